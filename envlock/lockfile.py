"""Atomic writes: a file (or a set of files) replaced whole or not at all.

(The lock formats that lived here are in envlock/formats/; these writers move to the fs seam.)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


# --------------------------------------------------------------------------- write


def _file_mode(fd: int, path: Path) -> None:
    """Give a temp file the mode the final file should have (mkstemp makes it 0600).

    An existing file keeps its mode; a new one gets 0666 minus the umask, like open() would.
    """
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.fchmod(fd, mode)


def write_atomic(path: Path, text: str) -> bool:
    """Write text via a temp file + os.replace; returns False (and touches nothing) if unchanged."""
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    _file_mode(fd, path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def remove_stale_temps(globs: Iterable[tuple[Path, str]]) -> list[Path]:
    """Delete temp files a killed writer left (call only while holding the writers' file lock)."""
    removed = []
    for directory, pattern in globs:
        for tmp in directory.glob(pattern) if directory.is_dir() else ():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _test_pause(name: str) -> None:
    """Test hook: ENVLOCK_TEST_PAUSE_BEFORE_REPLACE=SECONDS[:FILENAME] sleeps before a rename.

    Before every rename, or only before FILENAME's: it widens the window between staging and
    renaming so the reliability tests can SIGKILL a run there (tests/reliability/test_interrupted.py).
    Unset, it costs one dict lookup.
    """
    pause = os.environ.get("ENVLOCK_TEST_PAUSE_BEFORE_REPLACE")
    if not pause:
        return
    seconds, _, only = pause.partition(":")
    import sys
    import time

    sys.stderr.write(f"envlock-test: pausing before replace of {name}\n")
    sys.stderr.flush()
    if not only or only == name:
        time.sleep(float(seconds))


def write_all_atomic(files: Iterable[tuple[Path, str]]) -> list[Path]:
    """Write several files so a crash leaves each file whole (old or new).

    Every temp file is written and synced before the first rename, and the renames run in the
    given order, so callers put the authoritative file (the conda-lock.yml) last.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files:
            data = text.encode("utf-8")
            try:
                if path.read_bytes() == data:
                    continue
            except OSError:
                pass
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            _file_mode(fd, path)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        for tmp, path in staged:
            _test_pause(path.name)
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    return [path for _, path in staged]
