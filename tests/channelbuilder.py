"""Build real tiny conda packages and indexed channels with conda-forge's names and dependency shapes.

A plain importable library (no pytest, no rattler at module top) so tests *and* benchmarks can use it.

Layout written by `build_all(root)` (= `build_channel` + `build_nvidia_label_channel`)::

    root/conda-forge/{noarch,linux-64,linux-aarch64,win-64}/*.tar.bz2 + repodata.json(.zst) + shards
    root/nvidia/label/cuda-11.8.0/{noarch,linux-64,win-64}/...

Everything is deterministic: fixed tar mtimes/owners, fixed package `timestamp` (and `indexed_timestamp`),
sorted members, so the same inputs give byte-identical packages, repodata.json and repodata.json.zst
(the shard index carries rattler's `created_at`, so it differs between builds).

What the packages ship (linux-64; aarch64 uses targets/sbsa-linux; win-64 uses Library/{bin,include,lib}):
  cuda-nvcc-impl   bin/nvcc (sh script: real `nvcc --version` text, refuses to compile),
                   targets/x86_64-linux/bin/nvcc -> ../../../bin/nvcc, nvvm/bin/cicc, bin/nvcc.profile
  cuda-nvcc_linux-64  etc/conda/activate.d/~cuda-nvcc_activate.sh (NVCC_PREPEND_FLAGS, never CUDA_HOME)
  cuda-cudart-dev_linux-64  targets/<t>/include/{cuda_runtime.h,cuda_runtime_api.h,cuda.h}, lib .so symlink
  cuda-cudart_linux-64  targets/<t>/lib/libcudart.so.<full> (+ .so.<major>); cuda-cudart: lib/ symlinks
  lib{cublas,cusparse,cusolver}(-dev), libnvjitlink, cuda-nvrtc: same split; -dev ships cublas_v2.h,
                   cublas_api.h, cublasLt.h, cublas.h / cusparse.h / cusolverDn.h, cusolver_common.h
  libcurand(-dev) and the `--with` groups (cuda-profiler-api, libcufft-dev, ...): tests/channel_extras.py
  cudnn 8.x; libcudnn/libcudnn-dev/cudnn 9.x: include/cudnn.h, include/cudnn_version.h, lib/libcudnn.so.*
  gcc_impl/gxx_impl_<plat>: bin/<triplet>-gcc|g++ scripts (--version, -dumpversion, -dumpfullversion,
                          -dumpmachine) and their <triplet>-cc|c++ symlinks, as conda-forge ships them
  gcc_/gxx_<plat>: etc/conda/{activate,deactivate}.d scripts: CC=$CONDA_PREFIX/bin/<triplet>-cc, CXX=…-c++
                   (read ${CONDA_PREFIX} unguarded, like CF's)
  python: bin/pythonX.Y (answers --version, else execs $ENVLOCK_TEST_REAL_PYTHON or /usr/bin/python3)
  pytorch: <site-packages>/torch/{__init__,version}.py with __version__ and version.cuda
On linux-64 every lib*.so.<version> is a loadable x86_64 ELF (dlopen works) whose real entry points
report the version (cudaRuntimeGetVersion -> 12060, cudnnGetVersion, cusparseGetVersion, ...).
"""

from __future__ import annotations

import asyncio
import bz2
import fnmatch
import hashlib
import http.server
import io
import json
import os
import re
import socket
import struct
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.loopserver import LoopbackServer

# 2024-01-01T00:00:00Z in ms: a fixed `timestamp` keeps repodata reproducible (and old enough that
# `exclude_newer` filters do not hide packages by accident).
FIXED_TIMESTAMP_MS = 1_704_067_200_000
_TAR_MTIME = FIXED_TIMESTAMP_MS // 1000

NVIDIA_LICENSE = "LicenseRef-NVIDIA-End-User-License-Agreement"
ALL_SUBDIRS = ("linux-64", "linux-aarch64", "win-64")
DEFAULT_PYTHONS = ("3.10", "3.11", "3.12")


# ---------------------------------------------------------------------------------------------------
# Per-CUDA-minor component versions. Real numbers from conda-forge repodata (../shared/channels) and
# facts §3.2 where present; the 12.3/12.4 rows that the harvested data lacks follow NVIDIA's release
# component tables. There is NO 12.7 (NVIDIA never released it).
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaMinor:
    """Component versions of one CUDA minor release as conda-forge packages them."""

    minor: str  # "12.6"
    nvcc: str  # newest cf_nvcc_versions entry
    cudart: str
    nvrtc: str
    nvjitlink: str
    cublas: str
    cusparse: str
    cusolver: str
    cccl: str
    compiler_build: int  # the number in `Build cuda_X.Y.rX.Y/compiler.NNN_0`
    built_on: str  # the `Built on` line of nvcc --version
    gcc_impl_constraint: str  # cuda-nvcc-impl run_constrained on gcc_impl_<plat>

    @property
    def major(self) -> int:
        return int(self.minor.split(".")[0])

    @property
    def upper(self) -> str:
        """Exclusive upper bound used by conda-forge's exact-minor pins: 12.6 -> 12.7.0a0."""
        major, minor = self.minor.split(".")
        return f"{major}.{int(minor) + 1}.0a0"

    @property
    def version_pin(self) -> str:
        """`cuda-version >=12.6,<12.7.0a0` (CTK components pin their exact minor)."""
        return f"cuda-version >={self.minor},<{self.upper}"

    @property
    def cudart_define(self) -> int:
        """CUDART_VERSION as cuda_runtime_api.h defines it: 12.6 -> 12060."""
        major, minor = self.minor.split(".")
        return int(major) * 1000 + int(minor) * 10


# fmt: off
CUDA_MINORS: dict[str, CudaMinor] = {
    m.minor: m
    for m in (
        CudaMinor("12.0", "12.0.76", "12.0.107", "12.0.76", "12.0.76", "12.0.1.189", "12.0.0.76",
                  "11.4.2.57", "12.0.90", 32267302, "Fri_Jan__6_16:45:21_PST_2023", ">=6,<13"),
        CudaMinor("12.1", "12.1.105", "12.1.105", "12.1.105", "12.1.105", "12.1.3.1", "12.1.0.106",
                  "11.4.5.107", "12.1.109", 32688072, "Tue_Feb__7_19:32:13_PST_2023", ">=6,<13"),
        CudaMinor("12.2", "12.2.140", "12.2.140", "12.2.140", "12.2.140", "12.2.5.6", "12.1.2.141",
                  "11.5.2.141", "12.2.140", 33191640, "Tue_Aug_15_22:02:13_PDT_2023", ">=6,<13"),
        CudaMinor("12.3", "12.3.107", "12.3.101", "12.3.107", "12.3.101", "12.3.4.1", "12.2.0.103",
                  "11.5.4.101", "12.3.101", 33567101, "Wed_Nov_22_10:17:15_PST_2023", ">=6,<13"),
        CudaMinor("12.4", "12.4.131", "12.4.127", "12.4.127", "12.4.127", "12.4.5.8", "12.3.1.170",
                  "11.6.1.9", "12.4.127", 34097967, "Thu_Mar_28_02:18:24_PDT_2024", ">=6,<13"),
        CudaMinor("12.5", "12.5.82", "12.5.82", "12.5.82", "12.5.82", "12.5.3.2", "12.5.1.3",
                  "11.6.3.83", "12.5.39", 34385749, "Thu_Jun__6_02:18:23_PDT_2024", ">=6,<14.0a0"),
        CudaMinor("12.6", "12.6.85", "12.6.77", "12.6.85", "12.6.85", "12.6.4.1", "12.5.4.2",
                  "11.7.1.2", "12.6.77", 35059454, "Tue_Oct_29_23:50:19_PDT_2024", ">=6,<14.0a0"),
        CudaMinor("12.8", "12.8.93", "12.8.90", "12.8.93", "12.8.93", "12.8.4.1", "12.5.8.93",
                  "11.7.3.90", "12.8.90", 35583870, "Fri_Feb_21_20:23:50_PST_2025", ">=6,<15.0a0"),
        CudaMinor("12.9", "12.9.86", "12.9.79", "12.9.86", "12.9.86", "12.9.1.4", "12.5.10.65",
                  "11.7.5.82", "12.9.27", 36037853, "Tue_May_27_02:21:03_PDT_2025", ">=6,<15.0a0"),
        CudaMinor("13.0", "13.0.88", "13.0.96", "13.0.88", "13.0.88", "13.1.0.3", "12.6.3.3",
                  "12.0.4.66", "13.0.85", 36424714, "Wed_Aug_20_01:58:59_PM_PDT_2025", ">=6,<16.0a0"),
        CudaMinor("13.1", "13.1.115", "13.1.80", "13.1.115", "13.1.115", "13.2.1.1", "12.7.3.1",
                  "12.0.9.81", "13.1.78", 36836380, "Tue_Dec_16_07:23:41_PM_PST_2025", ">=6,<16.0a0"),
        CudaMinor("13.2", "13.2.78", "13.2.75", "13.2.78", "13.2.78", "13.4.0.1", "12.7.10.1",
                  "12.2.0.1", "13.2.75", 37234104, "Thu_Mar_19_08:02:11_PM_PDT_2026", ">=6,<16.0a0"),
    )
}
# fmt: on

# gcc versions per major that the channel offers (conda-forge ctng-compiler-activation builds).
GCC_VERSIONS = ("11.4.0", "12.4.0", "13.3.0", "14.2.0", "15.1.0")

# cuDNN versions and the CUDA majors conda-forge built them for (toolchain.yaml cudnn_pairing).
CUDNN_VERSIONS: dict[str, tuple[int, ...]] = {
    "8.9.7.29": (11, 12),
    "9.3.0.75": (12,),
    "9.10.2.21": (12,),
    "9.13.0.50": (12, 13),
    "9.14.0.64": (13,),
}

# (version, cuda_minor, build_number, per-python hash seed) - conda-forge pytorch CUDA builds.
PYTORCH_BUILDS: dict[str, tuple[tuple[str, str], ...]] = {
    # subdir -> ((torch version, cuda minor), ...) from facts §2 "CUDA variants by version"
    "linux-64": (
        ("2.4.0", "11.8"),
        ("2.3.1", "12.0"),
        ("2.7.1", "12.6"),
        ("2.7.1", "12.9"),
        ("2.8.0", "12.9"),
    ),
    "linux-aarch64": (("2.3.1", "12.0"), ("2.7.1", "12.6"), ("2.7.1", "12.9"), ("2.8.0", "12.9")),
    "win-64": (("2.3.1", "12.0"), ("2.7.1", "12.6"), ("2.7.1", "12.8"), ("2.8.0", "12.8")),
}

PYTHON_VERSIONS = {"3.9": "3.9.21", "3.10": "3.10.16", "3.11": "3.11.11", "3.12": "3.12.8", "3.13": "3.13.1"}


def target_of(subdir: str) -> str:
    """The CUDA `targets/<t>` dir name conda-forge uses per subdir."""
    return {"linux-64": "x86_64-linux", "linux-aarch64": "sbsa-linux", "linux-ppc64le": "ppc64le-linux"}.get(
        subdir, "x64"
    )


def gnu_triplet(subdir: str) -> str:
    """conda-forge's compiler triplet prefix per linux subdir."""
    return {"linux-64": "x86_64-conda-linux-gnu", "linux-aarch64": "aarch64-conda-linux-gnu"}[subdir]


