"""An update of an existing env is all or nothing (issue 22, Why 9): a disk that fills up in the conda step or in
the PyPI step, and SIGKILLs at random moments of an update, leave the old env working (the same files, the same
`nvcc --version`, the same `envlock doctor`) or the new env complete, never a mix.

The disk is a tmpfs the test mounts (root here) holding the env; the package cache lies elsewhere, so every
file is copied onto the small disk, as on a nearly full node.

On main before the fix (b459711): the update linked the new conda packages in place, then ENOSPC in the PyPI
step left the env `incomplete` with 12.6's nvcc and no working PyPI part; a SIGKILL mid-link did the same.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.channelbuilder import write_package
from tests.paused_envlock import LAUNCHER
from tests.security.hostile import (
    AnyPathServer, assert_refused, cli_env, envlock, locked, python311, tool, tree, wheel_entry, write_lock,
)
from tests.wheelindex import build_wheel

MB = 1 << 20


def _big(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)  # incompressible: a tmpfs holds it as it is


@pytest.fixture
def disk(tmp_path: Path):
    """A small tmpfs mounted for the test (skipped where mounting is not allowed)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root and a tmpfs mount to fill a disk")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _world(tmp_path: Path, server: AnyPathServer, wheels: dict, files: int = 0) -> tuple[Path, Path]:
    """The old lock (CUDA 12.1 + python + a small wheel) and the new one (12.6 with a 2 MB library and `files`
    small headers, + a 4 MB wheel): many files make the linking long enough for random kills to land in it."""
    chan = tmp_path / "chan" / "conda-forge"
    headers = {f"include/many/h{i:05d}.h": f"/* {i} */\n" for i in range(files)}
    old, new = tool("12.1"), tool("12.6", files={"lib/libbig.so": _big(2 * MB, 1), **headers})
    py = python311()
    for s in (old, new, py):
        write_package(s, chan / s.subdir)
    small, big = wheels["small"], wheels["big"]
    entry = lambda w: wheel_entry(w.project, w.version, f"{server.url}/simple/{w.project}/{w.filename}", w.data)  # noqa: E731
    lock_old = write_lock(tmp_path / "old" / "conda-lock.yml",
                          [locked(old, chan / "linux-64" / old.filename), locked(py, chan / "linux-64" / py.filename)],
                          [entry(small)])
    lock_new = write_lock(tmp_path / "new" / "conda-lock.yml",
                          [locked(new, chan / "linux-64" / new.filename), locked(py, chan / "linux-64" / py.filename)],
                          [entry(small), entry(big)])
    return lock_old, lock_new


@pytest.fixture
def wheels() -> dict:
    return {"small": build_wheel("ninja", "1.11.1"),
            "big": build_wheel("bigpkg", "1.0", files={"bigpkg/__init__.py": "", "bigpkg/blob.bin": _big(4 * MB, 2)})}


