"""Progress on a terminal only: a status line per platform while resolve fetches and solves, bytes with speed
and ETA while create downloads (conda archives and wheels); nothing on a pipe or with --json.

Real processes: a pty for the terminal side, pipes for the other; an http channel on 127.0.0.1 whose answers
are slowed down so the display has something to show.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.output import drain, flat
from tests.lockproject import make_project

ENVLOCK = [sys.executable, "-m", "envlock"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_a_terminal(args: list[str], env: dict[str, str], cols: int = 120) -> tuple[int, str]:
    """Run envlock with stdout and stderr on a pty; (exit code, what the terminal showed, ANSI removed)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(sys.executable, [sys.executable, "-m", "envlock", *args], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    out = drain(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), ANSI.sub("", out.decode(errors="replace")).replace("\r", "\n")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERM")}, "TERM": "xterm",
            "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}


@pytest.fixture
def slow_channel(make_channel_server, channel_root: Path):  # type: ignore[no-untyped-def]
    """The test channel over http: its shard indexes and its nvcc packages answer after a second."""
    return make_channel_server(channel_root, faults={"*repodata_shards*": "stall:1", "*/cuda-nvcc-*": "stall:1"})


def _resolve_args(channel: str, project: Path, *more: str) -> list[str]:
    return ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--platform", "win-64",
            "--channel", channel, "--project-dir", str(project), *more]


def test_resolve_shows_a_status_line_per_platform_on_a_terminal(slow_channel, tmp_path) -> None:
    code, screen = in_a_terminal(_resolve_args(slow_channel.channel_url("conda-forge"), tmp_path / "p"), _env(tmp_path))
    assert code == 0, screen
    for platform in ("linux-64", "win-64"):
        assert re.search(rf"{platform}: fetching repodata \(http://127\.0\.0\.1:\d+/conda-forge\)", screen), screen
        assert f"{platform}: solving CUDA 12.1 with cudnn 8.9.*" in screen
    assert "torch: finding the CUDA torch 2.3.0 was built for" in screen
    assert screen.rstrip().endswith("wrote environments/torch2.3.0-cu121.yml")  # the summary after the lines


def test_resolve_on_a_pipe_and_with_json_shows_nothing_but_its_result(slow_channel, tmp_path) -> None:
    url = slow_channel.channel_url("conda-forge")
    piped = subprocess.run([*ENVLOCK, *_resolve_args(url, tmp_path / "p")], capture_output=True, text=True,
                           timeout=300, env=_env(tmp_path))
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    assert "fetching repodata" not in piped.stdout and "solving CUDA" not in piped.stdout
    code, screen = in_a_terminal(_resolve_args(url, tmp_path / "q", "--json"), _env(tmp_path))
    assert code == 0 and "fetching repodata" not in screen and "solving CUDA" not in screen
    assert json.loads(screen[screen.index("{"):])["name"] == "torch2.3.0-cu121"  # stdout is the JSON alone


@pytest.fixture
def locked(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(tmp_path_factory.mktemp("prog"), test_channel, platforms=("linux-64",))


def test_create_shows_bytes_speed_and_eta_while_downloading(slow_channel, locked, tmp_path) -> None:
    args = ["create", "--project-dir", str(locked), "-p", str(tmp_path / "env"),
            "--mirror", f"conda-forge={slow_channel.channel_url('conda-forge')}"]
    code, screen = in_a_terminal(args, _env(tmp_path))
    assert code == 0, screen
    assert "download + verify" in screen and "↓ conda archives" in screen
    bytes_line = [ln for ln in screen.splitlines() if "↓ conda archives" in ln][-1]
    assert re.search(r"\d+(\.\d+)?/\d+(\.\d+)? [kM]?B\b", bytes_line), bytes_line  # done / total
    assert re.search(r"\d+(\.\d+)? [kM]?B/s", bytes_line), bytes_line  # speed
    assert re.search(r"\d:\d\d:\d\d", bytes_line), bytes_line  # time left
    total = re.search(r"/(\d+(?:\.\d+)?) ([kM]?B)", bytes_line)
    assert total and re.search(rf"{total.group(1)}/{total.group(1)} {total.group(2)}", bytes_line)  # all of it


def test_create_on_a_pipe_and_with_json_shows_no_bars(slow_channel, locked, tmp_path) -> None:
    mirror = f"conda-forge={slow_channel.channel_url('conda-forge')}"
    piped = subprocess.run([*ENVLOCK, "create", "--project-dir", str(locked), "-p", str(tmp_path / "a"), "--mirror",
                            mirror], capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert piped.returncode == 0, piped.stderr
    assert "download + verify" not in piped.stderr and "↓" not in piped.stderr
    assert flat(piped.stderr).startswith(f"created {tmp_path / 'a'} from ")  # the summary only (a long path: folded)
    code, screen = in_a_terminal(["create", "--project-dir", str(locked), "-p", str(tmp_path / "b"), "--mirror",
                                  mirror, "--json"], _env(tmp_path / "other-cache"))
    assert code == 0 and "download + verify" not in screen and "↓" not in screen
    assert json.loads(screen[screen.index("{"):])["action"] == "created"


def test_create_shows_the_wheels_download_in_bytes_too(tmp_path, test_channel_url, wheel_index) -> None:
    """A full environment: the PyPI part's wheels come over http from the (loopback) index, in bytes."""
    project = tmp_path / "full"
    project.mkdir()
    env = _env(tmp_path)
    done = subprocess.run([*ENVLOCK, "resolve", "--torch", "2.7.1", "--platform", "linux-64", "--mirror",
                           f"conda-forge={test_channel_url}", "--project-dir", str(project)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    code, screen = in_a_terminal(["create", "--project-dir", str(project), "-p", str(tmp_path / "env"),
                                  "--mirror", f"conda-forge={test_channel_url}"], env)
    assert code == 0, screen
    assert "wheels + verify" in screen
    line = [ln for ln in screen.splitlines() if "↓ wheels" in ln][-1]
    assert re.search(r"\d+(\.\d+)?/\d+(\.\d+)? [kM]?B\b", line), line
    # Speed and time left (the loopback index answers in one chunk: too quick for a speed sample, so '?'; rich
    # shows -:--:-- for the time left until it has one: CI caught a frame before the first estimate).
    assert re.search(r"(\d+(\.\d+)? [kM]?B/s|\?) (\d:\d\d:\d\d|-:--:--)", line), line
    assert any(p.endswith(".whl") for p in wheel_index.downloads())
