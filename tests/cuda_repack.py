"""Repackage a CUDA 12+/13 toolkit as conda packages under conda-forge's names, versions, deps and layout.

Shared by the two channel builders next to it: tests/nvidia_wheels.py (NVIDIA's PyPI wheels, used off the
GPU) and tests/toolkit_channel.py (a system toolkit directory such as /usr/local/cuda-13.0, used on the GPU
machine, where no conda channel is reachable). Both read their source into a `Toolkit`: per component
(nvcc, cudart, cusparse, curand, ...) its version and its files at the paths a toolkit directory has them
(bin/, include/, lib/ = lib64, nvvm/). This module turns that into packages (facts §9.2/§9.3):

  cuda-version X.Y (noarch; constrains __cuda >=X)
  cuda-nvcc        bin/nvcc + nvcc.profile + ptxas/fatbinary/nvlink/cudafe++, bin/crt, nvvm/, the crt
                   headers; etc/conda/activate.d/~cuda-nvcc_activate.sh (flags into targets/, -ccbin=$CXX);
                   depends cuda-cudart-dev X.Y.*, gcc_linux-64, gxx_linux-64 (conda-forge's cuda-nvcc →
                   cuda-nvcc_linux-64 → cuda-nvcc-impl/-tools/cuda-crt/cuda-nvvm chain folded into one)
  cuda-cudart / cuda-cudart-dev, cuda-cccl
  lib<X> / lib<X>-dev (cusparse, cublas, cusolver, curand, cufft, cufile, nvjitlink, npp, nvjpeg),
  cuda-nvrtc(-dev), cuda-cupti(-dev), and the header-only cuda-profiler-api, cuda-nvtx-dev, cuda-nvml-dev
  gcc_linux-64 / gxx_linux-64 / python: shims that run this machine's gcc, g++ and python
Headers go to targets/x86_64-linux/include, libraries to targets/x86_64-linux/lib with lib/ links; every
-dev package pins `cuda-version >=X.Y,<X.(Y+1).0a0` and depends on its runtime package.

`libs` says which shared libraries are packaged: "all" (every component's), "linked" (only those an
extension build links by name: cudart, curand (DeepSpeed's -lcurand), cufile (-lcufile), nvrtc, the driver
stub) or "none". Runtime packages of the others are then empty and their -dev packages carry headers only:
pip torch loads its own bundled CUDA libraries, and nothing links them by name (what tests/nvidia_wheels.py
always did). Importing this module needs neither rattler nor zstandard; building does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from tests.channelbuilder import PackageSpec, index_channel, write_package

SUBDIR = "linux-64"
T = "targets/x86_64-linux"
LICENSE = "LicenseRef-NVIDIA-End-User-License-Agreement"
Files = dict[str, tuple[bytes, bool]]  # toolkit-relative path -> (content, executable)

#: component -> (runtime package or None, -dev package, lib globs) for the library components.
LIBRARIES: dict[str, tuple[str | None, str, tuple[str, ...]]] = {
    "cusparse": ("libcusparse", "libcusparse-dev", ("libcusparse.so*",)),
    "cublas": ("libcublas", "libcublas-dev", ("libcublas.so*", "libcublasLt.so*", "libnvblas.so*")),
    "cusolver": ("libcusolver", "libcusolver-dev", ("libcusolver.so*", "libcusolverMg.so*")),
    "curand": ("libcurand", "libcurand-dev", ("libcurand.so*",)),
    "cufft": ("libcufft", "libcufft-dev", ("libcufft.so*", "libcufftw.so*")),
    "nvrtc": ("cuda-nvrtc", "cuda-nvrtc-dev", ("libnvrtc.so*", "libnvrtc-builtins.so*")),
    "cupti": ("cuda-cupti", "cuda-cupti-dev", ("libcupti.so*", "libnvperf_*.so*", "libpcsamplingutil.so*")),
    "cufile": ("libcufile", "libcufile-dev", ("libcufile.so*", "libcufile_rdma.so*")),
    "nvjitlink": ("libnvjitlink", "libnvjitlink-dev", ("libnvJitLink.so*",)),
    "npp": ("libnpp", "libnpp-dev", ("libnpp*.so*",)),
    "nvjpeg": ("libnvjpeg", "libnvjpeg-dev", ("libnvjpeg.so*",)),
    "profiler-api": (None, "cuda-profiler-api", ()),
    "nvtx": (None, "cuda-nvtx-dev", ()),
    "nvml": (None, "cuda-nvml-dev", ("stubs/libnvidia-ml.so",)),
}
#: Libraries an extension build links by name (-lcudart, -lcurand, -lcufile, -lcuda, nvrtc for jiterator).
LINKED = frozenset({"cudart", "curand", "cufile", "nvrtc"})
#: Which toolkit files belong to which component, for a toolkit directory (first match wins; the wheels
#: say it themselves). cudart takes every include/ file no other component claims.
PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nvcc", ("bin/nvcc", "bin/nvcc.profile", "bin/ptxas", "bin/fatbinary", "bin/nvlink", "bin/cudafe++",
              "bin/bin2c", "bin/__nvcc_device_query", "bin/crt/*", "include/fatbinary_section.h")),
    ("crt", ("include/crt/*",)),
    ("nvvm", ("nvvm/*", "lib/libnvvm.so*")),  # lib/: a toolkit assembled from the nvvm wheel
    ("cccl", ("include/cccl/*", "include/cub/*", "include/thrust/*", "include/cuda/*", "include/nv/*",
              "lib/cmake/cccl/*", "lib/cmake/cub/*", "lib/cmake/thrust/*", "lib/cmake/libcudacxx/*")),
    ("cusparse", ("include/cusparse*.h", "lib/libcusparse.so*")),
    ("cublas", ("include/cublas*.h", "include/nvblas.h", "lib/libcublas.so*", "lib/libcublasLt.so*", "lib/libnvblas.so*")),
    ("cusolver", ("include/cusolver*.h", "lib/libcusolver*.so*")),
    ("curand", ("include/curand*.h", "lib/libcurand.so*")),
    ("cufft", ("include/cufft*.h", "lib/libcufft*.so*")),
    ("nvrtc", ("include/nvrtc.h", "lib/libnvrtc*.so*")),
    ("profiler-api", ("include/cuda_profiler_api.h", "include/cudaProfiler.h")),
    ("nvtx", ("include/nvtx3/*", "include/nvToolsExt*.h", "lib/libnvtx3interop.so*")),
    ("cupti", ("include/cupti*.h", "include/generated_*.h", "include/nvperf_*.h", "include/Openacc/*",
               "include/Openmp/*", "lib/libcupti*", "lib/libnvperf_*", "lib/libpcsamplingutil*", "lib/libcheckpoint*")),
    ("nvml", ("include/nvml.h", "lib/stubs/libnvidia-ml.so")),
    ("cufile", ("include/cufile*.h", "lib/libcufile*.so*")),
    ("nvjitlink", ("include/nvJitLink.h", "lib/libnvJitLink.so*")),
    ("npp", ("include/npp*.h", "lib/libnpp*.so*")),
    ("nvjpeg", ("include/nvjpeg*.h", "lib/libnvjpeg*.so*")),
    ("cudart", ("lib/libcudart*", "lib/libcudadevrt.a", "lib/libculibos.a", "lib/stubs/libcuda.so", "include/*")),
)  # fmt: skip
#: NVIDIA's PyPI wheel (CUDA 13) -> the component it is.
WHEEL_COMPONENTS = {
    "nvidia-cuda-nvcc": "nvcc", "nvidia-cuda-crt": "crt", "nvidia-nvvm": "nvvm", "nvidia-cuda-runtime": "cudart",
    "nvidia-cuda-cccl": "cccl", "nvidia-cusparse": "cusparse", "nvidia-cublas": "cublas",
    "nvidia-cusolver": "cusolver", "nvidia-curand": "curand", "nvidia-cuda-profiler-api": "profiler-api",
    "nvidia-cufft": "cufft", "nvidia-cuda-nvrtc": "nvrtc", "nvidia-nvtx": "nvtx", "nvidia-cuda-cupti": "cupti",
    "nvidia-nvml-dev": "nvml", "nvidia-cufile": "cufile", "nvidia-nvjitlink": "nvjitlink", "nvidia-npp": "npp",
    "nvidia-nvjpeg": "nvjpeg",
}  # fmt: skip
#: conda-forge package names of the components that are not LIBRARIES.
CORE = {"nvcc": "cuda-nvcc", "crt": "cuda-nvcc", "nvvm": "cuda-nvcc", "cudart": "cuda-cudart-dev", "cccl": "cuda-cccl"}


@dataclass
class Toolkit:
    """A CUDA toolkit read from somewhere: component -> version and files (toolkit-relative paths)."""

    cuda: str  # "13.0"
    versions: dict[str, str]
    files: dict[str, Files] = field(default_factory=dict)
    symlinks: dict[str, dict[str, str]] = field(default_factory=dict)  # component -> {path: target}
    unclaimed: list[str] = field(default_factory=list)  # files no component took (reported, not packaged)
    source: str = ""


def component_of(rel: str) -> str | None:
    """The component a toolkit-relative path belongs to (PATTERNS), None when none claims it."""
    for comp, globs in PATTERNS:
        if any(fnmatch(rel, g) for g in globs):
            return comp
    return None


# ------------------------------------------------------------------------------------------- packages


def _spec(name: str, version: str, files: Files, *, depends: Iterable[str] = (), symlinks: Mapping[str, str] | None = None,
          noarch: bool = False, **kw: object) -> PackageSpec:  # fmt: skip
    return PackageSpec(
        name, version, subdir="noarch" if noarch else SUBDIR, depends=list(depends),
        files={k: v[0] for k, v in files.items()}, executables={k for k, v in files.items() if v[1]},
        symlinks=dict(symlinks or {}), license=LICENSE, fmt=".conda", **kw,
    )  # fmt: skip


def _headers(files: Files) -> Files:
    return {f"{T}/{rel}": v for rel, v in files.items() if rel.startswith("include/")}


def _libs(files: Files, links: Mapping[str, str], globs: Iterable[str]) -> tuple[Files, dict[str, str], dict[str, str]]:
    """(runtime files, runtime links, dev links) of lib/ entries matching `globs`, in conda-forge's layout.

    Versioned files and soname links go to the runtime package (targets/<t>/lib + lib/ links); the bare
    libX.so link is the -dev package's. A bare libX.so that is a real file (some wheels) becomes a link.
    """
    rt_files: Files = {}
    rt_links: dict[str, str] = {}
    dev_links: dict[str, str] = {}
    names = {rel[4:]: v for rel, v in files.items() if rel.startswith("lib/")}
    targets = {rel[4:]: t for rel, t in links.items() if rel.startswith("lib/")}
    for name in list({*names, *targets}):  # wheels ship only libX.so.N: the -dev link is made here
        m = re.match(r"^(.*\.so)\.\d+$", name)
        if m and m.group(1) not in names and m.group(1) not in targets:
            targets[m.group(1)] = name.split("/")[-1]
    for name in sorted({*names, *targets}):
        if not any(fnmatch(name, g) for g in globs):
            continue
        base = name.split("/")[-1]
        if base.endswith(".so"):  # the -dev link: to the soname (libX.so.N) if there is one
            sonames = sorted(n for n in {*names, *targets} if n.startswith(name + ".") and n.count(".") == name.count(".") + 1)
            target = sonames[0].split("/")[-1] if sonames else targets.get(name)
            if target is None:  # only a bare real file (a stub): ship it as is
                rt_files[f"{T}/lib/{name}"] = names[name]
                continue
            dev_links[f"{T}/lib/{name}"] = target
            dev_links[f"lib/{name}"] = f"../{T}/lib/{name}"
            continue
        if name in names:
            rt_files[f"{T}/lib/{name}"] = names[name]
        else:
            rt_links[f"{T}/lib/{name}"] = targets[name]
        depth = "../" * (name.count("/") + 1)
        rt_links[f"lib/{name}"] = f"{depth}{T}/lib/{name}"
    return rt_files, rt_links, dev_links


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


def conda_packages(tk: Toolkit, *, libs: str = "linked") -> list[PackageSpec]:
    """The conda-forge-shaped packages of a toolkit (see the module docstring)."""
    if libs not in ("all", "linked", "none"):
        raise ValueError(f"libs={libs!r}: use all, linked or none")
    major, minor = tk.cuda.split(".")
    pin = f"cuda-version >={tk.cuda},<{major}.{int(minor) + 1}.0a0"
    v, f, ln = tk.versions, tk.files, tk.symlinks
    missing = [c for c in ("nvcc", "cudart", "cccl") if not f.get(c)]
    if missing:
        raise RuntimeError(f"the toolkit ({tk.source}) lacks {missing}: no nvcc/cudart/cccl, nothing to build with")

    def keep(comp: str) -> bool:
        return libs == "all" or (libs == "linked" and comp in LINKED)

    rt = v["cudart"]
    cudart_files = f["cudart"]
    rt_files, rt_links, dev_links = _libs(cudart_files, ln.get("cudart", {}), ("libcudart.so*",))
    static = {f"{T}/{rel}": x for rel, x in cudart_files.items() if rel.startswith("lib/") and rel.endswith(".a")}
    stubs = {f"{T}/{rel}": x for rel, x in cudart_files.items() if rel.startswith("lib/stubs/")}
    specs = [
        _spec("cuda-version", tk.cuda, {}, noarch=True, constrains=[f"__cuda >={major}", f"cudatoolkit {tk.cuda}|{tk.cuda}.*"]),
        _spec("cuda-cudart", rt, rt_files, depends=[pin], symlinks=rt_links),
        _spec("cuda-cudart-dev", rt, {**_headers(cudart_files), **static, **stubs}, symlinks=dev_links,
              depends=[pin, f"cuda-cudart {rt}", f"cuda-cccl {v['cccl']}"]),
        _spec("cuda-cccl", v["cccl"], _headers(f["cccl"]), depends=[pin]),
    ]  # fmt: skip
    nvcc: Files = {rel: x for rel, x in f["nvcc"].items() if rel.startswith("bin/")}
    nvcc |= _headers(f["nvcc"]) | _headers(f.get("crt", {}))
    nvcc |= {rel: x for rel, x in f.get("nvvm", {}).items() if rel.startswith("nvvm/")}
    nvcc |= {f"nvvm/lib64/{rel[4:]}": x for rel, x in f.get("nvvm", {}).items() if rel.startswith("lib/")}
    nvcc["etc/conda/activate.d/~cuda-nvcc_activate.sh"] = (NVCC_ACTIVATE.encode(), False)
    nvvm_links = {rel: t for rel, t in ln.get("nvvm", {}).items() if rel.startswith("nvvm/")}
    specs.append(
        _spec("cuda-nvcc", v["nvcc"], nvcc, symlinks=nvvm_links,
              depends=[pin, f"cuda-cudart-dev {tk.cuda}.*", "gcc_linux-64", "gxx_linux-64"])
    )  # fmt: skip
    for comp, (runtime, dev, globs) in LIBRARIES.items():
        if not f.get(comp):
            continue
        ver = v[comp]
        rfiles, rlinks, dlinks = _libs(f[comp], ln.get(comp, {}), globs) if keep(comp) else ({}, {}, {})
        deps = [pin]
        if runtime is not None:
            specs.append(_spec(runtime, ver, rfiles, depends=[pin], symlinks=rlinks))
            deps.append(f"{runtime} {ver}")
            rfiles, rlinks = {}, {}
        specs.append(_spec(dev, ver, {**_headers(f[comp]), **rfiles}, depends=deps, symlinks={**rlinks, **dlinks}))
    return specs


def _version_of(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def host_shims(python: str = sys.executable) -> list[PackageSpec]:
    """gcc_linux-64 / gxx_linux-64 / python packages that run this machine's gcc, g++ and `python`."""
    gcc, gxx = shutil.which("gcc"), shutil.which("g++")
    if not (gcc and gxx):
        raise RuntimeError("no host gcc/g++ to wrap")
    gv = _version_of([gcc, "-dumpfullversion", "-dumpversion"])
    tri = "x86_64-conda-linux-gnu"

    def wrapper(target: str) -> tuple[bytes, bool]:
        return f'#!/bin/sh\nexec {target} "$@"\n'.encode(), True

    pyv = _version_of([python, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"])
    py = ".".join(pyv.split(".")[:2])
    return [
        _spec("gcc_linux-64", gv, {
            f"bin/{tri}-cc": wrapper(gcc), f"bin/{tri}-gcc": wrapper(gcc),
            "etc/conda/activate.d/activate-gcc_linux-64.sh": (f'export CC="$CONDA_PREFIX/bin/{tri}-cc"\n'.encode(), False),
        }),
        _spec("gxx_linux-64", gv, {
            f"bin/{tri}-c++": wrapper(gxx), f"bin/{tri}-g++": wrapper(gxx),
            "etc/conda/activate.d/activate-gxx_linux-64.sh": (f'export CXX="$CONDA_PREFIX/bin/{tri}-c++"\n'.encode(), False),
        }, depends=[f"gcc_linux-64 {gv}"]),
        _spec("python", pyv, {f"bin/python{py}": wrapper(python)}, symlinks={"bin/python3": f"python{py}", "bin/python": f"python{py}"}),
    ]  # fmt: skip


def write_channel(specs: Iterable[PackageSpec], channel: Path) -> dict[str, float]:
    """Write the packages and index them with rattler's indexer; return {'packages': n, 'bytes': total}."""
    if channel.exists():
        shutil.rmtree(channel)
    n = size = 0
    for spec in specs:
        path = write_package(spec, channel / spec.subdir)
        n, size = n + 1, size + path.stat().st_size
    index_channel(channel, write_zst=False, write_shards=False)
    return {"packages": n, "bytes": size}


def build(tk: Toolkit, channel: Path, *, libs: str = "linked", python: str = sys.executable,
          extra: Iterable[PackageSpec] = ()) -> dict[str, object]:  # fmt: skip
    """Repackage, write and index (with `extra` packages: tests/beside_repack.py's); return a report (what went
    where, sizes, seconds)."""
    start = time.monotonic()
    specs = [*conda_packages(tk, libs=libs), *host_shims(python), *extra]
    stats = write_channel(specs, channel)
    report: dict[str, object] = {
        "channel": str(channel),
        "source": tk.source,
        "cuda": tk.cuda,
        "libs": libs,
        "packages": {s.name: s.version for s in specs},
        "components": {c: {"version": tk.versions.get(c), "files": len(fs)} for c, fs in sorted(tk.files.items())},
        "unclaimed": tk.unclaimed[:200],
        "bytes": stats["bytes"],
        "seconds": round(time.monotonic() - start, 1),
    }
    (channel / "envlock-repack.json").write_text(json.dumps(report, indent=1))
    return report


def cuda_minor(nvcc_version: str) -> str:
    m = re.match(r"^(\d+)\.(\d+)", nvcc_version)
    if not m:
        raise RuntimeError(f"cannot read a CUDA minor from nvcc version {nvcc_version!r}")
    return f"{m.group(1)}.{m.group(2)}"


def walk_tree(root: Path, prefix: str = "") -> tuple[dict[str, Path], dict[str, str]]:
    """Regular files and relative symlinks under `root`, keyed `prefix + relpath` (nothing read yet).

    A symlink that points outside the tree or nowhere is followed (its file is taken as a file).
    """
    files: dict[str, Path] = {}
    links: dict[str, str] = {}
    if not root.is_dir():
        return files, links
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in [*filenames, *[d for d in dirnames if (here / d).is_symlink()]]:
            p = here / name
            rel = prefix + p.relative_to(root).as_posix()
            if p.is_symlink():
                target = os.readlink(p)
                inside = not os.path.isabs(target) and root.resolve() in (p.parent / target).resolve().parents
                if inside and (p.parent / target).exists():
                    links[rel] = target
                elif p.is_file():
                    files[rel] = p
            elif p.is_file():
                files[rel] = p
    return files, links
