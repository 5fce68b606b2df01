"""Solve failures: root cause first, said once, plain words, short; full detail under --verbose and in --json.

rattler's own reports are real (captured from py-rattler 0.28 on the conda-forge snapshot and from the test
channel); the CLI runs are real processes against real channels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.output import hint_commands, logical_lines

from envlock.core.solve_explain import MESSAGE_LIMIT, Attempt, Blocker, Slot, blocked, cause_of, combined, plain_reason, platform_failure
from tests.lockproject import edit, make_project, snapshot, spec_file

ENVLOCK = [sys.executable, "-m", "envlock"]

# rattler 0.28's answer for torch 2.8.0's CUDA 12.8 on the conda-forge snapshot (libcurand-dev has no 12.8 build).
CURAND_12_8 = """Cannot solve the request because of: libcurand-dev * cannot be installed because there are no viable options:
├─ libcurand-dev 10.4.3.29 would require
│  └─ cuda-version >=13.3,<13.4.0a0, for which no candidates were found.
├─ libcurand-dev 10.4.2.55 would require
│  └─ cuda-version >=13.2,<13.3.0a0, for which no candidates were found.
├─ libcurand-dev 10.4.0.35 would require
│  └─ cuda-version >=13.0,<13.1.0a0, for which no candidates were found.
├─ libcurand-dev 10.3.10.19 would require
│  └─ cuda-version >=12.9,<12.10.0a0, for which no candidates were found.
└─ libcurand-dev 10.3.7.77 would require
   └─ cuda-version >=12.6,<12.7.0a0, for which no candidates were found.
"""
# … and for conda-forge's pytorch 2.7.1 with python 3.9 (its builds need 3.12 or 3.13).
PYTORCH_PY39 = """Cannot solve the request because of: pytorch ==2.7.1 cuda129* cannot be installed because there are no viable options:
├─ pytorch 2.7.1 would require
│  └─ python >=3.13,<3.14.0a0, for which no candidates were found.
└─ pytorch 2.7.1 would require
   └─ python >=3.12,<3.13.0a0, for which no candidates were found.
"""


def test_the_wrong_way_round_wording_becomes_what_is_missing() -> None:
    """`nothing provides cuda-version >=13.3,<13.4.0a0` pointed the wrong way: the missing thing is a 12.8 build."""
    reason = plain_reason(CURAND_12_8, cuda="12.8", channel="conda-forge", platform="linux-64")
    assert reason == ("libcurand-dev has no build for CUDA 12.8 in conda-forge for linux-64 "
                      "(its builds are for CUDA 12.6, 12.9, 13.0, 13.2, 13.3)")


def test_a_name_the_channel_has_never_heard_of_is_said_so() -> None:
    raw = "Cannot solve the request because of: No candidates were found for nonexistent-pkg *."
    assert plain_reason(raw, cuda="12.6", channel="conda-forge", platform="linux-64", absent=["nonexistent-pkg"]) == (
        "there is no package 'nonexistent-pkg' in conda-forge for linux-64")
    raw = "Cannot solve the request because of: No candidates were found for python 2.7.*."
    assert plain_reason(raw, cuda="12.6", channel="conda-forge", platform="linux-64") == (
        "no python 2.7.* in conda-forge for linux-64")


def test_python_leaves_name_the_pythons_there_are() -> None:
    reason = plain_reason(PYTORCH_PY39, cuda="12.9", channel="conda-forge", platform="linux-64")
    assert reason.startswith("pytorch ==2.7.1 cuda129* needs python 3.12, 3.13")


def test_attempts_that_say_the_same_are_said_once_and_the_message_stays_short() -> None:
    attempts = [Attempt("linux-64", cuda, variant, cause_of(CURAND_12_8, channel="conda-forge"), CURAND_12_8)
                for cuda in ("12.8", "12.9") for variant in ("with cudnn 9.10.*", "with cudnn 9.*", "without cuDNN")]
    err = platform_failure("linux-64", attempts, lacking=False)
    assert err.message.count("libcurand-dev has no build") == 1
    assert err.message.endswith("(the same for CUDA 12.9)") and len(err.message) <= MESSAGE_LIMIT
    assert len(err.detail) == 6 and all("cuda-version >=13.3" in d for d in err.detail)
    many = [Attempt("linux-64", f"12.{i}", "", f"reason number {i} " + "x" * 80) for i in range(10)]
    long = platform_failure("linux-64", many, lacking=False)
    assert len(long.message) <= MESSAGE_LIMIT and long.message.endswith("(--verbose: every attempt)")
    assert len(long.detail) == 10


# --------------------------------------------------------------------------- through the CLI


def envlock(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "ENVLOCK_CACHE_DIR": str(cache), "NO_COLOR": "1"})


def test_a_missing_python_is_reported_after_the_first_attempt_with_a_python_hint(tmp_path, test_channel) -> None:
    """A python the channel lacks: no CUDA minor changes that, so one attempt, not six (the issue's case)."""
    proj = tmp_path / "p"
    proj.mkdir()
    args = ["resolve", "--torch", "2.7.1", "--torch-source", "conda-forge", "--python", "3.9", "--platform", "linux-64",
            "--mirror", f"conda-forge={test_channel.as_uri()}", "--project-dir", str(proj)]
    proc = envlock(*args, "--json", cwd=tmp_path, cache=tmp_path / ".cache")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3 == doc["exit_code"]
    assert doc["error"] == ("no python 3.9.* in conda-forge for linux-64 (no CUDA minor can change that: "
                            "envlock stopped after CUDA 12.9)")
    assert doc["hint"].startswith("pick a python conda-forge builds for linux-64 (it has 3.10 to 3.12)")
    assert len(doc["detail"]) == 1 and doc["detail"][0].startswith("linux-64, CUDA 12.9")
    assert (doc["platform"], doc["package"], doc["cause"]) == ("linux-64", "python", "python")  # as data too
    assert snapshot(proj) == {}


def test_verbose_prints_every_attempt_above_the_two_lines(tmp_path, make_channel) -> None:
    chan = make_channel(drop={("libcusparse-dev", None)}, subdirs=("linux-64",), with_pytorch=False, with_cuda11=False)
    args = ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64",
            "--mirror", f"conda-forge={chan.as_uri()}", "--project-dir", str(tmp_path)]
    plain = envlock(*args, cwd=tmp_path, cache=tmp_path / ".cache")
    assert plain.returncode == 3
    assert [ln.split(":")[0] for ln in logical_lines(plain.stderr)] == ["error", "hint"]
    assert len(logical_lines(plain.stderr)[0]) <= MESSAGE_LIMIT + len("error: ")
    assert max(len(ln) for ln in plain.stderr.splitlines()) <= 80
    verbose = envlock(*args, "--verbose", cwd=tmp_path, cache=tmp_path / ".cache")
    lines = verbose.stderr.splitlines()
    assert verbose.returncode == 3 and verbose.stderr.endswith(plain.stderr)
    heads = [ln.strip() for ln in lines if ln.startswith("  linux-64, CUDA ")]
    assert len(heads) == 9 and {h.split(",")[1].split()[1] for h in heads} == {"12.0", "12.1", "12.2"}
    # the solver's own words (folded to the width like every line)
    assert " ".join(verbose.stderr.split()).count("No candidates were found for libcusparse-dev") == 9


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(tmp_path_factory.mktemp("blocked"), test_channel, platforms=("linux-64",))


