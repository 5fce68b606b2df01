"""Exit-code integrity: the CLI as a subprocess, many times in a row, every exit code right.

py-rattler 0.28 can segfault at interpreter exit (DESIGN.md); envlock/cli.py leaves with os._exit.
One round = `--help` (0), `check` on a fresh lock (0), `check` on a stale one (1), a small
`resolve` (0), and an unsatisfiable `resolve` (3). The slow tier runs 200 rounds (1,000 processes),
two at a time; the default run does 3.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.reliability.conftest import ENV, TORCH

ENVLOCK = [sys.executable, "-m", "envlock"]


@pytest.fixture
def projects(previous_project: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(fresh, stale): the previous project as written (the marker is a comment), and one whose spec changed."""
    fresh, stale = tmp_path / "fresh", tmp_path / "stale"
    shutil.copytree(previous_project, fresh)
    shutil.copytree(previous_project, stale)
    spec = stale / "environments" / f"{ENV}.yml"
    spec.write_text(spec.read_text().replace("glibc: '2.28'", "glibc: '2.34'"))
    return fresh, stale


def _round(i: int, small_root: Path, fresh: Path, stale: Path, env: dict[str, str], work: Path) -> list[tuple[str, int, int, str]]:
    mirror = f"conda-forge={(small_root / 'conda-forge').as_uri()}"
    target = work / f"r{i}"
    target.mkdir()
    runs = [
        ("--help", ["--help"], None, 0),
        ("check fresh", ["check"], fresh, 0),
        ("check stale", ["check"], stale, 1),
        ("resolve", ["resolve", *TORCH, "--mirror", mirror, "--project-dir", str(target), "--json"], None, 0),
        ("resolve unsatisfiable", ["resolve", *TORCH, "--mirror", mirror, "--cuda", "12.4", "--project-dir",
                                   str(target), "--json"], None, 3),
    ]
    out = []
    for name, args, cwd, want in runs:
        done = subprocess.run([*ENVLOCK, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        out.append((name, want, done.returncode, done.stderr[-300:]))
    return out


def _run_rounds(n: int, small_root: Path, projects: tuple[Path, Path], tmp_path: Path) -> None:
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    fresh, stale = projects
    with ThreadPoolExecutor(max_workers=2) as pool:
        rounds = list(pool.map(lambda i: _round(i, small_root, fresh, stale, env, tmp_path), range(n)))
    results = [r for rnd in rounds for r in rnd]
    wrong = [r for r in results if r[1] != r[2]]
    tally = collections.Counter((name, code) for name, _, code, _ in results)
    print(f"\nexit codes over {len(results)} runs: {dict(tally)}")
    assert not wrong, wrong[:5]
    assert len(results) == 5 * n


def test_exit_codes_default(small_root: Path, projects: tuple[Path, Path], tmp_path: Path) -> None:
    _run_rounds(3, small_root, projects, tmp_path)


@pytest.mark.slow
def test_exit_codes_200_rounds(small_root: Path, projects: tuple[Path, Path], tmp_path: Path) -> None:
    _run_rounds(200, small_root, projects, tmp_path)
