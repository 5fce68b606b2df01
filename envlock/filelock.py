"""An advisory inter-process file lock that says who holds it when a second run has to wait.

Used around writes that two envlock runs must not interleave (a lock dir, a prefix). The holder
writes one line (pid, command, since) into the lock file, so a waiter can name it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

#: A waiter names the holder once it has waited this long (a short wait is not worth a line).
NOTICE_AFTER_S = 1.0
_POLL_S = 0.05


def _stderr(message: str) -> None:
    # The one print outside cli.py: the notice must appear while waiting, before any result exists.
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def holder_line() -> str:
    """What this process records about itself in a lock file it holds."""
    argv = " ".join(["envlock", *sys.argv[1:3]]) if sys.argv else "envlock"
    return f"pid {os.getpid()} ({argv}) since {time.strftime('%H:%M:%S')}"


class FileLock:
    """`with FileLock(path, "the lock of env X"):` — exclusive flock; waits, naming the holder after 1 s."""

    def __init__(self, path: Path, what: str, notify: Callable[[str], None] = _stderr) -> None:
        self.path = path
        self.what = what
        self.notify = notify
        self._fh: IO[str] | None = None

    def holder(self) -> str:
        """The holder line recorded in the lock file ('' when none)."""
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def __enter__(self) -> FileLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - closed in __exit__
        started = time.monotonic()
        told = False
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told and time.monotonic() - started >= NOTICE_AFTER_S:
                    who = self.holder() or "another envlock process"
                    self.notify(f"envlock: waiting for {self.what}, held by {who}")
                    told = True
                time.sleep(_POLL_S)
            except BaseException:
                fh.close()
                raise
        fh.seek(0)
        fh.truncate()
        fh.write(holder_line() + "\n")
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: Any) -> None:
        import fcntl

        if self._fh is None:
            return
        try:
            self._fh.truncate(0)  # a stale holder line would mislead the next waiter
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
        finally:
            self._fh.close()
            self._fh = None


def entry_lock(cache: Path, name: str) -> FileLock:
    """The lock of one package cache entry: envlock processes sharing a cache (a cluster's shared
    filesystem) fetch each entry once. Quiet: the waiter's progress display already names the package."""
    return FileLock(cache / ".envlock-locks" / f"{name}.lock", f"the package cache entry {name}", notify=lambda _: None)
