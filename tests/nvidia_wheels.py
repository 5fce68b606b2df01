"""A local conda channel made from NVIDIA's own PyPI wheels, repackaged in conda-forge's CUDA 12+/13 layout.

Why CUDA 13.0 and not a 12.x: the `nvidia-cuda-nvcc-cu12` wheels (12.0–12.9) carry only ptxas, libnvvm
and libdevice — no `nvcc` driver, no cicc, no fatbinary (checked: 12.4.131, 12.6.85, 12.8.93, 12.9.86).
The unsuffixed CUDA 13 wheels (`nvidia-cuda-nvcc`, `nvidia-cuda-crt`, `nvidia-nvvm`) are the first on the
index that hold a complete nvcc. The 13.0 GA wheel (13.0.48) lacks bin/crt/link.stub, without which nvcc
cannot link anything ("cc1plus: fatal error: .../bin/crt/link.stub: No such file or directory", found by
`envlock doctor --compile`), so the 13.0 Update 2 set is used (nvcc 13.0.88, what torch 2.11's
cuda-toolkit==13.0.2 pins). That is also this machine's system nvcc version: the tests hide /usr/local
from PATH and CUDA_HOME and check that the nvcc doctor reports lives in the env.

The repackaging itself (names, versions, dependencies, layout: facts §9.2/§9.3) is tests/cuda_repack.py,
shared with the channel builder for a system toolkit directory (tests/toolkit_channel.py, the GPU machine's).
Here each wheel is one toolkit component. Libraries: libs="linked" — cudart and cuRAND (DeepSpeed links
-lcurand) with their real shared libraries; cuSPARSE, cuBLAS, cuSOLVER as their `-dev` headers only:
compiling and linking a .cu that includes cusparse.h needs the headers, not the 0.1–0.5 GB libraries.
Host compilers and python are small shims to this machine's gcc and python (versions read from them),
so the env is complete for `envlock resolve`'s plan without a conda channel.

Wheels are downloaded once with `pip download` (the user's pip configuration decides the index) into
$ENVLOCK_NVIDIA_WHEELS_DIR, default <user cache>/envlock-tests/nvidia-wheels; the channel is cached there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests import cuda_repack
from tests.channelbuilder import PackageSpec

CUDA = "13.0"
#: PyPI name -> version: the CUDA 13.0 Update 2 components.
WHEELS: dict[str, str] = {
    "nvidia-cuda-nvcc": "13.0.88",
    "nvidia-cuda-crt": "13.0.88",
    "nvidia-nvvm": "13.0.88",
    "nvidia-cuda-runtime": "13.0.96",
    "nvidia-cuda-cccl": "13.0.85",
    "nvidia-cusparse": "12.6.3.3",
    "nvidia-cublas": "13.1.0.3",
    "nvidia-cusolver": "12.0.4.66",
    "nvidia-curand": "10.4.0.35",
    "nvidia-cuda-profiler-api": "13.0.85",
}
COMPONENTS = cuda_repack.WHEEL_COMPONENTS
#: The smallest set that lets nvcc compile and link a .cu including cuda_runtime.h and cusparse.h.
MINIMAL = (
    "nvidia-cuda-nvcc",
    "nvidia-cuda-crt",
    "nvidia-nvvm",
    "nvidia-cuda-runtime",
    "nvidia-cuda-cccl",
    "nvidia-cusparse",
)
PLATFORM_TAGS = (
    "manylinux2014_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux2010_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux1_x86_64",
)
BUILDER_VERSION = "3"  # bump when the repackaging changes: the cached channel is rebuilt


def cache_dir() -> Path:
    """Where wheels and the built channel live across test runs."""
    env = os.environ.get("ENVLOCK_NVIDIA_WHEELS_DIR")
    if env:
        return Path(env)
    from tests.suitecache import suite_cache

    return suite_cache() / "nvidia-wheels"


def _wheel_path(dest: Path, name: str, version: str) -> Path | None:
    stem = name.replace("-", "_")
    return next(iter(sorted(dest.glob(f"{stem}-{version}-*.whl"))), None)


def download(names: Iterable[str] = tuple(WHEELS), dest: Path | None = None) -> tuple[dict[str, Path], float]:
    """pip-download the missing wheels (no deps, binary only); return name -> wheel path and seconds spent."""
    dest = dest or cache_dir() / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}=={WHEELS[n]}" for n in names if _wheel_path(dest, n, WHEELS[n]) is None]
    start = time.monotonic()
    if missing:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            f"{sys.version_info.major}.{sys.version_info.minor}",
            "-d",
            str(dest),
        ]
        for tag in PLATFORM_TAGS:
            cmd += ["--platform", tag]
        from tests.pipenv import user_pip_environ  # the real index, not the test session's loopback one

        proc = subprocess.run(cmd + missing, capture_output=True, text=True, timeout=1800, env=user_pip_environ())
        if proc.returncode != 0:
            raise RuntimeError(f"pip download failed: {proc.stderr.strip()[-500:]}")
    paths = {n: _wheel_path(dest, n, WHEELS[n]) for n in names}
    absent = [n for n, p in paths.items() if p is None]
    if absent:
        raise RuntimeError(f"pip download left no wheel for {absent}")
    return {n: p for n, p in paths.items() if p is not None}, time.monotonic() - start


def wheel_members(path: Path, prefix: str = "nvidia/cu13/") -> dict[str, tuple[bytes, bool]]:
    """rel path (under nvidia/cu13/) -> (bytes, executable) of a wheel's payload."""
    out: dict[str, tuple[bytes, bool]] = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(prefix) or info.filename.endswith("__init__.py"):
                continue
            out[info.filename[len(prefix) :]] = (zf.read(info), bool((info.external_attr >> 16) & 0o111))
    return out


