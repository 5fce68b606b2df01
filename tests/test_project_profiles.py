"""The big projects' profiles (envlock/data/profiles/*.yaml, issue 35.4): saved scans of FlashAttention 2, xFormers,
causal-conv1d, mamba-ssm, FlashInfer, apex and bitsandbytes that `--for NAME` reads without the sources, made
by tools/project_profiles.py from each project's own sdist or source tree.

The tables regenerate byte for byte from their sources (slow tier) when the sources are in the cache the tool
uses ($ENVLOCK_SDIST_CACHE, else ~/.cache/envlock-sdists: `python tools/project_profiles.py fetch`), and the
test says why it skips otherwise; the tool itself is checked here on a project written by the test."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from envlock.sources.load import groups_for, load_scan
from envlock.sources.profiles import profile_named, profiles
from envlock.sources.saved import saved_scan
from tests.test_doctor import TARGET, base_env, cudart_stub, doctor, make_prefix  # noqa: F401 - fixture

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import project_profiles  # noqa: E402

TABLED = sorted(project_profiles.tabled())


def test_every_big_project_has_a_profile_with_a_saved_table() -> None:
    from envlock.commands.doctor import PROFILED

    assert TABLED == ["apex", "bitsandbytes", "causal-conv1d", "flash-attn", "flashinfer", "mamba-ssm", "xformers"]
    assert sorted(PROFILED.split(", ")) == TABLED  # what `envlock doctor --help` lists
    for name in TABLED:
        got = saved_scan(name)
        assert got is not None and got.units and got.profile == name, name
        assert all(u.sources for u in got.units if u.name != "CMakeLists.txt"), name  # (but the configure step)


def test_the_profiles_state_what_the_sources_ask_of_the_toolchain() -> None:
    doc = {n: project_profiles_yaml(n)["build"] for n in TABLED}
    fa = doc["flash-attn"]  # setup.py: -std=c++17, `bare_metal_version < Version("11.7")` raises, gated -gencode
    assert (fa["cxx_std"], fa["host_compiler"], fa["nvcc_min"]) == ("c++17", "gcc >= 7 (C++17)", "11.7")
    assert fa["arch"] == ["80", "90 (nvcc >= 11.8)", "100 (nvcc >= 12.8)", "120 (nvcc >= 12.8)"]
    assert doc["causal-conv1d"]["nvcc_min"] == "11.6" and "121 (nvcc >= 13.0)" in doc["causal-conv1d"]["arch"]
    assert doc["xformers"]["host_compiler"] == "gcc >= 7 (C++17)"  # its arch list is TORCH_CUDA_ARCH_LIST's
    bnb = doc["bitsandbytes"]  # CMake, read with -DCOMPUTE_BACKEND=cuda: FATAL_ERROR below 11.8 and from 14.0
    assert (bnb["nvcc_min"], bnb["nvcc_below"], bnb["cuda_libraries"]) == ("11.8", "14.0", ["cublas", "cublasLt", "cudart"])
    assert "nccl.h" in doc["apex"]["outside"] or "nccl" in doc["apex"]["groups"]  # its NCCL allocator extension
    for name in TABLED:
        assert doc[name]["cuda_headers"], name


def env_with(root: Path, stub: Path, headers: list[str] | tuple[str, ...], nvcc: str = "12.6.85") -> Path:
    """A constructed CUDA prefix (tests/test_doctor.py's) with exactly these headers where the compiler looks."""
    p = make_prefix(root, stub, nvcc=nvcc, headers=())
    for h in headers:
        (p / TARGET / "include" / h).parent.mkdir(parents=True, exist_ok=True)
        (p / TARGET / "include" / h).write_text(f"/* {h} */\n")
    return p


def project_profiles_yaml(name: str) -> dict:
    import yaml

    return yaml.safe_load((REPO / "envlock" / "data" / profiles()[name]["table"]).read_text())


def test_for_a_profiled_name_needs_no_sources(tmp_path: Path, cudart_stub: Path) -> None:
    assert profile_named("Flash_Attn")["name"] == "flash-attn"  # PEP 503's spelling
    scans = (load_scan("flash_attn"),)
    assert scans[0].origin == "flash-attn 2.8.3 (flash_attn-2.8.3.tar.gz, saved by envlock)"
    headers = tuple(sorted({n.name for u in scans[0].units for n in u.needs if n.what == "header" and n.provider.kind == "cuda"}))
    lacking = env_with(tmp_path / "a", cudart_stub, [h for h in headers if h != "cuda_fp8.h"])
    f = doctor(lacking, base_env(tmp_path), for_=("flash-attn",), scans=scans)["source.flash_attn_2_cuda"]
    assert f.severity == "warning" and f.details["missing"] == ["cuda_fp8.h"] and f.details["sources"] == 73, f.message
    full = env_with(tmp_path / "c", cudart_stub, headers)
    f = doctor(full, base_env(tmp_path), for_=("flash-attn",), scans=scans)["source.flash_attn_2_cuda"]
    assert f.severity == "ok", f.message
    old = env_with(tmp_path / "b", cudart_stub, headers, nvcc="11.4.152")
    g = doctor(old, base_env(tmp_path), for_=("flash-attn",), scans=scans)["source.flash_attn_2_cuda"]
    assert g.severity == "warning" and "needs nvcc >= 11.7 (setup.py:173); this env's is 11.4.152" in g.message
    assert "envlock resolve --torch installed" in (g.hint or "")


def test_doctor_and_resolve_for_a_profiled_name_from_the_command_line(tmp_path: Path, cudart_stub: Path) -> None:
    headers = {n.name for p in ("mamba-ssm", "apex") for u in load_scan(p).units for n in u.needs
               if n.what == "header" and n.provider.kind == "cuda" and not n.provider.group}  # the default set's
    env = env_with(tmp_path / "e", cudart_stub, sorted(headers))
    r = subprocess.run([sys.executable, "-m", "envlock", "doctor", "-p", str(env), "--json", "--for", "mamba-ssm",
                        "--for", "apex"], capture_output=True, text=True, timeout=300, env=base_env(tmp_path))  # fmt: skip
    assert "Traceback" not in r.stderr, r.stderr
    codes = {f["code"]: f for f in json.loads(r.stdout)["findings"]}
    assert codes["source.selective_scan_cuda"]["severity"] == "ok"
    assert codes["source.amp_C"]["severity"] == "ok"
    assert codes["source.transducer_joint_cuda"]["severity"] in ("ok", "info", "warning")
    assert codes["source.fused_adam_cuda"]["severity"] == "ok"
    groups, lines = groups_for(["apex"])
    assert "profiler-api" in groups and lines[0].startswith("--for apex: --with ")


def test_the_tool_writes_a_table_that_regenerates_byte_for_byte(tmp_path: Path) -> None:
    """tools/project_profiles.py on a project written here: the same sources give the same bytes, another
    version of them another table, and `check` skips a source that is not in the cache, saying why."""
    sdist = tmp_path / "demo-1.0.tar.gz"
    files = {"setup.py": 'from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension("demo._C", ["k.cu"], '
                         'extra_compile_args={"nvcc": ["-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a"]})\n',
             "k.cu": "#include <cufft.h>\n#include <nccl.h>\n"}  # fmt: skip
    with tarfile.open(sdist, "w:gz") as tf:
        for rel, text in files.items():
            info = tarfile.TarInfo(f"demo-1.0/{rel}")
            info.size = len(text.encode())
            tf.addfile(info, io.BytesIO(text.encode()))
    profile = {"name": "demo", "what": "Demo", "marker": "k.cu", "table": "profiles/demo.yaml",
               "source": {"file": sdist.name, "version": "1.0"}}  # fmt: skip
    first = project_profiles.table(profile, sdist)
    assert first == project_profiles.table(profile, sdist)
    assert "cufft.h" in first and "groups: [cufft, nccl]" in first and "arch: [90a]" in first and "nvcc_min: '11.0'" in first
    r = subprocess.run([sys.executable, str(REPO / "tools" / "project_profiles.py"), "check", "flash-attn"],
                       capture_output=True, text=True, timeout=300, env={**base_env(tmp_path), "ENVLOCK_SDIST_CACHE": str(tmp_path / "empty")})  # fmt: skip
    assert r.returncode == 0 and "flash-attn: skipped: no flash_attn-2.8.3.tar.gz in" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", TABLED)
def test_each_profile_regenerates_byte_for_byte_from_its_source(name: str) -> None:
    profile = project_profiles.tabled()[name]
    path, why = project_profiles.source_of(profile, project_profiles.cache_dir())
    if path is None:
        pytest.skip(why)
    saved = (REPO / "envlock" / "data" / profile["table"]).read_text(encoding="utf-8")
    assert project_profiles.table(profile, path) == saved, f"run: python tools/project_profiles.py write {name}"
