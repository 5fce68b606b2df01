"""Issue 24, first use second pass: the wording, the cutoff, the network failure and the leftovers, each with
the case the issue measured. (The hint walk: test_hint_walk.py; 80 columns: test_widths.py; options and exit
codes: test_cli_usage.py.)"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envlock.cli import run
from tests.channelbuilder import PackageSpec, index_channel, write_package
from tests.output import flat, error_and_hint, unfolded
from tests.test_pypi_part import full_project  # noqa: F401 - session fixture

ENVLOCK = [sys.executable, "-m", "envlock"]


def envlock(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})


# --------------------------------------------------------------------------- the resolution cutoff


def _tiny_channel(root: Path, name: str, version: str, stamp_ms: int) -> Path:
    """A one-package channel whose record is stamped (and indexed) at `stamp_ms`."""
    write_package(PackageSpec(name, version, subdir="noarch", timestamp=stamp_ms), root / "noarch")
    index_channel(root, write_zst=False, write_shards=False)
    return root


def test_a_package_indexed_in_the_same_second_as_the_first_resolve_is_in_it_and_stays(
    tmp_path: Path, test_channel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cutoff was written to the second: a package indexed at 12:00:00.4 was excluded by the first resolve
    at 12:00:00.7 (cutoff 12:00:00). It is kept to the millisecond now, so the first resolve has it and a
    re-lock of the unchanged spec gives the same bytes."""
    while int(time.time() * 1000) % 1000 > 300:  # start early in a second: index and resolve within it
        time.sleep(0.01)
    stamp = int(time.time() * 1000)
    stamp += 1 if stamp % 1000 == 0 else 0  # not a whole second: that one a cutoff to the second admits
    extra = _tiny_channel(tmp_path / "extra", "ninja", "99.0", stamp)
    project = tmp_path / "p"
    args = ["--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--channel", extra.as_uri(),
            "--channel", "conda-forge", "--mirror", f"conda-forge={test_channel.as_uri()}", "--project-dir", str(project)]
    assert run(["resolve", *args, "--json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    cutoff = datetime.datetime.fromisoformat(doc["exclude_newer"].replace("Z", "+00:00"))
    assert cutoff.timestamp() * 1000 >= stamp, (doc["exclude_newer"], stamp)  # to the millisecond, not cut down
    from envlock.formats import read_lock

    locked = {p.name: p.version for p in read_lock(project / "locks" / doc["name"] / "conda-lock.yml").packages}
    assert locked.get("ninja") == "99.0", locked  # the first resolve saw it
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert run(["lock", "--all", "--project-dir", str(project), "--mirror", f"conda-forge={test_channel.as_uri()}"]) == 0
    capsys.readouterr()
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before  # every later solve too


def test_a_cutoff_to_the_second_still_reads_and_writes_as_it_was() -> None:
    """Specs written before keep their bytes: a whole second is written without a fraction."""
    from envlock.formats.spec import format_cutoff, read_cutoff

    assert read_cutoff("2026-11-30T12:00:00Z", "t") == "2026-11-30T12:00:00Z"
    assert read_cutoff("2026-11-30T12:00:00.250Z", "t") == "2026-11-30T12:00:00.250Z"
    stamp = datetime.datetime(2026, 11, 30, 12, 0, 0, 999_999, tzinfo=datetime.timezone.utc)
    assert format_cutoff(stamp) == "2026-11-30T12:00:00.999Z"


# --------------------------------------------------------------------------- rattler's causes in plain words


def _solve_failure(tmp_path: Path, specs: list[PackageSpec], ask: list[str], cutoff: str | None = None) -> str:
    """The plain reason envlock gives for a real rattler failure on a channel of `specs`."""
    import asyncio

    import rattler
    import rattler.exceptions  # a submodule: `import rattler` alone does not load it (these tests failed run alone)

    from envlock.core.solve_explain import plain_reason

    root = tmp_path / "ch"
    for s in specs:
        write_package(s, root / s.subdir)
    index_channel(root, write_zst=False, write_shards=False)
    virtual = [rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString("0"))
               for n, v in (("__cuda", "12.6"), ("__glibc", "2.28"), ("__linux", "0"), ("__unix", "0"))]
    when = datetime.datetime.fromisoformat(cutoff.replace("Z", "+00:00")) if cutoff else None
    with pytest.raises(rattler.exceptions.SolverError) as info:
        asyncio.run(rattler.solve([rattler.Channel(root.as_uri())], ask, platforms=["linux-64", "noarch"],
                                  virtual_packages=virtual, exclude_newer=when, timestamp_policy="allow-missing"))
    return plain_reason(str(info.value), cuda="12.6", channel="conda-forge", platform="linux-64")


def test_a_cutoff_cause_is_named_with_the_package(tmp_path: Path) -> None:
    """The issue's case: 'ninja cannot be installed: … has no  that fits it' (an empty name)."""
    late = 1_800_000_000_123
    why = _solve_failure(tmp_path, [PackageSpec("ninja", "1.13.1", subdir="linux-64", timestamp=late)], ["ninja"],
                         cutoff="2027-01-15T08:00:00Z")
    assert why.startswith("ninja cannot be installed: ninja 1.13.1 came into conda-forge after the spec's resolution "
                          "cutoff"), why
    assert "has no  " not in why and "envlock lock --refresh" in why


def test_a_virtual_package_cause_says_what_the_machine_lacks(tmp_path: Path) -> None:
    why = _solve_failure(tmp_path, [PackageSpec("needs-driver", "1.0", subdir="linux-64", depends=["__cuda >=12.8"])],
                         ["needs-driver"])
    assert "needs-driver" in why and "__cuda >=12.8 (a driver for CUDA 12.8)" in why and "virtual package" in why, why


def test_a_missing_name_and_a_conflict_are_named(tmp_path: Path) -> None:
    specs = [PackageSpec("a", "1.0", subdir="linux-64", depends=["b <2"]), PackageSpec("b", "2.0", subdir="linux-64"),
             PackageSpec("c", "1.0", subdir="linux-64", depends=["b >=2"])]
    missing = _solve_failure(tmp_path / "1", specs, ["a", "c", "nonexistent"])
    assert "nonexistent" in missing, missing
    conflict = _solve_failure(tmp_path / "2", specs, ["a", "c"])
    assert "b <2" in conflict and "that fits it" in conflict and "has no  " not in conflict, conflict


# --------------------------------------------------------------------------- a channel that cannot be reached


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_label_channel_that_cannot_be_reached_is_named_with_what_was_tried_and_the_mirror_key(
    tmp_path: Path, make_channel
) -> None:
    """The issue's `--torch 1.13.1`: CUDA 11.7 and 11.6 (conda-forge) did not solve, 11.8 needs nvidia's label
    channel, which failed: ~330 characters of rattler's chain, no word of 11.7/11.6, no `--mirror nvidia=`."""
    chan = make_channel(subdirs=("linux-64",), cuda_minors=["12.6"], with_pytorch=False, with_cuda11=False)
    dead = f"http://127.0.0.1:{_closed_port()}/nvidia"
    env = {"ENVLOCK_HTTP_RETRIES": "0", "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    args = ["resolve", "--torch", "1.13.1", "--toolchain-only", "--platform", "linux-64", "--mirror",
            f"conda-forge={chan.as_uri()}", "--mirror", f"nvidia={dead}", "--project-dir", str(tmp_path / "p")]
    proc = envlock(*args, env=env)
    assert proc.returncode == 4, proc.stderr
    assert max(len(ln) for ln in proc.stderr.splitlines()) <= 80, proc.stderr
    error, hint = error_and_hint(proc.stderr)
    assert error.startswith("cannot fetch nvidia/label/cuda-11.8.0 for linux-64 (needed by the CUDA 11.8 candidate; "
                            "CUDA 11.7, 11.6 did not solve before it"), error
    assert "Connection refused" in error or "connect" in error.lower(), error
    assert "--mirror nvidia=URL (it covers its labels)" in hint
    verbose = envlock(*args, "-v", env=env)
    assert "CUDA 11.7: there is no package 'cudatoolkit-dev'" in unfolded(verbose.stderr)  # why each failed
    doc = json.loads(envlock(*args, "--json", env=env).stdout)
    assert doc["exit_code"] == 4 and any(d.startswith("fetching nvidia/label/cuda-11.8.0: ") for d in doc["detail"])
    assert any(d.startswith("CUDA 11.6: ") for d in doc["detail"])


def test_a_package_download_that_cannot_reach_its_channel_names_it_and_the_mirror_key(tmp_path: Path,
                                                                                      test_channel: Path) -> None:
    from tests.lockproject import make_project

    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",))
    dead = f"http://127.0.0.1:{_closed_port()}/cf"
    proc = envlock("create", "--project-dir", str(project), "-p", str(tmp_path / "env"), "-q", "--mirror",
                   f"conda-forge={dead}", env={"ENVLOCK_HTTP_RETRIES": "0", "ENVLOCK_CACHE_DIR": str(tmp_path / "c")})
    error, hint = error_and_hint(proc.stderr)
    assert proc.returncode == 4 and "(conda-forge) from 127.0.0.1:" in error and "connection refused" in error, error
    assert hint.startswith("fetch conda-forge's packages from a mirror: --mirror conda-forge=URL"), hint
    assert not (tmp_path / "env").exists()


# --------------------------------------------------------------------------- words


def test_a_repodata_only_channel_is_named_as_such(tmp_path: Path, test_channel: Path, capsys, monkeypatch) -> None:
    """The shared snapshot has repodata and no package files: 'the local channel moved or was cleaned' was wrong."""
    from tests.lockproject import make_project

    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))  # an empty cache: an earlier test's filled one
    # holds the packages, and the create would not need the channel's files at all

    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",))
    bare = tmp_path / "bare"
    shutil.copytree(test_channel, bare, ignore=shutil.ignore_patterns("*.tar.bz2", "*.conda"))
    code = run(["create", "--project-dir", str(project), "-p", str(tmp_path / "env"), "--mirror",
                f"conda-forge={bare.as_uri()}"])
    error, hint = error_and_hint(capsys.readouterr().err)
    assert code == 1 and "has repodata but not the package file" in error and "moved or was cleaned" not in error
    assert "--mirror conda-forge=URL" in hint and "envlock mirror" in hint
    assert not (tmp_path / "env").exists()


