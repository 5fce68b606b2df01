"""The channel builder for a system CUDA toolkit directory (tests/toolkit_channel.py + tests/cuda_repack.py).

Default tier: a runfile-shaped toolkit directory written here (real files and symlinks, a shell nvcc that
answers --version) → which component owns each file, versions, conda-forge names and layout.
Slow tier: a toolkit directory unpacked from NVIDIA's CUDA 13.0 wheels (real binaries; tests/nvidia_wheels.py
downloads them) → channel → `envlock resolve --with deepspeed` → `envlock create` → `envlock run -- envlock
doctor --compile --for deepspeed`, with no system CUDA on PATH; and the component patterns checked against
NVIDIA's own split (every file of each wheel is claimed by that wheel's component).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import cuda_repack, toolkit_channel
from tests.cuda_repack import T, component_of

NVCC = """#!/bin/sh
case "$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release 13.0, V13.0.88";;
  *) exit 1;;
esac
"""


def runfile_toolkit(root: Path, *, version_json: bool = True) -> Path:
    """What the runfile installs under /usr/local/cuda-13.0, in miniature (names as the real one has them)."""
    inc, lib = root / T / "include", root / T / "lib"
    files = {
        "bin/nvcc": NVCC, "bin/nvcc.profile": "TOP = $(_HERE_)/..\n", "bin/ptxas": "x", "bin/crt/link.stub": "x",
        "bin/cuda-gdb": "not nvcc's", "nvvm/bin/cicc": "x", "nvvm/libdevice/libdevice.10.bc": "x",
        "nvvm/lib64/libnvvm.so.4.0.0": "x",
        f"{T}/include/cuda_runtime.h": "x", f"{T}/include/cuda.h": "x", f"{T}/include/cusparse.h": "x",
        f"{T}/include/cublas_v2.h": "x", f"{T}/include/cublasLt.h": "x", f"{T}/include/cusolverDn.h": "x",
        f"{T}/include/curand.h": "x", f"{T}/include/curand_kernel.h": "x", f"{T}/include/cuda_profiler_api.h": "x",
        f"{T}/include/crt/host_config.h": "x", f"{T}/include/cccl/cuda/std/cassert": "x",
        f"{T}/include/nvtx3/nvToolsExt.h": "x", f"{T}/include/CL/cl.h": "OpenCL: nobody's",
        f"{T}/lib/libcudart.so.13.0.96": "ELF", f"{T}/lib/libcudart_static.a": "a", f"{T}/lib/libcurand.so.10.4.0.35": "ELF",
        f"{T}/lib/libcusparse.so.12.6.3.3": "ELF", f"{T}/lib/libcusparse_static.a": "big", f"{T}/lib/stubs/libcuda.so": "stub",
        f"{T}/lib/libOpenCL.so.1.0.0": "ELF", "extras/CUPTI/include/cupti.h": "x", "extras/CUPTI/lib64/libcupti.so.13": "ELF",
    }  # fmt: skip
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "bin/nvcc").chmod(0o755)
    for name, full in (("libcudart", "13.0.96"), ("libcurand", "10.4.0.35"), ("libcusparse", "12.6.3.3")):
        soname = f"{name}.so.{full.split('.')[0]}"
        (lib / soname).symlink_to(f"{name}.so.{full}")
        (lib / f"{name}.so").symlink_to(soname)
    (root / "nvvm/lib64/libnvvm.so").symlink_to("libnvvm.so.4.0.0")
    (root / "include").symlink_to(f"{T}/include")
    (root / "lib64").symlink_to(f"{T}/lib")
    assert inc.is_dir()
    if version_json:
        doc = {"cuda": {"name": "CUDA SDK", "version": "13.0.2"}, "cuda_nvcc": {"version": "13.0.88"},
               "cuda_cudart": {"version": "13.0.96"}, "cuda_cccl": {"version": "13.0.85"},
               "libcusparse": {"version": "12.6.3.3"}, "libcurand": {"version": "10.4.0.35"},
               "libcublas": {"version": "13.1.0.3"}, "libcusolver": {"version": "12.0.4.66"},
               "cuda_profiler_api": {"version": "13.0.85"}, "cuda_cupti": {"version": "13.0.85"}}  # fmt: skip
        (root / "version.json").write_text(json.dumps(doc))
    return root


@pytest.mark.parametrize(
    ("rel", "comp"),
    [("bin/nvcc", "nvcc"), ("bin/cuda-gdb", None), ("include/crt/host_config.h", "crt"), ("nvvm/bin/cicc", "nvvm"),
     ("include/cccl/cuda/std/cassert", "cccl"), ("include/cusparse.h", "cusparse"), ("include/cublasLt.h", "cublas"),
     ("include/curand_kernel.h", "curand"), ("include/cuda_profiler_api.h", "profiler-api"),
     ("include/nvtx3/nvToolsExt.h", "nvtx"), ("lib/libcurand.so.10", "curand"), ("include/cuda_runtime.h", "cudart"),
     ("include/CL/cl.h", "cudart"), ("lib/libOpenCL.so.1", None), ("lib/stubs/libcuda.so", "cudart")],
)  # fmt: skip
def test_which_component_owns_a_toolkit_file(rel: str, comp: str | None) -> None:
    assert component_of(rel) == comp


def test_a_runfile_toolkit_becomes_conda_forge_packages(tmp_path: Path) -> None:
    tk = toolkit_channel.read_toolkit(runfile_toolkit(tmp_path / "cuda-13.0"), libs="linked")
    assert tk.cuda == "13.0" and "version.json" in tk.source
    assert tk.versions["curand"] == "10.4.0.35" and tk.versions["crt"] == "13.0.88"  # crt: nvcc's when unlisted
    assert "bin/cuda-gdb" in tk.unclaimed and "lib/libOpenCL.so.1.0.0" in tk.unclaimed
    assert "lib/libcusparse_static.a" not in str(tk.files)  # static libraries: conda-forge's -static packages
    specs = {s.name: s for s in cuda_repack.conda_packages(tk, libs="linked")}
    assert {"cuda-version", "cuda-nvcc", "cuda-cudart", "cuda-cudart-dev", "cuda-cccl", "libcusparse", "libcusparse-dev",
            "libcublas", "libcublas-dev", "libcusolver", "libcusolver-dev", "libcurand", "libcurand-dev",
            "cuda-profiler-api", "cuda-cupti", "cuda-cupti-dev", "cuda-nvtx-dev"} == set(specs)  # fmt: skip
    pin = "cuda-version >=13.0,<13.1.0a0"
    assert specs["libcurand-dev"].depends == sorted([pin, "libcurand 10.4.0.35"])
    assert specs["cuda-nvcc"].depends == sorted([pin, "cuda-cudart-dev 13.0.*", "gcc_linux-64", "gxx_linux-64"])
    curand = specs["libcurand"]
    assert set(curand.files) == {f"{T}/lib/libcurand.so.10.4.0.35"}  # linked by DeepSpeed: the real library
    assert curand.symlinks[f"{T}/lib/libcurand.so.10"] == "libcurand.so.10.4.0.35"
    assert curand.symlinks[f"lib/libcurand.so.10"] == f"../{T}/lib/libcurand.so.10"
    assert specs["libcurand-dev"].symlinks[f"{T}/lib/libcurand.so"] == "libcurand.so.10"
    assert {f"{T}/include/curand.h", f"{T}/include/curand_kernel.h"} == set(specs["libcurand-dev"].files)
    assert specs["libcusparse"].files == {} and f"{T}/include/cusparse.h" in specs["libcusparse-dev"].files
    nvcc = specs["cuda-nvcc"]
    assert {"bin/nvcc", "bin/nvcc.profile", "bin/crt/link.stub", "nvvm/bin/cicc", f"{T}/include/crt/host_config.h",
            "etc/conda/activate.d/~cuda-nvcc_activate.sh"} <= set(nvcc.files) and "bin/nvcc" in nvcc.executables  # fmt: skip
    assert nvcc.symlinks["nvvm/lib64/libnvvm.so"] == "libnvvm.so.4.0.0"
    dev = specs["cuda-cudart-dev"]
    assert {f"{T}/include/cuda_runtime.h", f"{T}/lib/libcudart_static.a", f"{T}/lib/stubs/libcuda.so"} <= set(dev.files)
    assert f"{T}/include/cupti.h" in specs["cuda-cupti-dev"].files  # from extras/CUPTI
    assert f"{T}/include/cccl/cuda/std/cassert" in specs["cuda-cccl"].files


def test_libs_all_packages_every_shared_library(tmp_path: Path) -> None:
    tk = toolkit_channel.read_toolkit(runfile_toolkit(tmp_path / "cuda"), libs="all")
    specs = {s.name: s for s in cuda_repack.conda_packages(tk, libs="all")}
    assert set(specs["libcusparse"].files) == {f"{T}/lib/libcusparse.so.12.6.3.3"}
    assert specs["libcusparse-dev"].symlinks[f"lib/libcusparse.so"] == f"../{T}/lib/libcusparse.so"


def test_without_version_json_a_13_0_88_toolkit_takes_update_2s_versions(tmp_path: Path) -> None:
    tk = toolkit_channel.read_toolkit(runfile_toolkit(tmp_path / "cuda", version_json=False))
    assert tk.versions["curand"] == "10.4.0.35" and "Update 2" in tk.source


def test_a_folder_without_nvcc_or_cudart_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no bin/nvcc"):
        toolkit_channel.read_toolkit(tmp_path)
    root = runfile_toolkit(tmp_path / "cuda")
    shutil.rmtree(root / T / "include")
    (root / T / "include").mkdir()
    with pytest.raises(RuntimeError, match="lacks"):
        cuda_repack.conda_packages(toolkit_channel.read_toolkit(root))


# --------------------------------------------------------------------------------------------- slow


@pytest.fixture(scope="module")
def wheels() -> dict[str, Path]:
    from tests import nvidia_wheels

    try:
        return nvidia_wheels.download()[0]
    except RuntimeError as exc:
        pytest.skip(f"NVIDIA wheels unavailable: {exc}")


@pytest.mark.slow
def test_the_patterns_give_each_wheels_files_to_that_wheels_component(wheels: dict[str, Path]) -> None:
    """NVIDIA's own split (one wheel per component) against the patterns used for a toolkit directory."""
    from tests.nvidia_wheels import NVVM_PATHS

    wrong = []
    for name, path in wheels.items():
        comp = cuda_repack.WHEEL_COMPONENTS[name]
        with zipfile.ZipFile(path) as zf:
            for n in zf.namelist():
                rel = n.removeprefix("nvidia/cu13/")
                if rel == n or n.endswith("/") or rel.startswith(".metadata/") or rel.endswith("__init__.py"):
                    continue
                if name == "nvidia-nvvm":
                    rel = next((d + rel[len(s) :] for s, d in NVVM_PATHS if rel.startswith(s)), rel)
                got = component_of(rel)
                if got != comp and not (comp == "nvvm" and rel.startswith("nvvm/")):
                    wrong.append((name, rel, got))
    assert wrong == []


