"""Every command's output fits an 80-column terminal, on success and on failure (issue 24, Build 4).

Each command runs on a real pty whose window is 80 columns (set before envlock starts): resolve, check,
update, create, doctor, pack, unpack, mirror, export dockerfile and export explicit, each once succeeding and
once failing (and resolve once failing to solve). Whatever the terminal showed (status lines and progress bars
included, ANSI removed) has no line over 80 columns; a failure is one `error:` and one `hint:`, each folded,
never a traceback.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import struct
import sys
import tempfile
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.output import drain, logical_lines

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
COLUMNS = 80


def on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, list[str]]:
    """Run envlock on a pty of 80 columns: (exit code, the lines the terminal showed, ANSI removed)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the window size is set before envlock asks it
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))
        os.chdir(cwd)
        os.execvpe(sys.executable, [sys.executable, "-m", "envlock", *args], env)
    out = drain(fd)
    _, status = os.waitpid(pid, 0)
    text = ANSI.sub("", out.decode(errors="replace"))
    return os.waitstatus_to_exitcode(status), [ln for part in text.split("\n") for ln in part.split("\r")]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Iterator[Path]:
    """A short working dir (paths in messages stay short enough to be worth reading) with one locked project: under
    /tmp where $TMPDIR is long (a path wider than a line is kept whole in a command to paste: envlock/wrapping.py)."""
    from tests.lockproject import make_project

    base = Path(tmp_path_factory.getbasetemp())
    short = len(str(base)) > 40 and os.access("/tmp", os.W_OK)
    root = Path(tempfile.mkdtemp(prefix="w", dir="/tmp")) if short else Path(tmp_path_factory.mktemp("w"))
    try:
        make_project(root / "p", test_channel, platforms=("linux-64",), name="t")
        shutil.copytree(test_channel, root / "cf", symlinks=True)
        yield root
    finally:
        if short:
            shutil.rmtree(root, ignore_errors=True)


def _env(work: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERM", "NO_COLOR")}
    return {**keep, "TERM": "xterm", "ENVLOCK_CACHE_DIR": str(work / "cache"), "ENVLOCK_ENVS_DIR": str(work / "envs"),
            "ENVLOCK_MIRRORS": f"conda-forge={(work / 'cf').as_uri()}"}


# (name, arguments, expected exit code); run in this order (unpack needs the pack, doctor the env)
CASES = [
    ("resolve ok", ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64",
                    "--platform", "linux-aarch64", "--platform", "win-64", "--project-dir", "p2"], 0),
    ("resolve fails", ["resolve", "--torch", "2.3.0+cu126", "--project-dir", "p2"], 1),
    ("resolve fails to solve", ["resolve", "--torch", "2.3.0", "--toolchain-only", "--with", "all", "--platform",
                                "win-64", "--project-dir", "p3"], None),
    ("check ok", ["check", "--project-dir", "p"], 0),
    ("check fails", ["check", "nope", "--project-dir", "p"], 1),
    ("update ok", ["update", "cuda-nvcc", "--project-dir", "p"], 0),
    ("update fails", ["update", "no-such-package", "--project-dir", "p"], 1),
    ("create ok", ["create", "--project-dir", "p", "-p", "env"], 0),
    ("create fails", ["create", "--project-dir", "p", "-p", "env", "--lock", "nope"], 1),
    ("doctor ok", ["doctor", "-p", "env"], None),
    ("doctor fails", ["doctor", "-p", "no-env"], 1),
    ("pack ok", ["pack", "--project-dir", "p", "-o", "t.tar"], 0),
    ("pack fails", ["pack", "--project-dir", "p", "-o", "t.tar"], 1),
    ("unpack ok", ["unpack", "t.tar", "-p", "env2"], 0),
    ("unpack fails", ["unpack", "missing.tar", "-p", "env3"], 1),
    ("mirror ok", ["mirror", "--project-dir", "p", "m"], 0),
    ("mirror fails", ["mirror", "--project-dir", "p"], 2),
    ("export ok", ["export", "dockerfile", "--project-dir", "p", "-o", "p/Dockerfile"], 0),  # in its context
    ("export fails", ["export", "dockerfile", "--project-dir", "p", "--platform", "win-64"], 2),
    ("export explicit ok", ["export", "explicit", "--project-dir", "p", "-o", "x"], 0),
    ("export explicit fails", ["export", "explicit", "--project-dir", "p", "--platform", "osx-64"], 2),
]


def test_every_command_fits_80_columns_on_success_and_failure(work: Path) -> None:
    env = _env(work)
    seen = []
    for name, args, code in CASES:
        got, lines = on_a_terminal(args, env, work)
        shown = "\n".join(lines)
        if code is not None:
            assert got == code, (name, shown)
        wide = [ln for ln in lines if len(ln) > COLUMNS]
        assert wide == [], (name, wide)
        assert "Traceback" not in shown, (name, shown)
        if got not in (0, None) and not name.startswith("doctor"):
            labels = [ln.split(":")[0] for ln in logical_lines("\n".join(ln for ln in lines if ln.strip()))
                      if ln.startswith(("error:", "hint:"))]
            assert labels == ["error", "hint"], (name, shown)
        seen.append(name)
    assert len(seen) == len(CASES)


@given(st.lists(st.text(alphabet="abcdefghij_-.", min_size=1, max_size=30), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_a_command_with_a_path_wider_than_a_line_folds_within_it_and_reads_back(parts: list[str]) -> None:
    """`export pixi`'s `install it with: pixi install … --manifest-path PATH` printed a path wider than a line whole
    (87 columns under pytest's tmp folder: the width check of test_options_rule failed); it is cut after a '/',
    as every printed path is, and the pieces join back."""
    from envlock.wrapping import fold_command

    path = "/tmp/" + "/".join(parts) + "/pixi.toml"
    command = f"pixi install --frozen --manifest-path {path}"
    lines = fold_command("install it with: ", command, 80)
    assert all(len(ln) <= 80 for ln in lines), lines
    words: list[str] = []
    for ln in lines:
        ln = ln.removeprefix("install it with: ").removesuffix(" \\").strip()
        for w in ln.split(" "):
            if words and words[-1].endswith("/") and words[-1].startswith("/"):
                words[-1] += w
            else:
                words.append(w)
    assert " ".join(words) == command


def test_a_cache_notice_naming_a_long_path_fits_80_columns_and_reads_back(capsys: pytest.CaptureFixture[str]) -> None:
    """seams/trust.py's notice (a cache entry another user replaced) was one unfolded line: 300 columns under a long
    TMPDIR, control characters unescaped."""
    from envlock.seams.trust import notify
    from tests.output import flat

    path = "/tmp/" + "/".join(f"build-agent-workspace-{n}" for n in range(6)) + "/cache/pkgs/.envlock-trust/0"
    notify(f"{path} (your records of what you verified in this cache) was replaced by another user's")
    err = capsys.readouterr().err
    assert max(len(ln) for ln in err.splitlines()) <= 80 and len(err.splitlines()) > 2, err
    assert flat(err) == f"envlock: {path} (your records of what you verified in this cache) was replaced by another user's"
    notify("a\x1b[2Jname")
    assert "\x1b" not in capsys.readouterr().err
