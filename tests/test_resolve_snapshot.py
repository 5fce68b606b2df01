"""`envlock resolve` against the real conda-forge snapshot in ../shared/channels (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envlock.cli import run
from envlock.errors import SolveError
from envlock.models import Anchor, Candidate, Plan, PlanOptions, PlatformPlan, VirtualPackage
from envlock.seams.conda.solve import RattlerSolver, SolveOptions


@pytest.fixture
def mirror(shared_dir: Path) -> str:
    return f"conda-forge={(shared_dir / 'channels' / 'conda-forge').as_uri()}"


def resolve_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = run(["resolve", *args, "--project-dir", str(tmp_path), "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_torch_2_7_1_linux_64_gets_nvcc_12_6_and_gcc_at_most_13(tmp_path, capsys, mirror) -> None:
    code, doc = resolve_json(tmp_path, capsys, "--torch", "2.7.1", "--platform", "linux-64", "--mirror", mirror)
    assert code == 0, doc
    p = doc["platforms"]["linux-64"]
    assert p["cuda"] == "12.6" and p["skew"] == "exact"
    assert p["nvcc"].startswith("12.6.")
    assert p["gcc_max"] == 13
    lock = (tmp_path / "locks" / "torch2.7.1-cu126" / "conda-lock.yml").read_text()
    gcc = [ln for ln in lock.splitlines() if "/gcc_impl_linux-64-" in ln]
    assert gcc and all("gcc_impl_linux-64-13." in ln or "gcc_impl_linux-64-12." in ln for ln in gcc)
    # mirrors are for fetching only: the lock keeps the canonical conda-forge URLs
    assert "file://" not in lock and "https://conda.anaconda.org/conda-forge/" in lock


def test_torch_2_8_0_solves_12_8_exactly_on_linux_64(tmp_path, capsys, mirror) -> None:
    """The snapshot now holds conda-forge's linux-64 CUDA 12.8 dev set: the exact minor solves, no attempt fails."""
    code, doc = resolve_json(tmp_path, capsys, "--torch", "2.8.0", "--platform", "linux-64", "--toolchain-only", "--mirror", mirror)
    assert code == 0, doc
    p = doc["platforms"]["linux-64"]
    assert doc["anchor"]["cuda"] == "12.8"
    assert p["cuda"] == "12.8" and p["skew"] == "exact" and p["nvcc"].startswith("12.8.")
    assert p["attempts"] == []


def test_torch_2_8_0_moves_to_12_9_on_aarch64_because_the_snapshot_lacks_its_12_8_dev_packages(tmp_path, capsys, mirror) -> None:
    code, doc = resolve_json(tmp_path, capsys, "--torch", "2.8.0", "--platform", "linux-aarch64", "--toolchain-only",
                             "--mirror", mirror)  # fmt: skip
    assert code == 0, doc
    p = doc["platforms"]["linux-aarch64"]
    assert doc["anchor"]["cuda"] == "12.8"
    assert p["cuda"] == "12.9" and p["skew"] == "minor+1" and p["nvcc"].startswith("12.9.")
    assert p["attempts"] and {a["cuda"] for a in p["attempts"]} == {"12.8"}
    assert any("12.8" in a["cuda"] and a["error"] for a in p["attempts"])


