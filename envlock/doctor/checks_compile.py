"""`--compile`: what the real builds did (observe ran them; these read the answers, pure).

Codes: compile.nvcc (nvcc compiles and links probe.cu, which runs), compile.torch_extension (load_inline).
"""

from __future__ import annotations

import re
from typing import Any

from envlock.doctor.data import Tables
from envlock.doctor.hints import Hints
from envlock.doctor.observation import Observation, extension_skip
from envlock.models import Finding


def error_lines(text: str, limit: int = 3) -> str:
    """The first compiler error lines of a build log (what a user needs to see)."""
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if re.search(r"error|fatal|undefined reference", ln, re.IGNORECASE)
    ]
    picked = [ln for ln in lines if "fatal error" in ln] or lines
    return " | ".join(picked[:limit]) or (text.strip().splitlines() or ["(no output)"])[-1]


def check_compile_nvcc(obs: Observation, t: Tables) -> list[Finding]:
    """compile.nvcc: probe.cu (cuda_runtime.h + cusparse.h) compiled, linked against the env's cudart, run."""
    nv, built, hints = obs.nvcc, obs.nvcc_build, Hints(obs)
    if nv is None or nv.error or built is None:  # observe builds whenever there is a working nvcc
        return [
            Finding(
                "compile.nvcc",
                "error",
                "not run: no working nvcc (see nvcc.found)",
                hint=hints.package("cuda-nvcc", "nvcc"),
            )
        ]
    log, seconds = built.build.err + built.build.out, built.seconds
    details: dict[str, Any] = {
        "command": list(built.command),
        "seconds": seconds,
        "rc": built.build.rc,
        "log": log.strip()[-2000:],
    }
    if built.build.rc != 0 or built.run is None:
        return [
            Finding(
                "compile.nvcc",
                "error",
                f"nvcc {nv.version} failed to compile+link probe.cu after {seconds} s: {error_lines(log)}",
                hint=hints.compile(log),
                details=details,
            )
        ]
    ran = built.run
    details.update(run_rc=ran.rc, run_output=(ran.out + ran.err).strip()[-400:])
    if ran.rc != 0:
        return [
            Finding(
                "compile.nvcc",
                "error",
                f"probe.cu compiled and linked ({seconds} s) but does not run: {(ran.out + ran.err).strip()[-200:]}",
                hint=hints.package("cuda-cudart", "libcudart"),
                details=details,
            )
        ]
    return [
        Finding(
            "compile.nvcc",
            "ok",
            f"nvcc {nv.version} compiled and linked a .cu including cuda_runtime.h and "
            f"cusparse.h in {seconds} s; it runs: {ran.out.strip()}",
            details=details,
        )
    ]


def check_compile_torch(obs: Observation, t: Tables) -> list[Finding]:
    """compile.torch_extension: load_inline built a kernel including ATen/cuda/CUDAContext.h (and ran it)."""
    skip = extension_skip(obs.python, obs.py)
    if skip is not None:
        return [Finding("compile.torch_extension", "skipped", skip)]
    doc = obs.torch_extension or {}  # observe builds whenever torch is a CUDA build
    stage = doc.get("stage")
    details = {k: (v[-3000:] if isinstance(v, str) else v) for k, v in doc.items()}
    if stage == "ran" and doc.get("correct"):
        return [
            Finding(
                "compile.torch_extension",
                "ok",
                f"load_inline built a kernel including ATen/cuda/CUDAContext.h "
                f"in {doc['build_seconds']} s and it ran correctly on {doc['device']}",
                details=details,
            )
        ]
    if stage == "built":
        return [
            Finding(
                "compile.torch_extension",
                "ok",
                f"load_inline built a kernel including ATen/cuda/CUDAContext.h in "
                f"{doc['build_seconds']} s (no GPU: not run)",
                details=details,
            )
        ]
    if stage == "ran":
        return [
            Finding(
                "compile.torch_extension",
                "error",
                f"the kernel built and ran on {doc.get('device')} but returned a wrong result",
                hint="check the driver (driver.version) and TORCH_CUDA_ARCH_LIST",
                details=details,
            )
        ]
    text = doc.get("error") or doc.get("probe_error") or "unknown failure"
    took = f" after {doc['seconds']} s" if doc.get("seconds") is not None else ""
    return [
        Finding(
            "compile.torch_extension",
            "error",
            f"load_inline failed{took}: {error_lines(text)}",
            hint=Hints(obs).compile(text),
            details=details,
        )
    ]
