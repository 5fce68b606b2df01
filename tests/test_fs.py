"""envlock.seams.fs and envlock.seams.filelocks: the one atomic writer and the cross-platform file lock (flock / msvcrt),
with real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from envlock.seams.filelocks import FileLock
from envlock.seams.fs import copy_atomic, write_atomic, write_json_atomic
from tests.second_user import open_dir, second_user

HOLD = """
import sys, time
from pathlib import Path
from envlock.seams.filelocks import FileLock
with FileLock(Path(sys.argv[1]), "the lock of demo", root=Path(sys.argv[1]).parent):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_waiter_names_the_holder_after_a_second_then_gets_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "demo.lock"
    holder = _holder(lock, 2.0)
    said: list[str] = []
    started = time.monotonic()
    with FileLock(lock, "the lock of demo", notify=said.append, root=tmp_path):
        waited = time.monotonic() - started
        assert f"pid {os.getpid()}" in lock.read_text()  # this process is the holder now
    assert holder.wait() == 0
    assert 1.5 <= waited and len(said) == 1  # it waited for the 2 s holder, and said so once
    assert said[0].startswith(f"envlock: waiting for the lock of demo, held by pid {holder.pid} (envlock")
    # Released: no stale holder line (blanked in place, not truncated: see FileLock._record).
    assert lock.read_text().strip() == "" and FileLock(lock, "the lock of demo", root=tmp_path).holder() == ""


def test_a_lock_whose_holder_was_killed_is_free_again(tmp_path: Path) -> None:
    lock = tmp_path / "demo.lock"
    holder = _holder(lock, 60.0)
    holder.kill()
    holder.wait()
    said: list[str] = []
    with FileLock(lock, "the lock of demo", notify=said.append, root=tmp_path):
        pass
    assert said == []


def test_the_writer_keeps_an_existing_mode_and_gives_a_new_file_the_umasks(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_json_atomic(tmp_path / "new.json", {"b": 1, "a": [1]}, root=tmp_path)
        assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o640
        assert (tmp_path / "new.json").read_text() == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}\n'
        (tmp_path / "kept").write_text("a")
        (tmp_path / "kept").chmod(0o600)
        assert write_atomic(tmp_path / "kept", b"b", root=tmp_path) is True
        assert (tmp_path / "kept").stat().st_mode & 0o777 == 0o600
        copy_atomic(tmp_path / "kept", tmp_path / "copy", mode=0o644, root=tmp_path)
        assert (tmp_path / "copy").stat().st_mode & 0o777 == 0o644 and (tmp_path / "copy").read_text() == "b"
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "kept", "new.json"]  # no temp files left


def test_a_lock_in_a_folder_the_user_cannot_write_is_one_error_naming_it() -> None:
    as_other, env = second_user()
    with open_dir("envlock-root-only-") as root_only:
        code = ("import sys; from pathlib import Path; from envlock.seams.filelocks import FileLock\n"
                "try:\n    FileLock(Path(sys.argv[1]), 'the lock of x', root=Path(sys.argv[1]).parent).__enter__()\n"
                "except Exception as exc:\n    print(type(exc).__name__, exc.message, '|', exc.hint)")
        done = subprocess.run([*as_other, "-c", code, str(root_only / "a.lock")], capture_output=True, text=True,
                              cwd="/", env=env)
    said = done.stdout.strip()
    # one error: and hint: (an internal error before), naming the real cause, not FileNotFoundError
    assert said.startswith("SpecError cannot take the lock of x: Permission denied ("), done.stdout + done.stderr
    assert f"share {root_only} as a group" in said and "ENVLOCK_CACHE_DIR" in said


def test_another_users_lock_file_in_a_shared_cache_still_locks() -> None:
    """A cluster's shared cache: user A's lock file is 0644, user B cannot open it for writing but must
    still take (and wait for) the lock. Runs B as uid 65534 through setpriv where this test runs as root."""
    as_other, env = second_user()
    with open_dir("envlock-shared-", 0o1777) as shared:
        lock = shared / "entry.lock"
        with FileLock(lock, "the lock of demo", root=shared):
            assert lock.stat().st_mode & 0o777 == 0o644 and lock.stat().st_uid == 0
            other = subprocess.Popen([*as_other, "-c", WAIT, str(lock)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd="/", env=env)
            time.sleep(1.6)
            assert other.poll() is None, other.communicate()  # waiting for this process, not failing on the file
        out, err = other.communicate(timeout=30)
    assert other.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("envlock: waiting for the lock of demo, held by pid ") and lines[-1] == "got it"


WAIT = """
import sys
from pathlib import Path
from envlock.seams.filelocks import FileLock
with FileLock(Path(sys.argv[1]), "the lock of demo", notify=print, root=Path(sys.argv[1]).parent):
    print("got it")
"""


def test_a_filesystem_without_locks_is_an_error_not_an_endless_wait(tmp_path: Path, monkeypatch) -> None:
    """flock failing with ENOLCK (an NFS mount without lockd) must not read as "held by another process".
    No such filesystem exists here, so flock itself is replaced for this one call: the fake is the kernel's answer."""
    import errno
    import fcntl

    import pytest

    from envlock.errors import SpecError

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    started = time.monotonic()
    with pytest.raises(SpecError) as err:
        with FileLock(tmp_path / "x.lock", "the lock of demo", notify=lambda _: None, root=tmp_path):
            pass
    assert time.monotonic() - started < 1 and "No locks available" in err.value.message and err.value.hint