def is_win(subdir: str) -> bool:
    return subdir.startswith("win-")


# ---------------------------------------------------------------------------------------------------
# Writing one package
# ---------------------------------------------------------------------------------------------------


@dataclass
class PackageSpec:
    """One conda package: metadata plus payload (files, symlinks, executable bits)."""

    name: str
    version: str
    build: str = ""  # computed from a content hash + build_number when empty
    build_number: int = 0
    subdir: str = "noarch"
    depends: list[str] = field(default_factory=list)
    constrains: list[str] = field(default_factory=list)
    files: dict[str, bytes | str] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)  # relpath -> link target (relative)
    executables: set[str] = field(default_factory=set)
    noarch: str | None = None  # "generic" | "python"; implied "generic" for subdir noarch
    track_features: str = ""
    features: str = ""
    license: str = "BSD-3-Clause"
    timestamp: int = FIXED_TIMESTAMP_MS
    fmt: str = ".tar.bz2"  # or ".conda"
    build_prefix: str = ""  # e.g. "cuda126_generic_py311_" -> "cuda126_generic_py311_h1a2b3c4_201"
    build_suffix: str = ""  # e.g. "_cpython" -> "h1a2b3c4_0_cpython"

    def __post_init__(self) -> None:
        if self.subdir == "noarch" and self.noarch is None:
            self.noarch = "generic"
        self.depends = sorted(self.depends)  # conda-build writes them sorted
        self.constrains = sorted(self.constrains)
        if not self.build:
            self.build = (
                f"{self.build_prefix}h{self._content_hash()[:7]}_{self.build_number}{self.build_suffix}"
            )

    def _content_hash(self) -> str:
        """A stable hash of the inputs, standing in for conda-build's hash of the variant."""
        doc = json.dumps(
            [
                self.name,
                self.version,
                self.subdir,
                sorted(self.depends),
                sorted(self.constrains),
                sorted(self.files),
                sorted(self.symlinks.items()),
            ]
        )
        return hashlib.sha1(doc.encode()).hexdigest()

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}{self.fmt}"

    @property
    def dist_name(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"

    def index_json(self) -> dict[str, Any]:
        """info/index.json as conda-build writes it."""
        doc: dict[str, Any] = {
            "build": self.build,
            "build_number": self.build_number,
            "depends": list(self.depends),
            "license": self.license,
            "name": self.name,
            "subdir": self.subdir,
            "timestamp": self.timestamp,
            "version": self.version,
        }
        if self.constrains:
            doc["constrains"] = list(self.constrains)
        if self.subdir == "noarch":
            doc["noarch"] = self.noarch
        else:
            plat, _, arch = self.subdir.partition("-")
            doc["platform"] = plat
            doc["arch"] = {"64": "x86_64", "aarch64": "aarch64", "ppc64le": "ppc64le", "32": "x86"}.get(
                arch, arch
            )
        if self.track_features:
            doc["track_features"] = self.track_features
        if self.features:
            doc["features"] = self.features
        return doc


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode() if isinstance(data, str) else data


def _tarinfo(
    name: str, *, size: int = 0, mode: int = 0o644, kind: bytes = tarfile.REGTYPE, linkname: str = ""
) -> tarfile.TarInfo:
    """A TarInfo with fixed owner/mtime so archives are reproducible."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type, info.linkname = size, mode, kind, linkname
    info.mtime, info.uid, info.gid, info.uname, info.gname = _TAR_MTIME, 0, 0, "", ""
    return info


def _paths_json(spec: PackageSpec) -> dict[str, Any]:
    """info/paths.json: sha256 + size per hardlink; softlinks carry no hash (rattler does not need one)."""
    entries: list[dict[str, Any]] = []
    for rel, data in spec.files.items():
        raw = _as_bytes(data)
        entries.append(
            {
                "_path": rel,
                "path_type": "hardlink",
                "sha256": hashlib.sha256(raw).hexdigest(),
                "size_in_bytes": len(raw),
            }
        )
    for rel in spec.symlinks:
        entries.append({"_path": rel, "path_type": "softlink"})
    entries.sort(key=lambda e: e["_path"])
    return {"paths": entries, "paths_version": 1}


def _info_members(spec: PackageSpec) -> dict[str, bytes]:
    """The info/ files of a package."""
    all_paths = sorted([*spec.files, *spec.symlinks])
    return {
        "info/files": ("\n".join(all_paths) + "\n").encode() if all_paths else b"",
        "info/index.json": (json.dumps(spec.index_json(), indent=2, sort_keys=True) + "\n").encode(),
        "info/paths.json": (json.dumps(_paths_json(spec), indent=2, sort_keys=True) + "\n").encode(),
    }


def _payload_tar(members: Mapping[str, bytes], spec: PackageSpec | None) -> bytes:
    """An uncompressed, deterministic tar of `members` (+ the spec's symlinks)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries: list[tuple[str, bytes | None, str]] = [(k, v, "") for k, v in members.items()]
        if spec is not None:
            entries += [(k, None, target) for k, target in spec.symlinks.items()]
        # info/ first (conda convention), then payload in sorted order.
        entries.sort(key=lambda e: (not e[0].startswith("info/"), e[0]))
        for rel, data, target in entries:
            if data is None:
                tar.addfile(_tarinfo(rel, kind=tarfile.SYMTYPE, linkname=target, mode=0o777))
            else:
                mode = 0o755 if spec is not None and rel in spec.executables else 0o644
                tar.addfile(_tarinfo(rel, size=len(data), mode=mode), io.BytesIO(data))
    return buf.getvalue()


def write_package(spec: PackageSpec, outdir: Path) -> Path:
    """Write `spec` as a real conda package (`.tar.bz2` or `.conda`) into `outdir`; return its path."""
    outdir.mkdir(parents=True, exist_ok=True)
    missing = set(spec.executables) - set(spec.files)
    if missing:
        raise ValueError(f"{spec.name}: executables not among files: {sorted(missing)}")
    payload = {rel: _as_bytes(data) for rel, data in spec.files.items()}
    info = _info_members(spec)
    out = outdir / spec.filename
    if spec.fmt == ".tar.bz2":
        out.write_bytes(bz2.compress(_payload_tar({**info, **payload}, spec), 9))
    elif spec.fmt == ".conda":
        out.write_bytes(_conda_zip(spec, info, payload))
    else:
        raise ValueError(f"unknown package format {spec.fmt!r}")
    # rattler's indexer records the file's mtime as `indexed_timestamp` (what `exclude_newer` compares),
    # so pin it to the package timestamp for reproducible repodata.
    os.utime(out, ns=(spec.timestamp * 1_000_000, spec.timestamp * 1_000_000))
    return out


def _conda_zip(spec: PackageSpec, info: Mapping[str, bytes], payload: Mapping[str, bytes]) -> bytes:
    """The `.conda` v2 format: a stored zip of metadata.json + info-*.tar.zst + pkg-*.tar.zst."""
    import zstandard  # here, not at the top: the GPU machine's channel builder imports this module too

    pkg = _payload_tar(payload, spec)
    # Big payloads (a real toolkit's libraries) compress on every core; tiny test packages stay single-threaded.
    cctx = zstandard.ZstdCompressor(level=3, threads=-1 if len(pkg) > 64 << 20 else 0)
    members = {
        "metadata.json": json.dumps({"conda_pkg_format_version": 2}).encode(),
        f"pkg-{spec.dist_name}.tar.zst": cctx.compress(pkg),
        f"info-{spec.dist_name}.tar.zst": cctx.compress(_payload_tar(info, None)),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zi = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, data)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------------
# Payload helpers
# ---------------------------------------------------------------------------------------------------


def _header(filename: str, owner: str, *lines: str) -> str:
    """A tiny but valid C header (compiles with gcc/nvcc when included)."""
    guard = "".join(c if c.isalnum() else "_" for c in filename.upper())
    body = "\n".join(lines)
    return (
        f"/* {filename}: envlock test-channel stand-in shipped by {owner}. */\n"
        f"#pragma once\n#ifndef ENVLOCK_TEST_{guard}\n#define ENVLOCK_TEST_{guard}\n{body}\n#endif\n"
    )


def nvcc_version_text(version: str, compiler_build: int, built_on: str) -> str:
    """What a real `nvcc --version` prints for this nvcc version."""
    major, minor = version.split(".")[:2]
    year = {"11": "2022", "12": "2024", "13": "2025"}.get(major, "2025")
    return (
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        f"Copyright (c) 2005-{year} NVIDIA Corporation\n"
        f"Built on {built_on}\n"
        f"Cuda compilation tools, release {major}.{minor}, V{version}\n"
        f"Build cuda_{major}.{minor}.r{major}.{minor}/compiler.{compiler_build}_0\n"
    )


def nvcc_script(version: str, compiler_build: int, built_on: str) -> str:
    """An executable `nvcc` stand-in: real `--version` output; refuses to compile (it is not a compiler)."""
    text = nvcc_version_text(version, compiler_build, built_on)
    return (
        "#!/bin/sh\n"
        f"# envlock test-channel stand-in for nvcc {version}: answers --version like the real driver.\n"
        'case "${1:-}" in\n'
        "  --version|-V)\n"
        "    cat <<'NVCC_VERSION_EOF'\n"
        f"{text}"
        "NVCC_VERSION_EOF\n"
        "    exit 0 ;;\n"
        "esac\n"
        f'echo "nvcc fatal   : envlock test-channel stand-in (nvcc {version}) cannot compile" >&2\n'
        "exit 1\n"
    )


def gcc_script(tool: str, version: str) -> str:
    """An executable `<triplet>-gcc`/`g++` stand-in answering --version / -dumpversion like conda-forge's.

    Also called through its `<triplet>-cc`/`-c++` symlinks (what conda-forge's activation puts in CC/CXX):
    like a real gcc driver, its banner names the program it was called as.
    """
    major = version.split(".")[0]
    triplet = tool.rsplit("-", 1)[0]
    return (
        "#!/bin/sh\n"
        f"# envlock test-channel stand-in for {tool} {version}.\n"
        'case "${1:-}" in\n'
        f"  --version) printf '%s\\n' \"$(basename \"$0\") (conda-forge gcc {version}-1) {version}\" "
        "'Copyright (C) 2024 Free Software Foundation, Inc.' "
        "'This is free software; see the source for copying conditions.  There is NO' "
        "'warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.' ''; exit 0 ;;\n"
        f"  -dumpversion) echo {major}; exit 0 ;;\n"
        f"  -dumpfullversion) echo {version}; exit 0 ;;\n"
        f"  -dumpmachine) echo {triplet}; exit 0 ;;\n"
        "esac\n"
        f'echo "{tool}: envlock test-channel stand-in cannot compile" >&2\n'
        "exit 1\n"
    )


# ---------------------------------------------------------------------------------------------------
# Loadable x86_64 ELF stand-ins: tiny shared objects (no section headers) that glibc's dlopen accepts,
# with a SONAME and a few real entry points that report the library version (cudaRuntimeGetVersion ...).
# Only linux-64 gets them; other subdirs get placeholder bytes (nothing here can load those anyway).
# ---------------------------------------------------------------------------------------------------

Export = tuple[list[tuple[str, int]], int]  # ([(argN, value stored through that pointer arg)], return value)


def _x86_body(stores: list[tuple[str, int]], ret: int) -> bytes:
    """Machine code: store each value through the pointer in rdi (arg0) / rsi (arg1), return `ret` in eax."""
    code = b""
    for reg, value in stores:
        code += {"arg0": b"\xc7\x07", "arg1": b"\xc7\x06"}[reg] + struct.pack(
            "<i", value
        )  # mov dword [rdi|rsi], imm32
    return code + b"\xb8" + struct.pack("<i", ret) + b"\xc3"  # mov eax, imm32; ret


def _elf_hash(name: bytes) -> int:
    """The SysV ELF hash used by DT_HASH."""
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def elf_shared_object(soname: str, functions: Mapping[str, Export]) -> bytes:
    """A minimal x86_64 ELF shared object: SONAME, DT_HASH, one global dynsym per function, W^X segments.

    Layout: [ehdr][4 phdrs][dynsym][hash][dynstr][text] in an R+X segment, then .dynamic in an R+W segment
    mapped one page higher (glibc relocates .dynamic entries in place, so it must be writable).
    """
    names = sorted(functions)
    dynstr, str_off = b"\0", {}
    for n in [soname, *names]:
        str_off[n] = len(dynstr)
        dynstr += n.encode() + b"\0"
    text, fn_off = b"", {}
    for n in names:
        text += b"\xcc" * (-len(text) % 16)  # int3 padding, 16-byte aligned entry points
        fn_off[n] = len(text)
        text += _x86_body(*functions[n])
    nsym, nbucket, nph = len(names) + 1, max(1, len(names)), 4
    dynsym_off = 64 + 56 * nph
    hash_off = dynsym_off + 24 * nsym
    dynstr_off = hash_off + 4 * (2 + nbucket + nsym)
    text_off = (dynstr_off + len(dynstr) + 15) & ~15
    dyn_off = (text_off + len(text) + 7) & ~7
    dyn_vaddr = dyn_off + 0x1000  # same page offset, next page: a separate RW mapping
    # DT_SONAME, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT, DT_NULL
    dyn = [
        (14, str_off[soname]),
        (4, hash_off),
        (5, dynstr_off),
        (6, dynsym_off),
        (10, len(dynstr)),
        (11, 24),
        (0, 0),
    ]
    dynbytes = b"".join(struct.pack("<qQ", tag, val) for tag, val in dyn)
    syms = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)
    for n in names:  # STB_GLOBAL|STT_FUNC; st_shndx 1 (defined, not SHN_ABS, so the load base is added)
        syms += struct.pack(
            "<IBBHQQ", str_off[n], 0x12, 0, 1, text_off + fn_off[n], len(_x86_body(*functions[n]))
        )
    buckets, chains = [0] * nbucket, [0] * nsym
    for i, n in enumerate(names, start=1):
        b = _elf_hash(n.encode()) % nbucket
        chains[i], buckets[b] = buckets[b], i
    hashtab = struct.pack(f"<II{nbucket}I{nsym}I", nbucket, nsym, *buckets, *chains)
    # e_type ET_DYN, e_machine EM_X86_64, no section headers
    ehdr = (
        b"\x7fELF\x02\x01\x01"
        + b"\0" * 9
        + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, nph, 64, 0, 0)
    )
    pf_x, pf_w, pf_r = 1, 2, 4
    phdrs = b"".join(
        [
            struct.pack("<IIQQQQQQ", 1, pf_r | pf_x, 0, 0, 0, dyn_off, dyn_off, 0x1000),  # PT_LOAD text
            struct.pack(
                "<IIQQQQQQ",
                1,
                pf_r | pf_w,
                dyn_off,
                dyn_vaddr,
                dyn_vaddr,
                len(dynbytes),
                len(dynbytes),
                0x1000,
            ),
            struct.pack(
                "<IIQQQQQQ", 2, pf_r | pf_w, dyn_off, dyn_vaddr, dyn_vaddr, len(dynbytes), len(dynbytes), 8
            ),  # PT_DYNAMIC
            struct.pack(
                "<IIQQQQQQ", 0x6474E551, pf_r | pf_w, 0, 0, 0, 0, 0, 16
            ),  # PT_GNU_STACK: no exec stack
        ]
    )
    out = bytearray(dyn_off + len(dynbytes))
    for offset, blob in (
        (0, ehdr),
        (64, phdrs),
        (dynsym_off, syms),
        (hash_off, hashtab),
        (dynstr_off, dynstr),
        (text_off, text),
        (dyn_off, dynbytes),
    ):
        out[offset : offset + len(blob)] = blob
    return bytes(out)


