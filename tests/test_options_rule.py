"""One rule for options (issue 34.7, docs/reference.md): comma lists, the default set, `--with all`, mirrors from
every source alike, every ENVLOCK_* checked up front, `update` with no package, `diff` by lock name, `-q`
wherever there is output to quiet, check's rows, doctor's lines, exit codes, and `envlock` alone.

envlock's own CLI in-process (envlock.cli.run, what a process runs) against the real test channel; a few runs as
real processes where the pipe is the point.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.cli import run
from envlock.formats import read_lock
from tests.lockproject import NAME, cli, cli_json, copy_project, edit, lock_file, make_project, snapshot, spec_file

ENVLOCK = [sys.executable, "-m", "envlock"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(tmp_path_factory.mktemp("options-rule"), test_channel, platforms=("linux-64",))


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    return copy_project(template, tmp_path / "p")


@pytest.fixture
def cf(test_channel: Path) -> str:
    return f"conda-forge={test_channel.as_uri()}"


def flat(text: str) -> str:
    return re.sub(r"\n\s+", " ", text)


# --------------------------------------------------------------------------- envlock alone


@pytest.mark.parametrize("words", [[], ["export"]])
def test_envlock_alone_prints_its_help_and_exits_0(words: list[str]) -> None:
    """It printed the whole help reflowed into one `error: usage: …` paragraph, exit 2 (click >= 8.2)."""
    done = subprocess.run([*ENVLOCK, *words], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"Usage: envlock {' '.join(words)}".rstrip() + " [OPTIONS] COMMAND [ARGS]...")
    helped = subprocess.run([*ENVLOCK, *words, "--help"], capture_output=True, text=True, timeout=60)
    assert done.stdout == helped.stdout  # the same help as --help


# --------------------------------------------------------------------------- --with and --platform


def test_with_and_platform_take_comma_lists(capsys, cf: str) -> None:
    code, doc = cli_json(capsys, "resolve", "--torch", "2.3.0", "--toolchain-only", "--dry-run", "--with", "curand,nvtx",
                         "--platform", "linux-64,win-64", "--mirror", cf)
    assert code == 0, doc
    assert doc["with"] == ["curand", "nvtx"] and sorted(doc["platforms"]) == ["linux-64", "win-64"]


def test_a_default_set_name_is_answered_as_such(capsys, cf: str) -> None:
    """`--with cusparse` (the header of the seed's error) said "not a group", as if envlock lacked it."""
    code, out, err = cli(capsys, "resolve", "--torch", "2.3.0", "--toolchain-only", "--dry-run", "--with", "cusparse",
                         "--platform", "linux-64", "--json", "--mirror", cf)
    assert code == 0, err
    assert "note: --with cusparse: cuSPARSE (cusparse.h: libcusparse-dev) is in the default set: every lock has it" in err
    doc = json.loads(out)
    assert doc["with"] == [] and "libcusparse-dev" in doc["platforms"]["linux-64"]["specs"]
    code, _, err = cli(capsys, "resolve", "--torch", "2.3.0", "--dry-run", "--with", "cusparse,bogus")
    assert code == 2 and "--with 'bogus' is not a group envlock knows" in err
    assert "every lock has nvcc, cudart, cusparse, cublas, cusolver, cudnn already" in err


def test_with_all_leaves_out_a_group_the_channel_lacks_for_the_minor(tmp_path: Path, make_channel, capsys) -> None:
    """docs/usage.md: `all` is every group the CUDA minor and platform have. A channel without cuda-profiler-api for
    CUDA 12.6 made `--with all` fail (exit 3); now that group is left out with a note, and only that one."""
    channel = make_channel(cuda_minors=["12.4", "12.6"], subdirs=("linux-64",), with_pytorch=False, with_cuda11=False,
                           drop={("cuda-profiler-api", "12.6")})
    cf = f"conda-forge={channel.as_uri()}"
    project = tmp_path / "p"
    args = ["resolve", "--torch", "2.7.1", "--toolchain-only", "--platform", "linux-64", "--project-dir", str(project),
            "--mirror", cf]
    code, doc = cli_json(capsys, *args, "--with", "all")
    assert code == 0, doc
    plat = doc["platforms"]["linux-64"]
    assert plat["cuda"] == "12.6" and plat["skew"] == "exact"  # the exact minor, not a move to find the group
    left = [n for n in plat["notes"] if n.endswith("(left out)") and "profiler-api" in n]
    assert left and "cuda-profiler-api has no build for CUDA 12.6" in left[0], plat["notes"]
    name = doc["name"]
    names = {p.name for p in read_lock(project / "locks" / name / "conda-lock.yml").packages}
    assert "cuda-profiler-api" not in names and {"libcufft-dev", "cuda-nvrtc-dev", "cuda-nvtx-dev"} <= names
    assert "  with: [all]\n" in (project / "environments" / f"{name}.yml").read_text()
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0
    before = snapshot(project)
    assert cli(capsys, "lock", "--all", "--project-dir", str(project), "--mirror", cf)[0] == 0
    assert snapshot(project) == before  # the same inputs give the same bytes
    code, doc = cli_json(capsys, *args, "--with", "deepspeed", "--lock", "ds")
    assert code == 3 and "profiler-api" in doc["error"]  # a group asked for by name is never left out


# --------------------------------------------------------------------------- mirrors: one rule


def test_an_unused_mirror_is_not_used_whether_from_the_command_line_or_the_environment(capsys, monkeypatch,
                                                                                         cf: str) -> None:
    """An unused `--mirror nvidia=…` was an error while the same entry in ENVLOCK_MIRRORS was ignored."""
    base = ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--dry-run", "--mirror", cf]
    code, _, err = cli(capsys, *base, "--mirror", "nvidia=https://mirror.invalid/nvidia")
    assert code == 0, err
    monkeypatch.setenv("ENVLOCK_MIRRORS", "nvidia=https://mirror.invalid/nvidia")
    code, _, err = cli(capsys, *base)
    assert code == 0, err


def test_a_typo_is_refused_whether_from_the_command_line_the_environment_or_a_file(project: Path, capsys, monkeypatch,
                                                                                  cf: str) -> None:
    """`conda-forg=` in ENVLOCK_MIRRORS or an envlock.toml was silently unused (conda-forge then came from the
    network); on the command line it was refused. Now each is refused, naming where it comes from."""
    base = ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--dry-run", "--mirror", cf,
            "--project-dir", str(project)]
    code, _, err = cli(capsys, *base, "--mirror", "conda-forg=https://mirror.invalid/cf")
    assert code == 2 and "error: --mirror conda-forg=… names no channel in play here (in play: conda-forge)" in err
    monkeypatch.setenv("ENVLOCK_MIRRORS", "conda-forg=https://mirror.invalid/cf")
    code, _, err = cli(capsys, *base)
    assert code == 2 and "error: ENVLOCK_MIRRORS conda-forg=… names no channel in play here" in err, err
    assert "a typo of conda-forge?" in err
    monkeypatch.delenv("ENVLOCK_MIRRORS")
    (project / "envlock.toml").write_text('[mirrors]\nconda-forg = "https://mirror.invalid/cf"\n')
    code, _, err = cli(capsys, *base)
    assert code == 1 and f"{(project / 'envlock.toml').absolute()}: [mirrors] conda-forg=… names no channel" in flat(err)


