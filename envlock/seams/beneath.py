"""Writing inside a root without ever following a symlink out of it: the one way envlock creates a file.

A root is a directory the user names (a prefix, the project dir, envlock's cache dir, `mirror`'s DIR, `pack`'s
output folder, export's -o folder); everything envlock writes lies under one. Each write walks from the root one
component at a time: each directory is opened relative to the one before (openat), a missing one is made there,
and the file is written to a temp name (O_EXCL|O_NOFOLLOW) in the final directory and renamed over its name (a
symlink in its place is replaced, never followed). A file envlock must open as it is (a lock file) is opened
with O_NOFOLLOW: a link there is refused, never followed.

Two policies for a link on the way (`inside_links`):

* a prefix (the default): no link at all: a symlink or a file where a directory should be stops the write with one
  EnvCreateError (a package or a planted link cannot send envlock's hooks and records anywhere);
* the other roots (`inside_links=True`): a link is followed only where the directory it leads to is still under the
  root once every symlink is resolved (the gate's `under`, envlock/seams/gate.py), and that is checked on the open
  directory itself (/proc/self/fd, F_GETPATH), so a link swapped after a check cannot redirect the write; any other
  link is one UnsafeNameError naming it. A user's own `locks -> ../shared/locks` inside the project works; a
  `DIR/pypi -> /etc` or a group member's `file-locks -> /root` does not.

Where the platform has no dir_fd (Windows), the path is checked by envlock/seams/gate.py (under the root after every
symlink is resolved) and written the usual way.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from envlock.errors import EnvCreateError, EnvlockError

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
AT = os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")


def _new_file_mode() -> int:
    """0666 minus the umask (what open() gives a new file; envlock.seams.fs.new_file_mode, without importing it)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


Refusal = Callable[[Path, str], EnvlockError]


def _refused(root: Path, rel: str) -> EnvlockError:
    return EnvCreateError(f"{root / rel} is a symlink or not a directory: envlock does not write through it",
                          hint=f"a link in {root} leads elsewhere; remove it, or use a new -p PREFIX")


def outside(root: Path, rel: str) -> EnvlockError:
    """The refusal of a link (or a non-directory) on the way under a root other than a prefix."""
    from envlock.errors import UnsafeNameError  # noqa: PLC0415

    return UnsafeNameError(f"refusing to write under {root / rel}: it is a symlink leading out of {root}, or not a "
                           "directory; envlock does not write through it",
                           hint=f"remove that link (or make it a folder); envlock writes only inside {root}")


def _parts(rel: str | PurePosixPath) -> tuple[str, ...]:
    parts = tuple(p for p in PurePosixPath(rel).parts if p not in ("", "."))
    if any(p == ".." or "/" in p or "\\" in p for p in parts) or PurePosixPath(rel).is_absolute():
        raise EnvCreateError(f"{rel!r} is not a path inside the environment", hint="report this as a bug of envlock")
    return parts