def library_exports(lib: str, version: str) -> dict[str, Export]:
    """Version-reporting entry points of a CUDA library stand-in, with the real functions' encodings."""
    major, minor, patch = ([int(x) for x in version.split(".")] + [0, 0, 0])[:3]
    return {
        # cudaGetDeviceCount answers cudaErrorInsufficientDriver (35): there is no driver behind the stand-in.
        "libcudart": {
            "cudaRuntimeGetVersion": ([("arg0", major * 1000 + minor * 10)], 0),
            "cudaDriverGetVersion": ([("arg0", 0)], 0),
            "cudaGetDeviceCount": ([("arg0", 0)], 35),
        },
        "libcublas": {"cublasGetVersion_v2": ([("arg1", major * 10000 + minor * 100 + patch)], 0)},
        "libcusparse": {"cusparseGetVersion": ([("arg1", major * 1000 + minor * 100 + patch)], 0)},
        "libcusolver": {"cusolverGetVersion": ([("arg0", major * 1000 + minor * 100 + patch)], 0)},
        "libnvJitLink": {"nvJitLinkVersion": ([("arg0", major), ("arg1", minor)], 0)},
        "libnvrtc": {"nvrtcVersion": ([("arg0", major), ("arg1", minor)], 0)},
        "libcudnn": {
            "cudnnGetVersion": ([], (major * 10000 if major >= 9 else major * 1000) + minor * 100 + patch)
        },
    }.get(lib, {})


def lib_bytes(subdir: str, lib: str, version: str, owner: str, soname_version: str | None = None) -> bytes:
    """A shared-library payload: a loadable ELF on linux-64 (SONAME lib.so.<major>), placeholder bytes elsewhere."""
    if subdir != "linux-64":
        return _stub_lib(lib, owner)
    return elf_shared_object(
        f"{lib}.so.{soname_version or version.split('.')[0]}", library_exports(lib, version)
    )


def _stub_lib(name: str, owner: str) -> bytes:
    """Placeholder bytes for a shared library (NOT a loadable ELF/DLL)."""
    return f"envlock test-channel placeholder for {name} from {owner}\n".encode()


# ---------------------------------------------------------------------------------------------------
# Package catalog (conda-forge shapes). Each generator returns (tag, spec) pairs; the tag is the CUDA
# minor ("12.6"), CUDA major ("12"), or None, and is what `drop={(name, tag)}` matches.
# ---------------------------------------------------------------------------------------------------

Tagged = tuple[str | None, PackageSpec]


def _runtime_deps(subdir: str, libgcc: int = 13) -> list[str]:
    """The C/C++ runtime deps conda-forge compiled packages carry."""
    if is_win(subdir):
        return ["ucrt >=10.0.20348.0", "vc >=14.3,<15", "vc14_runtime >=14.44.35208"]
    return ["__glibc >=2.17,<3.0.a0", f"libgcc >={libgcc}", f"libstdcxx >={libgcc}"]


def _layout(subdir: str) -> tuple[str, str, str]:
    """(include dir, real-lib dir, lib-link dir) for CUDA 12+ packages on `subdir`."""
    if is_win(subdir):
        return "Library/include", "Library/bin", "Library/lib"
    t = target_of(subdir)
    return f"targets/{t}/include", f"targets/{t}/lib", "lib"


def _so_files(
    subdir: str, lib: str, version: str, major: str, owner: str
) -> tuple[dict[str, bytes | str], dict[str, str]]:
    """Files + symlinks of a CUDA runtime library: targets/<t>/lib/libX.so.V, lib/libX.so.M symlinks."""
    if is_win(subdir):
        return {f"Library/bin/{lib}64_{major}.dll": _stub_lib(lib, owner)}, {}
    _, real, _ = _layout(subdir)
    files: dict[str, bytes | str] = {
        f"{real}/{lib}.so.{version}": lib_bytes(subdir, lib, version, owner, major)
    }
    links = {
        f"{real}/{lib}.so.{major}": f"{lib}.so.{version}",
        f"lib/{lib}.so.{major}": f"../{real}/{lib}.so.{major}",
        f"lib/{lib}.so.{version}": f"../{real}/{lib}.so.{version}",
    }
    return files, links


def _dev_link(subdir: str, lib: str, major: str) -> tuple[dict[str, bytes | str], dict[str, str]]:
    """The -dev part of a library: libX.so symlinks (linux) or an import .lib (win)."""
    if is_win(subdir):
        return {f"Library/lib/{lib.removeprefix('lib')}.lib": _stub_lib(lib, "dev")}, {}
    _, real, _ = _layout(subdir)
    return {}, {f"{real}/{lib}.so": f"{lib}.so.{major}", f"lib/{lib}.so": f"../{real}/{lib}.so"}


def cuda_version_packages(minor: str) -> PackageSpec:
    """noarch `cuda-version X.Y` with conda-forge's run_constrained."""
    major = minor.split(".")[0]
    return PackageSpec(
        "cuda-version",
        minor,
        build_number=3,
        subdir="noarch",
        license="LicenseRef-NVIDIA-End-User-License-Agreement",
        constrains=[f"__cuda >={major}", f"cudatoolkit {minor}|{minor}.*"],
    )


