"""Files: the one atomic writer, and cross-platform file locks that name their holder.

Atomic writes: a temp file beside the target (`.<name>.<random>.tmp`), then `os.replace`d, so a killed run
(even SIGKILL) leaves each file whole, old or new. The temp file replacing an existing file is synced first, so
not even a power loss can leave that file empty; a new file is not (10 fsyncs were ~20 ms of a first resolve
here, and a new file has nothing to lose: after a power loss it may be empty, and envlock says so when it
reads it). The temp file gets the final file's mode: an existing file keeps its mode, a new one gets 0666
minus the umask, as open() would (`mode=` overrides it).

File locks (flock on Linux and macOS, msvcrt.locking on Windows; both are released by the OS when the holder
dies): `with FileLock(path, what):` waits, and after a second names the holder ("envlock: waiting for the lock
of X, held by pid N (envlock resolve) since 12:00:00"). The holder writes that line into the lock file; a
waiter reads it. Written here rather than taken from the `filelock` package: the ~40 lines envlock needs cost
nothing to import, while filelock 3.32 costs 16-17 ms of every resolve (benchmarks/README.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from envlock.names import printable

#: A waiter names the holder once it has waited this long (a short wait is not worth a line).
NOTICE_AFTER_S = 1.0
_POLL_S = 0.05


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


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return new_file_mode()


def replace(tmp: str | Path, path: Path) -> None:
    """`os.replace(tmp, path)`: the one rename every atomic write makes (tests widen it to SIGKILL a run there)."""
    os.replace(tmp, path)


def write_all_atomic(files: Iterable[tuple[Path, str | bytes]], *, mode: int | None = None,
                     skip_unchanged: bool = True) -> list[Path]:
    """Write several files so a killed run leaves each file whole (old or new); returns the files written.

    Every temp file is written (and synced, when it replaces a file: see the module's doc) before the first
    rename, and the renames run in the given order, so callers put the authoritative file (the
    conda-lock.yml) last. A file whose bytes are already there is not touched (bytes and mtime) unless
    `skip_unchanged` is False.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, content in files:
            data = content.encode("utf-8") if isinstance(content, str) else content
            existed = True
            try:
                if skip_unchanged and path.read_bytes() == data:
                    continue
            except FileNotFoundError:
                existed = False
            except OSError:
                pass
            if not skip_unchanged:
                existed = os.path.lexists(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            import tempfile  # noqa: PLC0415 - here: check writes nothing (~3 ms with shutil)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            if hasattr(os, "fchmod"):
                os.fchmod(fd, _mode_for(path) if mode is None else mode)  # mkstemp makes 0600
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                if existed:
                    fh.flush()
                    os.fsync(fh.fileno())
            if not hasattr(os, "fchmod"):  # Windows
                os.chmod(tmp, _mode_for(path) if mode is None else mode)
        for tmp, path in staged:
            replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    return [path for _, path in staged]


def write_atomic(path: Path, content: str | bytes, *, mode: int | None = None, skip_unchanged: bool = True) -> bool:
    """Write one file atomically; False (and nothing touched) when its bytes are already there."""
    return bool(write_all_atomic([(path, content)], mode=mode, skip_unchanged=skip_unchanged))


def write_json_atomic(path: Path, data: Any, *, mode: int | None = None, indent: int = 2) -> None:
    """JSON (sorted keys, a final newline) written atomically."""
    import json  # noqa: PLC0415

    write_atomic(path, json.dumps(data, indent=indent, sort_keys=True) + "\n", mode=mode, skip_unchanged=False)


def copy_atomic(src: Path, dest: Path, *, mode: int | None = None, link: bool = False) -> None:
    """`src` to `dest` by temp file + rename (`link`: a hard link where the filesystem allows one)."""
    import shutil  # noqa: PLC0415

    dest.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # noqa: PLC0415 - here: check writes nothing (~3 ms with shutil)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        done = False
        if link:
            os.unlink(tmp)
            try:
                os.link(src, tmp)
                done = True
            except OSError:  # another filesystem
                pass
        if not done:
            shutil.copyfile(src, tmp)
        os.chmod(tmp, new_file_mode() if mode is None else mode)
        replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)


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
def work_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A temp folder `parent/<prefix>XXXX` for one run's work, held (flock on the folder) while the run lasts and
    removed at its end; one that a killed run left is removed by the next (`remove_dead`)."""
    parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # noqa: PLC0415 - here: check writes nothing (~3 ms with shutil)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    held = _hold(path)
    try:
        yield path
    finally:
        import shutil  # noqa: PLC0415

        shutil.rmtree(path, ignore_errors=True)
        if held is not None:
            os.close(held)


def _hold(path: Path) -> int | None:
    if os.name == "nt":  # pragma: no cover - Windows: age alone tells a leftover
        return None
    import fcntl  # noqa: PLC0415

    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def remove_dead(parent: Path, pattern: str, *, older_than: float = LEFTOVER_AGE_S) -> list[Path]:
    """Remove the work folders `parent/<pattern>` whose run is gone (no process holds them) and that are older than
    `older_than` seconds: what killed runs left (a download half done, an extracted archive)."""
    removed: list[Path] = []
    try:
        candidates = [p for p in parent.glob(pattern) if p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    now = time.time()
    for path in candidates:
        try:
            if now - os.lstat(path).st_mtime < older_than or not _is_dead(path):
                continue
        except OSError:
            continue
        import shutil  # noqa: PLC0415

        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


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


# --------------------------------------------------------------------------- file locks


def _stderr(message: str) -> None:
    # The notice must appear while waiting, before any result exists (cli.py prints everything else).
    from envlock.wrapping import columns, fold

    sys.stderr.write("".join(f"{ln}\n" for ln in fold(printable(message), columns(sys.stderr))))
    sys.stderr.flush()


def holder_line() -> str:
    """What this process records about itself in a lock file it holds."""
    argv = " ".join(["envlock", *sys.argv[1:3]]) if sys.argv else "envlock"
    return f"pid {os.getpid()} ({argv}) since {time.strftime('%H:%M:%S')}"


#: errno of a lock another process holds (flock: EWOULDBLOCK; msvcrt.locking: EACCES / EDEADLOCK).
_BUSY = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES, errno.EDEADLK}


class _OsLock:
    """An exclusive lock on one file, tried without blocking: flock (POSIX) or msvcrt.locking (Windows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError as denied:
            # Another user's lock file in a shared cache: flock needs no write access (Windows: it does).
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                raise denied from None  # an unwritable folder without the file: say "permission denied"
        try:
            if os.name == "nt":
                import msvcrt  # noqa: PLC0415

                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # byte 0 (the fd is at offset 0)
            else:
                import fcntl  # noqa: PLC0415

                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_nlink == 0:  # the file was removed between open and flock: lock a new one
                    raise BlockingIOError("lock file removed")
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, BlockingIOError) or exc.errno in _BUSY:
                return False  # held by another process: try again
            raise  # e.g. ENOLCK (a filesystem without locks): an error, not an endless wait
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if os.name == "nt":
                import msvcrt  # noqa: PLC0415

                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
            else:
                import fcntl  # noqa: PLC0415

                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class FileLock:
    """`with FileLock(path, "the lock of env X"):` — an exclusive inter-process lock; waits, naming the holder."""

    def __init__(self, path: Path, what: str, notify: Callable[[str], None] = _stderr) -> None:
        self.path = path
        self.what = what
        self.notify = notify
        self._lock = _OsLock(path)

    def holder(self) -> str:
        """The holder line recorded in the lock file ('' when none, or unreadable while locked: Windows)."""
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return ""

    def __enter__(self) -> FileLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._wait()
        except OSError as exc:  # a cache shared with other users whose folders this user cannot write
            from envlock.errors import SpecError  # noqa: PLC0415

            raise SpecError(f"cannot take {self.what}: {exc.strerror or exc} ({exc.filename or self.path})",
                            hint=f"set ENVLOCK_CACHE_DIR to a directory you can write, or share {self.path.parent} "
                                 "as a group (g+rwX, g+s, umask 002 for every user of it)") from None
        self._record(holder_line() + "\n")
        return self

    def _wait(self) -> None:
        notice_at: float | None = time.monotonic() + NOTICE_AFTER_S
        while not self._lock.try_acquire():
            if notice_at is not None and time.monotonic() >= notice_at:
                notice_at = None
                self.notify(f"envlock: waiting for {self.what}, held by {self.holder() or 'another envlock process'}")
            time.sleep(_POLL_S)

    def _record(self, line: str) -> None:
        """Write `line` over the file's start; without `line`, blank what is there (holder() strips it).

        Never truncated to zero: ext4 flushes a file truncated to zero after a write when it is closed
        (auto_da_alloc), ~4 ms on every lock taken and released.
        """
        try:
            with open(self.path, "r+b") as fh:
                data = line.encode("utf-8") or b" " * os.fstat(fh.fileno()).st_size
                fh.write(data)
                if line:
                    fh.truncate(len(data))
        except OSError:
            pass  # Windows locks the file's bytes; another user's file: the waiter then names "another envlock process"

    def __exit__(self, *exc: Any) -> None:
        self._record("")  # a stale holder line would mislead the next waiter
        self._lock.release()


def entry_lock(cache: Path, name: str) -> FileLock:
    """The lock of one package cache entry: envlock processes sharing a cache (a cluster's shared
    filesystem) fetch each entry once. Quiet: the waiter's progress display already names the package."""
    return FileLock(cache / ".envlock-locks" / f"{name}.lock", f"the package cache entry {name}", notify=lambda _: None)

