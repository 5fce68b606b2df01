"""Checks of what a torch extension build needs: headers, libcudart, the host compilers (pure).

Codes: header.<name>, cudart.loadable, host_compiler.version, host_compiler.ccbin.
"""

from __future__ import annotations

import re
from typing import Any

from envlock.doctor.data import CUDNN_HEADER, HEADERS, Tables
from envlock.doctor.hints import Hints
from envlock.doctor.observation import Compiler, Observation, Ran, flags_ccbin, vtuple
from envlock.models import Finding


def expects_cudnn(obs: Observation) -> bool:
    """cudnn.h is checked when the env locked cuDNN (create's record), else when the anchor names one, or
    CUDNN_HOME is set."""
    if obs.env.get("CUDNN_HOME") or obs.env.get("CUDNN_PATH"):
        return True
    activation = (obs.meta or {}).get("activation")
    if isinstance(activation, dict) and "has_cudnn" in activation:
        return bool(activation["has_cudnn"])
    return bool(obs.anchor.get("cudnn"))


def check_headers(obs: Observation, t: Tables) -> list[Finding]:
    """header.<name>: each header torch's ATen/cuda includes, where the host compiler finds it."""
    headers = dict(HEADERS)
    if expects_cudnn(obs):
        headers[CUDNN_HEADER[0]] = CUDNN_HEADER[1]
    hints = Hints(obs)
    findings = []
    for name, package in headers.items():
        hit = next(((via, d / name) for via, d in obs.host_dirs if obs.has_file(d, name)), None)
        details: dict[str, Any] = {"package": package, "searched": [str(d) for _, d in obs.host_dirs]}
        if hit:
            details["path"] = str(hit[1])
            findings.append(
                Finding(f"header.{name}", "ok", f"{name}: {hit[1]} (via {hit[0]})", details=details)
            )
            continue
        elsewhere = next((d / name for d in obs.nvcc_dirs if obs.has_file(d, name)), None)
        if elsewhere:
            details["path"] = str(elsewhere)
            hint = (
                (hints.activation() + " — it puts this dir on CPATH")
                if obs.meta is not None
                else f'export CPATH="{elsewhere.parent}${{CPATH:+:$CPATH}}"  (or CUDA_INC_PATH={elsewhere.parent})'
            )
            findings.append(
                Finding(
                    f"header.{name}",
                    "error",
                    f"{name} is in {elsewhere.parent}, which nvcc searches but "
                    "the host compiler does not (torch adds only $CUDA_HOME/include): a .cpp that "
                    f"includes ATen/cuda/CUDAContext.h fails with '{name}: No such file or directory'",
                    hint=hint,
                    details=details,
                )
            )
            continue
        findings.append(
            Finding(
                f"header.{name}",
                "error",
                f"{name} not found (looked in $CUDA_HOME/include, CPATH, "
                f"the host compiler's dirs, nvcc's dirs and targets/*/include of {obs.root})",
                hint=hints.package(package, name),
                details=details,
            )
        )
    return findings


