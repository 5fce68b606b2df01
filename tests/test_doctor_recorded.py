"""doctor's checks on what real runs saw: the H200 records of docs/gpu-proof/ and tests/data/observed/.

No GPU, nvcc, gcc or bash here: each test rebuilds the Observation a recorded run had (from the details its
findings kept, or from the record's facts) and asks the pure checks for their verdicts, which must be the
recorded ones. Where doctor changed on purpose since a record (host_compiler.ccbin: two drivers of one gcc
install are ok since 2026-12-01, docs/gpu.md), the test says so and checks both sides.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from envlock.doctor import HEADERS, summary
from envlock.doctor.observation import Ccbin, Cudart, Driver, Nvcc, NvccBuild, Observation, Ran
from tests.doctor_observations import GPU_PROOF, OBSERVED, diagnose_all, record, replay, run, same_gcc

NVCC_13_0_LIST = (OBSERVED / "nvcc-13.0.88-list-gpu-arch.txt").read_text()
H200_RUNS = ("green", "ccbin", "ldpath", "no-cusparse")


@pytest.mark.parametrize("name", H200_RUNS)
def test_every_recorded_h200_finding_comes_back_from_its_observation(name: str) -> None:
    """System CUDA 13.0 + torch 2.11.0+cu130 on the H200: all green, a -ccbin clash, an older libnvJitLink on
    LD_LIBRARY_PATH, a toolkit without cuSPARSE headers (nvcc and load_inline fail on cusparse.h)."""
    result = record(f"2026-11-30-nvidia-h200-doctor-{name}.json")["result"]
    obs = replay(result)
    got = run(obs)
    for f in result["findings"]:
        g = got[f["code"]]
        assert g.severity == f["severity"], (f["code"], g.message)
        hint = f["hint"]
        if hint and "envlock resolve --torch installed" in hint:
            # Since issue 34 (item 1) a re-plan names the python doctor asked: resolve's own default (the active
            # venv, else python3 on PATH) could pick another one than the env's; torch lives outside this
            # system-CUDA setup, so only the toolchain is planned beside it.
            assert obs.python == "/opt/torch/.venv/bin/python3"
            hint = hint.replace("envlock resolve --torch installed",
                                f"envlock resolve --torch installed --python-exe {obs.python} --toolchain-only")
        if f["code"] != "host_compiler.ccbin":  # worded anew since (see the next test)
            assert (g.message, g.hint) == (f["message"], hint), f["code"]


def test_the_recorded_ccbin_clash_is_ok_once_both_compilers_are_one_gcc_install() -> None:
    """The record's nvcc said 'incompatible redefinition' for -ccbin=/usr/bin/g++ beside torch's -ccbin
    /usr/bin/gcc. Unidentified, that stays a warning; as the C and C++ drivers of one gcc 13.3.0 (what the
    machine's gcc answers to -dumpfullversion and -dumpmachine) it is ok and names the compiler nvcc uses."""
    obs = replay(record("2026-11-30-nvidia-h200-doctor-ccbin.json")["result"])
    assert obs.ccbin is not None and "compiler-bindir" in obs.ccbin.said
    identified = dataclasses.replace(
        obs,
        ccbin=dataclasses.replace(obs.ccbin, used=same_gcc("/usr/bin/gcc"), dropped=same_gcc("/usr/bin/g++")),
    )
    f = run(identified)["host_compiler.ccbin"]
    assert f.severity == "ok" and f.details["same_toolchain"] is True
    assert "uses torch's -ccbin $CC=/usr/bin/gcc (gcc 13.3.0, x86_64-linux-gnu)" in f.message
    other = dataclasses.replace(
        obs.ccbin, used=same_gcc("/usr/bin/gcc"), dropped=same_gcc("/opt/gcc/bin/g++", "13.2.0")
    )
    warned = run(dataclasses.replace(obs, ccbin=other))["host_compiler.ccbin"]
    assert (
        warned.severity == "warning"
        and "gcc 13.3.0 in /usr/bin vs gcc 13.2.0 in /opt/gcc/bin" in warned.message
    )


# ------------------------------------------- the seed's job in an env envlock made (2026-12-01, H200)

E = Path("/tmp/seed-work/env")
E_INC = E / "targets/x86_64-linux/include"
CC, CXX = str(E / "bin/x86_64-conda-linux-gnu-cc"), str(E / "bin/x86_64-conda-linux-gnu-c++")
SAID = "nvcc warning : incompatible redefinition for option 'compiler-bindir', the last value of this option was used"
#: What the lock's -dev packages put in targets/x86_64-linux/include (CCCL under include/cccl, nvcc's own).
LOCKED = (*HEADERS, "cuda.h", "cuda_fp16.h", "cuda_bf16.h", "cooperative_groups.h", "mma.h",
          "curand.h", "curand_kernel.h", "cuda_profiler_api.h")  # fmt: skip


def seed_env(
    *, without: tuple[str, ...] = (), for_: tuple[str, ...] = (), compile: bool = False
) -> Observation:
    """The env of docs/gpu-proof/run-seed-job.sh as `envlock run -p ENV -- envlock doctor` saw it (the record's
    facts: its lock, the machine's environment, torch 2.11.0+cu130 with DeepSpeed 0.19.8, nvcc 13.0.88)."""
    fused = record("2026-12-01-deepspeed-fusedadam.json")
    env = {
        **{k: v for k, v in fused["machine_env"].items() if v and k != "LD_LIBRARY_PATH"},
        "CUDA_HOME": str(E), "CUDA_PATH": str(E), "CPATH": str(E_INC), "CC": CC, "CXX": CXX,
        "NVCC_PREPEND_FLAGS": f" -ccbin={CXX}", "LD_LIBRARY_PATH": f"{fused['machine_env']['LD_LIBRARY_PATH']}:{E}/lib",
    }  # fmt: skip
    torch = {"version": fused["torch"], "cuda": fused["torch_cuda"], "cuda_available": True, "device": "NVIDIA H200",
             "capability": [9, 0], "arch_list": fused["torch_arch_list"]}  # fmt: skip
    meta = {"env_name": "seed", "lock_path": "/tmp/seed-work/project/locks/seed/conda-lock.yml",
            "anchor": {"torch": fused["torch"], "cuda": "13.0", "cudnn": None}}  # fmt: skip
    return Observation(
        for_=for_,
        compile=compile,
        mode="prefix",
        prefix=E,
        env=env,
        active=True,
        conda_meta=True,
        meta=meta,
        torch_home=E,
        torch_home_source="$CUDA_HOME",
        root=E,
        nvcc=Nvcc(E / "bin/nvcc", "13.0.88", "13.0", E, (E_INC, E_INC / "cccl")),
        path_nvcc=E / "bin/nvcc",
        path_nvcc_top=E,
        python="/opt/torch/.venv/bin/python3",
        py={"python_version": fused["python"], "torch": torch, "deepspeed": fused["deepspeed"], "nvidia_libs": {}},
        host_dirs=(("$CUDA_HOME/include", E / "include"), ("CPATH", E_INC), ("the host compiler's default", Path("/usr/include"))),
        nvcc_dirs=(E_INC, E_INC / "cccl", E_INC, E / "include"),
        files=frozenset([*(str(E_INC / h) for h in LOCKED if h not in without), str(E_INC / "cccl/cuda/std/cassert")]),
        cudart=Cudart(E / "lib/libcudart.so", "libcudart.so.13", {"loaded_by": "soname", "rc": 0, "version": 13000}),
        compilers=(("nvcc's host compiler", (CC,), Ran(0, "x86_64-conda-linux-gnu-cc (conda-forge gcc 13.3.0-2) 13.3.0\n")),
                   ("torch's CXX", (CXX,), Ran(0, "x86_64-conda-linux-gnu-c++ (conda-forge gcc 13.3.0-2) 13.3.0\n"))),
        nvcc_host_compiler_from="torch's -ccbin $CC",
        # nvcc said the -ccbin redefinition; the record's doctor identified both as one conda-forge gcc 13.3.0
        ccbin=Ccbin(0, SAID, "", used=same_gcc(CC), dropped=same_gcc(CXX)),
        driver=Driver(Path("/usr/local/nvidia/bin/nvidia-smi"), Ran(0, "580.159.04, NVIDIA H200\n")),
        gpu_arch_list=Ran(0, NVCC_13_0_LIST),
        nvcc_build=NvccBuild((str(E / "bin/nvcc"), "-cudart", "shared"), _nvcc_seconds(fused), Ran(0),
                             Ran(0, "cudart=13000 cusparse_header=12603 err=0\n")) if compile else None,
        torch_extension={"stage": "ran", "build_seconds": fused["load_inline_seconds"], "device": "NVIDIA H200",
                         "correct": True} if compile else None,
    )  # fmt: skip


def _nvcc_seconds(fused: dict) -> float:
    """The time of the record's nvcc compile+link (its message says it: '… in 1.52 s; it runs …')."""
    msg = fused["doctor"]["compile"]["compile.nvcc"]["message"]
    return float(msg.split(" in ", 1)[1].split(" s;", 1)[0])


def _as_recorded(findings: list) -> dict:
    """A doctor result in the record's shape (run-seed-job.sh keeps the summary, what is not ok, the infos)."""
    return {
        "summary": summary(findings),
        "not_ok": [{"code": f.code, "severity": f.severity, "message": f.message} for f in findings
                   if f.severity in ("warning", "error")],
        "info": [f.code for f in findings if f.severity == "info"],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("key", "obs"),
    [
        ("doctor", seed_env(compile=True)),
        ("doctor_for_deepspeed", seed_env(for_=("deepspeed",))),
    ],
)
def test_the_seed_env_gives_the_recorded_summary_infos_and_warnings(key: str, obs: Observation) -> None:
    recorded = record("2026-12-01-deepspeed-fusedadam.json")[key]
    findings = diagnose_all(obs)
    got = _as_recorded(findings)
    # Changed on purpose since the run (issue 35.1): libaio and CUTLASS are `--with` groups now (conda-forge's
    # libaio, cutlass), so async_io and evoformer_attn — info "needs libaio / CUTLASS" in the record, with
    # neither in the env — are warnings naming the group, and gds names libaio.h's group beside cufile.h's.
    grouped = {"deepspeed.op.async_io", "deepspeed.op.evoformer_attn"} if key == "doctor_for_deepspeed" else set()
    want = dict(recorded["summary"], info=recorded["summary"]["info"] - len(grouped),
                warning=recorded["summary"]["warning"] + len(grouped))  # fmt: skip
    assert got["summary"] == want and got["info"] == [c for c in recorded["info"] if c not in grouped]
    assert sorted(f["code"] for f in got["not_ok"]) == sorted([*(f["code"] for f in recorded["not_ok"]), *grouped])
    by = {f.code: f for f in findings}
    if grouped:
        assert "missing libaio.h (--with libaio)" in by["deepspeed.op.async_io"].message
        assert "and 59 more (--with cutlass)" in by["deepspeed.op.evoformer_attn"].message
    for f in recorded["not_ok"]:
        if f["code"] == "deepspeed.op.gds":  # worded anew after the run ("besides" read twice; libaio a group since)
            assert by[f["code"]].message == f["message"].replace(
                "; besides, it needs libaio (libaio-dev) besides cufile.h", "; libaio.h (--with libaio)")
            # and its hint says the project since (the record's said `envlock lock` as if run in the project)
            project = "/tmp/seed-work/project"
            assert by[f["code"]].hint == f["hint"].replace(
                "in environments/", f"in {project}/environments/").replace(
                "envlock lock &&", f"envlock lock --project-dir {project} &&").replace(
                "add cufile to", "add cufile, libaio to").replace("(adds libcufile-dev)", "(adds libcufile-dev, libaio)")
        elif f["code"] != "host_compiler.ccbin":  # worded anew since
            assert (by[f["code"]].message, by[f["code"]].hint) == (f["message"], f["hint"])
    for code, f in recorded["compile"].items():
        assert (by[code].severity, by[code].message) == (f["severity"], f["message"])


def test_the_seed_env_is_all_green_because_its_two_compilers_are_one_gcc_install() -> None:
    """The record is all green; nvcc's -ccbin redefinition unidentified (the first run's doctor) was a warning."""
    obs = seed_env(compile=True)
    assert summary(diagnose_all(obs)) == {"ok": 26, "info": 9, "skipped": 0, "warning": 0, "error": 0}
    unidentified = summary(diagnose_all(dataclasses.replace(obs, ccbin=Ccbin(0, SAID, ""))))
    assert unidentified == {"ok": 25, "info": 9, "skipped": 0, "warning": 1, "error": 0}


def test_the_runtime_only_env_names_cusparse_h_as_recorded() -> None:
    """The same env without libcusparse-dev: doctor named cusparse.h (and the fix) before any build ran."""
    recorded = record("2026-12-01-deepspeed-runtime-only.json")["doctor"]
    findings = diagnose_all(seed_env(without=("cusparse.h",)))
    got = _as_recorded(findings)
    assert got["summary"] == recorded["summary"] and got["info"] == recorded["info"]
    cusparse = next(f for f in findings if f.code == "header.cusparse.h")
    want = next(f for f in recorded["not_ok"] if f["code"] == "header.cusparse.h")
    assert (cusparse.severity, cusparse.message, cusparse.hint) == (
        want["severity"],
        want["message"],
        want["hint"],
    )


def test_the_h200_gpu_checks_give_the_recorded_details() -> None:
    """docs/gpu-proof/2026-12-01-gpu-tests.txt: the gpu-marked test's printout of gpu.arch.* on the H200
    (torch's capability 9.0 and arch list, nvcc 13.0.88's --list-gpu-arch as tests/data/observed has it)."""
    want = json.loads((GPU_PROOF / "2026-12-01-gpu-tests.txt").read_text().splitlines()[0])
    obs = seed_env(for_=("deepspeed",))
    obs = dataclasses.replace(obs, env={**obs.env, "TORCH_CUDA_ARCH_LIST": "9.0a"})
    got = run(obs)
    for code in ("gpu.arch.torch", "gpu.arch.nvcc"):
        assert got[code].severity == "ok" and got[code].details == want[code], code
    assert got["arch_list.deepspeed"].severity == "warning"  # 9.0a: DeepSpeed 0.19.8 dies on int('0a')
    assert got["arch_list.nvcc"].severity == "ok"  # nvcc 13.0 builds compute_90a