# --------------------------------------------------------------------------- ENVLOCK_* up front


@pytest.mark.parametrize("value", ["/dev/null", "/dev/null/envs", "/etc/passwd"])
def test_a_directory_setting_that_cannot_be_a_directory_is_named_up_front(value: str, capsys, monkeypatch) -> None:
    """ENVLOCK_ENVS_DIR=/dev/null passed the start-up check and failed later without naming the variable."""
    monkeypatch.setenv("ENVLOCK_ENVS_DIR", value)
    code, _, err = cli(capsys, "config")
    assert code == 2 and f"error: ENVLOCK_ENVS_DIR='{value}' is not a directory" in err, err


def test_an_unknown_envlock_variable_is_warned_about_with_the_closest_setting(project: Path, capsys,
                                                                              monkeypatch) -> None:
    monkeypatch.setenv("ENVLOCK_HTTP_TIMOUT", "5")
    monkeypatch.setenv("ENVLOCK_PREFIX", "/x")  # an activated env's own: no warning
    code, _, err = cli(capsys, "check", "--project-dir", str(project))
    assert code == 0
    assert err == ("warning: ENVLOCK_HTTP_TIMOUT is not a setting envlock reads (it changes nothing): did you mean "
                   "ENVLOCK_HTTP_TIMEOUT?\n"), err


# --------------------------------------------------------------------------- -q


@pytest.mark.parametrize("command", ["resolve", "lock", "update", "check"])
def test_quiet_is_taken_wherever_there_is_output_to_quiet(command: str, project: Path, capsys, cf: str) -> None:
    """`-q` was missing on resolve, lock and update (exit 2); each prints a summary without it."""
    args = {"resolve": ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--mirror", cf],
            "lock": ["lock", "--mirror", cf], "update": ["update", "cuda-nvcc", "--mirror", cf],
            "check": ["check"]}[command]
    loud = cli(capsys, *args, "--project-dir", str(project))
    code, out, err = cli(capsys, *args, "-q", "--project-dir", str(project))
    assert loud[0] == code == 0, (loud, err)
    assert loud[1].strip() and out == "" and err == ""