def _observe(prefix: Path, env: dict[str, str]) -> tuple[str, list[tuple[str, str, str]]]:
    """What a user sees of the env: `nvcc --version`, and doctor's findings."""
    try:
        done = subprocess.run([str(prefix / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
        nvcc = done.stdout + done.stderr
    except OSError as exc:  # a half-changed env may have none
        nvcc = f"nvcc: {exc.strerror}"
    doctor = envlock("doctor", "-p", str(prefix), "--json", env=env)
    findings = sorted((f["code"], f["severity"], f["message"]) for f in json.loads(doctor.stdout)["findings"])
    return nvcc, findings


def _free(mnt: Path) -> int:
    st = os.statvfs(mnt)
    return st.f_bavail * st.f_frsize


@pytest.mark.parametrize("step,free", [("conda", 1 * MB), ("PyPI", 3 * MB)])
def test_a_disk_that_fills_up_during_an_update_leaves_the_old_env(step: str, free: int, disk: Path, tmp_path: Path,
                                                                  wheels: dict) -> None:
    env = cli_env(tmp_path)
    with AnyPathServer({w.filename: w.data for w in wheels.values()}) as server:
        lock_old, lock_new = _world(tmp_path, server, wheels)
        prefix = disk / "env"
        mirror = ["--mirror", f"conda-forge={(tmp_path / 'chan' / 'conda-forge').as_uri()}"]
        assert envlock("create", "--lock", str(lock_old), "-p", str(prefix), *mirror, env=env).returncode == 0
        envlock("create", "--lock", str(lock_new), "-p", str(tmp_path / "warm"), *mirror, env=env)  # cache filled
        before, seen = tree(prefix), _observe(prefix, env)
        filler = disk / "filler"
        filler.write_bytes(b"\0" * max(0, _free(disk) - free))
        done = envlock("create", "--lock", str(lock_new), "-p", str(prefix), *mirror, env=env)
        assert_refused(done)
        assert tree(prefix) == before and _observe(prefix, env) == seen
        assert sorted(p.name for p in disk.iterdir()) == ["env", "filler"]  # the half-built new env is gone
        filler.unlink()
        again = envlock("create", "--lock", str(lock_new), "-p", str(prefix), *mirror, env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "release 12.6" in _observe(prefix, env)[0]
        assert not (prefix / "lib" / "python3.11" / "site-packages" / "bigpkg" / "blob.bin").is_symlink()


def _kills(n: int, slow: bool, tmp_path: Path, wheels: dict) -> None:
    env = cli_env(tmp_path)
    with AnyPathServer({w.filename: w.data for w in wheels.values()}) as server:
        lock_old, lock_new = _world(tmp_path, server, wheels, files=3000 if slow else 0)
        prefix = tmp_path / "envs" / "env"
        mirror = ["--mirror", f"conda-forge={(tmp_path / 'chan' / 'conda-forge').as_uri()}"]
        assert envlock("create", "--lock", str(lock_old), "-p", str(prefix), *mirror, env=env).returncode == 0
        warm = tmp_path / "warm"
        assert envlock("create", "--lock", str(lock_old), "-p", str(warm), *mirror, env=env).returncode == 0
        t0 = time.monotonic()  # an update from the warm cache, as each killed run does (not the first fetch)
        assert envlock("create", "--lock", str(lock_new), "-p", str(warm), *mirror, env=env).returncode == 0
        span = time.monotonic() - t0  # how long an update takes here, about
        before, seen = tree(prefix), _observe(prefix, env)
        rng = random.Random(22)
        outcomes = []
        for i in range(n):
            proc = subprocess.Popen([*LAUNCHER, "create", "--lock", str(lock_new), "-p", str(prefix), *mirror],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.1, span * 1.2) if slow else span * (i + 1) / (n + 1))
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            nvcc, findings = _observe(prefix, env)
            if "release 12.6" in nvcc:  # the new env, complete
                outcomes.append("new")
                meta = json.loads((prefix / "conda-meta" / "envlock").read_text())
                assert meta["state"] == "complete"
                assert (prefix / "lib" / "python3.11" / "site-packages" / "bigpkg" / "blob.bin").is_file()
                assert envlock("create", "--lock", str(lock_old), "-p", str(prefix), *mirror, env=env).returncode == 0
                before, seen = tree(prefix), _observe(prefix, env)  # back to the old env for the next kill
            else:  # the old env, exactly
                outcomes.append("old")
                assert (nvcc, findings) == seen and tree(prefix) == before, i
        done = envlock("create", "--lock", str(lock_new), "-p", str(prefix), *mirror, "--json", env=env)
        assert done.returncode == 0 and "release 12.6" in _observe(prefix, env)[0]
        assert not [p for p in prefix.parent.iterdir() if p.name.startswith(".env.envlock-")]  # leftovers removed
        print("outcomes:", outcomes)
        assert "old" in outcomes, outcomes


def test_a_kill_while_linking_an_update_leaves_the_old_env(tmp_path: Path, wheels: dict) -> None:
    """SIGKILL with the update half-linked (tests/paused_envlock.py holds it after the first linked package)."""
    from tests.paused_envlock import environ as paused_env

    env = cli_env(tmp_path)
    with AnyPathServer({w.filename: w.data for w in wheels.values()}) as server:
        lock_old, lock_new = _world(tmp_path, server, wheels)
        prefix = tmp_path / "envs" / "env"
        mirror = ["--mirror", f"conda-forge={(tmp_path / 'chan' / 'conda-forge').as_uri()}"]
        assert envlock("create", "--lock", str(lock_old), "-p", str(prefix), *mirror, env=env).returncode == 0
        before, seen = tree(prefix), _observe(prefix, env)
        proc = subprocess.Popen([*LAUNCHER, "create", "--lock", str(lock_new), "-p", str(prefix), *mirror],
                                env=paused_env(env, PAUSE_IN_LINK="60"), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:
            if "pausing while linking" in line:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert tree(prefix) == before and _observe(prefix, env) == seen
        done = envlock("create", "--lock", str(lock_new), "-p", str(prefix), *mirror, env=env)
        assert done.returncode == 0 and "release 12.6" in _observe(prefix, env)[0], done.stderr
        assert not [p for p in prefix.parent.iterdir() if p.name.startswith(".env.envlock-")]


def test_kills_during_an_update_leave_the_old_env_or_the_new_one(tmp_path: Path, wheels: dict) -> None:
    _kills(3, False, tmp_path, wheels)


@pytest.mark.slow
def test_twenty_random_kills_during_an_update(tmp_path: Path, wheels: dict) -> None:
    _kills(20, True, tmp_path, wheels)


def test_an_update_changes_nothing_of_the_old_env_while_it_is_built(tmp_path: Path, wheels: dict) -> None:
    """The old env's files share inodes with the clone the update builds in: none of them may change."""
    env = cli_env(tmp_path)
    with AnyPathServer({w.filename: w.data for w in wheels.values()}) as server:
        lock_old, lock_new = _world(tmp_path, server, wheels)
        prefix = tmp_path / "envs" / "env"
        mirror = ["--mirror", f"conda-forge={(tmp_path / 'chan' / 'conda-forge').as_uri()}"]
        assert envlock("create", "--lock", str(lock_old), "-p", str(prefix), *mirror, env=env).returncode == 0
        keep = tmp_path / "keep"
        shutil.copytree(prefix, keep, symlinks=True)
        old_inodes = {p: os.lstat(p) for p in prefix.rglob("*")}
        assert envlock("create", "--lock", str(lock_new), "-p", str(prefix), *mirror, env=env).returncode == 0
    for path, st in old_inodes.items():  # every file the old env had, if still linked somewhere, is unchanged
        rel = path.relative_to(prefix)
        if path.is_file() and not path.is_symlink() and os.lstat(path).st_ino == st.st_ino:
            assert path.read_bytes() == (keep / rel).read_bytes(), rel
