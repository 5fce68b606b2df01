"""Observations for doctor's pure checks: made by hand, or replayed from a recorded `doctor --json` run.

An Observation is what observe.py saw (programs' answers, which files exist, the env): the checks' real
input, so a test needs no gcc, bash, nvcc or GPU. `green()` is a complete envlock env (the shape of
tests/test_doctor.py's constructed prefix: CUDA 12.6, headers in targets/x86_64-linux/include on CPATH,
a libcudart that loads by soname, gcc 13); `replay()` rebuilds what a recorded run saw from the details
its findings kept (docs/gpu-proof/ on an H200).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from envlock.doctor import HEADERS, diagnose
from envlock.doctor.data import load_tables
from envlock.doctor.observation import (
    Ccbin,
    Compiler,
    Cudart,
    Driver,
    LibCopy,
    Nvcc,
    NvccBuild,
    Observation,
    Ran,
    minor_of,
)
from envlock.models import Finding

REPO = Path(__file__).resolve().parent.parent
GPU_PROOF = REPO / "docs" / "gpu-proof"
OBSERVED = Path(__file__).resolve().parent / "data" / "observed"
TABLES = load_tables()

P = Path("/envs/train")
TARGET = "targets/x86_64-linux"
INC = P / TARGET / "include"
META = {
    "envlock_version": "0.1.0",
    "lock_path": "locks/train/conda-lock.yml",
    "content_hash": "abc",
    "platform": "linux-64",
    "env_name": "train",
    "anchor": {"torch": "2.6.0", "cuda": "12.6", "cudnn": None, "torch_source": "pip"},
}
NVCC_12_6 = Nvcc(P / "bin" / "nvcc", "12.6.85", "12.6", P, (INC,))


def gcc(version: str = "13.3.0", name: str = "gcc") -> Ran:
    """A gcc driver's `--version` answer."""
    return Ran(0, f"{name} (GCC) {version}\nCopyright (C) 2024 Free Software Foundation, Inc.\n")


GREEN = Observation(
    mode="prefix",
    prefix=P,
    env={
        "PATH": f"{P}/bin:/usr/bin:/bin",
        "CONDA_PREFIX": str(P),
        "CUDA_HOME": str(P),
        "CUDA_PATH": str(P),
        "CPATH": str(INC),
        "LD_LIBRARY_PATH": f"{P}/lib",
    },
    scripts=(f"{P}/etc/conda/activate.d/envlock-cuda.sh",),
    conda_meta=True,
    meta=META,
    torch_home=P,
    torch_home_source="$CUDA_HOME",
    root=P,
    nvcc=NVCC_12_6,
    path_nvcc=P / "bin" / "nvcc",
    path_nvcc_top=P,
    python="/usr/bin/python3",
    py={
        "python": "/usr/bin/python3",
        "python_version": "3.12.3",
        "deepspeed": None,
        "loaded": {},
        "nvidia_libs": {},
    },
    host_dirs=(
        ("CPATH", INC),
        ("the host compiler's default", Path("/usr/local/include")),
        ("the host compiler's default", Path("/usr/include")),
    ),
    nvcc_dirs=(INC, INC, P / "include"),
    files=frozenset(str(INC / h) for h in HEADERS),
    cudart=Cudart(
        P / "lib" / "libcudart.so",
        "libcudart.so.12",
        {"loaded_by": "soname", "rc": 0, "version": 12060, "file": f"{P}/{TARGET}/lib/libcudart.so.12.6.77"},
    ),
    compilers=(("nvcc's host compiler", ("gcc",), gcc()), ("torch's CXX", ("c++",), gcc(name="c++"))),
    nvcc_host_compiler_from="nvcc's default (gcc on PATH)",
    driver=Driver(),
    gpu_arch_list=Ran(
        0, "compute_50\ncompute_60\ncompute_70\ncompute_75\ncompute_80\ncompute_86\ncompute_90\n"
    ),
    smi_gpu=Ran(127, "", "FileNotFoundError: nvidia-smi"),
)


def green(**changes: Any) -> Observation:
    """The complete envlock env, with some of what was seen changed."""
    return dataclasses.replace(GREEN, **changes)


def files(*paths: Path | str) -> frozenset[str]:
    """The files observe found (every other name it looked for is absent)."""
    return frozenset(str(p) for p in paths)


def torch_py(version: str = "2.6.0+cu126", cuda: str | None = "12.6", **more: Any) -> dict[str, Any]:
    """The probe's answer in a python whose torch is `version`."""
    return {
        **GREEN.py,
        "torch": {"version": version, "cuda": cuda, "cudnn": None, "cuda_available": False, **more},
    }


def by_code(findings: list[Finding]) -> dict[str, Finding]:
    return {f.code: f for f in findings}


def diagnose_all(obs: Observation) -> list[Finding]:
    """Every check on `obs` (the compile checks too when obs.compile), in doctor's order."""
    return diagnose(obs, TABLES)


def run(obs: Observation) -> dict[str, Finding]:
    """Every check on `obs`, by code."""
    return by_code(diagnose_all(obs))


# ------------------------------------------------------------------------------------- recorded runs


def record(name: str) -> dict[str, Any]:
    """A docs/gpu-proof/ JSON record."""
    return json.loads((GPU_PROOF / name).read_text(encoding="utf-8"))


