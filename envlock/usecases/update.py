"""An update of an existing environment is all or nothing: built beside it, then swapped in at once.

Changing an env in place (unlink the old packages' files, link the new ones, run uv) leaves a half-changed env
when anything stops it: ENOSPC, SIGKILL, a refused wheel. Instead, create (envlock/usecases/create.py):

1. clones the prefix beside itself, `<parent>/.<name>.envlock-new-<random>`: every directory made, every file
   hard-linked (no data copied), conda-meta/ copied (rattler rewrites records in place);
2. changes the clone: rattler unlinks and links there, with the prefix's own path patched into the files
   (`alternative_target_prefix`), uv installs the PyPI part there, the hooks and conda-meta/envlock are written
   there. Every file rattler, uv or envlock writes is a new file (unlinked or renamed over), so the env at the
   prefix, sharing the old inodes, never sees a byte of it;
3. exchanges the clone and the prefix in one renameat2(RENAME_EXCHANGE) (Linux): at every instant the prefix is
   the old env or the complete new one. The old one, now at the clone's path, is removed.

A failure (or a kill) before the exchange leaves the old env exactly as it was; what the clone left is removed
by the next create of that prefix (`remove_leftovers`, under the prefix's lock). Where the exchange is not
available (another OS, a filesystem without it) two renames stand in: a kill between them leaves the old env
at `.<name>.envlock-old-…`, which the next create renames back before anything else: only a folder of this
user's whose record names that very prefix (`recover`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

NEW, OLD = "envlock-new", "envlock-old"


def _sibling(prefix: Path, kind: str) -> Path:
    return prefix.with_name(f".{prefix.name}.{kind}-{secrets.token_hex(4)}")


def clone(prefix: Path) -> Path:
    """A hard-linked copy of `prefix` beside it (conda-meta/ copied); removed again if it cannot be made."""
    dest = _sibling(prefix, NEW)
    try:
        _clone_dir(str(prefix), str(dest), top=True)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def _clone_dir(src: str, dest: str, top: bool = False, copy: bool = False) -> None:
    st = os.lstat(src)
    os.mkdir(dest, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)
    with os.scandir(src) as entries:
        for entry in entries:
            s, d = entry.path, os.path.join(dest, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(s), d)
            elif entry.is_dir(follow_symlinks=False):
                _clone_dir(s, d, copy=copy or (top and entry.name == "conda-meta"))
            elif entry.is_file(follow_symlinks=False):
                _clone_file(s, d, copy=copy)
            # sockets, fifos, devices: not part of an environment, not carried over
    os.chmod(dest, stat.S_IMODE(st.st_mode))


def _clone_file(src: str, dest: str, *, copy: bool) -> None:
    if not copy:
        try:
            os.link(src, dest, follow_symlinks=False)
            return
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
                raise
    shutil.copy2(src, dest, follow_symlinks=False)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2() -> object | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(new: Path, prefix: Path) -> None:
    """The built clone becomes the prefix, at once; the old env is then at `new`'s path."""
    fn = _renameat2() if os.name == "posix" else None
    if fn is not None:
        if fn(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(prefix), _RENAME_EXCHANGE) == 0:  # type: ignore[operator]  # a ctypes function, typed object
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(prefix))
    old = _sibling(prefix, OLD)  # two renames: a kill between them is undone by recover()
    os.rename(prefix, old)
    os.rename(new, prefix)
    os.rename(old, new)


def recover(prefix: Path, say: Callable[[str], None] | None = None) -> None:
    """Where two renames stood in for the exchange and a kill fell between them: the old env back at the prefix.

    Only a folder this user owns whose record (conda-meta/envlock, also this user's) names this very prefix is
    adopted: in a folder others can write (/tmp, a shared envs dir) another user's `.<name>.envlock-old-*`, with
    activation hooks of their own, would otherwise become this user's env. Any other is left alone and named."""
    if os.path.lexists(prefix) or not prefix.parent.is_dir():
        return
    for old in sorted(prefix.parent.glob(f".{prefix.name}.{OLD}-*")):
        why = _not_ours(old, prefix)
        if why is None:
            os.rename(old, prefix)
            return
        _said(say, f"envlock: left {old} alone: {why}; if it is your environment, move it to {prefix} yourself")


