"""Files: the one atomic writer, and one run's work folders (the file locks: envlock/seams/filelocks.py).

Every file envlock creates lies under a root (the project dir, envlock's cache dir, a mirror's DIR, an export's
folder, a prefix) and is written through envlock/seams/beneath.py: no symlink leads a write out of its root, and
a link in the file's own place is replaced, never followed (docs/security.md).

Atomic writes: a temp file beside the target (`.<name>.<random>.tmp`, made with O_EXCL|O_NOFOLLOW), then renamed
over it, so a killed run (even SIGKILL) leaves each file whole, old or new. The temp file replacing an existing
file is synced first, so not even a power loss can leave that file empty; a new file is not (10 fsyncs were
~20 ms of a first resolve here, and a new file has nothing to lose: after a power loss it may be empty, and
envlock says so when it reads it). The temp file gets the final file's mode: an existing file of this user's
keeps its mode, a new one (or one replacing another user's) gets 0666 minus the umask, as open() would (`mode=`
overrides it).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


# --------------------------------------------------------------------------- atomic writes


def new_file_mode() -> int:
    """0666 minus the umask: the mode open() gives a new file (0644 under the usual 022)."""
    return 0o666 & ~_umask()


def new_dir_mode() -> int:
    """0777 minus the umask: the mode mkdir gives a new directory (0755 under the usual 022)."""
    return 0o777 & ~_umask()


def share_with_group(cache: Path, *roots: Path) -> None:
    """Give what this user wrote under `roots` the modes the umask allows, when envlock's cache dir `cache` is
    shared by a group (group-writable, as docs/scale.md's "Several users on one cache" sets it up).

    rattler writes repodata shards and uv its cache entries through temporary files (0600): in a shared cache
    the next user's resolve then fails to read them. A private cache is left as it is, and not walked.
    """
    try:
        if os.name != "posix" or not os.stat(cache).st_mode & 0o020:
            return
    except OSError:
        return
    import stat

    me, file_bits, dir_bits = os.geteuid(), new_file_mode(), new_dir_mode()
    for root in roots:
        for top, _dirs, files in os.walk(root):
            for path, bits in [(top, dir_bits)] + [(os.path.join(top, f), file_bits) for f in files]:
                try:
                    st = os.lstat(path)
                    if st.st_uid == me and not stat.S_ISLNK(st.st_mode) and (st.st_mode & bits) != bits:
                        os.chmod(path, stat.S_IMODE(st.st_mode) | bits)
                except OSError:
                    continue  # gone (another process replaced it), or not ours to change


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def replace(tmp: str | Path, path: Path, dir_fd: int | None = None) -> None:
    """`os.replace(tmp, path)` (both names in the directory `dir_fd` where given): the one rename every atomic write
    makes (tests widen it to SIGKILL a run there)."""
    if dir_fd is None:
        os.replace(tmp, path)
    else:
        os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def write_all_atomic(files: Iterable[tuple[Path, str | bytes]], *, root: Path, mode: int | None = None,
                     skip_unchanged: bool = True) -> list[Path]:
    """Write several files under `root` so a killed run leaves each file whole (old or new); returns the files written.

    Every file lies under `root` (the project dir, the cache dir, a mirror's DIR, an export's folder): it is
    written through envlock/seams/beneath.py, so no symlink leads the write out of `root` and a link in the file's
    own place is replaced, never followed. Every temp file is written (and synced, when it replaces a file: see
    the module's doc) before the first rename, and the renames run in the given order, so callers put the
    authoritative file (the conda-lock.yml) last. A file whose bytes are already there is not touched (bytes and
    mtime) unless `skip_unchanged` is False. An existing file of this user's keeps its mode; a new one gets 0666
    minus the umask (`mode=` overrides both).
    """
    from envlock.seams import beneath  # noqa: PLC0415

    staged = [(beneath.relative_to(root, path), content.encode("utf-8") if isinstance(content, str) else content)
              for path, content in files]
    done = beneath.write_files(root, staged, mode=mode, sync=True, skip_unchanged=skip_unchanged, inside_links=True,
                               rename=lambda tmp, rel, dfd: replace(tmp, root.joinpath(*rel.parts), dfd))
    return [root.joinpath(*rel.parts) for rel in done]


def write_atomic(path: Path, content: str | bytes, *, root: Path, mode: int | None = None,
                 skip_unchanged: bool = True) -> bool:
    """Write one file under `root` atomically; False (and nothing touched) when its bytes are already there."""
    return bool(write_all_atomic([(path, content)], root=root, mode=mode, skip_unchanged=skip_unchanged))


def write_json_atomic(path: Path, data: Any, *, root: Path, mode: int | None = None, indent: int = 2) -> None:
    """JSON (sorted keys, a final newline) written atomically under `root`."""
    import json  # noqa: PLC0415

    write_atomic(path, json.dumps(data, indent=indent, sort_keys=True) + "\n", root=root, mode=mode,
                 skip_unchanged=False)


def copy_atomic(src: Path, dest: Path, *, root: Path, mode: int | None = None) -> None:
    """A copy of `src` at `dest` (under `root`, never through a link: as write_all_atomic writes), by temp file +
    rename."""
    import shutil  # noqa: PLC0415

    from envlock.seams import beneath  # noqa: PLC0415

    rel = beneath.relative_to(root, dest)
    if not beneath.AT:  # pragma: no cover - Windows: no dir_fd (beneath.write_files checks the path as a whole)
        beneath.write_files(root, [(rel, Path(src).read_bytes())], mode=mode, inside_links=True)
        return
    with beneath.directory(root, rel.parent, inside_links=True) as dfd:
        tmp = f".{rel.name}.{os.urandom(4).hex()}.tmp"
        try:
            wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            with os.fdopen(wfd, "wb") as out, open(src, "rb") as inp:
                shutil.copyfileobj(inp, out, 1 << 20)
                os.fchmod(out.fileno(), new_file_mode() if mode is None else mode)
            replace(tmp, dest, dfd)
        finally:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass


def move_in(src: Path, dest: Path, *, root: Path) -> None:
    """Rename this run's own file `src` (in its work folder) to `dest` under `root`, into a folder reached as
    write_all_atomic reaches it (a link in `dest`'s place is replaced, never followed)."""
    from envlock.seams import beneath  # noqa: PLC0415

    rel = beneath.relative_to(root, dest)
    if not beneath.AT:  # pragma: no cover - Windows
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
        return
    sfd = os.open(src.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with beneath.directory(root, rel.parent, inside_links=True) as dfd:
            os.replace(src.name, rel.name, src_dir_fd=sfd, dst_dir_fd=dfd)
    finally:
        os.close(sfd)


def remove_stale_temps(globs: Iterable[tuple[Path, str]]) -> list[Path]:
    """Delete temp files a killed writer left (call only while holding the writers' file lock)."""
    removed = []
    for directory, pattern in globs:
        for tmp in directory.glob(pattern) if directory.is_dir() else ():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


# --------------------------------------------------------------------------- one run's work folders

#: A work folder younger than this is never removed as a leftover (its maker may not hold its lock yet).
LEFTOVER_AGE_S = 60.0


@contextlib.contextmanager
def work_dir(parent: Path, prefix: str, *, root: Path) -> Iterator[Path]:
    """A folder `parent/<prefix>XXXX` (0700, under `root`: reached as write_all_atomic reaches a file's folder) for
    one run's work, held (flock on the folder) while the run lasts and removed at its end; one that a killed run
    left is removed by the next (`remove_dead`)."""
    import shutil  # noqa: PLC0415

    from envlock.seams import beneath  # noqa: PLC0415

    if beneath.AT:
        with beneath.directory(root, beneath.relative_to(root, parent), inside_links=True) as dfd:
            path = parent / _new_dir(dfd, prefix)
    else:  # pragma: no cover - Windows
        import tempfile  # noqa: PLC0415

        parent.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    held = _hold(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if held is not None:
            os.close(held)


@contextlib.contextmanager
def pinned_work_dir(parent: Path, prefix: str, *, root: Path) -> Iterator[Path]:
    """work_dir, reached through the folder it holds open rather than through its name (Linux: `/proc/self/fd/N`).

    In a folder other users may write (a group-shared cache: setgid 2775, no sticky bit) another member can rename
    our 0700 work folder away and make one of theirs under its name: every later `work / name` would then read what
    they put there. The held descriptor keeps naming the folder this run made (this user's, 0700: nobody else can
    enter it, add, rename or change a file in it), wherever it is renamed to; nothing in it is reached through the
    shared parent again. Where /proc cannot pin it (not Linux), the folder's path, as work_dir gives it."""
    import shutil  # noqa: PLC0415

    from envlock.seams import beneath  # noqa: PLC0415

    if not beneath.AT or not os.path.isdir("/proc/self/fd"):  # pragma: no cover - no openat, or no /proc
        with work_dir(parent, prefix, root=root) as path:
            yield path
        return
    import fcntl  # noqa: PLC0415

    with beneath.directory(root, beneath.relative_to(root, parent), inside_links=True) as dfd:
        name = _new_dir(dfd, prefix)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        pdfd = os.dup(dfd)  # to remove the folder by name at the end, only if the name is still ours
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:  # replaced between mkdir and open: not ours
        os.close(fd)
        os.close(pdfd)
        raise PermissionError(f"{parent / name} was replaced by another user's folder while it was made")
    pinned = Path(f"/proc/self/fd/{fd}")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held while the run lasts: remove_dead leaves it alone
        yield pinned
    finally:
        with contextlib.suppress(OSError):
            for entry in os.listdir(fd):
                target = pinned / entry
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    os.unlink(target)
        with contextlib.suppress(OSError):
            now = os.lstat(name, dir_fd=pdfd)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                os.rmdir(name, dir_fd=pdfd)
        os.close(pdfd)
        os.close(fd)


def _new_dir(dfd: int, prefix: str) -> str:
    """A new folder `<prefix><random>` (0700) in the directory `dfd`: its name (mkdtemp's rule, by dir fd)."""
    for _ in range(100):
        name = f"{prefix}{os.urandom(6).hex()}"
        try:
            os.mkdir(name, 0o700, dir_fd=dfd)
            return name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name {prefix}XXXX")  # pragma: no cover


def _hold(path: Path) -> int | None:
    if os.name == "nt":  # pragma: no cover - Windows: age alone tells a leftover
        return None
    import fcntl  # noqa: PLC0415

    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def remove_dead(parent: Path, pattern: str, *, older_than: float = LEFTOVER_AGE_S) -> list[Path]:
    """Remove the work folders `parent/<pattern>` whose run is gone (no process holds them) and that are older than
    `older_than` seconds: what killed runs left (a download half done, an extracted archive). Only this user's own
    folders: another user's (a shared cache, /tmp) is left alone."""
    removed: list[Path] = []
    try:
        candidates = [p for p in parent.glob(pattern) if p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    now = time.time()
    for path in candidates:
        try:
            st = os.lstat(path)
            if now - st.st_mtime < older_than or not owned(st) or not _is_dead(path):
                continue
        except OSError:
            continue
        import shutil  # noqa: PLC0415

        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def owned(st: os.stat_result) -> bool:
    """Whether a file's stat says this user owns it (always, where there are no owners: Windows)."""
    return not hasattr(os, "geteuid") or st.st_uid == os.geteuid()


def _is_dead(path: Path) -> bool:
    if os.name == "nt":  # pragma: no cover
        return time.time() - os.lstat(path).st_mtime > 86400
    import fcntl  # noqa: PLC0415

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False  # held: its run is alive
    finally:
        os.close(fd)