def test_unpack_says_the_packages_came_from_the_archive_and_a_missing_archive_is_said_plainly(
    tmp_path: Path, test_channel: Path
) -> None:
    from tests.lockproject import make_project

    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",))
    env = {"ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_MIRRORS": f"conda-forge={test_channel.as_uri()}"}
    assert envlock("pack", "--project-dir", str(project), "-o", str(tmp_path / "e.tar"), "-q", env=env).returncode == 0
    done = envlock("unpack", str(tmp_path / "e.tar"), "-p", str(tmp_path / "env"),
                   env={"ENVLOCK_CACHE_DIR": str(tmp_path / "fresh-cache")})
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stderr.split())
    assert "from the archive, 0 from the package cache" in summary and "downloaded" not in summary, summary
    missing = envlock("unpack", str(tmp_path / "nope.tar"), "-p", str(tmp_path / "env2"))
    error, hint = error_and_hint(missing.stderr)
    assert missing.returncode == 1 and error == f"{tmp_path / 'nope.tar'}: no such file", error
    assert "Errno" not in missing.stderr and "`envlock pack`" in hint


def test_python_2_is_said_plainly(tmp_path: Path, capsys) -> None:
    """'or a torch release with wheels for Python 2.7' (there is none): torch has wheels for CPython 3 only."""
    assert run(["resolve", "--torch", "2.7.1", "--python", "2.7", "--dry-run", "--project-dir", str(tmp_path)]) == 2
    error, hint = error_and_hint(capsys.readouterr().err)
    assert error == "--python 2.7: torch has wheels for CPython 3 only" and "--python 3.11" in hint


