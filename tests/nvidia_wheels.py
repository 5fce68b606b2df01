"""A local conda channel made from NVIDIA's own PyPI wheels, repackaged in conda-forge's CUDA 12+/13 layout.

Why CUDA 13.0 and not a 12.x: the `nvidia-cuda-nvcc-cu12` wheels (12.0–12.9) carry only ptxas, libnvvm
and libdevice — no `nvcc` driver, no cicc, no fatbinary (checked: 12.4.131, 12.6.85, 12.8.93, 12.9.86).
The unsuffixed CUDA 13 wheels (`nvidia-cuda-nvcc`, `nvidia-cuda-crt`, `nvidia-nvvm`) are the first on the
index that hold a complete nvcc. The 13.0 GA wheel (13.0.48) lacks bin/crt/link.stub, without which nvcc
cannot link anything ("cc1plus: fatal error: .../bin/crt/link.stub: No such file or directory", found by
`envlock doctor --compile`), so the 13.0 Update 2 set is used (nvcc 13.0.88, what torch 2.11's
cuda-toolkit==13.0.2 pins). That is also this machine's system nvcc version: the tests hide /usr/local
from PATH and CUDA_HOME and check that the nvcc doctor reports lives in the env.

Layout written (what conda-forge's packages do, facts §9.2/§9.3):
  bin/nvcc + nvcc.profile (TOP=$(_HERE_)/.., includes from targets/x86_64-linux/include), nvvm/bin/cicc,
  targets/x86_64-linux/{include,lib}, lib/ symlinks to the shared libraries, etc/conda/activate.d scripts.
Math libraries (cuSPARSE, cuBLAS, cuSOLVER) are repackaged as their `-dev` headers only: compiling and
linking a .cu that includes cusparse.h needs the headers, not the 0.1–0.5 GB runtime libraries.
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

from tests.channelbuilder import PackageSpec, index_channel, write_package

CUDA = "13.0"
SUBDIR = "linux-64"
T = "targets/x86_64-linux"
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
}
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
BUILDER_VERSION = "1"  # bump when the repackaging changes: the cached channel is rebuilt


def cache_dir() -> Path:
    """Where wheels and the built channel live across test runs."""
    env = os.environ.get("ENVLOCK_NVIDIA_WHEELS_DIR")
    if env:
        return Path(env)
    import platformdirs

    return platformdirs.user_cache_path("envlock-tests") / "nvidia-wheels"


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
        proc = subprocess.run(cmd + missing, capture_output=True, text=True, timeout=1800)
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


def _pkg(
    name: str,
    version: str,
    files: Mapping[str, tuple[bytes, bool]],
    *,
    depends: Iterable[str] = (),
    symlinks: Mapping[str, str] | None = None,
    noarch: bool = False,
    **kw: object,
) -> PackageSpec:
    return PackageSpec(
        name,
        version,
        subdir="noarch" if noarch else SUBDIR,
        depends=list(depends),
        files={k: v[0] for k, v in files.items()},
        executables={k for k, v in files.items() if v[1]},
        symlinks=dict(symlinks or {}),
        license="LicenseRef-NVIDIA-End-User-License-Agreement",
        fmt=".conda",
        **kw,
    )


def _remap(
    members: Mapping[str, tuple[bytes, bool]], rules: Iterable[tuple[str, str]]
) -> dict[str, tuple[bytes, bool]]:
    """Move wheel paths into the conda layout by (wheel prefix -> conda prefix) rules; unmatched are dropped."""
    out: dict[str, tuple[bytes, bool]] = {}
    for rel, data in members.items():
        for src, dst in rules:
            if rel.startswith(src):
                out[dst + rel[len(src) :]] = data
                break
    return out


NVCC_ACTIVATE = f"""# shaped like conda-forge cuda-nvcc's activate.sh (facts §9.1): flags into targets/, -ccbin=$CXX
if [ -z "${{CONDA_BUILD:-}}" ]; then
  export CFLAGS="${{CFLAGS:-}} -isystem ${{CONDA_PREFIX}}/{T}/include -isystem ${{CONDA_PREFIX}}/{T}/include/cccl"
  export CPPFLAGS="${{CPPFLAGS:-}} -isystem ${{CONDA_PREFIX}}/{T}/include -isystem ${{CONDA_PREFIX}}/{T}/include/cccl"
  export CXXFLAGS="${{CXXFLAGS:-}} -isystem ${{CONDA_PREFIX}}/{T}/include -isystem ${{CONDA_PREFIX}}/{T}/include/cccl"
  export LDFLAGS="${{LDFLAGS:-}} -L${{CONDA_PREFIX}}/{T}/lib -L${{CONDA_PREFIX}}/{T}/lib/stubs"
fi
if [ -n "${{CXX:-}}" ]; then
  export NVCC_PREPEND_FLAGS_BACKUP="${{NVCC_PREPEND_FLAGS:-}}"
  export NVCC_PREPEND_FLAGS="${{NVCC_PREPEND_FLAGS:-}} -ccbin=${{CXX}}"