def test_a_spec_extra_no_channel_has_stops_after_one_attempt_and_names_it(project, test_channel, tmp_path) -> None:
    edit(spec_file(project), "platforms:", "  - nonexistent-pkg >=1\nplatforms:")
    before = snapshot(project)
    proc = envlock("lock", "--project-dir", str(project), "--mirror", f"conda-forge={test_channel.as_uri()}", "--json",
                   cwd=tmp_path, cache=tmp_path / ".cache")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3, doc
    assert doc["error"].startswith("there is no package 'nonexistent-pkg' in conda-forge for linux-64 (no CUDA minor")
    assert "the spec's dependency `nonexistent-pkg >=1`" in doc["hint"] and "--cuda" not in doc["hint"]
    assert (doc["platform"], doc["package"], doc["cause"]) == ("linux-64", "nonexistent-pkg", "extra")
    assert len(doc["detail"]) == 1
    assert snapshot(project) == before  # nothing written


def test_one_failing_platform_is_named_first_and_the_hint_locks_the_others(tmp_path, make_channel) -> None:
    """linux-64 solves, win-64 cannot (the channel has no win-64 packages): all or nothing, and how to go on."""
    chan = make_channel(subdirs=("linux-64",), with_pytorch=False, with_cuda11=False)
    proj = tmp_path / "p"
    proj.mkdir()
    base = ["resolve", "--torch", "2.3.0", "--toolchain-only", "--mirror", f"conda-forge={chan.as_uri()}",
            "--project-dir", str(proj)]
    proc = envlock(*base, "--platform", "win-64", "--platform", "linux-64", cwd=tmp_path, cache=tmp_path / ".cache")
    error, hint = logical_lines(proc.stderr)
    assert proc.returncode == 3
    assert error.startswith("error: win-64 cannot be solved: there is no package 'cuda-nvcc' in conda-forge")
    assert error.endswith("(linux-64 solved; nothing was written)")
    assert hint.startswith("hint: lock the others without it: `envlock resolve ")
    assert snapshot(proj) == {}
    (command,) = hint_commands(hint)  # the user's own command line without --platform win-64
    assert command == [*base, "--platform", "linux-64"], command
    again = envlock(*command, cwd=tmp_path, cache=tmp_path / ".cache")
    assert again.returncode == 0, again.stderr  # what the hint says works
    assert (proj / "locks" / "torch2.3.0-cu121" / "conda-linux-64.lock").is_file()