def test_human_summary_says_why_the_minor_moved(tmp_path, capsys, mirror) -> None:
    code = run(["resolve", "--torch", "2.8.0", "--platform", "linux-aarch64", "--toolchain-only", "--mirror", mirror,
                "--project-dir", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "torch 2.8.0 → CUDA 12.8" in out
    assert "minor+1" in out and "12.9" in out


def test_gcc_14_with_nvcc_12_6_fails_with_a_readable_reason(shared_dir: Path, tmp_path: Path) -> None:
    anchor = Anchor(torch="2.7.1", cuda="12.6", cudnn=None, source="override", detail="test")
    cand = Candidate(
        cuda="12.6",
        skew="exact",
        specs=("cuda-version=12.6", "cuda-nvcc", "gcc_linux-64 14.*", "gxx_linux-64 14.*"),
        channels=("conda-forge",),
        virtual_packages=(VirtualPackage("__cuda", "12.6"), VirtualPackage("__glibc", "2.28"), VirtualPackage("__unix", "0"), VirtualPackage("__linux", "5.10")),
        gcc_max=14,
        cudnn=None,
    )
    plan = Plan(anchor, PlanOptions(platforms=("linux-64",)), (PlatformPlan("linux-64", (cand,)),), "test")
    solver = RattlerSolver(
        SolveOptions(cache_dir=tmp_path / "cache", mirrors={"conda-forge": (shared_dir / "channels/conda-forge").as_uri()})
    )
    with pytest.raises(SolveError) as err:
        solver.solve(plan)
    msg = err.value.message
    assert "linux-64" in msg and "CUDA 12.6" in msg
    assert "gcc" in msg  # the solver names the compiler conflict
    assert "\n" not in msg


def test_three_platforms_in_one_run_report_the_one_the_snapshot_cannot_serve(tmp_path, capsys, mirror) -> None:
    args = ["--torch", "2.11.0", "--platform", "linux-64", "--platform", "linux-aarch64", "--platform", "win-64", "--mirror", mirror]
    code, doc = resolve_json(tmp_path, capsys, *args)
    assert code == 3
    # The failing platform first, the others named as solved; the hint locks them without it; nothing written.
    assert doc["error"].startswith("win-64 cannot be solved: ") and "(linux-64, linux-aarch64 solved; nothing was written)" in doc["error"]
    assert doc["hint"].startswith("lock the others without it: `envlock resolve --torch 2.11.0 --platform linux-64 "
                                  "--platform linux-aarch64 --mirror")  # the command that was run, without win-64
    assert len(doc["error"]) <= 500 and all(d.startswith("win-64, CUDA ") for d in doc["detail"])
    assert not (tmp_path / "locks").exists() and not (tmp_path / "environments").exists()


def test_linux_64_and_aarch64_in_one_run(tmp_path, capsys, mirror) -> None:
    args = ["--torch", "2.11.0", "--platform", "linux-64", "--platform", "linux-aarch64", "--mirror", mirror]
    code, doc = resolve_json(tmp_path, capsys, *args)
    assert code == 0, doc
    assert {p: v["cuda"] for p, v in doc["platforms"].items()} == {"linux-64": "13.0", "linux-aarch64": "13.0"}
    lock = (tmp_path / "locks" / "torch2.11.0-cu130" / "conda-lock.yml").read_text()
    assert "linux-aarch64/cuda-nvcc-13.0" in lock and "linux-64/cuda-nvcc-13.0" in lock
    assert (tmp_path / "locks" / "torch2.11.0-cu130" / "conda-linux-aarch64.lock").is_file()


def test_linux_64_and_win_64_with_cuda_override(tmp_path, capsys, mirror) -> None:
    args = ["--torch", "2.11.0", "--cuda", "13.3", "--platform", "linux-64", "--platform", "win-64", "--mirror", mirror,
            "--toolchain-only"]  # no torch on any index is a CUDA 13.3 build
    code, doc = resolve_json(tmp_path, capsys, *args)
    assert code == 0, doc
    assert doc["anchor"]["source"] == "override"
    assert doc["platforms"]["win-64"]["nvcc"].startswith("13.3.")
    assert "vs2022_win-64" in doc["platforms"]["win-64"]["specs"]


def test_resolve_is_byte_identical_on_rerun(tmp_path, capsys, mirror) -> None:
    args = ["--torch", "2.7.1", "--platform", "linux-64", "--mirror", mirror]
    assert resolve_json(tmp_path, capsys, *args)[0] == 0
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and not p.name.startswith("."))
    first = {p: p.read_bytes() for p in files}
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    assert resolve_json(tmp_path, capsys, *args)[0] == 0
    assert {p: p.read_bytes() for p in files} == first
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes  # unchanged files are not rewritten


def test_conda_lock_parses_our_lock_and_renders_explicit(tmp_path, capsys, mirror) -> None:
    conda_lock = pytest.importorskip("conda_lock.lockfile")
    assert resolve_json(tmp_path, capsys, "--torch", "2.8.0", "--platform", "linux-64", "--mirror", mirror)[0] == 0
    path = tmp_path / "locks" / "torch2.8.0-cu128" / "conda-lock.yml"
    lf = conda_lock.parse_conda_lock_file(path)
    assert lf.metadata.platforms == ["linux-64"]
    assert lf.metadata.custom_metadata and "envlock.anchor" in lf.metadata.custom_metadata
    names = {p.name for p in lf.package}
    assert {"cuda-nvcc", "cuda-cudart-dev", "libcusparse-dev", "libcublas-dev", "libcusolver-dev"} <= names


def test_the_spec_written_is_the_spec_solved_torch_2_11(tmp_path, capsys, mirror) -> None:
    """torch 2.11.0: cuDNN 9.19 is not on the snapshot for CUDA 13.0, so the plan drops cuDNN. The spec must
    say so (a `cudnn 9.19.*` line would make conda and libsolv fail on it), every requirement in it must be
    met by its lock, `check` must see the two agree, and conda-lock must find the spec from the lock."""
    import rattler
    from conda_lock.conda_lock import handle_no_specified_source_files

    from envlock.formats import read_lock
    from envlock.names import match_spec_name as _spec_name
    from envlock.project import OPTIONAL_NAMES, PLAN_NAMES
    from envlock.formats.spec import read_spec

    code, doc = resolve_json(tmp_path, capsys, "--torch", "2.11.0", "--platform", "linux-64", "--mirror", mirror)
    assert code == 0, doc
    assert doc["platforms"]["linux-64"]["cudnn"] is None
    spec_path = tmp_path / "environments" / "torch2.11.0-cu130.yml"
    text = spec_path.read_text()
    assert "cudnn" not in [_spec_name(d) for d in read_spec(spec_path).dependencies]
    assert "# linux-64: written as solved" in text and "no cuDNN solves with nvcc 13.0" in text
    lock_path = tmp_path / "locks" / "torch2.11.0-cu130" / "conda-lock.yml"
    locked = {p.name: p for p in read_lock(lock_path).packages_for("linux-64")}
    for dep in read_spec(spec_path).dependencies:
        match = rattler.MatchSpec(dep)
        name = match.name.normalized
        assert name in locked, dep
        assert match.version is None or rattler.VersionSpec(str(match.version)).matches(
            rattler.Version(locked[name].version)), (dep, locked[name].version)
    assert all(_spec_name(d) in PLAN_NAMES | OPTIONAL_NAMES for d in read_spec(spec_path).dependencies)
    assert "pip" in read_spec(spec_path).dependencies  # what the lock took beside python, as conda installs it
    assert run(["check", "--project-dir", str(tmp_path)]) == 0
    # A hand edit back to torch's cuDNN: the spec no longer says what was solved, and check says so.
    spec_path.write_text(text.replace("  - python 3.11.*", "  - python 3.11.*\n  - cudnn 9.19.*"))
    assert run(["check", "--project-dir", str(tmp_path)]) == 1
    assert "the spec asks for cudnn 9.19.*" in capsys.readouterr().out
    spec_path.write_text(text)
    # metadata.sources is relative to the lock's folder: conda-lock's own lookup finds the spec.
    assert handle_no_specified_source_files(lock_path) == [lock_path.parent / "../../environments/torch2.11.0-cu130.yml"]
    assert (lock_path.parent / "../../environments/torch2.11.0-cu130.yml").resolve() == spec_path.resolve()


def test_a_moved_cuda_minor_is_written_as_solved_with_a_whole_reason(tmp_path, capsys, mirror) -> None:
    """torch 2.8.0 --with deepspeed on linux-aarch64: the snapshot has no aarch64 12.8 dev set, so 12.9 is locked.
    The spec says cuda-version=12.9 and why, in a sentence that ends (it ended '… 12.9 (minor+1) was')."""
    import itertools

    from envlock.formats.spec import read_spec

    code, doc = resolve_json(tmp_path, capsys, "--torch", "2.8.0", "--toolchain-only", "--with", "deepspeed",
                             "--platform", "linux-aarch64", "--mirror", mirror)  # fmt: skip
    assert code == 0, doc
    spec_path = tmp_path / "environments" / "torch2.8.0-cu128.yml"
    lines = spec_path.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if "written as solved" in ln)
    wrapped = [lines[at], *itertools.takewhile(lambda ln: ln.strip().startswith("#   "), lines[at + 1:])]
    comment = " ".join(ln.strip().lstrip("#").strip() for ln in wrapped)
    assert comment == ("linux-aarch64: written as solved, not as first planned: CUDA 12.8 did not solve "
                       "(the lock's plan says why), CUDA 12.9 (minor+1) did")  # fmt: skip
    assert "cuda-version=12.9" in read_spec(spec_path).dependencies
    assert run(["check", "--project-dir", str(tmp_path)]) == 0


