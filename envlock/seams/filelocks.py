"""File locks: cross-platform (flock on Linux and macOS, msvcrt.locking on Windows; both are released by the OS
when the holder dies), each on a file under a root, that name their holder.

`with FileLock(path, what, root=ROOT):` waits, and after a second names the holder ("envlock: waiting for the lock
of X, held by pid N (envlock resolve) since 12:00:00"). The holder writes that line into the lock file; a waiter
reads it. Written here rather than taken from the `filelock` package: the ~40 lines envlock needs cost nothing to
import, while filelock 3.32 costs 16-17 ms of every resolve (benchmarks/README.md).

A lock file lies in a folder other users may write (a group-shared cache's `file-locks/`, `pkgs/.envlock-locks/`):
it is opened once, without following a link (envlock/seams/beneath.py), and must be a regular file with one name;
a symlink or a hard link in its place is refused, never followed, and the holder line is written only into a file
this user owns.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envlock.errors import UnsafeNameError
from envlock.names import printable
from envlock.seams.fs import owned

#: A waiter names the holder once it has waited this long (a short wait is not worth a line).
NOTICE_AFTER_S = 1.0
_POLL_S = 0.05


def say(message: str) -> None:
    """A notice on stderr, escaped and folded: one that must appear while envlock works (a wait for a lock, a folder
    left alone), before any result exists (cli.py prints everything else)."""
    from envlock.wrapping import columns, fold

    sys.stderr.write("".join(f"{ln}\n" for ln in fold(printable(message), columns(sys.stderr))))
    sys.stderr.flush()


def holder_line() -> str:
    """What this process records about itself in a lock file it holds."""
    argv = " ".join(["envlock", *sys.argv[1:3]]) if sys.argv else "envlock"
    return f"pid {os.getpid()} ({argv}) since {time.strftime('%H:%M:%S')}"


#: errno of a lock another process holds (flock: EWOULDBLOCK; msvcrt.locking: EACCES / EDEADLOCK).
_BUSY = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES, errno.EDEADLK}
#: What a holder line may weigh when a waiter reads it (envlock writes ~60 bytes).
_HOLDER_CAP = 512


def _refused_lock(path: Path, why: str) -> UnsafeNameError:
    return UnsafeNameError(f"refusing the lock file {path}: {why}; envlock takes no lock through a link",
                           hint=f"remove {path} (envlock makes a new one); in a cache shared with others, another "
                                "user may have put it there")


class _OsLock:
    """An exclusive lock on one file under `root`, tried without blocking: flock (POSIX) or msvcrt.locking (Windows).

    The file is opened once (O_NOFOLLOW, its folder reached through envlock/seams/beneath.py) and must be a regular
    file with one name: a symlink, a hard link or anything else in its place is refused, never followed. The
    holder line is written only into this user's own file; another user's (a shared cache) is locked as it is."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path = path
        self.root = root
        self._fd: int | None = None
        self.mine = False  # the file is this user's own: the holder line may be written into it
        self.held = False

    def _open(self) -> int:
        from envlock.seams import beneath  # noqa: PLC0415

        if not beneath.AT:  # pragma: no cover - Windows: by path
            self.mine = True
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        rel = beneath.relative_to(self.root, self.path)

        def refusal(root: Path, rel: str) -> UnsafeNameError:
            return _refused_lock(root / rel, f"it is a symlink, or a folder on its way leads out of {root}")

        writable = True
        try:
            fd = beneath.open_file(self.root, rel, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o666, refusal=refusal)
        except PermissionError as denied:
            # Another user's lock file in a shared cache: flock needs no write access (Windows: it does).
            try:
                fd = beneath.open_file(self.root, rel, os.O_RDONLY | os.O_NONBLOCK, refusal=refusal)
                writable = False
            except OSError:
                raise denied from None  # an unwritable folder without the file: say "permission denied"
        import stat  # noqa: PLC0415

        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            os.close(fd)
            raise _refused_lock(self.path, "it is not a regular file" if not stat.S_ISREG(st.st_mode)
                                else f"it has {st.st_nlink} names (a hard link)")
        self.mine = writable and owned(st)
        return fd

    def try_acquire(self) -> bool:
        if self._fd is None:
            self._fd = self._open()
        fd = self._fd
        try:
            if os.name == "nt":
                import msvcrt  # noqa: PLC0415

                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # byte 0
            else:
                import fcntl  # noqa: PLC0415

                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_nlink == 0:  # the file was removed between open and flock: lock a new one
                    self.close()
                    return False
        except OSError as exc:
            if isinstance(exc, BlockingIOError) or exc.errno in _BUSY:
                return False  # held by another process: try again
            self.close()
            raise  # e.g. ENOLCK (a filesystem without locks): an error, not an endless wait
        self.held = True
        return True

    def read(self) -> str:
        """The holder line in the file (read from the open file: never another file put in its place)."""
        fd = self._fd
        if fd is None:
            return ""
        try:
            return os.pread(fd, _HOLDER_CAP, 0).decode("utf-8").strip() if hasattr(os, "pread") else ""
        except (OSError, UnicodeDecodeError):
            return ""

    def write(self, line: str) -> None:
        """`line` over the file's start; without `line`, blank what is there (only this user's own file).

        Never truncated to zero: ext4 flushes a file truncated to zero after a write when it is closed
        (auto_da_alloc), ~4 ms on every lock taken and released."""
        fd = self._fd
        if fd is None or not self.mine or not hasattr(os, "pwrite"):
            return
        try:
            data = line.encode("utf-8") or b" " * min(os.fstat(fd).st_size, _HOLDER_CAP)
            os.pwrite(fd, data, 0)
            if line:
                os.ftruncate(fd, len(data))
        except OSError:
            pass  # Windows locks the file's bytes: the waiter then names "another envlock process"

    def close(self) -> None:
        fd, self._fd, self.held = self._fd, None, False
        if fd is not None:
            os.close(fd)

    def release(self) -> None:
        fd = self._fd
        if fd is None:
            return
        try:
            if self.held:
                if os.name == "nt":
                    import msvcrt  # noqa: PLC0415

                    os.lseek(fd, 0, os.SEEK_SET)
                    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
                else:
                    import fcntl  # noqa: PLC0415

                    fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self.close()