def cuda_minor_packages(cm: CudaMinor, subdir: str) -> list[PackageSpec]:
    """The CUDA 12+/13 split packages of one minor for one subdir (+ their noarch `_<target>` parts)."""
    plat, major, pin = subdir, str(cm.major), cm.version_pin
    inc = _layout(subdir)[0]
    win = is_win(subdir)
    rt = _runtime_deps(subdir)
    lic = NVIDIA_LICENSE
    specs: list[PackageSpec] = []

    def add(spec: PackageSpec) -> PackageSpec:
        spec.license = lic
        specs.append(spec)
        return spec

    cccl = add(
        PackageSpec(
            f"cuda-cccl_{plat}",
            cm.cccl,
            subdir="noarch",
            depends=[pin],
            files={
                f"{inc}/cuda/std/version": _header(
                    "cuda/std/version",
                    "cuda-cccl",
                    f"#define _LIBCUDACXX_CUDA_API_VERSION {cm.cudart_define}",
                ),
                f"{inc}/nv/target": _header("nv/target", "cuda-cccl", "#define _NV_TARGET_DEF 1"),
            },
        )
    )
    cudart_files, cudart_links = _so_files(subdir, "libcudart", cm.cudart, major, "cuda-cudart")
    cudart_t = add(
        PackageSpec(
            f"cuda-cudart_{plat}",
            cm.cudart,
            subdir="noarch",
            depends=[pin],
            files=cudart_files,
            symlinks={k: v for k, v in cudart_links.items() if not k.startswith("lib/")},
        )
    )
    dev_files, dev_links = _dev_link(subdir, "libcudart", major)
    cudart_dev_t = add(
        PackageSpec(
            f"cuda-cudart-dev_{plat}",
            cm.cudart,
            subdir="noarch",
            depends=[f"cuda-cccl_{plat}", f"cuda-cudart_{plat}", pin],
            files={
                f"{inc}/cuda_runtime_api.h": _header(
                    "cuda_runtime_api.h", "cuda-cudart-dev", f"#define CUDART_VERSION {cm.cudart_define}"
                ),
                f"{inc}/cuda_runtime.h": _header(
                    "cuda_runtime.h", "cuda-cudart-dev", '#include "cuda_runtime_api.h"'
                ),
                f"{inc}/cuda.h": _header(
                    "cuda.h", "cuda-cudart-dev", f"#define CUDA_VERSION {cm.cudart_define}"
                ),
                **dev_files,
            },
            symlinks={k: v for k, v in dev_links.items() if not k.startswith("lib/")},
        )
    )
    cudart = add(
        PackageSpec(
            "cuda-cudart",
            cm.cudart,
            subdir=subdir,
            depends=[f"cuda-cudart_{plat} {cm.cudart} {cudart_t.build}", pin, *rt],
            symlinks={k: v for k, v in cudart_links.items() if k.startswith("lib/")},
        )
    )
    add(
        PackageSpec(
            "cuda-cudart-dev",
            cm.cudart,
            subdir=subdir,
            depends=[
                f"cuda-cudart {cm.cudart} {cudart.build}",
                f"cuda-cudart-dev_{plat} {cm.cudart} {cudart_dev_t.build}",
                pin,
                *rt,
            ],
            symlinks={k: v for k, v in dev_links.items() if k.startswith("lib/")},
        )
    )
    del cccl

    def lib_pair(
        name: str, lib: str, version: str, lib_deps: list[str], dev_deps: list[str], headers: dict[str, str]
    ) -> PackageSpec:
        files, links = _so_files(subdir, lib, version, version.split(".")[0], name)
        runtime = add(
            PackageSpec(
                name, version, subdir=subdir, depends=[*lib_deps, pin, *rt], files=files, symlinks=links
            )
        )
        dfiles, dlinks = _dev_link(subdir, lib, version.split(".")[0])
        hdrs = {f"{inc}/{h}": _header(h, f"{name}-dev", body) for h, body in headers.items()}
        add(
            PackageSpec(
                f"{name}-dev",
                version,
                subdir=subdir,
                depends=[*dev_deps, f"{name} {version} {runtime.build}", pin, *rt],
                constrains=[f"{name}-static >={version}"],
                files={**hdrs, **dfiles},
                symlinks=dlinks,
            )
        )
        return runtime

    nvjit_pin = f"cuda-version >={major},<{cm.upper}" if cm.minor >= "12.6" or cm.major >= 13 else pin
    nvjit_files, nvjit_links = _so_files(subdir, "libnvJitLink", cm.nvjitlink, major, "libnvjitlink")
    add(
        PackageSpec(
            "libnvjitlink",
            cm.nvjitlink,
            subdir=subdir,
            depends=[nvjit_pin, *rt],
            files=nvjit_files,
            symlinks=nvjit_links,
        )
    )
    nvrtc_files, nvrtc_links = _so_files(subdir, "libnvrtc", cm.nvrtc, major, "cuda-nvrtc")
    add(
        PackageSpec(
            "cuda-nvrtc", cm.nvrtc, subdir=subdir, depends=[pin, *rt], files=nvrtc_files, symlinks=nvrtc_links
        )
    )

    def nxt(version: str) -> str:
        """`>=V,<M+1.0a0` range on the version's own major (how run_exports pin CUDA libs)."""
        return f">={version},<{int(version.split('.')[0]) + 1}.0a0"

    nvjit_dep = f"libnvjitlink {nxt(cm.nvjitlink)}"
    lib_pair(
        "libcublas",
        "libcublas",
        cm.cublas,
        ["cuda-nvrtc"],
        [f"cuda-cudart-dev_{plat}"],
        {
            "cublas_api.h": f"#define CUBLAS_VER_MAJOR {cm.cublas.split('.')[0]}\n#define CUBLAS_VER_MINOR {cm.cublas.split('.')[1]}",
            "cublas_v2.h": '#include "cublas_api.h"',
            "cublas.h": '#include "cublas_api.h"',
            "cublasLt.h": f"#define CUBLASLT_VERSION_MAJOR {cm.cublas.split('.')[0]}",
        },
    )
    lib_pair(
        "libcusparse",
        "libcusparse",
        cm.cusparse,
        [nvjit_dep],
        [nvjit_dep],
        {
            "cusparse.h": f"#define CUSPARSE_VER_MAJOR {cm.cusparse.split('.')[0]}\n#define CUSPARSE_VER_MINOR {cm.cusparse.split('.')[1]}",
        },
    )
    cub_major_minor = ".".join(cm.cublas.split(".")[:2])
    cusp_major_minor = ".".join(cm.cusparse.split(".")[:2])
    lib_pair(
        "libcusolver",
        "libcusolver",
        cm.cusolver,
        [
            f"libcublas >={cm.cublas},<{_bump(cub_major_minor)}",
            f"libcusparse >={cm.cusparse},<{_bump(cusp_major_minor)}",
            nvjit_dep,
        ],
        [],
        {
            "cusolver_common.h": f"#define CUSOLVER_VER_MAJOR {cm.cusolver.split('.')[0]}",
            "cusolverDn.h": '#include "cusolver_common.h"',
        },
    )

    # nvcc: cuda-nvcc -> cuda-nvcc_<plat> -> cuda-nvcc-impl (payload + the host-compiler constraint).
    if win:
        impl_files: dict[str, bytes | str] = {
            "Library/bin/nvcc.exe": f"envlock test-channel placeholder for nvcc.exe {cm.nvcc}\n",
            "Library/bin/nvcc.profile": "TOP = $(_HERE_)/..\n",
            "Library/nvvm/bin/cicc.exe": "envlock test-channel placeholder for cicc.exe\n",
        }
        impl_links: dict[str, str] = {}
        impl_execs: set[str] = set()
        impl_constrains = ["vc >=14.2"]
    else:
        t = target_of(subdir)
        impl_files = {
            "bin/nvcc": nvcc_script(cm.nvcc, cm.compiler_build, cm.built_on),
            "bin/nvcc.profile": f'TOP              = $(_HERE_)/..\nINCLUDES        +=  "-I$(TOP)/targets/{t}/include" $(_SPACE_)\n',
            "nvvm/bin/cicc": "#!/bin/sh\necho 'cicc: envlock test-channel stand-in' >&2\nexit 1\n",
        }
        impl_links = {f"targets/{t}/bin/nvcc": "../../../bin/nvcc"}
        impl_execs = {"bin/nvcc", "nvvm/bin/cicc"}
        impl_constrains = [f"gcc_impl_{plat} {cm.gcc_impl_constraint}"]
    # conda-forge's aarch64 builds from 12.9 on select the SBSA (not Tegra) variant explicitly.
    arm = (
        ["arm-variant * sbsa"]
        if subdir == "linux-aarch64" and (cm.major, int(cm.minor.split(".")[1])) >= (12, 9)
        else []
    )
    add(
        PackageSpec(
            "cuda-nvcc-impl",
            cm.nvcc,
            subdir=subdir,
            depends=[f"cuda-cudart {nxt(cm.cudart)}", "cuda-cudart-dev", pin, *arm],
            constrains=impl_constrains,
            files=impl_files,
            symlinks=impl_links,
            executables=impl_execs,
        )
    )
    nvcc_plat_deps = [f"cuda-cudart-dev_{plat} {cm.minor}.*", f"cuda-nvcc-impl {cm.nvcc}.*", *arm]
    nvcc_plat_files: dict[str, bytes | str] = {}
    if not win:
        nvcc_plat_deps = ["__glibc >=2.17,<3.0.a0", *nvcc_plat_deps, f"sysroot_{plat} >=2.17,<3.0a0"]
        nvcc_plat_files["etc/conda/activate.d/~cuda-nvcc_activate.sh"] = _nvcc_activate_sh(subdir)
        nvcc_plat_files["etc/conda/deactivate.d/~cuda-nvcc_deactivate.sh"] = _nvcc_deactivate_sh()
    add(
        PackageSpec(
            f"cuda-nvcc_{plat}", cm.nvcc, subdir=subdir, depends=nvcc_plat_deps, files=nvcc_plat_files
        )
    )
    host = ["vs2019_win-64"] if win else [f"gcc_{plat}", f"gxx_{plat}"]
    add(PackageSpec("cuda-nvcc", cm.nvcc, subdir=subdir, depends=[f"cuda-nvcc_{plat} {cm.nvcc}.*", *host]))
    from tests.channel_extras import extra_packages  # cuRAND and the `--with` groups (imports this module)

    specs.extend(extra_packages(cm, subdir))
    return specs


def _bump(major_minor: str) -> str:
    """12.6 -> 12.7.0a0 (upper bound of a max_pin='x.x' range)."""
    major, minor = major_minor.split(".")
    return f"{major}.{int(minor) + 1}.0a0"


def _nvcc_activate_sh(subdir: str) -> str:
    """conda-forge cuda-nvcc's recipe/activate.sh outside conda-build (bash/zsh: it uses [[ ]]), cut to linux.

    Appends -I/-L of targets/<t> to CFLAGS/CPPFLAGS/CXXFLAGS/LDFLAGS, and `-ccbin=${CXX}` to
    NVCC_PREPEND_FLAGS with its backup (UNSET when it was unset); never CUDA_HOME.
    """
    t = f"targets/{target_of(subdir)}"
    return (
        "#!/bin/bash\n"
        "# envlock test channel: conda-forge cuda-nvcc's activate.sh (no CUDA_HOME), outside conda-build.\n"
        "ERROR=false\n"
        f'CUDA_CFLAGS=" -I${{CONDA_PREFIX}}/{t}/include"\n'
        f'CUDA_LDFLAGS=" -L${{CONDA_PREFIX}}/{t}/lib -L${{CONDA_PREFIX}}/{t}/lib/stubs"\n'
        'export CFLAGS="${CFLAGS} ${CUDA_CFLAGS}"\n'
        'export CPPFLAGS="${CPPFLAGS} ${CUDA_CFLAGS}"\n'
        'export CXXFLAGS="${CXXFLAGS} ${CUDA_CFLAGS}"\n'
        'export LDFLAGS="${LDFLAGS} ${CUDA_LDFLAGS}"\n'
        'if [ -z "${CXX+x}" ]; then\n'
        "    echo 'cuda-nvcc: Please add the `compiler(\"c\")` and `compiler(\"cxx\")` packages to the environment.'\n"
        "    ERROR=true\n"
        "else\n"
        '    if [[ ! -z "${NVCC_PREPEND_FLAGS+x}" ]]; then\n'
        '        export NVCC_PREPEND_FLAGS_BACKUP="${NVCC_PREPEND_FLAGS}"\n'
        "    else\n"
        '        export NVCC_PREPEND_FLAGS_BACKUP="UNSET"\n'
        "    fi\n"
        '    NVCC_PREPEND_FLAGS="${NVCC_PREPEND_FLAGS} -ccbin=${CXX}"\n'
        "    export NVCC_PREPEND_FLAGS\n"
        "fi\n"
        "! $ERROR\n"
    )


