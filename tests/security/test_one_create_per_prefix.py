"""One create per prefix whatever path names it, and "unchanged" only when the installed records equal the lock's
(issue 22, Why 8).

On main before the fix (b459711): two creates into one prefix through a symlinked parent did not wait for each
other (the lock was keyed on the path as typed), and a prefix holding a record more than the lock was called
`unchanged` (the lock's records only had to be a subset of what was installed).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paused_envlock import LAUNCHER
from tests.paused_envlock import environ as paused_env
from tests.security.hostile import ENVLOCK, built, cli_env, envlock, tool, write_lock


def _locks(tmp_path: Path) -> tuple[Path, Path]:
    chan = tmp_path / "chan"
    url = (chan / "linux-64").as_uri()
    one, two = tool("12.1"), tool("12.6")
    return (write_lock(tmp_path / "l121" / "conda-lock.yml", [built(one, chan, url=f"{url}/{one.filename}")]),
            write_lock(tmp_path / "l126" / "conda-lock.yml", [built(two, chan, url=f"{url}/{two.filename}")]))


def _wait_line(proc: subprocess.Popen[str], needle: str) -> str:
    """What proc wrote on stderr up to the line holding needle (communicate() cannot see what was read here)."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            return "".join(seen)
    raise AssertionError(f"ended (exit {proc.wait()}) before printing {needle!r}: {''.join(seen)}")


@pytest.mark.parametrize("spelling", ["symlinked parent", "dot-dot", "symlinked prefix"])
def test_two_creates_of_one_prefix_under_two_names_wait_for_each_other(spelling: str, tmp_path: Path) -> None:
    lock121, lock126 = _locks(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    first_path = real / "env"
    second_path = {"symlinked parent": tmp_path / "alias" / "env", "dot-dot": real / "x" / ".." / "env",
                   "symlinked prefix": tmp_path / "envlink"}[spelling]
    if spelling == "dot-dot":
        (real / "x").mkdir()
    if spelling == "symlinked prefix":
        first_path.mkdir()
        second_path.symlink_to(first_path)
    env = cli_env(tmp_path)
    release = tmp_path / "release-the-first"  # the first holds its pause until the second says it waits
    first = subprocess.Popen([*LAUNCHER, "create", "--lock", str(lock121), "-p", str(first_path), "--json"],
                             env=paused_env(env, PAUSE_IN_LINK=f"until={release}"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    _wait_line(first, "envlock-test: pausing while linking")
    second = subprocess.Popen([*ENVLOCK, "create", "--lock", str(lock126), "-p", str(second_path), "--json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = _wait_line(second, "waiting for the environment")  # or it ended first: an AssertionError
    finally:
        release.touch()
    out2, rest = second.communicate(timeout=120)
    err2 = waiting + rest
    out1, _ = first.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, out2 + err2
    assert "waiting for the environment" in err2, err2
    records = sorted(p.name for p in (first_path / "conda-meta").glob("*.json"))
    assert len(records) == 1 and records[0].startswith("cuda-nvcc-12.6-"), records  # the second create's, alone
    assert json.loads((first_path / "conda-meta" / "envlock").read_text())["state"] == "complete"


def test_a_record_more_than_the_lock_is_not_unchanged(tmp_path: Path) -> None:
    lock121, lock126 = _locks(tmp_path)
    env = cli_env(tmp_path)
    prefix, other = tmp_path / "env", tmp_path / "other"
    assert envlock("create", "--lock", str(lock121), "-p", str(prefix), env=env).returncode == 0
    assert envlock("create", "--lock", str(lock126), "-p", str(other), env=env).returncode == 0
    extra = next((other / "conda-meta").glob("cuda-nvcc-12.6-*.json"))
    shutil.copy(extra, prefix / "conda-meta" / extra.name)  # what a racing create of another lock left behind
    done = envlock("create", "--lock", str(lock121), "-p", str(prefix), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["action"] == "updated"
    records = [p.name for p in (prefix / "conda-meta").glob("*.json")]
    assert len(records) == 1 and records[0].startswith("cuda-nvcc-12.1-"), records
    again = envlock("create", "--lock", str(lock121), "-p", str(prefix), "--json", env=env)
    assert json.loads(again.stdout)["action"] == "unchanged"