def real_path(fd: int) -> str | None:
    """Where an open file or directory really is (Linux /proc/self/fd, macOS F_GETPATH); None where unknown."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    try:
        import fcntl  # noqa: PLC0415

        if hasattr(fcntl, "F_GETPATH"):  # pragma: no cover - macOS
            return os.fsdecode(fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024)).rstrip(b"\0"))
    except (ImportError, OSError):
        pass
    return None


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def _enter(fd: int, part: str, *, create: bool, root: Path, done: str, top: str | None, refusal: Refusal) -> int:
    """The fd of the directory `part` in the directory `fd`: made where missing (if `create`); a link followed only
    where `top` (the root's real path) is given and the directory it leads to lies under it."""
    for attempt in range(2):
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create or attempt:
                raise
            try:
                os.mkdir(part, dir_fd=fd)
            except FileExistsError:
                pass  # made meanwhile (or a dangling link: the open refuses it)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            if top is None or not _is_link(part, fd):
                raise refusal(root, done) from None
            try:
                nfd = os.open(part, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
            except OSError:
                raise refusal(root, done) from None
            where = real_path(nfd)
            if where is None:  # pragma: no cover - no /proc and no F_GETPATH: checked by path (the gate's rule)
                where = os.path.realpath(root / done)
            if not _within(where, top):
                os.close(nfd)
                raise refusal(root, done) from None
            return nfd
    raise AssertionError("unreachable")  # pragma: no cover


def _is_link(name: str, dfd: int) -> bool:
    import stat  # noqa: PLC0415

    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextmanager
def directory(root: Path, rel: str | PurePosixPath = "", *, create: bool = True, inside_links: bool = False,
              refusal: Refusal | None = None) -> Iterator[int]:
    """An fd of `root/rel`, reached without following any symlink below `root` (made where missing, if `create`).

    `inside_links`: a link on the way is followed where what it leads to is still under the root (see the module's
    doc); `refusal` makes the error for one that is not (default: the prefix's EnvCreateError)."""
    if create:
        root.mkdir(parents=True, exist_ok=True)  # the root itself is the user's (-p PREFIX): its path is theirs
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        top = (real_path(fd) or os.path.realpath(root)) if inside_links else None
        why = refusal or (outside if inside_links else _refused)
        done: list[str] = []
        for part in _parts(rel):
            done.append(part)
            nfd = _enter(fd, part, create=create, root=root, done="/".join(done), top=top, refusal=why)
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


def relative_to(root: Path, path: Path) -> PurePosixPath:
    """`path` as a path relative to `root` (both as the caller spells them); ValueError where it is not below it."""
    return PurePosixPath(*Path(path).relative_to(root).parts)


def _split(rel: str | PurePosixPath) -> tuple[PurePosixPath, str]:
    parts = _parts(rel)
    if not parts:
        raise EnvCreateError(f"{rel!r} names no file", hint="report this as a bug of envlock")
    return PurePosixPath(*parts[:-1]), parts[-1]


def write_bytes(root: Path, rel: str | PurePosixPath, data: bytes, *, mode: int | None = None,
                sync: bool = False) -> None:
    """`root/rel` := data, atomically (temp file + rename in its directory); parents made; no symlink followed.

    `sync`: the temp file is fsync'd before the rename when it replaces a file (envlock/seams/fs.py's rule: not even a
    power loss leaves that file empty); a new file is not synced (it has nothing to lose, and a sync costs ~7 ms
    of a ~120 ms warm create here: conda-meta/envlock is first written new, then replaced)."""
    write_files(root, [(rel, data)], mode=_new_file_mode() if mode is None else mode, sync=sync)


Rename = Callable[[str, PurePosixPath, int], None]


def _rename(tmp: str, rel: PurePosixPath, dfd: int) -> None:
    os.replace(tmp, rel.name, src_dir_fd=dfd, dst_dir_fd=dfd)


def write_files(root: Path, files: Iterable[tuple[str | PurePosixPath, bytes]], *, mode: int | None = None,
                sync: bool = False, skip_unchanged: bool = False, inside_links: bool = False,
                refusal: Refusal | None = None, rename: Rename = _rename) -> list[PurePosixPath]:
    """Several files under `root`, each atomically (a temp file `.<name>.<random>.tmp` made with O_EXCL|O_NOFOLLOW in
    its directory, renamed over its name), none through a link (see `directory` for `inside_links`); returns the
    paths written (relative to `root`).

    Every temp file is written before the first rename, and the renames run in the given order (a caller puts the
    authoritative file last). `mode`: the files' mode; None keeps the mode of the file replaced where it is this
    user's own regular file (another user's mode is never copied: a group-writable plant would make ours so), else
    0666 minus the umask. `sync`: a temp file replacing a file is fsync'd first. `skip_unchanged`: a regular file
    already holding the bytes is left as it is (bytes and mtime)."""
    rels = [(PurePosixPath(*_parts(rel)), data) for rel, data in files]
    if not AT:  # pragma: no cover - Windows: no dir_fd; each path is checked as a whole, then written
        return _write_by_path(root, rels, mode, skip_unchanged)
    written: list[tuple[int, str, PurePosixPath]] = []
    with ExitStack() as stack:
        dirs: dict[PurePosixPath, int] = {}
        try:
            for rel, data in rels:
                if not rel.parts:
                    raise EnvCreateError(f"{str(rel)!r} names no file", hint="report this as a bug of envlock")
                if rel.parent not in dirs:
                    dirs[rel.parent] = stack.enter_context(
                        directory(root, rel.parent, inside_links=inside_links, refusal=refusal))
                dfd = dirs[rel.parent]
                st = _lstat(rel.name, dfd)
                if skip_unchanged and st is not None and _holds(rel.name, dfd, data):
                    continue
                tmp = f".{rel.name}.{secrets.token_hex(4)}.tmp"
                wfd = os.open(tmp, _NEW_FILE, 0o600, dir_fd=dfd)
                written.append((dfd, tmp, rel))
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(wfd, view):]
                    os.fchmod(wfd, mode if mode is not None else _kept_mode(st))
                    if sync and st is not None:
                        os.fsync(wfd)
                finally:
                    os.close(wfd)
            for dfd, tmp, rel in written:
                rename(tmp, rel, dfd)
        except BaseException:
            for dfd, tmp, _ in written:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
            raise
    return [rel for _, _, rel in written]


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_READ_FILE = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _lstat(name: str, dfd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _kept_mode(st: os.stat_result | None) -> int:
    import stat  # noqa: PLC0415

    if st is not None and stat.S_ISREG(st.st_mode) and (not hasattr(os, "geteuid") or st.st_uid == os.geteuid()):
        return stat.S_IMODE(st.st_mode) & 0o777
    return _new_file_mode()


def _holds(name: str, dfd: int, data: bytes) -> bool:
    """Whether the regular file `name` (never a link) holds exactly `data`."""
    import stat  # noqa: PLC0415

    try:
        fd = os.open(name, _READ_FILE, dir_fd=dfd)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(len(data) + 1) == data
    finally:
        os.close(fd)


def _write_by_path(root: Path, rels: list[tuple[PurePosixPath, bytes]], mode: int | None,
                   skip_unchanged: bool) -> list[PurePosixPath]:  # pragma: no cover - Windows
    top = os.path.realpath(root)
    out = []
    for rel, data in rels:
        path = Path(root, *rel.parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not _within(os.path.realpath(path.parent), top):
            raise outside(root, str(rel))
        if skip_unchanged and path.is_file() and path.read_bytes() == data:
            continue
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        tmp.write_bytes(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
        out.append(rel)
    return out


def open_file(root: Path, rel: str | PurePosixPath, flags: int, mode: int = 0o666, *,
              refusal: Refusal | None = None) -> int:
    """An fd of the file `root/rel` opened with `flags` (O_CREAT to make it) and O_NOFOLLOW: its directory reached as
    `directory(..., inside_links=True)` reaches it, a link in the file's own place refused (`refusal`)."""
    parent, name = _split(rel)
    why = refusal or outside
    with directory(root, parent, inside_links=True, refusal=why) as dfd:
        try:
            return os.open(name, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(name, dfd)):
                raise why(root, str(PurePosixPath(parent, name))) from None
            raise


def write_json(root: Path, rel: str | PurePosixPath, data: Any, *, mode: int | None = None) -> None:
    """JSON (sorted keys, a final newline), as write_bytes writes it (a record: synced when it replaces one)."""
    write_bytes(root, rel, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), mode=mode, sync=True)


def copy_in(src: Path, root: Path, rel: str | PurePosixPath, *, mode: int | None = None) -> None:
    """A copy of the file `src` (not a link to it) at `root/rel`, as write_bytes writes it."""
    write_bytes(root, rel, src.read_bytes(), mode=mode)


def unlink(root: Path, rel: str | PurePosixPath) -> None:
    """Remove the entry `root/rel` (a link itself, never what it points at); missing is fine."""
    if not AT:  # pragma: no cover - Windows
        Path(root, *_parts(rel)).unlink(missing_ok=True)
        return
    parent, name = _split(rel)
    try:
        with directory(root, parent, create=False) as dfd:
            os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        pass


def chmod_files(root: Path, rel: str | PurePosixPath, mode: int) -> None:
    """Every regular file directly in `root/rel` gets `mode` (links and other entries are left alone)."""
    if not AT:  # pragma: no cover - Windows
        return
    import stat  # noqa: PLC0415

    with directory(root, rel, create=False) as dfd:
        for name in os.listdir(dfd):
            try:
                ffd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
            except OSError:
                continue  # a link (ELOOP), or gone
            try:
                st = os.fstat(ffd)
                if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
                    os.fchmod(ffd, mode)
            finally:
                os.close(ffd)