def _nvcc_deactivate_sh() -> str:
    """conda-forge cuda-nvcc's recipe/deactivate.sh (NVCC_PREPEND_FLAGS back from its backup)."""
    return (
        "#!/bin/bash\n"
        "# envlock test channel: conda-forge cuda-nvcc's deactivate.sh.\n"
        'if [[ ! -z "${NVCC_PREPEND_FLAGS_BACKUP+x}" ]]\n'
        "then\n"
        '  if [[ "${NVCC_PREPEND_FLAGS_BACKUP}" == "UNSET" ]]\n'
        "  then\n"
        "    unset NVCC_PREPEND_FLAGS\n"
        "  else\n"
        '    export NVCC_PREPEND_FLAGS="${NVCC_PREPEND_FLAGS_BACKUP}"\n'
        "  fi\n"
        "  unset NVCC_PREPEND_FLAGS_BACKUP\n"
        "fi\n"
    )


def compiler_packages(subdir: str) -> list[PackageSpec]:
    """Host toolchain: gcc_<plat>/gxx_<plat> wrappers -> *_impl, sysroot, binutils, libgcc (linux); vs20xx (win)."""
    if is_win(subdir):
        return _win_runtime_packages() + [
            PackageSpec(
                "vswhere",
                "3.1.7",
                subdir=subdir,
                license="MIT",
                files={"Library/bin/vswhere.exe": "envlock test-channel placeholder for vswhere.exe\n"},
            ),
            PackageSpec(
                "vs2019_win-64",
                "19.29.30139",
                build_number=39,
                subdir=subdir,
                depends=["vswhere"],
                constrains=["vs_win-64 2019.11"],
                files={
                    "etc/conda/activate.d/vs2019_compiler_vars.bat": "@rem envlock test channel: vs2019 activation\n"
                },
            ),
            PackageSpec(
                "vs2022_win-64",
                "19.44.35207",
                build_number=39,
                subdir=subdir,
                depends=["vswhere"],
                constrains=["vs_win-64 2022.14"],
                files={
                    "etc/conda/activate.d/vs2022_compiler_vars.bat": "@rem envlock test channel: vs2022 activation\n"
                },
            ),
        ]
    plat, triplet = subdir, gnu_triplet(subdir)
    specs: list[PackageSpec] = [
        PackageSpec(
            "libgcc",
            "15.1.0",
            build_number=2,
            subdir=subdir,
            depends=["__glibc >=2.17,<3.0.a0"],
            license="GPL-3.0-only WITH GCC-exception-3.1",
            # No lib/libgcc_s.so.1: a fake one on LD_LIBRARY_PATH would break real programs.
            files={
                "share/licenses/libgcc/RUNTIME.LIBRARY.EXCEPTION": "GCC RUNTIME LIBRARY EXCEPTION (test channel)\n"
            },
        ),
        PackageSpec(
            "libstdcxx",
            "15.1.0",
            build_number=2,
            subdir=subdir,
            depends=["__glibc >=2.17,<3.0.a0", "libgcc 15.1.0"],
            license="GPL-3.0-only WITH GCC-exception-3.1",
            files={
                "share/licenses/libstdcxx/RUNTIME.LIBRARY.EXCEPTION": "GCC RUNTIME LIBRARY EXCEPTION (test channel)\n"
            },
        ),
        PackageSpec(
            f"binutils_{plat}",
            "2.43",
            build_number=4,
            subdir=subdir,
            license="GPL-3.0-only",
            files={f"bin/{triplet}-ld": "#!/bin/sh\necho 'GNU ld (GNU Binutils) 2.43'\n"},
            executables={f"bin/{triplet}-ld"},
        ),
    ]
    for glibc in ("2.17", "2.28"):
        specs.append(
            PackageSpec(
                f"sysroot_{plat}",
                glibc,
                build_number=8,
                subdir="noarch",
                depends=[f"__glibc >={glibc}"],
                license="LGPL-2.0-or-later AND GPL-2.0-or-later",
                files={
                    f"{triplet}/sysroot/usr/include/features.h": _header(
                        "features.h", f"sysroot {glibc}", f"#define __GLIBC_MINOR__ {glibc.split('.')[1]}"
                    )
                },
            )
        )
    for version in GCC_VERSIONS:
        lic = "GPL-3.0-only WITH GCC-exception-3.1"
        gcc_impl = PackageSpec(
            f"gcc_impl_{plat}",
            version,
            build_number=2,
            subdir=subdir,
            license=lic,
            depends=[f"libgcc >={version}", f"libstdcxx >={version}", f"sysroot_{plat}"],
            files={f"bin/{triplet}-gcc": gcc_script(f"{triplet}-gcc", version)},
            symlinks={f"bin/{triplet}-cc": f"{triplet}-gcc"},  # conda-forge ships both names
            executables={f"bin/{triplet}-gcc"},
        )
        gxx_impl = PackageSpec(
            f"gxx_impl_{plat}",
            version,
            build_number=2,
            subdir=subdir,
            license=lic,
            depends=[f"gcc_impl_{plat} {version} {gcc_impl.build}", f"sysroot_{plat}"],
            files={f"bin/{triplet}-g++": gcc_script(f"{triplet}-g++", version)},
            symlinks={f"bin/{triplet}-c++": f"{triplet}-g++"},
            executables={f"bin/{triplet}-g++"},
        )
        gcc = PackageSpec(
            f"gcc_{plat}",
            version,
            build_number=11,
            subdir=subdir,
            license="BSD-3-Clause",
            depends=[f"gcc_impl_{plat} {version}.*", f"binutils_{plat}", f"sysroot_{plat}"],
            files={
                f"etc/conda/activate.d/activate-gcc_{plat}.sh": _gcc_activate_sh(triplet, "CC", "cc"),
                f"etc/conda/deactivate.d/deactivate-gcc_{plat}.sh": _gcc_deactivate_sh("CC"),
            },
        )
        gxx = PackageSpec(
            f"gxx_{plat}",
            version,
            build_number=11,
            subdir=subdir,
            license="BSD-3-Clause",
            depends=[
                f"gxx_impl_{plat} {version}.*",
                f"gcc_{plat} =={version} {gcc.build}",
                f"binutils_{plat}",
                f"sysroot_{plat}",
            ],
            files={
                f"etc/conda/activate.d/activate-gxx_{plat}.sh": _gcc_activate_sh(triplet, "CXX", "c++"),
                f"etc/conda/deactivate.d/deactivate-gxx_{plat}.sh": _gcc_deactivate_sh("CXX"),
            },
        )
        specs += [gcc_impl, gxx_impl, gcc, gxx]
    return specs


def _gcc_activate_sh(triplet: str, var: str, tool: str) -> str:
    """conda-forge's activate-gcc.sh/activate-g++.sh in their `_tc_activation` shape, cut to the compiler.

    Like the real one: CC=${CONDA_PREFIX}/bin/<triplet>-cc and CXX=…-c++ (the -cc/-c++ names, not -gcc/-g++),
    reads ${CONDA_PREFIX} unguarded (so it fails under `set -u` without it), keeps the
    old value in CONDA_BACKUP_<VAR> only when there was one (else unsets the backup), and exports HOST
    and CONDA_BUILD_SYSROOT the same way.
    """
    pairs = [(var, f"${{CONDA_PREFIX}}/bin/{triplet}-{tool}"), ("HOST", triplet),
             ("CONDA_BUILD_SYSROOT", f"${{CONDA_PREFIX}}/{triplet}/sysroot")]
    lines = ["#!/bin/bash", "# envlock test channel: conda-forge ctng-compiler-activation's _tc_activation, cut down."]
    for name, value in pairs:
        lines += [
            f'oldval="${{{name}}}"',
            f'if [ -n "${{oldval}}" ]; then export CONDA_BACKUP_{name}="${{oldval}}"; else unset CONDA_BACKUP_{name}; fi',
            f'export {name}="{value}"',
        ]
    return "\n".join(lines) + "\n"


def _gcc_deactivate_sh(var: str) -> str:
    """The matching deactivate-*.sh: each variable back from CONDA_BACKUP_<VAR>, else unset."""
    lines = ["#!/bin/bash", "# envlock test channel: conda-forge ctng-compiler-activation's deactivation, cut down."]
    for name in (var, "HOST", "CONDA_BUILD_SYSROOT"):
        lines += [
            f'oldval="${{CONDA_BACKUP_{name}}}"',
            f'if [ -n "${{oldval}}" ]; then export {name}="${{oldval}}"; else unset {name}; fi',
            f"unset CONDA_BACKUP_{name}",
        ]
    return "\n".join(lines) + "\n"


def _win_runtime_packages() -> list[PackageSpec]:
    """ucrt / vc / vc14_runtime, which conda-forge win-64 binaries depend on."""
    return [
        PackageSpec(
            "ucrt",
            "10.0.22621.0",
            subdir="win-64",
            license="LicenseRef-MicrosoftWindowsSDK10",
            files={"Library/bin/ucrtbase.dll": _stub_lib("ucrtbase", "ucrt")},
        ),
        PackageSpec(
            "vc14_runtime",
            "14.44.35208",
            build_number=26,
            subdir="win-64",
            depends=["ucrt >=10.0.20348.0"],
            constrains=["vs2015_runtime 14.44.35208.* *_26"],
            license="LicenseRef-MicrosoftVisualCpp2015-2022Runtime",
            files={"Library/bin/vcruntime140.dll": _stub_lib("vcruntime140", "vc14_runtime")},
        ),
        PackageSpec("vc", "14.3", build_number=26, subdir="win-64", depends=["vc14_runtime >=14.44.35208"]),
    ]


def python_packages(subdir: str, pythons: Iterable[str]) -> list[PackageSpec]:
    """CPython X.Y per subdir (the binary is a script stand-in) plus noarch python_abi."""
    specs: list[PackageSpec] = []
    for xy in pythons:
        full, nodot = PYTHON_VERSIONS[xy], xy.replace(".", "")
        if is_win(subdir):
            files: dict[str, bytes | str] = {
                "python.exe": f"envlock test-channel placeholder for python.exe {full}\n",
                "Lib/site-packages/README.txt": "site-packages\n",
            }
            links: dict[str, str] = {}
            execs: set[str] = set()
            deps = _runtime_deps(subdir)
        else:
            files = {
                f"bin/python{xy}": _python_script(full),
                f"lib/python{xy}/site-packages/README.txt": "site-packages\n",
            }
            links = {"bin/python3": f"python{xy}", "bin/python": f"python{xy}"}
            execs = {f"bin/python{xy}"}
            deps = ["__glibc >=2.17,<3.0.a0", "libgcc >=13"]
        specs.append(
            PackageSpec(
                "python",
                full,
                build_number=1,
                subdir=subdir,
                build_suffix="_cpython",
                license="Python-2.0",
                depends=deps,
                constrains=[f"python_abi {xy}.* *_cp{nodot}"],
                files=files,
                symlinks=links,
                executables=execs,
            )
        )
    return specs


def python_abi_packages(pythons: Iterable[str]) -> list[PackageSpec]:
    """noarch python_abi X.Y (build `8_cpXY`, as conda-forge's current ones)."""
    return [
        PackageSpec(
            "python_abi",
            xy,
            build=f"8_cp{xy.replace('.', '')}",
            build_number=8,
            subdir="noarch",
            constrains=[f"python {xy}.* *_cpython"],
        )
        for xy in pythons
    ]