def check_cudart(obs: Observation, t: Tables) -> list[Finding]:
    """cudart.loadable: libcudart loads by soname with the env's LD_LIBRARY_PATH and says its version."""
    hints = Hints(obs)
    if obs.cudart is None:
        return [
            Finding(
                "cudart.loadable",
                "error",
                f"no libcudart.so under {obs.root} (lib64, lib, targets/*/lib)",
                hint=hints.package("cuda-cudart-dev", "libcudart.so"),
            )
        ]
    lib, soname, doc = obs.cudart.file, obs.cudart.soname, obs.cudart.probe
    details = {"file": str(lib), "soname": soname, "LD_LIBRARY_PATH": obs.env.get("LD_LIBRARY_PATH"), **doc}
    if "loaded_by" not in doc:
        err = doc.get("path_error") or doc.get("probe_error") or "unknown error"
        return [
            Finding(
                "cudart.loadable",
                "error",
                f"{lib} does not load: {err}",
                hint=hints.package("cuda-cudart", "a loadable libcudart"),
                details=details,
            )
        ]
    version = obs.cudart.runtime
    shown = f"CUDA runtime {version}" if version else f"cudaRuntimeGetVersion rc={doc.get('rc')}"
    nv = obs.nvcc
    if nv and nv.minor and version and vtuple(nv.minor)[0] != vtuple(version)[0]:
        return [
            Finding(
                "cudart.loadable",
                "error",
                f"{doc.get('file') or lib} is {shown} but nvcc is {nv.minor}: a mixed toolkit",
                hint=hints.package("cuda-cudart-dev", "a matching cudart"),
                details=details,
            )
        ]
    if doc["loaded_by"] == "path":
        return [
            Finding(
                "cudart.loadable",
                "warning",
                f"{lib} loads by path ({shown}), but the dynamic loader does not "
                f"find {soname} by name with this LD_LIBRARY_PATH: programs linked against it fail outside torch",
                hint=(
                    hints.activation()
                    if obs.prefix
                    else f"append {lib.parent} to LD_LIBRARY_PATH (append, so torch's own CUDA libraries still win)"
                ),
                details=details,
            )
        ]
    return [Finding("cudart.loadable", "ok", f"{doc.get('file') or lib} loads ({shown})", details=details)]


def compiler_version(answer: Ran) -> tuple[str, str | None, str]:
    """(kind, version, first line) of a C/C++ compiler from its `--version` answer."""
    first = ((answer.out or answer.err).strip().splitlines() or [""])[0]
    if answer.rc != 0:
        return "missing", None, (answer.err or answer.out).strip()[-200:]
    kind = (
        "clang"
        if "clang" in first.lower()
        else "gcc"
        if re.search(r"gcc|g\+\+|GCC|\bcc\b|c\+\+", first)
        else "unknown"
    )
    versions = re.findall(r"\d+\.\d+(?:\.\d+)?", first)
    return kind, versions[-1] if versions else None, first


def check_host_compiler(obs: Observation, t: Tables) -> list[Finding]:
    """host_compiler.version: nvcc's host compiler and torch's $CXX against the newest gcc nvcc accepts."""
    nv = obs.nvcc
    limit = t.cuda.gcc_max(nv.minor) if nv and nv.minor else None
    seen: dict[str, Any] = {}
    problems, notes = [], []
    for role, cmd, answer in obs.compilers:
        kind, version, first = compiler_version(answer)
        seen[role] = {"command": list(cmd), "kind": kind, "version": version, "banner": first}
        label = f"{role}: {cmd[0]} {version or ''}".rstrip()
        if kind == "missing":
            problems.append(f"{role} {cmd[0]} does not run")
        elif kind == "gcc" and version and limit is not None and vtuple(version)[0] > limit:
            problems.append(
                f"{label} is newer than gcc {limit}, the newest nvcc {nv.minor if nv else ''} accepts"
            )
        else:
            notes.append(label)
    details = {
        "gcc_max": limit,
        "nvcc": nv.minor if nv else None,
        "compilers": seen,
        "nvcc_host_compiler_from": obs.nvcc_host_compiler_from,
    }
    if problems:
        hint = (
            f"{Hints(obs).activation()} — the env's own gcc/g++ (CC/CXX) are within the limit"
            if obs.meta is not None
            else f"use gcc <= {limit}: export CC=gcc-{limit} CXX=g++-{limit}, or add gcc_linux-64<{(limit or 0) + 1} "
            f"gxx_linux-64<{(limit or 0) + 1} (conda-forge)"
        )
        return [Finding("host_compiler.version", "error", "; ".join(problems), hint=hint, details=details)]
    if limit is None:
        return [
            Finding(
                "host_compiler.version",
                "warning",
                f"{'; '.join(notes)} (no gcc limit known for nvcc {nv.minor if nv else '?'})",
                details=details,
            )
        ]
    return [
        Finding(
            "host_compiler.version",
            "ok",
            f"{'; '.join(notes)} (nvcc {nv.minor if nv else ''} accepts gcc <= {limit})",
            details=details,
        )
    ]


