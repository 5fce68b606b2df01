"""`envlock resolve`'s summary fits 80 columns (CI logs, pipes, an 80-column terminal); reasons below the table."""

from __future__ import annotations

import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import fcntl
from pathlib import Path

import pytest

from envlock.commands.summary import HEADERS, table
from tests.output import drain

ENVLOCK = [sys.executable, "-m", "envlock"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_the_widest_row_envlock_writes_fits_80_columns() -> None:
    widest = ("linux-aarch64", "12.1", "12.1.105", "14", "9.10.2.21", "123", "torch 2.15.0 +31", "minor+1")
    lines = table([widest], 80)
    assert len(lines) == 2 and lines[0].split() == [h for h in " ".join(HEADERS).split()]
    assert max(len(ln) for ln in lines) <= 80
    narrow = table([widest], 50)  # a narrower terminal: one line per platform, never a wrapped cell
    assert narrow == ["linux-aarch64: CUDA 12.1, nvcc 12.1.105, gcc ≤ 14, cuDNN 9.10.2.21, pkgs 123, "
                      "PyPI torch 2.15.0 +31, skew minor+1"]


@pytest.fixture(scope="module")
def moved_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CUDA 12.1 lacks libcusparse-dev: the plan moves to 12.0 (minor-1) on every platform."""
    from tests.channelbuilder import build_channel

    return build_channel(tmp_path_factory.mktemp("moved"), cuda_minors=["12.0", "12.1", "12.2"],
                         drop={("libcusparse-dev", "12.1")}, with_pytorch=False, with_cuda11=False)


def _args(channel: Path, project: Path) -> list[str]:
    return ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--platform", "linux-aarch64",
            "--platform", "win-64", "--mirror", f"conda-forge={channel.as_uri()}", "--project-dir", str(project)]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**env, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), **extra}


def test_a_piped_summary_fits_80_columns_and_keeps_each_reason_whole(tmp_path, moved_channel) -> None:
    project = tmp_path / "p"
    project.mkdir()
    proc = subprocess.run([*ENVLOCK, *_args(moved_channel, project)], capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80, proc.stdout
    table_rows = [ln for ln in lines if not ln.startswith(" ") and ln.split()[:1] in (["linux-64"], ["linux-aarch64"], ["win-64"])]
    assert [r.split()[:2] for r in table_rows] == [["linux-64", "12.0"], ["linux-aarch64", "12.0"], ["win-64", "12.0"]]
    assert all(r.split()[-1] == "minor-1" for r in table_rows)  # one row per platform, no wrapped cell
    doc = json.loads(subprocess.run([*ENVLOCK, *_args(moved_channel, project), "--json"], capture_output=True,
                                    text=True, timeout=300, env=_env(tmp_path)).stdout)
    reason = doc["platforms"]["linux-64"]["attempts"][0]["error"].partition(": ")[2].replace(" for linux-64", "")
    assert reason and " ".join(reason.split()) in " ".join(proc.stdout.split())  # below the table, whole
    # the same reason on the three platforms: said once
    assert proc.stdout.count("why: ") == 1
    assert "why: linux-64, linux-aarch64, win-64: CUDA 12.0 (minor-1) solved after CUDA 12.1:" in " ".join(proc.stdout.split())


def test_an_80_column_terminal_gets_the_same_fit(tmp_path, moved_channel) -> None:
    project = tmp_path / "p"
    project.mkdir()
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdout and stderr are the terminal
        os.execvpe(sys.executable, [sys.executable, "-m", "envlock", *_args(moved_channel, project)],
                   _env(tmp_path, TERM="xterm"))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out = drain(fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    text = ANSI.sub("", out.decode()).replace("\r", "")
    text = text[text.rindex("torch 2.3.0 → CUDA"):]  # the summary, after the (transient) status lines are gone
    summary = [ln for ln in text.splitlines() if ln.strip()]
    assert any(re.match(r"platform +CUDA +nvcc", ln) for ln in summary), text
    assert max(len(ln) for ln in summary) <= 80, text