def _python_script(full: str) -> str:
    """`bin/pythonX.Y` stand-in: answers --version; delegates anything else to a real interpreter."""
    return (
        "#!/bin/sh\n"
        f"# envlock test-channel stand-in for CPython {full}.\n"
        f'case "${{1:-}}" in --version|-V) echo "Python {full}"; exit 0 ;; esac\n'
        'exec "${ENVLOCK_TEST_REAL_PYTHON:-/usr/bin/python3}" "$@"\n'
    )


def cudnn_packages(subdir: str, cuda_majors: Iterable[int]) -> list[Tagged]:
    """cuDNN per conda-forge: 8.x one `cudnn` package; 9.x cudnn -> libcudnn-dev -> libcudnn; major-family pins."""
    out: list[Tagged] = []
    win = is_win(subdir)
    rt = _runtime_deps(subdir)
    inc = "Library/include" if win else "include"  # cuDNN headers sit in $PREFIX/include, not targets/
    for version, majors in CUDNN_VERSIONS.items():
        cmaj, cmin, patch = version.split(".")[:3]
        hdr = {
            f"{inc}/cudnn_version.h": _header(
                "cudnn_version.h",
                "cudnn",
                f"#define CUDNN_MAJOR {cmaj}",
                f"#define CUDNN_MINOR {cmin}",
                f"#define CUDNN_PATCHLEVEL {patch}",
            ),
            f"{inc}/cudnn.h": _header("cudnn.h", "cudnn", '#include "cudnn_version.h"'),
        }
        for major in majors:
            if major not in cuda_majors:
                continue
            pin = f"cuda-version >={major},<{major + 1}.0a0"
            # cuDNN 9 needs glibc 2.28 on linux (as conda-forge's libcudnn does).
            rtd = rt if win else ["__glibc >=2.28,<3.0.a0", "libgcc >=13", "libstdcxx >=13"]
            if win:
                lib_files: dict[str, bytes | str] = {
                    f"Library/bin/cudnn64_{cmaj}.dll": _stub_lib("cudnn", "libcudnn")
                }
                lib_links: dict[str, str] = {}
                dev_extra: dict[str, bytes | str] = {
                    "Library/lib/cudnn.lib": _stub_lib("cudnn", "libcudnn-dev")
                }
                dev_links: dict[str, str] = {}
            else:
                lib_files = {f"lib/libcudnn.so.{version}": lib_bytes(subdir, "libcudnn", version, "libcudnn")}
                lib_links = {f"lib/libcudnn.so.{cmaj}": f"libcudnn.so.{version}"}
                dev_extra, dev_links = {}, {"lib/libcudnn.so": f"libcudnn.so.{cmaj}"}
            # CUDA-11 builds take their CUDA libraries from cudatoolkit; CUDA 12+ builds from the split packages.
            base_deps = (
                ["cudatoolkit 11.*", pin, *rtd] if major == 11 else ["cuda-nvrtc", pin, "libcublas", *rtd]
            )
            if cmaj == "8":
                out.append(
                    (
                        str(major),
                        PackageSpec(
                            "cudnn",
                            version,
                            subdir=subdir,
                            license="LicenseRef-cuDNN-Software-License-Agreement",
                            depends=base_deps,
                            files={**lib_files, **hdr, **dev_extra},
                            symlinks={**lib_links, **dev_links},
                        ),
                    )
                )
                continue
            lib = PackageSpec(
                "libcudnn",
                version,
                subdir=subdir,
                license="LicenseRef-cuDNN-Software-License-Agreement",
                depends=base_deps,
                constrains=["libcudnn-jit <0a"],
                files=lib_files,
                symlinks=lib_links,
            )
            dev = PackageSpec(
                "libcudnn-dev",
                version,
                subdir=subdir,
                license="LicenseRef-cuDNN-Software-License-Agreement",
                depends=[f"libcudnn {version} {lib.build}", pin, *rtd],
                constrains=["libcudnn-jit-dev <0a"],
                files={**hdr, **dev_extra},
                symlinks=dev_links,
            )
            meta = PackageSpec(
                "cudnn",
                version,
                subdir=subdir,
                license="LicenseRef-cuDNN-Software-License-Agreement",
                depends=[f"libcudnn-dev {version} {dev.build}", pin, *rtd],
                constrains=["cudnn-jit <0a"],
            )
            out += [(str(major), lib), (str(major), dev), (str(major), meta)]
    return out


def pytorch_packages(
    subdir: str, pythons: Iterable[str], minors: Mapping[str, CudaMinor], *, cuda11: bool = True
) -> list[Tagged]:
    """conda-forge pytorch CUDA builds (small but real-shaped dependency sets), tagged with their CUDA minor."""
    out: list[Tagged] = []
    win = is_win(subdir)
    for torch, minor in PYTORCH_BUILDS.get(subdir, ()):
        if minor == "11.8":
            if cuda11:
                out += _pytorch_cuda118(subdir, torch, pythons)
            continue
        cm = minors.get(minor)
        if cm is None:
            continue
        xy_tag = minor.replace(".", "")
        new_style = tuple(int(p) for p in torch.split(".")[:2]) >= (2, 5)
        cudnn = "cudnn >=9.3.0.75,<10.0a0" if new_style else "cudnn >=8.9.7.29,<9.0a0"
        for xy in pythons:
            nodot = xy.replace(".", "")
            x, y = xy.split(".")
            prefix = f"cuda{xy_tag}_generic_py{nodot}_" if new_style else f"cuda{xy_tag}_py{nodot}"
            sp = "Lib/site-packages" if win else f"lib/python{xy}/site-packages"
            deps = [
                "__cuda",
                f"cuda-cudart >={cm.cudart},<{cm.major + 1}.0a0",
                f"cuda-nvrtc >={cm.nvrtc},<{cm.major + 1}.0a0",
                f"cuda-version >={minor},<{cm.major + 1}",
                cudnn,
                f"libcublas >={cm.cublas},<{int(cm.cublas.split('.')[0]) + 1}.0a0",
                f"libcusparse >={cm.cusparse},<{int(cm.cusparse.split('.')[0]) + 1}.0a0",
                f"libcusolver >={cm.cusolver},<{int(cm.cusolver.split('.')[0]) + 1}.0a0",
                f"python >={xy},<{x}.{int(y) + 1}.0a0",
                f"python_abi {xy}.* *_cp{nodot}",
                *(
                    _runtime_deps(subdir)
                    if win
                    else ["__glibc >=2.17,<3.0.a0", "libgcc >=13", "libstdcxx >=13"]
                ),
            ]
            files: dict[str, bytes | str] = {
                f"{sp}/torch/__init__.py": f'"""envlock test-channel stand-in for torch {torch}."""\n__version__ = "{torch}"\nfrom . import version\n',
                f"{sp}/torch/version.py": f'__version__ = "{torch}"\ncuda = "{minor}"\ngit_version = "0000000"\nhip = None\n',
            }
            out.append(
                (
                    minor,
                    PackageSpec(
                        "pytorch",
                        torch,
                        build_number=301 if not new_style else 201,
                        subdir=subdir,
                        build_prefix=prefix,
                        depends=deps,
                        constrains=["pytorch-cpu <0.0a0", f"pytorch-gpu {torch}"],
                        files=files,
                    ),
                )
            )
    return out


def _pytorch_cuda118(subdir: str, torch: str, pythons: Iterable[str]) -> list[Tagged]:
    """A CUDA 11.8 conda-forge pytorch build: CUDA from cudatoolkit (facts §2: 2.4.0 cuda118 example)."""
    out: list[Tagged] = []
    for xy in pythons:
        nodot = xy.replace(".", "")
        x, y = xy.split(".")
        sp = f"lib/python{xy}/site-packages"
        deps = [
            "__cuda",
            "__glibc >=2.17,<3.0.a0",
            "cudatoolkit >=11.8,<12",
            "cuda-version >=11.8,<12",
            "cudnn >=8.9.7.29,<9.0a0",
            "libgcc >=13",
            "libstdcxx >=13",
            f"python >={xy},<{x}.{int(y) + 1}.0a0",
            f"python_abi {xy}.* *_cp{nodot}",
        ]
        files: dict[str, bytes | str] = {
            f"{sp}/torch/__init__.py": f'"""envlock test-channel stand-in for torch {torch}."""\n__version__ = "{torch}"\nfrom . import version\n',
            f"{sp}/torch/version.py": f'__version__ = "{torch}"\ncuda = "11.8"\ngit_version = "0000000"\nhip = None\n',
        }
        out.append(
            (
                "11.8",
                PackageSpec(
                    "pytorch",
                    torch,
                    build_number=301,
                    subdir=subdir,
                    build_prefix=f"cuda118_py{nodot}",
                    depends=deps,
                    constrains=["pytorch-cpu <0.0a0", f"pytorch-gpu {torch}"],
                    files=files,
                ),
            )
        )
    return out


def cudatoolkit_packages(subdir: str) -> list[PackageSpec]:
    """Pre-12 conda-forge: cudatoolkit 11.8.0 (runtime libs only) and cudatoolkit-dev 11.7.0 (post-link downloader)."""
    if subdir not in ("linux-64", "win-64"):
        return []
    win = is_win(subdir)
    if win:
        tk_files: dict[str, bytes | str] = {
            "Library/bin/cudart64_110.dll": _stub_lib("cudart", "cudatoolkit")
        }
        tk_links: dict[str, str] = {}
        dev_files: dict[str, bytes | str] = {
            "Scripts/.cudatoolkit-dev-post-link.bat": _cudatoolkit_dev_post_link("bat")
        }
    else:
        tk_files = {
            "lib/libcudart.so.11.8.89": lib_bytes(subdir, "libcudart", "11.8.89", "cudatoolkit", "11.0")
        }
        tk_links = {"lib/libcudart.so.11.0": "libcudart.so.11.8.89"}
        dev_files = {"bin/.cudatoolkit-dev-post-link.sh": _cudatoolkit_dev_post_link("sh")}
    deps = _runtime_deps(subdir, 12)
    return [
        PackageSpec(
            "cudatoolkit",
            "11.8.0",
            build_number=13,
            subdir=subdir,
            depends=deps,
            constrains=["__cuda >=11"],
            license=NVIDIA_LICENSE,
            files=tk_files,
            symlinks=tk_links,
        ),
        PackageSpec(
            "cudatoolkit-dev",
            "11.7.0",
            build_number=6,
            subdir=subdir,
            depends=["python"],
            license=NVIDIA_LICENSE,
            files=dev_files,
        ),
    ]


def _cudatoolkit_dev_post_link(kind: str) -> str:
    """Content of cudatoolkit-dev's post-link script: it downloads NVIDIA's installer (envlock never runs it)."""
    if kind == "bat":
        return (
            "@rem cudatoolkit-dev post-link: downloads the CUDA 11.7 installer from NVIDIA and runs it.\n"
            '"%PREFIX%\\python.exe" "%PREFIX%\\Scripts\\cudatoolkit-dev-extra.py"\n'
        )
    return (
        "#!/bin/bash\n# cudatoolkit-dev post-link: downloads the CUDA 11.7 runfile from NVIDIA and installs it.\n"
        '"${PREFIX}/bin/python" "${PREFIX}/bin/cudatoolkit-dev-extra.py" || exit 1\n'
    )