def test_the_cudnn_variants_of_the_chosen_minor_read_as_such(make_channel, tmp_path: Path, capsys) -> None:
    """'CUDA 13.0 (exact) solved after CUDA 13.0: no cudnn 9.19.*': the minor solved without cuDNN."""
    chan = make_channel(subdirs=("linux-64",), cuda_minors=["12.1"], drop={("cudnn", None), ("libcudnn", None),
                                                                          ("libcudnn-dev", None)},
                        with_pytorch=False, with_cuda11=False)
    code = run(["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--mirror",
                f"conda-forge={chan.as_uri()}", "--project-dir", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert "why: linux-64: CUDA 12.1 (exact) solved without cuDNN, as " in out, out
    assert "solved after CUDA 12.1" not in out


# --------------------------------------------------------------------------- names and options


def test_the_old_name_spellings_still_work_with_a_note(tmp_path: Path, test_channel: Path, capsys) -> None:
    """`resolve --name` and `update --name` are `--lock NAME` now (-n/--name names an environment elsewhere)."""
    mirror = ["--mirror", f"conda-forge={test_channel.as_uri()}"]
    base = ["--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--project-dir", str(tmp_path), *mirror]
    assert run(["resolve", *base, "--name", "old"]) == 0
    err = unfolded(capsys.readouterr().err)
    assert "warning: `envlock resolve --name NAME` is now `envlock resolve --lock NAME`" in err
    assert (tmp_path / "locks" / "old" / "conda-lock.yml").is_file()
    assert run(["resolve", *base, "--lock", "new"]) == 0 and "warning" not in capsys.readouterr().err
    assert run(["update", "cuda-nvcc", "--name", "old", "--dry-run", "--project-dir", str(tmp_path), *mirror]) == 0
    assert "`envlock update --lock NAME`" in unfolded(capsys.readouterr().err)
    assert run(["update", "cuda-nvcc", "--lock", "new", "--dry-run", "--project-dir", str(tmp_path), *mirror]) == 0
    assert run(["resolve", *base, "--name", "a", "--lock", "b"]) == 2  # two different names: which one?
    assert "--lock and --name name two different locks" in unfolded(capsys.readouterr().err)


def test_lock_accepts_a_name_or_a_file_in_every_command_that_reads_one(tmp_path: Path, test_channel: Path,
                                                                      capsys) -> None:
    from tests.lockproject import make_project

    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",), name="t")
    by_name = run(["export", "dockerfile", "--lock", "t", "-o", "-", "--project-dir", str(project)])
    text = capsys.readouterr().out
    by_file = run(["export", "dockerfile", "--lock", str(project / "locks/t/conda-lock.yml"), "-o", "-",
                   "--project-dir", str(project)])
    assert by_name == by_file == 0 and capsys.readouterr().out == text


# --------------------------------------------------------------------------- leftovers


def test_ctrl_c_during_a_full_env_create_leaves_no_download_and_a_stale_one_is_removed(
    full_project: Path, tmp_path: Path, test_channel: Path, make_channel_server  # noqa: F811
) -> None:
    from tests.test_pack import connected_env, offline_env

    dest = tmp_path / "mirror"
    done = subprocess.run([*ENVLOCK, "mirror", "--project-dir", str(full_project), "--mirror",
                           f"conda-forge={test_channel}", str(dest), "-q"], capture_output=True, text=True,
                          env=connected_env(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    server = make_channel_server(dest)
    stall = server.add_fault("*/pypi/files/torch-*", "stall:30", times=1)
    cache = tmp_path / "cache"
    env = offline_env(tmp_path, ENVLOCK_MIRRORS=f"conda-forge={server.url}/conda-forge,pypi={server.url}/pypi/simple",
                      NO_PROXY="127.0.0.1", ENVLOCK_CACHE_DIR=str(cache))
    proc = subprocess.Popen([*ENVLOCK, "create", "--project-dir", str(full_project), "-p", str(tmp_path / "env"), "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not stall.hits:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    # a wheel downloads into a work folder of its own (.envlock-fetch-*), swapped in once its sha256 matched
    assert list((cache / "wheels").glob(".envlock-fetch-*")), "the torch wheel's work folder exists while it waits"
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - interrupted < 15  # not held up by the server that sits on the request (30 s)
    assert list((cache / "wheels").glob(".envlock-fetch-*")) == []  # the interrupted download removed its own
    assert list((cache / "wheels").rglob("*.part")) == []
    assert not (tmp_path / "env").exists()
    # a run killed outright leaves its folder behind: the next run removes it (once it is older than a minute and
    # no process holds it)
    stale = cache / "wheels" / ".envlock-fetch-killed"
    stale.mkdir()
    (stale / "torch-half.whl").write_bytes(b"half a wheel")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    done = subprocess.run([*ENVLOCK, "create", "--project-dir", str(full_project), "-p", str(tmp_path / "env"), "-q"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and list((cache / "wheels").glob(".envlock-fetch-*")) == []


# --------------------------------------------------------------------------- paths with shell characters and quotes


def test_doctor_and_its_fixes_take_a_prefix_with_shell_characters_and_a_quote(tmp_path: Path, test_channel: Path) -> None:
    """'CXX …/envs/with space/… does not run', and fixes printed with the path unquoted. A space itself is refused
    by create since issue 34 (nvcc cannot read it in NVCC_PREPEND_FLAGS: tests/test_prefix_path.py); `(`, `&` and
    a quote still need quoting everywhere a path is printed."""
    import shlex

    from tests.lockproject import make_project

    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",))
    prefix = tmp_path / "envs" / "with(paren)&" / "it's"
    env = {"ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_MIRRORS": f"conda-forge={test_channel.as_uri()}"}
    done = envlock("create", "--project-dir", str(project), "-p", str(prefix), env=env)
    assert done.returncode == 0, done.stderr
    # read back as tests/output.py reads every fold: a path wider than a line is cut after a '/' (34.9)
    assert f"conda activate {shlex.quote(str(prefix))}" in flat(done.stderr.replace(" \\\n", "\n"))
    (next(prefix.glob("targets/*/include/cusparse.h"))).unlink()  # a finding whose fix names the prefix
    done = envlock("doctor", "-p", str(prefix), "--python-exe", sys.executable, "--json", env=env)
    doc = json.loads(done.stdout)
    assert "findings" in doc, (doc, done.stderr)
    by_code = {f["code"]: f for f in doc["findings"]}
    compilers = by_code["host_compiler.version"]
    assert compilers["severity"] == "ok", compilers  # $CXX is the env's g++ under a path with shell characters
    assert "does not run" not in compilers["message"]
    fix = by_code["header.cusparse.h"]["hint"]
    assert shlex.quote(str(prefix)) in fix and f"-p {prefix} " not in fix, fix
    words = shlex.split(fix.split("  (")[0])  # the command of the fix reads back as one path
    assert str(prefix) in words, words


def test_the_anchor_line_never_breaks_inside_a_word(tmp_path: Path, capsys) -> None:
    """`cuda-toolkit[cub` / `las,…`: the anchor's Requires-Dist pin is one long word; it folds after a ','."""
    import re

    assert run(["resolve", "--torch", "2.15.0", "--dry-run", "--platform", "linux-64", "--project-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 80, out
    pin = re.search(r"cuda-toolkit\[[^\]]*\]==[\d.]+", " ".join(ln.strip() for ln in lines).replace(", ", ","))
    assert pin, out
    for name in re.findall(r"[\w.-]+", pin.group(0)):  # every name in it stands whole on one line
        assert any(re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", ln) for ln in lines), (name, out)


def test_a_hint_quotes_a_project_dir_with_a_space_and_a_quote(tmp_path: Path, capsys) -> None:
    import shlex

    from tests.output import hint_commands

    project = tmp_path / "my project" / "it's"
    assert run(["resolve", "--torch", "2.3.0+cu126", "--dry-run", "--project-dir", str(project)]) == 1
    error, hint = error_and_hint(capsys.readouterr().err)
    assert shlex.quote(str(project)) in hint
    for command in hint_commands(hint):
        assert command[command.index("--project-dir") + 1] == str(project)  # reads back as the one path
        assert run(command) != 2
        capsys.readouterr()
