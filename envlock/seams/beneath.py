"""Writing inside a root (an environment's prefix) without ever following a symlink out of it.

envlock's own writes into a prefix (the activation hooks, conda-meta/envlock, the PyPI part's scripts moved to
bin/, the lock copy `unpack` keeps) walk from the root one component at a time: each directory is opened with
O_NOFOLLOW relative to the one before (openat), a missing one is made there, and a file is written to a temp
name in the final directory and renamed over its name (a symlink in its place is replaced, never followed).
A symlink or a file where a directory should be stops the write with one EnvCreateError.

Where the platform has no dir_fd (Windows), the path is checked by envlock/seams/gate.py (under the root after every
symlink is resolved) and written the usual way.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from envlock.errors import EnvCreateError

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_AT = os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")


def _new_file_mode() -> int:
    """0666 minus the umask (what open() gives a new file; envlock.seams.fs.new_file_mode, without importing it)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _refused(root: Path, rel: str) -> EnvCreateError:
    return EnvCreateError(f"{root / rel} is a symlink or not a directory: envlock does not write through it",
                          hint=f"a link in {root} leads elsewhere; remove it, or use a new -p PREFIX")


def _parts(rel: str | PurePosixPath) -> tuple[str, ...]:
    parts = tuple(p for p in PurePosixPath(rel).parts if p not in ("", "."))
    if any(p == ".." or "/" in p or "\\" in p for p in parts) or PurePosixPath(rel).is_absolute():
        raise EnvCreateError(f"{rel!r} is not a path inside the environment", hint="report this as a bug of envlock")
    return parts


@contextmanager
def directory(root: Path, rel: str | PurePosixPath = "", *, create: bool = True) -> Iterator[int]:
    """An fd of `root/rel`, reached without following any symlink below `root` (made where missing, if `create`)."""
    if create:
        root.mkdir(parents=True, exist_ok=True)  # the root itself is the user's (-p PREFIX): its path is theirs
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        done: list[str] = []
        for part in _parts(rel):
            done.append(part)
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile (or a dangling link: the open below refuses it)
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise _refused(root, "/".join(done)) from None
                    raise
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refused(root, "/".join(done)) from None
                raise
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


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
    if not _AT:  # pragma: no cover - Windows: no dir_fd; the path is checked as a whole, then written
        path = Path(root, *_parts(rel))
        top, real = os.path.realpath(root), os.path.realpath(path.parent)
        if real != top and not real.startswith(top.rstrip(os.sep) + os.sep):
            raise _refused(root, str(rel))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return
    parent, name = _split(rel)
    with directory(root, parent) as dfd:
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(wfd, view):]
                os.fchmod(wfd, _new_file_mode() if mode is None else mode)
                if sync and _exists(name, dfd):
                    os.fsync(wfd)
            finally:
                os.close(wfd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise


def _exists(name: str, dfd: int) -> bool:
    """Whether `name` is an entry of the directory `dfd` (a link counts: the rename replaces it)."""
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def write_json(root: Path, rel: str | PurePosixPath, data: Any, *, mode: int | None = None) -> None:
    """JSON (sorted keys, a final newline), as write_bytes writes it (a record: synced when it replaces one)."""
    write_bytes(root, rel, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), mode=mode, sync=True)


def copy_in(src: Path, root: Path, rel: str | PurePosixPath, *, mode: int | None = None) -> None:
    """A copy of the file `src` (not a link to it) at `root/rel`, as write_bytes writes it."""
    write_bytes(root, rel, src.read_bytes(), mode=mode)


def unlink(root: Path, rel: str | PurePosixPath) -> None:
    """Remove the entry `root/rel` (a link itself, never what it points at); missing is fine."""
    if not _AT:  # pragma: no cover - Windows
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
    if not _AT:  # pragma: no cover - Windows
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