def cuda11_version_packages() -> list[PackageSpec]:
    """noarch cuda-version 11.7 / 11.8 (the CUDA-11 tail conda-forge still has)."""
    return [cuda_version_packages(minor) for minor in ("11.7", "11.8")]


# ---------------------------------------------------------------------------------------------------
# Channels
# ---------------------------------------------------------------------------------------------------


def conda_forge_catalog(
    *,
    cuda_minors: Iterable[str] | None = None,
    subdirs: Iterable[str] = ALL_SUBDIRS,
    pythons: Iterable[str] = DEFAULT_PYTHONS,
    with_pytorch: bool = True,
    with_cudnn: bool = True,
    with_cuda11: bool = True,
) -> list[Tagged]:
    """Every (tag, spec) of the conda-forge-shaped test channel, before `drop`/`extra` are applied."""
    minors = {m: CUDA_MINORS[m] for m in (CUDA_MINORS if cuda_minors is None else cuda_minors)}
    unknown = set(cuda_minors or ()) - set(CUDA_MINORS)
    if unknown:
        raise ValueError(f"no such CUDA minor in the test channel: {sorted(unknown)} (there is no 12.7)")
    pythons, subdirs = tuple(pythons), tuple(subdirs)
    out: list[Tagged] = [(m, cuda_version_packages(m)) for m in minors]
    out += [(None, s) for s in python_abi_packages(pythons)]
    if with_cuda11:
        out += [(s.version, s) for s in cuda11_version_packages()]
    majors = sorted({cm.major for cm in minors.values()})
    if "linux-aarch64" in subdirs:
        out.append((None, PackageSpec("arm-variant", "1.2.0", build="sbsa", subdir="noarch")))
    for subdir in subdirs:
        for m, cm in minors.items():
            out += [(m, s) for s in cuda_minor_packages(cm, subdir)]
        out += [(None, s) for s in compiler_packages(subdir)]
        from tests.channel_extras import beside_packages  # NCCL, cuSPARSELt, Eigen, …: one build per CUDA major

        out += beside_packages(subdir, [*majors, *([11] if with_cuda11 else [])])
        out += [(None, s) for s in python_packages(subdir, pythons)]
        cuda11 = with_cuda11 and subdir in ("linux-64", "win-64")  # where cudatoolkit is built
        if with_cudnn:
            out += cudnn_packages(subdir, [11, *majors] if cuda11 else majors)
        if with_pytorch:
            out += pytorch_packages(subdir, pythons, minors, cuda11=cuda11)
        if with_cuda11:
            out += [("11.8" if s.name == "cudatoolkit" else "11.7", s) for s in cudatoolkit_packages(subdir)]
    return out


def _dropped(tag: str | None, spec: PackageSpec, drop: Iterable[tuple[str, str | None]]) -> bool:
    """`(name, tag)` drops that name for that CUDA minor/major tag; `(name, "*")` or `(name, None)` drops it everywhere."""
    for name, which in drop:
        if name == spec.name and (which in ("*", None) or which == tag):
            return True
    return False


def write_packages(specs: Iterable[PackageSpec], channel_dir: Path) -> list[Path]:
    """Write each spec into channel_dir/<subdir>/, refusing duplicate filenames (they would shadow each other)."""
    seen: dict[str, PackageSpec] = {}
    paths: list[Path] = []
    for spec in specs:
        key = f"{spec.subdir}/{spec.filename}"
        if key in seen:
            raise ValueError(f"duplicate package {key}")
        seen[key] = spec
        paths.append(write_package(spec, channel_dir / spec.subdir))
    return paths


def index_channel(
    channel_dir: Path, *, write_zst: bool = True, write_shards: bool = True
) -> dict[str, list[str]]:
    """Index channel_dir with `rattler.index.index_fs`; return the repodata files written per subdir.

    rattler stamps every record with `indexed_timestamp` = now (what `exclude_newer` compares). To keep
    repodata reproducible, a first pass indexes, each record's `indexed_timestamp` is set to its own
    `timestamp`, and a second incremental pass (which keeps existing records) writes .zst and shards.
    """
    from rattler.index import index_fs  # rattler only when indexing (keeps `import channelbuilder` light)

    (channel_dir / "noarch").mkdir(parents=True, exist_ok=True)  # rattler requires noarch to exist
    asyncio.run(index_fs(channel_dir, write_zst=False, write_shards=False, force=True))
    subdirs = sorted(p for p in channel_dir.iterdir() if p.is_dir() and (p / "repodata.json").is_file())
    for sub in subdirs:
        _pin_indexed_timestamps(sub / "repodata.json")
    asyncio.run(index_fs(channel_dir, write_zst=write_zst, write_shards=write_shards, force=False))
    return {
        sub.name: sorted(p.name for p in sub.iterdir() if p.name.startswith("repodata")) for sub in subdirs
    }


def _pin_indexed_timestamps(repodata_json: Path) -> None:
    """Set each record's indexed_timestamp to its build timestamp."""
    doc = json.loads(repodata_json.read_text())
    for key in ("packages", "packages.conda"):
        for record in doc.get(key, {}).values():
            record["indexed_timestamp"] = record.get("timestamp", FIXED_TIMESTAMP_MS)
    repodata_json.write_text(json.dumps(doc, separators=(",", ":"), sort_keys=True))


def build_channel(
    root: Path,
    *,
    name: str = "conda-forge",
    cuda_minors: Iterable[str] | None = None,
    subdirs: Iterable[str] = ALL_SUBDIRS,
    pythons: Iterable[str] = DEFAULT_PYTHONS,
    drop: Iterable[tuple[str, str | None]] = (),
    extra: Iterable[PackageSpec] = (),
    with_pytorch: bool = True,
    with_cudnn: bool = True,
    with_cuda11: bool = True,
    write_zst: bool = True,
    write_shards: bool = True,
    fmt: str = ".tar.bz2",
) -> Path:
    """Write the conda-forge-shaped test channel under root/<name> and index it; return the channel dir."""
    channel = Path(root) / name
    subdirs = tuple(subdirs)
    drop = tuple(drop)
    catalog = conda_forge_catalog(
        cuda_minors=cuda_minors,
        subdirs=subdirs,
        pythons=pythons,
        with_pytorch=with_pytorch,
        with_cudnn=with_cudnn,
        with_cuda11=with_cuda11,
    )
    specs = [s for tag, s in catalog if not _dropped(tag, s, drop)]
    for spec in specs:
        spec.fmt = fmt  # the build string does not depend on the format, so names stay comparable
    write_packages([*specs, *extra], channel)
    for sub in subdirs:
        (channel / sub).mkdir(parents=True, exist_ok=True)  # an empty subdir still gets a repodata.json
    index_channel(channel, write_zst=write_zst, write_shards=write_shards)
    return channel


NVIDIA_118 = {
    "cuda-cccl": "11.8.89",
    "cuda-cudart": "11.8.89",
    "cuda-cudart-dev": "11.8.89",
    "cuda-nvcc": "11.8.89",
    "cuda-nvrtc": "11.8.89",
    "cuda-nvrtc-dev": "11.8.89",
    "libcublas": "11.11.3.6",
    "libcublas-dev": "11.11.3.6",
    "libcusparse": "11.7.5.86",
    "libcusparse-dev": "11.7.5.86",
    "libcusolver": "11.4.1.48",
    "libcusolver-dev": "11.4.1.48",
    "libcurand": "10.3.0.86",
    "libcurand-dev": "10.3.0.86",
    "cuda-profiler-api": "11.8.86",
    "libnvjitlink": None,
}


def nvidia_label_packages(subdir: str) -> list[PackageSpec]:
    """The nvidia/label/cuda-11.8.0 split packages (build `0`, `>=` deps, files in $PREFIX/include and lib)."""
    v = {k: x for k, x in NVIDIA_118.items() if x}
    win = is_win(subdir)
    inc = "Library/include" if win else "include"
    lic = NVIDIA_LICENSE

    def lib(name: str, libname: str, version: str) -> PackageSpec:
        if win:
            files: dict[str, bytes | str] = {
                f"Library/bin/{libname.removeprefix('lib')}64_11.dll": _stub_lib(libname, name)
            }
            links: dict[str, str] = {}
        else:
            files = {f"lib/{libname}.so.{version}": lib_bytes(subdir, libname, version, name)}
            links = {f"lib/{libname}.so.{version.split('.')[0]}": f"{libname}.so.{version}"}
        return PackageSpec(name, version, build="0", subdir=subdir, license=lic, files=files, symlinks=links)

    def dev(name: str, libname: str, version: str, headers: dict[str, str], deps: list[str]) -> PackageSpec:
        files: dict[str, bytes | str] = {f"{inc}/{h}": _header(h, name, body) for h, body in headers.items()}
        links: dict[str, str] = {}
        if win:
            files[f"Library/lib/{libname.removeprefix('lib')}.lib"] = _stub_lib(libname, name)
        else:
            links[f"lib/{libname}.so"] = f"{libname}.so.{version.split('.')[0]}"
        return PackageSpec(
            name, version, build="0", subdir=subdir, license=lic, depends=deps, files=files, symlinks=links
        )

    if win:
        nvcc_files: dict[str, bytes | str] = {
            "Library/bin/nvcc.exe": "envlock test-channel placeholder for nvcc.exe 11.8.89\n",
            "Library/nvvm/bin/cicc.exe": "placeholder\n",
        }
        nvcc_execs: set[str] = set()
    else:
        nvcc_files = {
            "bin/nvcc": nvcc_script("11.8.89", 31833905, "Wed_Sep_21_10:33:58_PDT_2022"),
            "nvvm/bin/cicc": "#!/bin/sh\nexit 1\n",
        }
        nvcc_execs = {"bin/nvcc", "nvvm/bin/cicc"}
    return [
        PackageSpec(
            "cuda-cccl",
            v["cuda-cccl"],
            build="0",
            subdir=subdir,
            license=lic,
            files={
                f"{inc}/cuda/std/version": _header(
                    "cuda/std/version", "cuda-cccl", "#define _LIBCUDACXX_CUDA_API_VERSION 11008"
                )
            },
        ),
        lib("cuda-cudart", "libcudart", v["cuda-cudart"]),
        dev(
            "cuda-cudart-dev",
            "libcudart",
            v["cuda-cudart-dev"],
            {
                "cuda_runtime_api.h": "#define CUDART_VERSION 11080",
                "cuda_runtime.h": '#include "cuda_runtime_api.h"',
                "cuda.h": "#define CUDA_VERSION 11080",
            },
            ["cuda-cccl", f"cuda-cudart >={v['cuda-cudart']}"],
        ),
        PackageSpec(
            "cuda-nvcc",
            v["cuda-nvcc"],
            build="0",
            subdir=subdir,
            license=lic,
            files=nvcc_files,
            executables=nvcc_execs,
        ),
        lib("cuda-nvrtc", "libnvrtc", v["cuda-nvrtc"]),
        dev(
            "cuda-nvrtc-dev",
            "libnvrtc",
            v["cuda-nvrtc-dev"],
            {"nvrtc.h": "#define NVRTC_VERSION 11080"},
            [f"cuda-nvrtc >={v['cuda-nvrtc']}"],
        ),
        lib("libcublas", "libcublas", v["libcublas"]),
        dev(
            "libcublas-dev",
            "libcublas",
            v["libcublas-dev"],
            {
                "cublas_api.h": "#define CUBLAS_VER_MAJOR 11",
                "cublas_v2.h": '#include "cublas_api.h"',
                "cublasLt.h": "#define CUBLASLT_VERSION_MAJOR 11",
            },
            [f"libcublas >={v['libcublas']}"],
        ),
        lib("libcusparse", "libcusparse", v["libcusparse"]),
        dev(
            "libcusparse-dev",
            "libcusparse",
            v["libcusparse-dev"],
            {"cusparse.h": "#define CUSPARSE_VER_MAJOR 11"},
            [f"libcusparse >={v['libcusparse']}"],
        ),
        lib("libcusolver", "libcusolver", v["libcusolver"]),
        dev(
            "libcusolver-dev",
            "libcusolver",
            v["libcusolver-dev"],
            {
                "cusolver_common.h": "#define CUSOLVER_VER_MAJOR 11",
                "cusolverDn.h": '#include "cusolver_common.h"',
            },
            [f"libcusolver >={v['libcusolver']}"],
        ),
        lib("libcurand", "libcurand", v["libcurand"]),
        dev(
            "libcurand-dev",
            "libcurand",
            v["libcurand-dev"],
            {"curand.h": "#define CURAND_VER_MAJOR 10", "curand_kernel.h": '#include "curand.h"'},
            [f"libcurand >={v['libcurand']}"],
        ),
        PackageSpec(
            "cuda-profiler-api",
            v["cuda-profiler-api"],
            build="0",
            subdir=subdir,
            license=lic,
            files={f"{inc}/cuda_profiler_api.h": _header("cuda_profiler_api.h", "cuda-profiler-api", "")},
        ),
    ]