def one_gcc_toolchain(a: Compiler, b: Compiler) -> bool:
    """Both are drivers of the same gcc install: same directory, same full version, same target.

    conda-forge's cuda-nvcc activation sets NVCC_PREPEND_FLAGS=-ccbin=$CXX and torch's extension builder
    adds -ccbin $CC: in an env with conda-forge's compilers those are the C and C++ drivers of one gcc
    install (x86_64-conda-linux-gnu-cc and -c++), and nvcc compiling with either gives the same build.
    """
    return (
        a.gcc and b.gcc
        and a.install is not None and a.install == b.install
        and a.version is not None and a.version == b.version
        and a.target is not None and a.target == b.target
    )  # fmt: skip


def _label(c: Compiler | None) -> str:
    """`gcc 13.3.0 in /x/bin` for a finding's message."""
    kind = "gcc" if c is not None and c.gcc else "compiler"
    return f"{kind} {(c.version if c else None) or '?'} in {(c.install if c else None) or '?'}"


def check_ccbin(obs: Observation, t: Tables) -> list[Finding]:
    """host_compiler.ccbin: NVCC_PREPEND_FLAGS=-ccbin=$CXX (conda-forge cuda-nvcc) plus torch's -ccbin $CC:
    what nvcc really does with both."""
    env, pre = obs.env, flags_ccbin(obs.env)
    details: dict[str, Any] = {
        "NVCC_PREPEND_FLAGS": env.get("NVCC_PREPEND_FLAGS"),
        "NVCC_APPEND_FLAGS": env.get("NVCC_APPEND_FLAGS"),
        "CC": env.get("CC"),
    }
    c, nv = obs.ccbin, obs.nvcc
    if c is None or nv is None:  # observe asks nvcc whenever there is a -ccbin in the flags, a CC and an nvcc
        return [
            Finding(
                "host_compiler.ccbin",
                "ok",
                "no -ccbin clash (no -ccbin in NVCC_*_FLAGS, or CC unset)",
                details=details,
            )
        ]
    if not obs.torch:  # the second -ccbin is torch's (-ccbin $CC); without torch there is no clash
        return [
            Finding(
                "host_compiler.ccbin",
                "ok",
                f"NVCC_*_FLAGS has -ccbin {pre} and CC is set, but torch is not "
                "importable here, and only torch's builder adds -ccbin $CC",
                details=details,
            )
        ]
    details.update(rc=c.rc, output=c.output, nvcc_said=c.said)
    if c.rc != 0:
        return [
            Finding(
                "host_compiler.ccbin",
                "error",
                f"nvcc {nv.version} refuses two -ccbin options (NVCC_*_FLAGS "
                f"has {pre}, torch adds -ccbin $CC={env['CC']}): {c.said or c.output}",
                hint="unset CC for torch builds, or drop -ccbin from NVCC_PREPEND_FLAGS",
                details=details,
            )
        ]
    if not c.said:
        return [
            Finding(
                "host_compiler.ccbin",
                "ok",
                f"nvcc accepts -ccbin {pre} (NVCC_*_FLAGS) with torch's -ccbin {env['CC']} silently",
                details=details,
            )
        ]
    used, dropped = c.used, c.dropped
    details["same_toolchain"] = same = bool(used and dropped and one_gcc_toolchain(used, dropped))
    if same and used is not None:  # conda-forge's -cc and -c++ of one gcc install: nothing changes
        return [
            Finding(
                "host_compiler.ccbin",
                "ok",
                f"nvcc {nv.version} uses torch's -ccbin $CC={env['CC']} (gcc {used.version}, "
                f"{used.target}); NVCC_*_FLAGS' {pre} is the C++ driver of the same gcc install, "
                "so nvcc's 'incompatible redefinition' warning changes nothing",
                details=details,
            )
        ]
    return [
        Finding(
            "host_compiler.ccbin",
            "warning",
            f"nvcc {nv.version} warns '{c.said}' and uses the last one: "
            f"torch's -ccbin $CC={env['CC']} wins over {pre}, a different compiler "
            f"({_label(used)} vs {_label(dropped)})",
            hint="point CC and CXX at one gcc install (e.g. the env's own x86_64-conda-linux-gnu-cc/-c++), "
            "or unset CC for torch builds",
            details=details,
        )
    ]