def _env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "ENVLOCK_CACHE_DIR")}
    return {**keep, "PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _envlock(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], env=_env(), cwd=cwd, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_toolkit_dir_made_from_the_wheels_gives_an_env_that_compiles(wheels, tmp_path: Path) -> None:
    root = toolkit_channel.toolkit_dir_from_wheels(wheels, tmp_path / "cuda-13.0")
    r = subprocess.run(
        [sys.executable, "-m", "tests.toolkit_channel", "--toolkit", str(root), "--out", str(tmp_path / "channel")],
        env=_env(), capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["packages"]["libcurand-dev"] == "10.4.0.35" and report["packages"]["cuda-profiler-api"] == "13.0.85"
    project, prefix = tmp_path / "project", tmp_path / "env"
    project.mkdir()
    # As the seed job on the GPU does: toolchain-only beside the torch the machine has (no PyPI part to lock).
    r = _envlock("resolve", "--torch", "2.11.0", "--with", "deepspeed", "--channel", (tmp_path / "channel").as_uri(),
                 "--toolchain-only", "--project-dir", str(project), "--lock", "sys")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    r = _envlock("create", "--lock", str(project / "locks/sys/conda-lock.yml"), "-p", str(prefix), "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    r = _envlock("run", "-p", str(prefix), "--", sys.executable, "-m", "envlock", "doctor", "--compile", "--json", "--for", "deepspeed")
    doc = json.loads(r.stdout)
    by = {f["code"]: f for f in doc["findings"]}
    assert r.returncode == 0 and doc["summary"]["error"] == 0, [f["message"] for f in doc["findings"] if f["severity"] == "error"]
    assert by["nvcc.found"]["details"]["path"] == str(prefix / "bin" / "nvcc")
    assert by["compile.nvcc"]["severity"] == "ok"
    assert by["header_group.curand"]["severity"] == "ok" and by["header_group.profiler-api"]["severity"] == "ok"
    ds = {c.split(".", 2)[2]: f["severity"] for c, f in by.items() if c.startswith("deepspeed.op.")}
    # cufile.h (gds) is not in `--with deepspeed`; libaio.h (async_io, gds) and CUTLASS (evoformer_attn) are groups
    # beside the toolkit since issue 35.1 (--with libaio, --with cutlass), not in it either
    assert sorted(op for op, sev in ds.items() if sev == "warning") == ["async_io", "evoformer_attn", "gds"]
    assert (prefix / T / "lib" / "libcurand.so").resolve().stat().st_size > 10_000_000  # the real cuRAND


@pytest.mark.gpu
@pytest.mark.skipif(
    not Path("/usr/local/cuda/bin/nvcc").exists() or not Path("/usr/local/cuda/include/cusparse.h").exists(),
    reason="no full system CUDA toolkit here (the GPU machine has one)",
)
def test_the_gpu_machines_own_toolkit_gives_the_dev_set_and_deepspeeds_extras(tmp_path: Path) -> None:
    """On the lent GPU machine (a full system CUDA 13.0): the packages the plan and `--with deepspeed` lock."""
    root = Path(os.path.realpath("/usr/local/cuda"))
    tk = toolkit_channel.read_toolkit(root, libs="linked")
    specs = {s.name: s for s in cuda_repack.conda_packages(tk, libs="linked")}
    for name in ("cuda-nvcc", "cuda-cudart-dev", "libcusparse-dev", "libcublas-dev", "libcusolver-dev", "libcurand-dev", "cuda-profiler-api"):
        assert name in specs, (name, sorted(specs), tk.source)
    assert any(p.endswith("/libcurand.so.10") for p in specs["libcurand"].symlinks) or any(
        "libcurand.so.10" in p for p in specs["libcurand"].files
    )
    print(json.dumps({"source": tk.source, "versions": tk.versions, "unclaimed": tk.unclaimed[:50]}))