def replay(result: dict[str, Any]) -> Observation:
    """What observe saw in a recorded `doctor --json` run, rebuilt from its findings' details.

    The details keep every program answer the verdicts depend on; what a record does not keep is said
    where it is filled in (the labels of the host compiler's include dirs, the names of the bundled
    libraries nothing shadows, nvcc's -ccbin line, which is in the message).
    """
    d = {f["code"]: f["details"] for f in result["findings"]}
    msg = {f["code"]: f["message"] for f in result["findings"]}
    target, tf, nf, ch = d["env.target"], d["torch.found"], d["nvcc.found"], d["cuda_home.consistent"]
    prefix = Path(target["prefix"]) if target["prefix"] else None
    root = Path(nf["toolkit"]) if nf.get("toolkit") else None
    nvcc = None
    if "path" in nf:
        top = Path(nf["top"]) if nf.get("top") else None
        includes = tuple(Path(p) for p in nf["includes"])
        nvcc = Nvcc(Path(nf["path"]), nf["version"], minor_of(nf["version"]), top, includes)
    cud, hc, cc, dp, ld = (d[c] for c in ("cudart.loadable", "host_compiler.version", "host_compiler.ccbin",
                                          "driver.present", "ld_library_path.shadowing"))  # fmt: skip
    env = {k: v for k, v in {**ch, **cc, "LD_LIBRARY_PATH": ld["LD_LIBRARY_PATH"]}.items()
           if k.isupper() and v is not None}  # fmt: skip
    # headers: the dirs the host compiler searched, the label of the dir each was found in (from its message)
    found, via = set(), {}
    for code, det in d.items():
        if code.startswith("header.") and det.get("path"):
            found.add(det["path"])
            label = re.search(r"\(via (.*)\)$", msg[code])
            if label:
                via[str(Path(det["path"]).parent)] = label.group(1)
    searched = next(det["searched"] for code, det in d.items() if code.startswith("header."))
    host_dirs = tuple((via.get(s, "the host compiler's default"), Path(s)) for s in searched)
    nvcc_dirs = (*(nvcc.includes if nvcc else ()), *((root / "include",) if root else ()))
    probe = {
        k: cud[k] for k in ("loaded_by", "rc", "version", "file", "soname_error", "path_error") if k in cud
    }
    nvidia_libs = {
        Path(e["file"]).name: {"path": e["bundled"], "version": e["bundled_version"]} for e in ld["shadowing"]
    }
    for i in range(ld["bundled"] - len(nvidia_libs)):  # the record keeps only how many others torch bundles
        nvidia_libs[f"libbundled-{i}.so"] = {"path": f"/bundled/{i}", "version": "0"}
    loaded = {
        Path(e["file"]).name: e["import_torch_loaded"] for e in ld["shadowing"] if e["import_torch_loaded"]
    }
    py = {k: tf[k] for k in ("python_version", "torch", "torch_error") if k in tf}
    smi = dp.get("nvidia_smi")
    said = re.search(r"warns '(.*)' and uses the last one", msg["host_compiler.ccbin"])
    path_top = re.search(r"belongs to (\S+), not to CUDA_HOME", msg["cuda_home.consistent"])
    built, ext = d.get("compile.nvcc"), d.get("compile.torch_extension")
    return Observation(
        compile=built is not None,
        mode=target["mode"],
        prefix=prefix,
        env=env,
        active=target["active"],
        scripts=tuple(target["activation_scripts"]),
        conda_meta=prefix is not None and "has no conda-meta" not in msg["env.target"],
        meta=target.get("envlock"),
        torch_home=Path(ch["torch_would_pick"]) if ch["torch_would_pick"] else None,
        torch_home_source=ch["picked_from"],
        root=root,
        nvcc=nvcc,
        path_nvcc=Path(ch["which_nvcc"]) if ch["which_nvcc"] else None,
        path_nvcc_top=Path(path_top.group(1)) if path_top else (nvcc.top if nvcc else None),
        python=tf["python"],
        py={**py, "nvidia_libs": nvidia_libs, "loaded": loaded},
        host_dirs=host_dirs,
        nvcc_dirs=nvcc_dirs,
        files=frozenset(found),
        cudart=Cudart(Path(cud["file"]), cud["soname"], probe) if "soname" in cud else None,
        compilers=tuple(
            (role, tuple(c["command"]), Ran(127 if c["kind"] == "missing" else 0, c["banner"] + "\n"))
            for role, c in hc["compilers"].items()
        ),
        nvcc_host_compiler_from=hc["nvcc_host_compiler_from"],
        ccbin=Ccbin(cc["rc"], cc.get("nvcc_said") or (said.group(1) if said else ""), cc["output"])
        if "rc" in cc
        else None,
        driver=Driver(Path(smi["path"]), Ran(smi["rc"], smi["output"]))
        if smi
        else Driver(proc_text=dp.get("proc")),
        lib_copies=tuple(
            LibCopy(Path(e["file"]), Path(e["file"]).name, e["version"]) for e in ld["shadowing"]
        ),
        nvcc_build=NvccBuild(
            tuple(built["command"]),
            built["seconds"],
            Ran(built["rc"], "", built["log"]),
            Ran(built["run_rc"], built["run_output"]) if "run_rc" in built else None,
        )
        if built
        else None,
        torch_extension=ext,
    )


def same_gcc(path: str, version: str = "13.3.0") -> Compiler:
    """What a driver of the H200 machine's gcc 13.3.0 says it is (-dumpfullversion, -dumpmachine)."""
    return Compiler(path, path, str(Path(path).parent), version, "x86_64-linux-gnu", True)