class FileLock:
    """`with FileLock(path, "the lock of env X", root=ROOT):` — an exclusive inter-process lock on a file under
    ROOT (envlock's cache dir, a mirror's DIR); waits, naming the holder."""

    def __init__(self, path: Path, what: str, notify: Callable[[str], None] = say, *, root: Path) -> None:
        self.path = path
        self.what = what
        self.notify = notify
        self._lock = _OsLock(path, root)

    def holder(self) -> str:
        """The holder line recorded in the lock file ('' when none, or unreadable while locked: Windows)."""
        return printable(self._lock.read())

    def __enter__(self) -> FileLock:
        try:
            self._wait()
        except OSError as exc:  # a cache shared with other users whose folders this user cannot write
            from envlock.errors import SpecError  # noqa: PLC0415

            raise SpecError(f"cannot take {self.what}: {exc.strerror or exc} ({exc.filename or self.path})",
                            hint=f"set ENVLOCK_CACHE_DIR to a directory you can write, or share {self.path.parent} "
                                 "as a group (g+rwX, g+s, umask 002 for every user of it)") from None
        self._lock.write(holder_line() + "\n")
        return self

    def _wait(self) -> None:
        notice_at: float | None = time.monotonic() + NOTICE_AFTER_S
        try:
            while not self._lock.try_acquire():
                if notice_at is not None and time.monotonic() >= notice_at:
                    notice_at = None
                    self.notify(f"envlock: waiting for {self.what}, held by {self.holder() or 'another envlock process'}")
                time.sleep(_POLL_S)
        except BaseException:
            self._lock.close()
            raise

    def __exit__(self, *exc: Any) -> None:
        self._lock.write("")  # a stale holder line would mislead the next waiter
        self._lock.release()


def entry_lock(cache: Path, name: str) -> FileLock:
    """The lock of one package cache entry (`cache`: the package or wheel cache, a folder of envlock's cache dir,
    its root): envlock processes sharing a cache (a cluster's shared filesystem) fetch each entry once. Quiet: the
    waiter's progress display already names the package."""
    return FileLock(cache / ".envlock-locks" / f"{name}.lock", f"the package cache entry {name}", notify=lambda _: None,
                    root=cache.parent)