def _locked(tmp_path: Path, name: str) -> dict[str, str]:
    lock = (tmp_path / "locks" / name / "conda-lock.yml").read_text()
    return {ln.rsplit("/", 1)[1].rsplit("-", 2)[0]: ln.rsplit("/", 1)[1] for ln in lock.splitlines() if "url: https://" in ln}


def test_torch_2_7_1_locks_libcurand_dev_by_default(tmp_path, capsys, mirror) -> None:
    code, doc = resolve_json(tmp_path, capsys, "--torch", "2.7.1", "--platform", "linux-64", "--mirror", mirror)
    assert code == 0, doc
    assert "libcurand-dev" in doc["platforms"]["linux-64"]["specs"]
    assert _locked(tmp_path, "torch2.7.1-cu126")["libcurand-dev"].startswith("libcurand-dev-10.3.7.77-")


@pytest.mark.parametrize(("torch", "name", "cuda", "curand", "profiler"), [
    # the snapshot's linux-64 12.6 NVTX/profiler-API/NVML dev packages (added to ../shared in round 5): exact
    ("2.7.1", "torch2.7.1-cu126", "12.6", "10.3.7.77", "12.6.77"),
    ("2.8.0", "torch2.8.0-cu128", "12.8", "10.3.9.90", "12.8.90"),  # the snapshot's linux-64 12.8 dev set: exact
    ("2.11.0", "torch2.11.0-cu130", "13.0", "10.4.0.35", "13.0.85"),
])  # fmt: skip
def test_with_deepspeed_locks_curand_and_the_profiler_api(tmp_path, capsys, mirror, torch, name, cuda, curand, profiler) -> None:
    code, doc = resolve_json(tmp_path, capsys, "--torch", torch, "--platform", "linux-64", "--with", "deepspeed", "--mirror", mirror)
    assert code == 0, doc
    assert doc["platforms"]["linux-64"]["cuda"] == cuda
    locked = _locked(tmp_path, name)
    assert locked["libcurand-dev"].startswith(f"libcurand-dev-{curand}-")
    assert locked["cuda-profiler-api"].startswith(f"cuda-profiler-api-{profiler}-")


def test_conda_forge_pytorch_without_a_build_for_the_python_stops_after_one_attempt(tmp_path, capsys, mirror) -> None:
    """The issue's case: python 3.11 with conda-forge's pytorch 2.7.1 (built for 3.12 and 3.13 only on the snapshot).
    No CUDA minor changes that: one attempt, the real cause, a hint about python."""
    code, doc = resolve_json(tmp_path, capsys, "--torch", "2.7.1", "--torch-source", "conda-forge", "--python", "3.11",
                             "--platform", "linux-64", "--mirror", mirror)
    assert code == 3
    assert doc["error"] == ("conda-forge's pytorch 2.7.1 is built for python 3.12, 3.13 on linux-64, not for python 3.11 "
                            "(no CUDA minor can change that: envlock stopped after CUDA 12.9)")
    assert doc["hint"] == "pass --python 3.13, or --torch-source pip"
    assert len(doc["detail"]) == 1
    ok = resolve_json(tmp_path, capsys, "--torch", "2.7.1", "--torch-source", "conda-forge", "--python", "3.13",
                      "--platform", "linux-64", "--mirror", mirror)
    assert ok[0] == 0, ok[1]  # what the hint says works