def test_export_pixi_takes_quiet_as_the_other_exports_do(project: Path, capsys, tmp_path: Path) -> None:
    """docs/reference.md: `-q` wherever a command prints more than its result; `export pixi` printed its `wrote`
    lines and install command with no way to quiet them (exit 2 for -q)."""
    # run() itself: how wide the loud lines come out depends on tmp_path's length, which is not the point here
    loud = run(["export", "pixi", "--project-dir", str(project), "-o", str(tmp_path / "a")]), capsys.readouterr()
    code, (out, err) = run(["export", "pixi", "-q", "--project-dir", str(project), "-o", str(tmp_path / "b")]), capsys.readouterr()
    assert loud[0] == code == 0, (loud, err)
    assert "wrote" in loud[1].err and "pixi install --frozen" in loud[1].err
    assert out == err == "" and (tmp_path / "b" / "pixi.lock").read_bytes() == (tmp_path / "a" / "pixi.lock").read_bytes()


def test_check_quiet_still_says_what_is_stale(project: Path, capsys) -> None:
    edit(spec_file(project), "  cudnn: true\n", "  cudnn: false\n")
    code, out, err = cli(capsys, "check", "-q", "--project-dir", str(project))
    assert code == 1 and out == "" and err.startswith(f"error: 1 of 1 environment(s) not fresh: {NAME}")


# --------------------------------------------------------------------------- update with no package, diff by name


def test_update_with_no_package_is_not_a_usage_error(project: Path, capsys, cf: str) -> None:
    before = snapshot(project)
    code, out, err = cli(capsys, "update", "--dry-run", "--project-dir", str(project), "--mirror", cf)
    assert code == 0, err
    assert "nothing moved (every package is already at the newest version the rules allow)" in out
    assert snapshot(project) == before


def test_diff_takes_lock_names(tmp_path: Path, test_channel: Path, capsys) -> None:
    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",), name="a")
    make_project(project, test_channel, platforms=("linux-64",), name="b", torch="2.5.1")
    code, out, err = cli(capsys, "diff", "a", "b", "--project-dir", str(project))
    assert code == 0, err
    assert f"--- {lock_file(project, 'a')}" in out and f"+++ {lock_file(project, 'b')}" in out
    assert re.search(r"~\s+cuda-version\s+12\.1\S* .*→\s+12\.4", out), out
    code, _, err = cli(capsys, "diff", "a", "nope", "--project-dir", str(project))
    assert code == 1 and "no lock named 'nope'" in err and "locks here: a, b" in flat(err)


# --------------------------------------------------------------------------- check's rows, doctor's lines, exit codes


def test_check_rows_name_platforms_not_a_dash(project: Path, capsys) -> None:
    """Each row: what, the lock, the platforms it is about, why. A change of the whole lock showed `-`."""
    code, out, _ = cli(capsys, "check", "--project-dir", str(project))
    assert code == 0 and re.fullmatch(rf"fresh\s+{re.escape(NAME)}\s+linux-64\s+matches its spec\n", out), out
    edit(spec_file(project), "  cudnn: true\n", "  cudnn: banana\n")
    code, out, _ = cli(capsys, "check", "--project-dir", str(project))
    assert code == 1 and re.match(rf"invalid-spec\s+{re.escape(NAME)}\s+all\s", out), out
    assert not re.search(r"\s-\s", out), out


def test_doctor_folds_a_long_line_instead_of_cutting_it() -> None:
    """A line was cut to 80 columns with "…" (on a pipe, a CI log: the rest was lost); now it is folded under its
    message by envlock's one folding function."""
    from envlock.commands.doctor import render_human
    from envlock.models import Finding
    from envlock.wrapping import lines_of

    message = "torch is not installed in /a/very/long/path/that/does/not/fit/on/one/line/of/eighty/columns/bin/python3"
    text = render_human([Finding("torch.found", "ok", message)], colour=False, width=80)
    head = "ok      torch.found  "
    expected = lines_of(message, head, " " * len(head), 80)
    assert len(expected) > 1 and text.splitlines()[: len(expected)] == expected
    assert "…" not in text and all(len(ln) <= 80 for ln in text.splitlines())


@pytest.mark.parametrize("command", [["doctor", "--for"], ["resolve", "--torch", "2.3.0", "--dry-run", "--for"]])
def test_a_for_path_that_is_not_there_exits_1_like_a_prefix_that_is_not(command: list[str], tmp_path: Path,
                                                                       capsys) -> None:
    """docs/reference.md: a well-formed value envlock cannot serve exits 1; a missing `--for` path exited 2."""
    code, _, err = cli(capsys, *command, str(tmp_path / "missing"))
    assert code == 1 and "no such file or folder, and no installed package of that name" in err
    assert run(["doctor", "--for"]) == 2  # a missing value is the command line's fault
