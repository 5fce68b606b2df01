"""Shared parts of the attack suite on untrusted inputs: resolved projects to attack, and envlock run as a
separate process under a memory cap (a hostile input must not take the test run down with it).

Plain functions and fixtures (imported by the test modules that use them), so tests/security/ needs no
conftest.py of its own.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lockproject import make_project
from tests.output import logical_lines

ENVLOCK = [sys.executable, "-m", "envlock"]
TOOLCHAIN = "torch2.3.0-cu121"  # the toolchain-only template (linux-64 + linux-aarch64)
FULL = "torch2.7.1-cu126"  # the full template (linux-64: the conda part and the PyPI part)
#: Address space a hostile run may take: envlock itself needs ~0.3 GiB; a YAML alias bomb took 2.7 GB.
MEMORY_CAP = 1536 << 20


@pytest.fixture(scope="session")
def toolchain_template(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    """torch 2.3.0, toolchain only, linux-64 and linux-aarch64, resolved once for the session."""
    return make_project(tmp_path_factory.mktemp("sec-toolchain"), test_channel,
                        platforms=("linux-64", "linux-aarch64"))


@pytest.fixture(scope="session")
def full_template(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    """torch 2.7.1 (CUDA 12.6), linux-64, a full environment: conda part + PyPI part from the test index."""
    return make_project(tmp_path_factory.mktemp("sec-full"), test_channel, torch="2.7.1", platforms=("linux-64",),
                        toolchain_only=False)


def copy(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest, symlinks=True)
    return dest


def _cap_memory() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def envlock(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`envlock ARGS…` as its own process, its address space capped at MEMORY_CAP.

    A run that outlives `timeout` is killed and reported as exit 124 (what `timeout(1)` says). The output is
    decoded as it is, carriage returns included (text mode would turn a `\r` into a line break).
    """
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    env.pop("ENVLOCK_DEBUG", None)
    try:
        done = subprocess.run([*ENVLOCK, *args], capture_output=True, env=env, cwd=cwd, timeout=timeout,
                              preexec_fn=_cap_memory, check=False)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, _text(exc.stdout), _text(exc.stderr) + "[killed: timeout]")
    return subprocess.CompletedProcess(done.args, done.returncode, _text(done.stdout), _text(done.stderr))


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def assert_one_error(done: subprocess.CompletedProcess[str], *needles: str, code: int = 1) -> str:
    """The run failed the way every envlock failure must: exit `code`, exactly one `error:` line and one
    `hint:` line on stderr, no traceback, no internal error. Returns the error line (needles must be in it)."""
    where = f"exit {done.returncode}\nstdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
    assert done.returncode == code, where
    lines = logical_lines(done.stderr)  # folded to 80 columns: a long temp path moves words to the next line
    errors = [ln for ln in lines if ln.startswith("error:")]
    hints = [ln for ln in lines if ln.startswith("hint:")]
    assert len(errors) == 1 and len(hints) == 1, where
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, where
    for needle in needles:
        assert needle in errors[0], f"{needle!r} not in {errors[0]!r}"
    return errors[0]