def test_several_failing_platforms_each_keep_their_own_advice() -> None:
    """The hint said only the first failing platform's advice (torch 2.7.1 on three platforms: aarch64's
    channel advice, nothing about win-64's). Each platform's words are said again from its record, without it."""
    missing = "Cannot solve the request because of: No candidates were found for {} *."
    aarch = platform_failure("linux-aarch64", [Attempt("linux-aarch64", "12.8", "", cause_of(
        missing.format("libcurand-dev"), channel="conda-forge", absent=["libcurand-dev"]))], lacking=False)
    win_blocker = Blocker("extra", "cuda-nvcc", ("there is no package 'cuda-nvcc' in conda-forge", Slot.FOR),
                          ("the spec's dependency `cuda-nvcc` cannot be met", Slot.FOR, ": drop it"))
    win = blocked("win-64", Attempt("win-64", "12.8", "", "x"), win_blocker)
    assert "for linux-aarch64" in aarch.message and "on linux-aarch64" in aarch.hint  # each said for its platform
    assert "for win-64" in win.message and "for win-64" in win.hint
    err = combined([("linux-aarch64", aarch), ("win-64", win)], ["linux-64"], ["linux-64", "linux-aarch64", "win-64"])
    assert err.message.startswith("linux-aarch64 and win-64 cannot be solved: linux-aarch64: there is no package "
                                  "'libcurand-dev' in conda-forge (CUDA 12.8); win-64: there is no package 'cuda-nvcc' "
                                  "in conda-forge (no CUDA minor can change that: envlock stopped after CUDA 12.8)")
    assert err.hint.startswith("lock the others without them: `envlock … --platform linux-64` (or drop them")
    assert "linux-aarch64: use a channel that has what these CUDA minors need (--channel" in err.hint
    assert "win-64: the spec's dependency `cuda-nvcc` cannot be met: drop it" in err.hint
    assert "for linux-aarch64" not in err.hint + err.message and "for win-64" not in err.hint + err.message
    win_same = platform_failure("win-64", [Attempt("win-64", "12.8", "", cause_of(
        missing.format("libcurand-dev"), channel="conda-forge", absent=["libcurand-dev"]))], lacking=False)
    same = combined([("linux-aarch64", aarch), ("win-64", win_same)], [], ["linux-aarch64", "win-64"])
    assert same.hint == "use a channel that has what these CUDA minors need (--channel, --mirror), or pin a CUDA " \
        "minor other than 12.8 with --cuda"  # one piece of advice for both: said once (and no X.Y: issue 34.5)
    assert same.message.startswith("linux-aarch64 and win-64 cannot be solved: there is no package 'libcurand-dev'")


def test_a_solve_failure_carries_its_platform_package_and_cause_as_data() -> None:
    """Callers read what a failure is about from fields, not from its words (issue 26 item 3)."""
    attempts = [Attempt("linux-64", cuda, "", cause_of(CURAND_12_8, channel="conda-forge"), CURAND_12_8)
                for cuda in ("12.8", "12.9")]
    err = platform_failure("linux-64", attempts, lacking=False)
    assert (err.platform, err.package, err.cause) == ("linux-64", "libcurand-dev", "no-build")
    assert [f.platform for f in err.failures] == ["linux-64"] and err.failures[0].attempts == tuple(attempts)
    py = cause_of(PYTORCH_PY39, channel="conda-forge")
    assert (py.kind, py.package) == ("python", "pytorch")
    stop = blocked("win-64", Attempt("win-64", "12.9", "", py), Blocker("pytorch", "pytorch ==2.7.1", py.words, ("h",)))
    assert (stop.platform, stop.package, stop.cause) == ("win-64", "pytorch", "pytorch")
    both = combined([("linux-64", err), ("win-64", stop)], [], ["linux-64", "win-64"])
    assert both.platform is None and [f.platform for f in both.failures] == ["linux-64", "win-64"]
    assert (both.package, both.cause) == ("libcurand-dev", "no-build")  # the first failing platform's


def test_the_reason_no_cudnn_variant_changes_comes_before_the_missing_cudnn() -> None:
    """torch 2.6.0 / 2.7.1 on the snapshot led with 'no cudnn 9.x.*', though the attempts without cuDNN show
    what no cuDNN variant fixes (libcurand-dev for that CUDA)."""
    from envlock.core.solve_explain import Attempt, platform_failure

    attempts = [Attempt("linux-aarch64", "12.6", "with cudnn 9.7.*", "no cudnn 9.7.* in conda-forge"),
                Attempt("linux-aarch64", "12.6", "without cuDNN",
                        "libcurand-dev has no build for CUDA 12.6 in conda-forge")]  # fmt: skip
    msg = platform_failure("linux-aarch64", attempts, lacking=False).message
    assert msg.index("libcurand-dev") < msg.index("no cudnn"), msg
