"""`envlock resolve` end to end against the test channel (real tiny packages, file:// and http)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.core.tables import example_torch
from tests.output import logical_lines, unfolded

from envlock.cli import run
from envlock.formats import read_lock

ENVLOCK = [sys.executable, "-m", "envlock"]


def resolve(tmp: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = run(["resolve", *args, "--project-dir", str(tmp), "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def cf(test_channel: Path) -> str:
    return f"conda-forge={test_channel.as_uri()}"


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def test_three_platforms_exact_minor_files_and_json(tmp_path, capsys, cf) -> None:
    args = ["--torch", "2.3.0", "--platform", "linux-64", "--platform", "linux-aarch64", "--platform", "win-64", "--mirror", cf,
            "--toolchain-only"]  # win-64's default-index torch is a CPU build: tests/test_pypi_part.py
    code, doc = resolve(tmp_path, capsys, *args)
    assert code == 0, doc
    assert doc["name"] == "torch2.3.0-cu121"
    assert doc["anchor"] == doc["anchor"] | {"torch": "2.3.0", "cuda": "12.1", "cudnn": "8.9.2.26", "source": "table"}
    for platform in ("linux-64", "linux-aarch64", "win-64"):
        p = doc["platforms"][platform]
        assert p["cuda"] == "12.1" and p["skew"] == "exact" and p["nvcc"].startswith("12.1.")
        assert p["packages"] > 5 and "cuda-version=12.1" in p["specs"]
        assert any(v.startswith("__cuda=12.1") for v in p["virtual_packages"])
    assert doc["platforms"]["linux-64"]["gcc_max"] == 12 and doc["platforms"]["win-64"]["gcc_max"] is None
    ldir = tmp_path / "locks" / "torch2.3.0-cu121"
    for f in ("conda-lock.yml", "conda-linux-64.lock", "conda-linux-aarch64.lock", "conda-win-64.lock"):
        assert (ldir / f).is_file()
    assert (tmp_path / "environments" / "torch2.3.0-cu121.yml").is_file()
    lock = read_lock(ldir / "conda-lock.yml")
    assert lock.platforms == ("linux-64", "linux-aarch64", "win-64")
    names = {p.name for p in lock.packages_for("linux-aarch64")}
    assert {"cuda-nvcc", "cuda-cudart-dev", "libcusparse-dev", "libcublas-dev", "libcusolver-dev"} <= names
    assert any(n.startswith("gcc_linux-aarch64") for n in names)
    assert "vs2022_win-64" in {p.name for p in lock.packages_for("win-64")}
    assert all(p.url.startswith("https://conda.anaconda.org/conda-forge/") for p in lock.packages)
    assert all(len(p.sha256 or "") == 64 and len(p.md5) == 32 for p in lock.packages)


def test_explicit_file_is_in_dependency_order_with_md5(tmp_path, capsys, cf) -> None:
    assert resolve(tmp_path, capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", cf)[0] == 0
    text = (tmp_path / "locks/torch2.3.0-cu121/conda-linux-64.lock").read_text()
    body = text.split("@EXPLICIT\n", 1)[1].splitlines()
    assert body and all("#" in ln and len(ln.rsplit("#", 1)[1]) == 32 for ln in body)
    order = [ln.rsplit("/", 1)[1] for ln in body]
    first = {name: i for i, name in enumerate(order)}
    version_pos = next(i for n, i in first.items() if n.startswith("cuda-version-"))
    nvcc_pos = next(i for n, i in first.items() if n.startswith("cuda-nvcc-12"))
    assert version_pos < nvcc_pos  # dependencies come first
    lock = read_lock(tmp_path / "locks/torch2.3.0-cu121/conda-linux-64.lock")
    assert lock.kind == "explicit" and all(p.sha256 for p in lock.packages)


def test_missing_dev_package_moves_the_minor_and_says_why(tmp_path, capsys, make_channel) -> None:
    chan = make_channel(drop={("libcusparse-dev", "12.1")}, subdirs=("linux-64",))
    code, doc = resolve(tmp_path, capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", f"conda-forge={chan.as_uri()}")
    assert code == 0, doc
    p = doc["platforms"]["linux-64"]
    assert p["cuda"] == "12.0" and p["skew"] == "minor-1"
    assert p["attempts"] and "libcusparse-dev" in p["attempts"][0]["error"]
    assert any("LD_LIBRARY_PATH" in c for c in p["complaints"])


def test_unsatisfiable_plan_lists_every_attempt_and_writes_nothing(tmp_path, capsys, make_channel) -> None:
    chan = make_channel(drop={("libcusparse-dev", None)}, subdirs=("linux-64",))
    code, doc = resolve(tmp_path, capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", f"conda-forge={chan.as_uri()}")
    assert code == 3
    # One cause, said once, for the three minors tried (each with its cuDNN variants) …
    assert doc["error"] == ("no CUDA toolchain solves on linux-64: there is no package 'libcusparse-dev' in "
                            "conda-forge for linux-64 (CUDA 12.1, 12.0, 12.2)")
    assert doc["hint"]
    # … and every attempt in full in the detail (--json; --verbose prints it).
    heads = [d.splitlines()[0] for d in doc["detail"]]
    assert [h.split(":")[0] for h in heads] == [
        f"linux-64, CUDA {c} ({v})" for c in ("12.1", "12.0", "12.2") for v in ("with cudnn 8.9.*", "with cudnn 8.*", "without cuDNN")]
    assert all("No candidates were found for libcusparse-dev" in d for d in doc["detail"])
    assert files_under(tmp_path) == []


def test_http_channel_and_mirror_give_the_same_lock(tmp_path, capsys, cf, channel_server) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    cutoff = ("--exclude-newer", "2026-01-01T00:00:00Z")  # two new specs: one cutoff
    assert resolve(a, capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", cf, *cutoff)[0] == 0
    http = f"conda-forge={channel_server.channel_url('conda-forge')}"
    before = channel_server.count()
    assert resolve(b, capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", http, *cutoff)[0] == 0
    assert channel_server.count() > before  # really fetched over http
    for rel in ("locks/torch2.3.0-cu121/conda-lock.yml", "locks/torch2.3.0-cu121/conda-linux-64.lock", "environments/torch2.3.0-cu121.yml"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes()


def test_http_channel_by_url_is_recorded_as_that_url(tmp_path, capsys, channel_server) -> None:
    url = channel_server.channel_url("conda-forge")
    code, doc = resolve(tmp_path, capsys, "--torch", "2.3.0", "--platform", "linux-64", "--channel", url)
    assert code == 0, doc
    lock = read_lock(tmp_path / "locks/torch2.3.0-cu121/conda-lock.yml")
    assert all(p.url.startswith(url.rstrip("/") + "/") for p in lock.packages)


def test_offline_uses_the_cache_and_fails_cleanly_without_it(tmp_path, capsys, channel_server, monkeypatch) -> None:
    http = f"conda-forge={channel_server.channel_url('conda-forge')}"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "p1").mkdir()
    assert resolve(tmp_path / "p1", capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", http)[0] == 0
    before = channel_server.count()
    (tmp_path / "p2").mkdir()
    code, doc = resolve(tmp_path / "p2", capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", http, "--offline")
    assert code == 0, doc
    assert channel_server.count() == before  # not a single request
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "empty-cache"))
    (tmp_path / "p3").mkdir()
    code, doc = resolve(tmp_path / "p3", capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", http, "--offline")
    assert code == 4 and "--offline" in doc["error"] and doc["hint"]
    assert files_under(tmp_path / "p3") == []


def test_torch_from_conda_forge_pins_pytorch_built_for_the_cuda(tmp_path, capsys, cf) -> None:
    code, doc = resolve(tmp_path, capsys, "--torch", "2.7.1", "--torch-source", "conda-forge", "--platform", "linux-64", "--mirror", cf)
    assert code == 0, doc
    assert doc["anchor"]["source"] == "conda-forge" and doc["anchor"]["torch_source"] == "conda-forge"
    p = doc["platforms"]["linux-64"]
    assert any(s.startswith("pytorch ==2.7.1 cuda") for s in p["specs"])
    lock = read_lock(tmp_path / f"locks/{doc['name']}/conda-lock.yml")
    torch = [q for q in lock.packages_for("linux-64") if q.name == "pytorch"]
    assert torch and torch[0].build.startswith("cuda" + doc["anchor"]["cuda"].replace(".", ""))


def test_cuda_11_8_comes_from_the_nvidia_label(tmp_path, capsys, cf, nvidia_label_channel) -> None:
    label = f"nvidia/label/cuda-11.8.0={nvidia_label_channel.as_uri()}"
    code, doc = resolve(tmp_path, capsys, "--torch", "2.3.0+cu118", "--platform", "linux-64", "--mirror", cf, "--mirror", label,
                        "--toolchain-only")
    assert code == 0, doc
    assert doc["anchor"]["cuda"] == "11.8" and doc["anchor"]["source"] == "local-label"
    p = doc["platforms"]["linux-64"]
    assert p["nvcc"] == "11.8.89" and p["channels"][0] == "nvidia/label/cuda-11.8.0"
    lock = read_lock(tmp_path / f"locks/{doc['name']}/conda-lock.yml")
    nvcc = [q for q in lock.packages_for("linux-64") if q.name == "cuda-nvcc"][0]
    assert nvcc.url.startswith("https://conda.anaconda.org/nvidia/label/cuda-11.8.0/")


def test_aarch64_with_a_cpu_only_pypi_torch_is_warned_about(tmp_path, capsys) -> None:
    code, doc = resolve(tmp_path, capsys, "--torch", "2.8.0", "--platform", "linux-aarch64", "--dry-run")
    assert code == 0 and any("CPU-only" in w for w in doc["warnings"])
    code, doc = resolve(tmp_path, capsys, "--torch", "2.11.0", "--platform", "linux-aarch64", "--dry-run")
    assert code == 0 and doc["warnings"] == []


def test_dry_run_plans_without_network_or_files(tmp_path, capsys) -> None:
    code, doc = resolve(tmp_path, capsys, "--torch", "2.8.0", "--platform", "linux-64", "--channel", "http://127.0.0.1:9/none", "--dry-run")
    assert code == 0, doc
    p = doc["platforms"]["linux-64"]
    assert doc["dry_run"] is True and p["nvcc"] is None and p["packages"] is None
    assert p["candidates"][0] == {"cuda": "12.8", "skew": "exact"}
    assert {c["cuda"] for c in p["candidates"]} == {"12.8", "12.9"}
    assert files_under(tmp_path) == []


JSON_KEYS = {"cuda", "skew", "nvcc", "gcc_max", "cudnn", "specs", "virtual_packages", "packages", "files"}


def test_json_schema_is_stable(tmp_path, capsys, cf) -> None:
    code, doc = resolve(tmp_path, capsys, "--torch", "2.3.0", "--platform", "linux-64", "--mirror", cf)
    assert code == 0
    assert {"torch", "cuda", "cudnn", "source"} <= set(doc["anchor"])
    assert JSON_KEYS <= set(doc["platforms"]["linux-64"])
    assert doc["platforms"]["linux-64"]["files"] == [
        "locks/torch2.3.0-cu121/conda-linux-64.lock", "locks/torch2.3.0-cu121/requirements-linux-64.txt",
        "locks/torch2.3.0-cu121/environment-linux-64.yml",
    ]
    assert {w["name"] for w in doc["platforms"]["linux-64"]["pypi"]} >= {"torch", "ninja"}
    assert doc["toolchain_only"] is False and doc["exclude_newer"].endswith("Z")
    assert "locks/torch2.3.0-cu121/conda-lock.yml" in doc["files"]
    assert doc["envlock_result_version"] == 1


# --------------------------------------------------------------------------- bad input


BAD = [  # (args, a word of the error, exit code: 2 for a value of the wrong form or not among the choices)
    (["--torch", "9.9.9", "--offline"], "9.9.9", 1),
    (["--torch", "two.three"], "two.three", 2),
    (["--torch", "2.3.0+cpu"], "CPU", 1),
    (["--torch", "2.3.0", "--cuda", "12.7"], "12.7", 1),
    (["--torch", "2.3.0", "--cuda", "9.0"], "9.0", 1),
    (["--torch", "2.3.0", "--platform", "linux-sparc"], "linux-sparc", 2),
    (["--torch", "2.3.0", "--platform", "osx-arm64"], "macOS", 2),
    (["--torch", "2.3.0", "--mirror", "nonsense"], "NAME=URL", 2),
    (["--torch", "2.3.0", "--lock", "../evil"], "../evil", 2),
    (["--torch", "2.3.0", "--channel", "http://127.0.0.1:9/conda-forge"], "127.0.0.1", 4),
]


@pytest.mark.parametrize(("args", "needle", "code"), BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_bad_input_is_one_error_and_a_hint_and_no_files(tmp_path, args, needle, code) -> None:
    platform = [] if "--platform" in args else ["--platform", "linux-64"]
    cmd = [*ENVLOCK, "resolve", *args, *platform, "--project-dir", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert max(len(ln) for ln in proc.stderr.splitlines()) <= 80, proc.stderr
    lines = logical_lines(proc.stderr.strip())
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("error: ") and needle.lower() in lines[0].lower()
    assert lines[1].startswith("hint: ") and len(lines[1]) > len("hint: ")
    assert "Traceback" not in proc.stderr + proc.stdout
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("how", ["locks-is-a-file", "read-only", "under-a-file"])
def test_unwritable_project_dir(tmp_path, cf, how) -> None:
    with contextlib.ExitStack() as stack:
        _unwritable_project_dir(tmp_path, cf, how, stack)


def _unwritable_project_dir(tmp_path, cf, how, stack) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    envlock, env = ENVLOCK, None
    if how == "locks-is-a-file":
        (proj / "locks").write_text("not a directory")  # fails for root too, who ignores mode bits
    elif how == "read-only":
        if os.geteuid() == 0:  # root ignores permission bits: a second user runs it
            from tests.second_user import open_dir, second_user

            as_other, env = second_user()
            base = stack.enter_context(open_dir("envlock-read-only-"))
            proj = base / "proj"
            proj.mkdir()
            (base / "cache").mkdir(mode=0o777)
            (base / "cache").chmod(0o777)
            env.update(ENVLOCK_CACHE_DIR=str(base / "cache"), ENVLOCK_CONFIG_DIR=str(base / "config"), HOME="/")
            envlock = [*as_other, "-m", "envlock"]
        proj.chmod(0o555)
    else:
        (tmp_path / "a-file").write_text("")
        proj = tmp_path / "a-file" / "nope"  # cannot be created
    cmd = [*envlock, "resolve", "--torch", "2.3.0", "--platform", "linux-64", "--mirror", cf, "--project-dir", str(proj)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd="/")
    assert proc.returncode == 1, proc.stderr
    lines = logical_lines(proc.stderr.strip())
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"cannot {'create the project dir' if how == 'under-a-file' else 'write to'} {proj}" in lines[0], proc.stderr
    assert not (proj / "environments").exists()


def test_json_errors_are_json_with_a_non_zero_exit(tmp_path) -> None:
    proc = subprocess.run([*ENVLOCK, "resolve", "--torch", "2.3.0+cpu", "--json", "--project-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert set(doc) >= {"error", "hint"} and "CPU" in doc["error"]


def _exit_codes_over(runs: int, tmp_path: Path, cf: str) -> None:
    """py-rattler 0.28 can segfault at interpreter exit; envlock leaves with os._exit. Every tenth run is refused."""
    (tmp_path / "p").mkdir()
    ok = [*ENVLOCK, "resolve", "--torch", "2.3.0", "--platform", "linux-64", "--mirror", cf, "--project-dir", str(tmp_path / "p")]
    bad = [*ENVLOCK, "resolve", "--torch", "2.3.0", "--cuda", "12.7", "--project-dir", str(tmp_path / "p")]
    codes = []
    for i in range(runs):
        cmd, want = (bad, 1) if i % 10 == 9 else (ok, 0)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        codes.append((proc.returncode, want))
    wrong = [(i, got, want) for i, (got, want) in enumerate(codes) if got != want]
    assert wrong == []


def test_cli_exit_codes_stay_right_over_10_runs(tmp_path, cf) -> None:
    _exit_codes_over(10, tmp_path, cf)


@pytest.mark.slow
def test_cli_exit_codes_stay_right_over_100_runs(tmp_path, cf) -> None:
    """The soak: 100 processes (~90 s of one worker), in the slow tier beside tests/reliability/test_exit_codes.py's
    1,000; the default tier runs the same check over 10."""
    _exit_codes_over(100, tmp_path, cf)


def test_a_dropped_cudnn_says_what_works_and_the_advice_holds(tmp_path, capsys, make_channel, test_channel) -> None:
    """The note once said "add a cudnn dependency to the spec": the plan replaces such a line. What it says now
    is checked here: the line is replaced (so cuDNN stays out), a channel that has cuDNN brings it."""
    bare = make_channel(cuda_minors=["12.1"], subdirs=("linux-64",), with_cudnn=False, with_pytorch=False,
                        with_cuda11=False)
    args = ["--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only"]
    code, doc = resolve(tmp_path, capsys, *args, "--mirror", f"conda-forge={bare.as_uri()}")
    assert code == 0, doc
    plat = doc["platforms"]["linux-64"]
    assert plat["cudnn"] is None and plat["cuda"] == "12.1"
    (note,) = [n for n in plat["notes"] if "cuDNN is not locked" in n]
    assert "add a cudnn dependency" not in note
    assert "a cudnn line in the spec is replaced by the plan" in note and "a channel with cuDNN for CUDA 12.1" in note
    spec = tmp_path / "environments" / "torch2.3.0-cu121.yml"
    text = spec.read_text()
    assert "  - python" not in text  # toolchain only: add the line after the toolchain's own
    spec.write_text(text.replace("\nplatforms:", "\n  - cudnn\nplatforms:", 1))
    lock = tmp_path / "locks" / "torch2.3.0-cu121" / "conda-lock.yml"
    code = run(["lock", "--all", "--project-dir", str(tmp_path), "--mirror", f"conda-forge={bare.as_uri()}"])
    out = capsys.readouterr().out
    assert code == 0 and "warning: spec line 'cudnn' is replaced by the plan" in out, out
    assert "cudnn" not in {p.name for p in read_lock(lock).packages}  # the hand-added line changed nothing
    code = run(["lock", "--all", "--project-dir", str(tmp_path), "--mirror", f"conda-forge={test_channel.as_uri()}"])
    assert code == 0, capsys.readouterr()
    assert "cudnn" in {p.name for p in read_lock(lock).packages}  # the advice: a channel that builds it


@pytest.mark.parametrize(("args", "error", "hint"), [
    (["--torch", "2.5.1", "--cuda", "13.0"],
     "torch 2.5.1 was built for CUDA 11.8, 12.1, 12.4 (cu118, cu121, cu124), never for CUDA 13", "--cuda 12.4"),
    (["--torch", "2.7.1", "--python", "3.14"],
     "torch 2.7.1 has no wheels for Python 3.14 (it has 3.9 to 3.13)", "--python 3.13"),
    (["--torch", "2.9.0", "--python", "3.9"], "torch 2.9.0 has no wheels for Python 3.9", "--python 3.10"),
])  # fmt: skip
def test_domain_refusals_exit_1_before_any_solve(tmp_path, cf, args, error, hint) -> None:
    proc = subprocess.run([*ENVLOCK, "resolve", *args, "--platform", "linux-64", "--mirror", cf,
                           "--project-dir", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / ".cache")})
    assert proc.returncode == 1, proc.stderr
    lines = logical_lines(proc.stderr.strip())
    assert len(lines) == 2 and lines[0] == f"error: {error}" + lines[0][len(f"error: {error}"):]
    assert lines[0].startswith(f"error: {error}") and hint in lines[1]
    # the hint's command is the user's own, changed: the mirror and project dir come along
    assert f"--mirror {cf}" in lines[1] and f"--project-dir {tmp_path}" in lines[1]
    assert files_under(tmp_path) == []


def test_a_project_dir_that_does_not_exist_yet_is_created(tmp_path, cf) -> None:
    proj = tmp_path / "new" / "project"
    cmd = [*ENVLOCK, "resolve", "--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only", "--mirror", cf,
           "--project-dir", str(proj)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert (proj / "locks" / "torch2.3.0-cu121" / "conda-lock.yml").is_file()


def test_a_failed_first_resolve_leaves_no_project_dir_behind(tmp_path) -> None:
    """resolve creates a missing --project-dir before the solve; when the solve fails, the folders it made go
    again (empty ones only), and check's hint for a missing project says how to start one."""
    proj = tmp_path / "new" / "project"
    gone = tmp_path / "no-such-channel"
    cmd = [*ENVLOCK, "resolve", "--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only", "--mirror",
           f"conda-forge=file://{gone}", "--project-dir", str(proj)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode != 0 and proc.stderr.startswith("error:"), proc.stderr
    assert not (tmp_path / "new").exists()
    check = subprocess.run([*ENVLOCK, "check", "--project-dir", str(proj)], capture_output=True, text=True)
    assert check.returncode != 0 and "does not exist" in unfolded(check.stderr)
    assert f"envlock resolve --torch {example_torch()} --project-dir {proj}`" in unfolded(check.stderr)


@pytest.mark.parametrize("command", ["resolve", "resolve-full", "lock", "update", "create"])
def test_an_unusable_cache_dir_is_named_not_blamed_on_the_project(tmp_path, cf, test_channel, command) -> None:
    """The issue's case: an unwritable cache dir said "check that environments/ and locks/ are writable". A path no
    directory can be made at is refused before the command starts, naming the setting (issue 34.7: every ENVLOCK_*
    checked up front, exit 2 as for any malformed setting); a directory that cannot be written is named when it is
    used (exit 1: a well-formed value envlock cannot serve)."""
    from tests.lockproject import make_project, snapshot

    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",))
    (tmp_path / "a-file").write_text("")
    cache = tmp_path / "a-file" / "cache"  # a cache dir that cannot be created
    args = {
        "resolve": ["resolve", "--torch", "2.4.0", "--platform", "linux-64", "--toolchain-only", "--mirror", cf],
        "resolve-full": ["resolve", "--torch", "2.4.0", "--platform", "linux-64", "--mirror", cf],
        "lock": ["lock", "--all", "--mirror", cf],
        "update": ["update", "cuda-nvcc", "--mirror", cf],
        "create": ["create", "-p", str(tmp_path / "env"), "--mirror", cf],
    }[command]
    before = snapshot(project)
    proc = subprocess.run([*ENVLOCK, *args, "--project-dir", str(project)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "ENVLOCK_CACHE_DIR": str(cache)})
    assert proc.returncode == 2, proc.stderr
    error, hint = logical_lines(proc.stderr)
    assert error == f"error: ENVLOCK_CACHE_DIR='{cache}' is not a directory (nor a path one can be made at)"
    assert hint.startswith("hint: point it at a directory") and "environments/" not in hint
    assert snapshot(project) == before and not (tmp_path / "env").exists()


def test_a_dropped_platform_takes_its_files_and_leaves_the_users(tmp_path, capsys, cf) -> None:
    """Re-resolving without win-64 removes conda-win-64.lock and the .ps1/.bat scripts; a user's own files stay."""
    both = ["--torch", "2.3.0", "--platform", "linux-64", "--platform", "win-64", "--mirror", cf, "--toolchain-only"]
    assert resolve(tmp_path, capsys, *both)[0] == 0
    ldir = tmp_path / "locks" / "torch2.3.0-cu121"
    assert {"conda-win-64.lock", "activate.ps1", "deactivate.bat"} <= {p.name for p in ldir.iterdir()}
    (ldir / "activate.local.sh").write_text("export MINE=1\n")
    (ldir / "conda-notes.lock.txt").write_text("mine\n")
    code = run(["resolve", *both[:4], *both[6:], "--project-dir", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert sorted(p.name for p in ldir.iterdir()) == [
        "activate.local.sh", "activate.sh", "conda-linux-64.lock", "conda-lock.yml", "conda-notes.lock.txt",
        "deactivate.sh", "environment-linux-64.yml"]
    gone = ("activate.bat", "activate.ps1", "conda-win-64.lock", "deactivate.bat", "deactivate.ps1",
            "environment-win-64.yml")
    for name in gone:
        assert f"removed locks/torch2.3.0-cu121/{name} (not in the new lock)" in out
    # The user's files are left where they are, and `check` names them: the folder holds the lock's files only
    # (issue 33: a file there for a platform the lock lacks is what a user's conda would install from).
    assert run(["check", "--project-dir", str(tmp_path)]) == 1
    said = " ".join(capsys.readouterr().out.split())
    for mine in ("activate.local.sh", "conda-notes.lock.txt"):
        assert f"{mine} is not a file envlock renders from conda-lock.yml" in said
        (ldir / mine).unlink()
    assert run(["check", "--project-dir", str(tmp_path)]) == 0
    # --json names them under "removed", apart from "files" (what the lock has)
    capsys.readouterr()
    assert resolve(tmp_path, capsys, *both)[0] == 0
    code, doc = resolve(tmp_path, capsys, *both[:4], *both[6:])
    assert code == 0 and doc["removed"] == [f"locks/torch2.3.0-cu121/{name}" for name in gone]
    assert not set(doc["removed"]) & set(doc["files"])