fi
"""


def cuda_packages(wheels: Mapping[str, Path]) -> list[PackageSpec]:
    """The conda-forge-shaped CUDA 13.0 packages made from the downloaded wheels."""
    v = WHEELS
    pin = f"cuda-version >={CUDA},<13.1.0a0"
    m = {name: wheel_members(path) for name, path in wheels.items()}
    rt = v["nvidia-cuda-runtime"]
    specs = [
        _pkg(
            "cuda-version", CUDA, {}, noarch=True, constrains=["__cuda >=13", f"cudatoolkit {CUDA}|{CUDA}.*"]
        ),
        _pkg(
            "cuda-cudart",
            rt,
            {f"{T}/lib/libcudart.so.{rt}": m["nvidia-cuda-runtime"]["lib/libcudart.so.13"]},
            depends=[pin],
            symlinks={
                f"{T}/lib/libcudart.so.13": f"libcudart.so.{rt}",
                "lib/libcudart.so.13": f"../{T}/lib/libcudart.so.13",
            },
        ),
        _pkg(
            "cuda-cudart-dev",
            rt,
            _remap(
                m["nvidia-cuda-runtime"], [("include/", f"{T}/include/"), ("lib/libcuda", f"{T}/lib/libcuda")]
            )
            | {},
            depends=[pin, f"cuda-cudart {rt}", f"cuda-cccl {v['nvidia-cuda-cccl']}"],
            symlinks={
                f"{T}/lib/libcudart.so": "libcudart.so.13",
                "lib/libcudart.so": f"../{T}/lib/libcudart.so",
            },
        ),
        _pkg(
            "cuda-cccl",
            v["nvidia-cuda-cccl"],
            _remap(m["nvidia-cuda-cccl"], [("include/", f"{T}/include/")]),
            depends=[pin],
        ),
    ]
    # the .so.13 file of the runtime wheel belongs to cuda-cudart, not -dev
    specs[2].files.pop(f"{T}/lib/libcudart.so.13", None)
    specs[2].executables.discard(f"{T}/lib/libcudart.so.13")
    nvcc_files = _remap(m["nvidia-cuda-nvcc"], [("bin/", "bin/"), ("include/", f"{T}/include/")])
    nvcc_files |= _remap(m["nvidia-cuda-crt"], [("include/", f"{T}/include/")])
    nvcc_files |= _remap(
        m["nvidia-nvvm"],
        [
            ("bin/cicc", "nvvm/bin/cicc"),
            ("lib/", "nvvm/lib64/"),
            ("nvvm/", "nvvm/"),
            ("include/", "nvvm/include/"),
        ],
    )
    nvcc_files["etc/conda/activate.d/~cuda-nvcc_activate.sh"] = (NVCC_ACTIVATE.encode(), False)
    specs.append(
        _pkg(
            "cuda-nvcc",
            v["nvidia-cuda-nvcc"],
            nvcc_files,
            depends=[pin, f"cuda-cudart-dev {CUDA}.*", "gcc_linux-64", "gxx_linux-64"],
        )
    )
    for wheel, name in (
        ("nvidia-cusparse", "libcusparse-dev"),
        ("nvidia-cublas", "libcublas-dev"),
        ("nvidia-cusolver", "libcusolver-dev"),
    ):
        if wheel in m:
            specs.append(
                _pkg(name, v[wheel], _remap(m[wheel], [("include/", f"{T}/include/")]), depends=[pin])
            )
    return specs


def _version_of(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def host_shims() -> list[PackageSpec]:
    """gcc_linux-64 / gxx_linux-64 / python packages that run this machine's gcc, g++ and python."""
    gcc, gxx = shutil.which("gcc"), shutil.which("g++")
    if not (gcc and gxx):
        raise RuntimeError("no host gcc/g++ to wrap")
    gv = _version_of([gcc, "-dumpfullversion", "-dumpversion"])
    tri = "x86_64-conda-linux-gnu"

    def wrapper(target: str) -> tuple[bytes, bool]:
        return f'#!/bin/sh\nexec {target} "$@"\n'.encode(), True

    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    pyv = ".".join(str(x) for x in sys.version_info[:3])
    return [
        _pkg(
            "gcc_linux-64",
            gv,
            {
                f"bin/{tri}-cc": wrapper(gcc),
                f"bin/{tri}-gcc": wrapper(gcc),
                "etc/conda/activate.d/activate-gcc_linux-64.sh": (
                    f'export CC="$CONDA_PREFIX/bin/{tri}-cc"\n'.encode(),
                    False,
                ),
            },
        ),
        _pkg(
            "gxx_linux-64",
            gv,
            {
                f"bin/{tri}-c++": wrapper(gxx),
                f"bin/{tri}-g++": wrapper(gxx),
                "etc/conda/activate.d/activate-gxx_linux-64.sh": (
                    f'export CXX="$CONDA_PREFIX/bin/{tri}-c++"\n'.encode(),
                    False,
                ),
            },
            depends=[f"gcc_linux-64 {gv}"],
        ),
        _pkg(
            "python",
            pyv,
            {f"bin/python{py}": wrapper(sys.executable)},
            symlinks={"bin/python3": f"python{py}", "bin/python": f"python{py}"},
        ),
    ]


def _key(wheels: Mapping[str, Path]) -> str:
    doc = [
        BUILDER_VERSION,
        sorted(p.name for p in wheels.values()),
        sys.version,
        shutil.which("gcc"),
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
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
    if channel.exists():
        shutil.rmtree(channel)
    for spec in [*cuda_packages(wheels), *host_shims()]:
        write_package(spec, channel / spec.subdir)
    index_channel(channel, write_zst=False, write_shards=False)
    done.write_text(json.dumps({n: p.name for n, p in wheels.items()}, indent=1))
    return channel, {"download_s": dl, "build_s": time.monotonic() - start}


if __name__ == "__main__":  # python -m tests.nvidia_wheels: build the channel and print where it is
    ch, took = build_channel()
    print(ch, json.dumps(took))
    os._exit(0)  # rattler (used by index_channel) can crash at interpreter exit