def _not_ours(folder: Path, prefix: Path) -> str | None:
    """Why `folder` is not an env this user made at `prefix` (None when it is)."""
    from envlock.seams import envrecord  # noqa: PLC0415
    from envlock.seams.fs import owned  # noqa: PLC0415

    try:
        st, meta = os.lstat(folder), os.lstat(envrecord.path(folder))
    except OSError:
        return "it holds no envlock record (conda-meta/envlock)"
    if not stat.S_ISDIR(st.st_mode) or not owned(st):
        return "it is not a folder of yours" if stat.S_ISDIR(st.st_mode) else "it is not a folder"
    if not stat.S_ISREG(meta.st_mode) or not owned(meta) or os.path.islink(folder / "conda-meta"):
        return "its record (conda-meta/envlock) is not a file of yours"
    from envlock.errors import NewerFormatError  # noqa: PLC0415

    try:
        record = envrecord.read(folder)
    except NewerFormatError:  # a newer envlock's: not one this envlock adopts
        record = {}
    if record.get("prefix") != str(prefix):
        return f"its record does not name {prefix} as its place"
    return None


def remove_leftovers(prefix: Path, say: Callable[[str], None] | None = None) -> None:
    """Clones a killed update left beside the prefix (call while holding the prefix's lock, after recover): this
    user's own only; another user's is left alone and named. An old env is removed only once the prefix exists
    again (recover did not adopt it: it stays for its owner to look at)."""
    from envlock.seams.fs import owned  # noqa: PLC0415

    if not prefix.parent.is_dir():
        return
    kinds = (NEW, OLD) if os.path.lexists(prefix) else (NEW,)
    for kind in kinds:
        for path in sorted(prefix.parent.glob(f".{prefix.name}.{kind}-*")):
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and owned(st):
                shutil.rmtree(path, ignore_errors=True)
            else:
                _said(say, f"envlock: left {path} alone: it is not a folder of yours")


def _said(say: Callable[[str], None] | None, message: str) -> None:
    if say is None:
        from envlock.seams.filelocks import say  # noqa: PLC0415
    say(message)


def drop_pypi_part(root: Path, keep: set[tuple[str, str]]) -> None:
    """Remove from the env at `root` every distribution uv installed (its RECORD's files, scripts moved to bin/
    included) whose (canonical name, version) is not in `keep`: conda's records do not list them, so a lock
    without them (a toolchain-only one, another python) would leave them behind (bin/torchrun, site-packages)."""
    from envlock.seams import beneath  # noqa: PLC0415
    from envlock.errors import EnvCreateError  # noqa: PLC0415
    from envlock.seams.gate import canonical_project  # noqa: PLC0415

    for installer in [*root.glob("lib/python*/site-packages/*.dist-info/INSTALLER"),
                      *root.glob("Lib/site-packages/*.dist-info/INSTALLER")]:
        try:
            if installer.read_text(encoding="utf-8").strip() != "uv":
                continue  # conda's own python packages carry their INSTALLER too: theirs to remove
            info = installer.parent
            name, _, version = info.name[: -len(".dist-info")].partition("-")
            if (canonical_project(name), version) in keep:
                continue
            site = info.parent.relative_to(root).as_posix()
            lines = (info / "RECORD").read_text(encoding="utf-8").splitlines()
        except (OSError, ValueError):
            continue
        dirs: set[str] = set()
        for line in lines:
            rel = os.path.normpath(f"{site}/{line.split(',', 1)[0]}").replace(os.sep, "/")
            if line.strip() and not rel.startswith("../") and rel != "..":
                try:
                    beneath.unlink(root, rel)
                    dirs.add(rel.rsplit("/", 1)[0])
                except (EnvCreateError, IsADirectoryError, PermissionError):
                    continue
        shutil.rmtree(info, ignore_errors=True)
        _remove_empty(root, dirs, stop=site)


def _remove_empty(root: Path, dirs: set[str], stop: str) -> None:
    """The folders a removed distribution leaves empty, deepest first, up to (not including) `stop`."""
    from envlock.seams.gate import UnsafeNameError, under  # noqa: PLC0415

    for deepest in sorted(dirs, key=lambda d: -d.count("/")):
        rel = deepest
        while rel.startswith(stop + "/"):
            try:
                os.rmdir(under(root, rel))
            except (OSError, UnsafeNameError):
                break
            rel = rel.rsplit("/", 1)[0]
