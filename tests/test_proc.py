"""envlock/seams/proc.py, the one runner: one timeout, Ctrl-C and failure policy for every program envlock starts, with
real programs (sh, sleep, a missing one, a file that is not executable)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envlock.seams import proc
from envlock.errors import EnvlockError, SpecError

SH = "/bin/sh"


def _failed(why: proc.Failure) -> EnvlockError:
    return SpecError(f"{why.kind}|{why.program}|{why}", hint="h")


def test_run_captures_and_leaves_the_exit_status_to_the_caller() -> None:
    done = proc.run([SH, "-c", "echo out; echo err >&2; exit 3"], what="t", timeout=30, failed=_failed)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_run_says_when_the_child_runs_before_it_ends(tmp_path: Path) -> None:
    """`started()` (the PyPI part's cue to start the conda solve beside uv) comes once, while the child runs: the
    child is still waiting for its input then, and has answered it when run returns."""
    seen: list[tuple[bool, bool]] = []
    out = tmp_path / "out"

    def started() -> None:
        seen.append((out.exists(), threading.current_thread() is threading.main_thread()))

    done = proc.run([SH, "-c", f"read line; echo \"$line\" > {out}; echo ran"], what="t", timeout=30,
                    failed=_failed, input="hello\n", started=started)
    assert seen == [(False, True)]
    assert (done.returncode, done.stdout, out.read_text()) == (0, "ran\n", "hello\n")
    # from a worker thread too (uv runs in one), and never for a program that cannot start
    calls: list[str] = []
    worker = threading.Thread(target=lambda: proc.run([SH, "-c", "true"], what="t", timeout=30, failed=_failed,
                                                     started=lambda: calls.append("ran")))
    worker.start()
    worker.join()
    with pytest.raises(SpecError):
        proc.run([str(tmp_path / "no-such-program")], what="t", timeout=30, failed=_failed,
                 started=lambda: calls.append("missing"))
    assert calls == ["ran"]


def test_run_words_each_failure_through_the_caller(tmp_path: Path) -> None:
    not_exec = tmp_path / "script"
    not_exec.write_text("#!/bin/sh\n")
    cases = {"missing": [str(tmp_path / "no-such-program")], "denied": [str(not_exec)],
             "timeout": ["sleep", "5"]}
    for kind, args in cases.items():
        with pytest.raises(SpecError) as info:
            proc.run(args, what="t", timeout=0.5, failed=_failed)
        got_kind, program, words = info.value.message.split("|")
        assert (got_kind, program) == (kind, args[0])
        assert words == ("took longer than 0 s" if kind == "timeout" else f"cannot run {args[0]}: " + (
            "No such file or directory" if kind == "missing" else "Permission denied"))


def test_attempt_answers_instead_of_raising(tmp_path: Path) -> None:
    assert proc.attempt([SH, "-c", "printf 'a\\377'; exit 2"], what="t", timeout=30) == (2, "a\ufffd", "")
    raw = proc.attempt([SH, "-c", "printf 'a\\377'"], what="t", timeout=30, out_errors="surrogateescape")
    assert raw.out.encode(errors="surrogateescape") == b"a\xff"
    assert proc.attempt([SH, "-c", "cat"], what="t", timeout=30, input="in") == (0, "in", "")
    missing = proc.attempt([str(tmp_path / "nope")], what="t", timeout=30)
    assert missing.rc == 127 and missing.err.startswith("FileNotFoundError")
    assert proc.attempt(["sleep", "5"], what="t", timeout=0.3) == (124, "", "timed out after 0 s")


@pytest.mark.parametrize("call", ["run", "attempt"])
def test_ctrl_c_stops_the_child_and_is_interrupted(call: str, tmp_path: Path) -> None:
    """SIGINT to envlock while a child runs: the child is killed and envlock raises Interrupted naming the work."""
    pidfile = tmp_path / "pid"
    code = (
        "import sys\nfrom envlock.seams import proc\nfrom envlock.errors import Interrupted\n"
        f"args = ['/bin/sh', '-c', 'echo $$ > {pidfile}; exec sleep 60']\n"
        "try:\n"
        f"    proc.{call}(args, what='sleeping', timeout=120"
        + (", failed=lambda w: None)\n" if call == "run" else ")\n")
        + "except Interrupted as exc:\n    print(exc.message, exc.exit_code)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=30)
    assert out.strip() == "interrupted while sleeping 130"
    sleeper = int(pidfile.read_text())
    # The kill is sent before envlock returns; on a loaded machine the sleeper may take a moment to be gone
    # (seen at load 11: state R right after), so wait for it rather than read its state once.
    gone_by = time.monotonic() + 10
    while not _gone(sleeper) and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert _gone(sleeper)


def _gone(pid: int) -> bool:
    try:
        return "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True


def test_replace_with_becomes_the_command_or_says_why_not(tmp_path: Path) -> None:
    code = ("import sys\nfrom envlock.seams import proc\nfrom envlock.errors import SpecError\n"
            "try:\n    proc.replace_with(sys.argv[1:], {'PATH': '/usr/bin:/bin'},"
            " failed=lambda w: SpecError(f'{w.kind} {w.reason}', hint='h'))\n"
            "except SpecError as exc:\n    print(exc.message); sys.exit(9)\n")
    became = subprocess.run([sys.executable, "-c", code, SH, "-c", "echo $$; exit 7"], capture_output=True, text=True)
    assert became.returncode == 7 and became.stdout.strip()  # the exit status is the command's own
    missing = subprocess.run([sys.executable, "-c", code, "no-such-command-xyz"], capture_output=True, text=True)
    assert (missing.returncode, missing.stdout.strip()) == (9, "missing No such file or directory")