def build_nvidia_label_channel(
    root: Path,
    *,
    subdirs: Iterable[str] = ("linux-64", "win-64"),
    write_zst: bool = True,
    write_shards: bool = True,
) -> Path:
    """Write and index root/nvidia/label/cuda-11.8.0 (cuda-nvcc 11.8.89 & co.); return the channel dir."""
    channel = Path(root) / "nvidia" / "label" / "cuda-11.8.0"
    write_packages([s for sub in subdirs for s in nvidia_label_packages(sub)], channel)
    index_channel(channel, write_zst=write_zst, write_shards=write_shards)
    return channel


def build_all(root: Path, **kwargs: Any) -> Path:
    """Build conda-forge + nvidia/label/cuda-11.8.0 under root (the layout `ChannelServer` serves); return root."""
    build_channel(root, **kwargs)
    build_nvidia_label_channel(
        root, write_zst=kwargs.get("write_zst", True), write_shards=kwargs.get("write_shards", True)
    )
    return Path(root)


# ---------------------------------------------------------------------------------------------------
# HTTP server with request log and fault injection
# ---------------------------------------------------------------------------------------------------


@dataclass
class RequestRecord:
    """One request the server answered."""

    method: str
    path: str
    status: int
    bytes_sent: int
    fault: str | None = None
    authorization: str | None = None  # the Authorization header, if any (credential tests)
    token: str | None = None  # a conda `/t/<token>/` path prefix, if any (stripped before serving)


@dataclass
class Fault:
    """An injected fault: `action` for requests whose path matches `pattern`, `times` times (None = always).

    Actions: "status:NNN" (answer NNN, empty body), "close-mid-body" / "truncate" (send headers with the full
    Content-Length and half the body, then drop the connection), "stall:SECONDS" (sleep, then answer
    normally), "corrupt" (flip the first 64 body bytes, same length), "reset" (close without any response),
    "redirect:BASE" (302 to BASE + the same path, e.g. another host's server).
    Paths may start with a conda token segment `/t/<token>/` (or `/<prefix>/t/<token>/`, as `/api/t/`): it is
    recorded and stripped with the prefix, so `http://user:pw@127.0.0.1:PORT/t/TOKEN/conda-forge` serves the
    channel (the Authorization header is logged).
    """

    pattern: str
    action: str
    times: int | None = None
    hits: int = 0

    def matches(self, path: str) -> bool:
        return fnmatch.fnmatchcase(path, self.pattern) and (self.times is None or self.hits < self.times)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files from the server root, with request logging and fault hooks."""

    server: _ThreadingServer
    protocol_version = "HTTP/1.1"  # keep-alive like a real CDN; rattler reuses connections

    def log_message(self, format: str, *args: Any) -> None:
        """Silence stderr access logging (tests read `requests` instead)."""

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _serve(self, *, head: bool) -> None:
        owner = self.server.owner
        owner._begin()
        try:
            self._answer(owner, head=head)
        finally:
            owner._end()

    def _answer(self, owner: ChannelServer, *, head: bool) -> None:
        path = self.path.split("?", 1)[0]
        self._token = None
        token = re.match(r"(?:/[^/]+)?/t/([^/]*)(/.*)", path)  # /t/<token>/…, or /<one prefix>/t/<token>/… (/api/t/)
        if token is not None:
            self._token, path = token.group(1), token.group(2)
            self.path = path
        owner = _Logging(owner, self)  # type: ignore[assignment]
        fault = owner._take_fault(path)
        action = fault.action if fault else ""
        if action.startswith("redirect:"):
            self.send_response(302)
            self.send_header("Location", action.split(":", 1)[1].rstrip("/") + path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            owner._record(RequestRecord(self.command, path, 302, 0, action))
            return
        if action.startswith("stall:"):
            time.sleep(float(action.split(":", 1)[1]))
        if action == "reset":
            owner._record(RequestRecord(self.command, path, 0, 0, action))
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if action.startswith("status:"):
            status = int(action.split(":", 1)[1])
            self.send_response(status)
            self.send_header("Content-Length", "0")
            if status == 503:
                self.send_header("Retry-After", "0")
            self.end_headers()
            owner._record(RequestRecord(self.command, path, status, 0, action))
            return
        fs_path = Path(self.translate_path(path))
        if fs_path.is_dir() and (fs_path / "index.html").is_file():  # a PEP 503 page (an `envlock mirror`'s pypi/)
            fs_path = fs_path / "index.html"
        if not fs_path.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            owner._record(RequestRecord(self.command, path, 404, 0, action or None))
            return
        body = fs_path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        if self.headers.get("If-None-Match") == etag and not action:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            owner._record(RequestRecord(self.command, path, 304, 0, None))
            return
        if action == "corrupt":
            body = bytes(b ^ 0xFF for b in body[:64]) + body[64:]
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(fs_path)))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Cache-Control", "public, max-age=0")
        self.end_headers()
        sent = 0
        if not head:
            if action in ("close-mid-body", "truncate"):
                half = body[: max(1, len(body) // 2)]
                self.wfile.write(half)
                self.wfile.flush()
                sent = len(half)
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            else:
                self.wfile.write(body)
                sent = len(body)
        owner._record(RequestRecord(self.command, path, 200, sent, action or None))


class _Logging:
    """The server as `_answer` sees it: records get the request's Authorization header and token."""

    def __init__(self, owner: ChannelServer, handler: _Handler) -> None:
        self._owner = owner
        self._handler = handler

    def _take_fault(self, path: str) -> Fault | None:
        return self._owner._take_fault(path)

    def _record(self, record: RequestRecord) -> None:
        record.authorization = self._handler.headers.get("Authorization")
        record.token = self._handler._token
        self._owner._record(record)


class _ThreadingServer(LoopbackServer):
    owner: ChannelServer


class ChannelServer:
    """Serve a channel root (holding conda-forge/, nvidia/label/...) on 127.0.0.1; usable as a context manager.

    `.url` is the base (http://127.0.0.1:PORT); `.channel_url("conda-forge")` a channel URL.
    `.log()` is the settled request log (`.requests` the live list); `.count(pattern)` / `.bytes_sent(pattern)`
    summarise it (fnmatch on the path) after waiting for in-flight requests to finish being logged.
    `.add_fault(pattern, action, times=None)` injects a fault (see `Fault`); `faults=` takes {pattern: action}.
    """

    def __init__(self, root: Path, *, faults: Mapping[str, str] | None = None, host: str = "127.0.0.1") -> None:
        self.root = Path(root)
        self.host = host  # e.g. a non-loopback address, for the plain-http refusal tests
        self.requests: list[RequestRecord] = []
        self.faults: list[Fault] = [Fault(p, a) for p, a in (faults or {}).items()]
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._server: _ThreadingServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> ChannelServer:
        """Bind port 0 on 127.0.0.1 and serve in a daemon thread."""
        root = str(self.root)

        def handler(*args: Any, **kwargs: Any) -> _Handler:
            return _Handler(*args, directory=root, **kwargs)

        self._server = _ThreadingServer((self.host, 0), handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="channel-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Shut the server down and close its socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ChannelServer:  # noqa: PYI034 - a plain class; Self needs py3.11
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def channel_url(self, name: str = "conda-forge") -> str:
        return f"{self.url}/{name.strip('/')}"

    # -- faults and the log ------------------------------------------------------------------------
    def add_fault(self, pattern: str, action: str, times: int | None = None) -> Fault:
        """Inject `action` for paths matching `pattern` (e.g. "*/linux-64/repodata.json", "status:503")."""
        fault = Fault(pattern, action, times)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until no request is being answered (a client can read a response before it is logged)."""
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout)

    def count(self, pattern: str = "*", *, status: int | None = None) -> int:
        """How many requests hit paths matching `pattern` (optionally with that status)."""
        self.settle()
        with self._lock:
            return sum(
                1
                for r in self.requests
                if fnmatch.fnmatchcase(r.path, pattern) and (status is None or r.status == status)
            )

    def bytes_sent(self, pattern: str = "*") -> int:
        """Body bytes sent for paths matching `pattern`."""
        self.settle()
        with self._lock:
            return sum(r.bytes_sent for r in self.requests if fnmatch.fnmatchcase(r.path, pattern))

    def paths(self) -> list[str]:
        """Requested paths in order."""
        self.settle()
        with self._lock:
            return [r.path for r in self.requests]

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(path):
                    fault.hits += 1
                    return fault
        return None

    def log(self) -> list[RequestRecord]:
        """A settled copy of the request log."""
        self.settle()
        with self._lock:
            return list(self.requests)

    def _begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def _end(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self.requests.append(record)


# ---------------------------------------------------------------------------------------------------
# Small helpers for tests that solve against the channel
# ---------------------------------------------------------------------------------------------------


def virtual_packages(subdir: str, *, cuda: str | None = "12.6", glibc: str = "2.28") -> list[Any]:
    """rattler GenericVirtualPackages for `subdir` (explicit, as envlock's plan writes them)."""
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    def vp(name: str, version: str) -> Any:
        return GenericVirtualPackage(PackageName(name), Version(version), BuildString("0"))

    out = [vp("__cuda", cuda)] if cuda else []
    if subdir.startswith("linux"):
        out += [vp("__glibc", glibc), vp("__linux", "6.0"), vp("__unix", "0")]
    elif is_win(subdir):
        out += [vp("__win", "0")]
    return out


def plain_source_config() -> Any:
    """SourceConfig that fetches only repodata.json (rattler otherwise probes .zst, .bz2 and shards)."""
    from rattler import SourceConfig

    return SourceConfig(zstd_enabled=False, bz2_enabled=False, sharded_enabled=False)
