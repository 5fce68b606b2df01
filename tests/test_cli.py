"""The CLI surface: usage errors, --help speed path, the project's own example staying fresh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.cli import run

REPO = Path(__file__).resolve().parent.parent
ENVLOCK = [sys.executable, "-m", "envlock"]


@pytest.mark.parametrize("args", [["lock", "--bogus"], ["resolve"], ["resolve", "--torch"], ["nonsense"]])
def test_usage_errors_exit_2_without_traceback(args: list[str]) -> None:
    proc = subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def test_version_and_help() -> None:
    out = subprocess.run([*ENVLOCK, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("envlock ")
    helptext = subprocess.run([*ENVLOCK, "--help"], capture_output=True, text=True, timeout=60)
    assert helptext.returncode == 0
    for cmd in ("resolve", "create", "run", "shell-hook", "doctor", "check", "lock", "update", "diff"):
        assert cmd in helptext.stdout


def test_help_imports_no_solver_or_network_stack() -> None:
    """On a pipe `--help` is click's plain help: no rattler, conda-lock, requests, nor rich (README "How it is built")."""
    code = ("import sys; from envlock.cli import run; run(['--help']); "
            "print(sorted(m for m in ('rattler','conda_lock','requests','rich') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_a_resolve_on_a_pipe_prints_its_summary_without_importing_rich(test_channel: Path, tmp_path: Path) -> None:
    """CI logs and pipes get the plain summary; rich (styles, ~10 ms to import) is for terminals only; a file://
    mirror is read without urllib.request (http.client, email: ~40 ms for a path)."""
    code = ("import sys; from envlock.cli import run; rc = run(sys.argv[1:]); "
            "print(sorted(m for m in ('rich', 'filelock', 'urllib.request') if m in sys.modules), rc)")
    proc = subprocess.run([sys.executable, "-c", code, "resolve", "--torch", "2.3.0", "--platform", "linux-64",
                           "--toolchain-only", "--mirror", f"conda-forge={test_channel.as_uri()}",
                           "--project-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    assert lines[-1] == "[] 0", proc.stdout + proc.stderr
    assert lines[0].startswith("torch 2.3.0 → CUDA 12.1") and "wrote locks/torch2.3.0-cu121/conda-lock.yml" in lines
    assert all(len(line) <= 80 for line in lines[:-1])


def test_the_projects_own_example_lock_is_fresh(shared_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """environments/ + locks/ of this repo must be re-locked whenever the rules change a plan."""
    code = run(["check", "--project-dir", str(REPO), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc


def test_mirror_path_with_dotdot_still_records_canonical_urls(shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = f"{REPO.as_uri()}/../{shared_dir.name}/channels/conda-forge"  # rattler normalises the ..
    code = run(["resolve", "--torch", "2.7.1", "--platform", "linux-64", "--mirror", f"conda-forge={odd}", "--project-dir", str(tmp_path), "--json"])
    assert code == 0, capsys.readouterr().out
    lock = (tmp_path / "locks/torch2.7.1-cu126/conda-lock.yml").read_text()
    assert "file://" not in lock and lock.count("https://conda.anaconda.org/conda-forge/") >= 60