#: The nvvm wheel keeps libnvvm in lib/ and nvvm.h in include/; a toolkit has them under nvvm/.
NVVM_PATHS = (("lib/", "nvvm/lib64/"), ("include/", "nvvm/include/"), ("bin/cicc", "nvvm/bin/cicc"), ("nvvm/", "nvvm/"))


def toolkit_from_wheels(wheels: Mapping[str, Path]) -> cuda_repack.Toolkit:
    """The wheels as a cuda_repack.Toolkit: each wheel is one component, its files at toolkit paths."""
    files: dict[str, cuda_repack.Files] = {}
    for name, path in wheels.items():
        members = {k: v for k, v in wheel_members(path).items() if not k.startswith(".metadata/")}
        if name == "nvidia-nvvm":
            members = {next(dst + k[len(src) :] for src, dst in NVVM_PATHS if k.startswith(src)): v
                       for k, v in members.items() if any(k.startswith(src) for src, _ in NVVM_PATHS)}  # fmt: skip
        files[COMPONENTS[name]] = members
    versions = {COMPONENTS[n]: WHEELS[n] for n in wheels}
    return cuda_repack.Toolkit(CUDA, versions, files, source="NVIDIA PyPI wheels " + ", ".join(sorted(wheels)))


def cuda_packages(wheels: Mapping[str, Path]) -> list[PackageSpec]:
    """The conda-forge-shaped CUDA 13.0 packages made from the downloaded wheels (math libraries: headers only)."""
    return cuda_repack.conda_packages(toolkit_from_wheels(wheels), libs="linked")


def host_shims() -> list[PackageSpec]:
    """gcc_linux-64 / gxx_linux-64 / python packages that run this machine's gcc, g++ and python."""
    return cuda_repack.host_shims(sys.executable)


def _key(wheels: Mapping[str, Path]) -> str:
    doc = [
        BUILDER_VERSION,
        sorted(p.name for p in wheels.values()),
        sys.version,
        shutil.which("gcc"),
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        hashlib.sha256(Path(cuda_repack.__file__).read_bytes()).hexdigest(),
    ]
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:16]


def build_channel(
    names: Iterable[str] = tuple(WHEELS), root: Path | None = None
) -> tuple[Path, dict[str, float]]:
    """Download (once), repackage and index; return the channel dir and the seconds each step took."""
    wheels, dl = download(names)
    channel = (root or cache_dir() / "channels") / _key(wheels)
    done = channel / ".complete"
    if done.exists():
        return channel, {"download_s": dl, "build_s": 0.0}
    start = time.monotonic()
    cuda_repack.write_channel([*cuda_packages(wheels), *host_shims()], channel)
    done.write_text(json.dumps({n: p.name for n, p in wheels.items()}, indent=1))
    return channel, {"download_s": dl, "build_s": time.monotonic() - start}


if __name__ == "__main__":  # python -m tests.nvidia_wheels: build the channel and print where it is
    ch, took = build_channel()
    print(ch, json.dumps(took))
    os._exit(0)  # rattler (used by index_channel) can crash at interpreter exit
