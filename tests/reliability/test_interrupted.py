"""SIGKILL during `envlock resolve`'s writing, and two resolves of one env at once (real subprocesses).

The window is widened by the test-only launcher tests/paused_envlock.py (ENVLOCK_TEST_PAUSE_BEFORE_REPLACE wraps
envlock.seams.fs.replace): each rename waits, announcing `envlock-test: pausing before replace of <file>` on stderr first, so
the test kills at a known point instead of hoping to hit it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envlock.formats import read_lock
from tests.paused_envlock import LAUNCHER
from tests.paused_envlock import environ as paused_env
from tests.reliability.conftest import ENV, LOCK, TORCH, snapshot

ENVLOCK = [sys.executable, "-m", "envlock"]
MARK = "# previous run\n"
PAUSE_LINE = "envlock-test: pausing before replace of "


def _mark_all(project: Path) -> dict[str, bytes]:
    """Append a comment to every file, so each file's old and new bytes differ; return the old ones."""
    for p in project.rglob("*"):
        if p.is_file():
            p.write_bytes(p.read_bytes() + MARK.encode())
    return snapshot(project)


def _start(project: Path, channel: Path, env: dict[str, str], pause: str | None) -> subprocess.Popen[str]:
    run_env = {**env} if pause is None else paused_env(env, PAUSE_BEFORE_REPLACE=pause)
    args = [*(ENVLOCK if pause is None else LAUNCHER), "resolve", *TORCH, "--mirror", f"conda-forge={channel.as_uri()}", "--project-dir", str(project)]
    return subprocess.Popen(args, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_pause(proc: subprocess.Popen[str], filename: str, timeout: float = 60) -> list[str]:
    """Read the child's stderr until it pauses before renaming `filename`; return the files it paused on."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the run ended before pausing at {filename} (exit {proc.wait()}), paused at {seen}")
        if line.startswith(PAUSE_LINE):
            seen.append(line[len(PAUSE_LINE) :].strip())
            if seen[-1] == filename:
                return seen
    raise AssertionError(f"no pause at {filename} within {timeout} s")


def _read_until(proc: subprocess.Popen[str], needle: str, timeout: float = 120) -> str:
    """The child's stderr up to and including the first line holding `needle` (all of it if it ends first)."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if not line or needle in " ".join("".join(seen).split()):  # a notice is folded to 80 columns
            break
    return "".join(seen)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}


@pytest.fixture
def new_files(small_root: Path, tmp_path: Path, env: dict[str, str]) -> dict[str, bytes]:
    """What an uninterrupted run writes (same inputs → same bytes)."""
    clean = tmp_path / "clean"
    clean.mkdir()
    proc = _start(clean, small_root / "conda-forge", env, None)
    assert proc.wait(120) == 0, proc.stderr.read() if proc.stderr else ""
    return snapshot(clean)


# Order of renames: conda-linux-64.lock, activate/deactivate scripts, conda-lock.yml, then the spec.
KILL_POINTS = ["conda-linux-64.lock", "deactivate.sh", "conda-lock.yml", f"{ENV}.yml"]


@pytest.mark.parametrize(
    "at", [pytest.param(a, marks=[] if a in ("conda-linux-64.lock", "conda-lock.yml") else [pytest.mark.slow])
           for a in KILL_POINTS]
)
def test_sigkill_while_writing_leaves_each_file_whole_and_the_next_run_completes(
    at: str, project: Path, small_root: Path, env: dict[str, str], new_files: dict[str, bytes]
) -> None:
    old = _mark_all(project)
    proc = _start(project, small_root / "conda-forge", env, pause=f"60:{at}")
    paused = _wait_for_pause(proc, at)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    after = snapshot(project)
    renamed = set(paused[:-1])  # every file paused on before the last was renamed
    leftovers = [p for p in after if p.rsplit("/", 1)[-1].startswith(".") and p.endswith(".tmp")]
    assert leftovers  # SIGKILL skips cleanup: the temp files of what was not renamed yet remain
    for rel, data in old.items():
        name = rel.rsplit("/", 1)[-1]
        expected = new_files[rel] if name in renamed else data
        assert after[rel] == expected, rel  # whole: the old bytes or the new ones, never a mix
    lock = read_lock(project / LOCK)  # the authoritative file always parses
    assert (MARK in (project / LOCK).read_text()) == ("conda-lock.yml" not in renamed)
    assert lock.packages_for("linux-64")
    # The next run repairs it: every file new, the killed run's temp files gone.
    proc = _start(project, small_root / "conda-forge", env, None)
    assert proc.wait(120) == 0
    assert snapshot(project) == new_files


def test_two_resolves_of_one_env_are_serialised_and_the_second_names_the_holder(
    project: Path, small_root: Path, env: dict[str, str], new_files: dict[str, bytes], tmp_path: Path
) -> None:
    _mark_all(project)
    release = tmp_path / "release-the-first"  # the first holds its pause until the second says it waits
    first = _start(project, small_root / "conda-forge", env, pause=f"until={release}:conda-linux-64.lock")
    _wait_for_pause(first, "conda-linux-64.lock")  # the first now holds the env's file lock
    started = time.monotonic()
    second = _start(project, small_root / "conda-forge", env, None)
    # the whole notice (folded over lines: communicate() cannot see what readline() buffered past the match)
    waiting = _read_until(second, f"held by pid {first.pid} (envlock resolve")
    release.touch()
    _, rest = second.communicate(timeout=120)
    err2 = waiting + rest
    waited = time.monotonic() - started
    assert second.returncode == 0, err2
    first_err = first.communicate(timeout=60)[1]
    assert first.returncode == 0, first_err
    flat2 = " ".join(err2.split())
    assert f"waiting for the lock of {ENV}" in flat2 and f"held by pid {first.pid} (envlock resolve" in flat2
    assert waited > 1.0
    assert snapshot(project) == new_files  # both wrote whole files, one after the other
