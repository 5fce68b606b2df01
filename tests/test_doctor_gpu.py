"""doctor's GPU-target checks (envlock.doctor.checks_gpu): TORCH_CUDA_ARCH_LIST, nvcc --list-gpu-arch, torch's arch list.

Off the GPU the judges get recorded observations:
  * tests/data/observed/nvcc-13.0.88-list-gpu-arch.txt: the real `nvcc --list-gpu-arch` of nvcc 13.0.88
    (this machine kind's system CUDA 13.0, the same binary as NVIDIA's nvidia-cuda-nvcc 13.0.88 wheel);
  * the H200 is compute capability 9.0 and its machine exports TORCH_CUDA_ARCH_LIST=9.0a (seen in the
    build log of docs/gpu-proof/2026-11-30-nvidia-h200-doctor-no-cusparse.json: -gencode=arch=compute_90a);
  * DeepSpeed 0.19.8's compute_capability_args raised `ValueError: invalid literal for int() with base 10:
    '0a'` on that machine (issue 11).
Torch arch lists are inputs shaped like torch.cuda.get_arch_list()'s answer (sm_XY / compute_XY); the
`gpu`-marked test at the end reads the real one on a GPU machine.
The real nvcc runs too where this machine has one (its system CUDA 13.0).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.output import logical_lines

from envlock.doctor.checks_gpu import (
    judge_arch_list,
    judge_nvcc,
    judge_torch,
    needs_cuda,
    parse_nvcc_arches,
    torch_runs_on,
)
from envlock.core.tables import gpu_arch_table as arch_table

OBSERVED = Path(__file__).parent / "data" / "observed"
NVCC_13_0 = parse_nvcc_arches((OBSERVED / "nvcc-13.0.88-list-gpu-arch.txt").read_text())
H200 = (9, 0)
ARCHES = arch_table()


def test_the_recorded_nvcc_13_0_list_is_what_cuda_13_targets() -> None:
    assert NVCC_13_0 == {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121}


def by_code(findings):  # type: ignore[no-untyped-def]
    return {f.code: f for f in findings}


# ---------------------------------------------------------------------------- TORCH_CUDA_ARCH_LIST


def test_the_h200_machines_9_0a_is_a_warning_naming_deepspeed_and_the_fix_when_deepspeed_is_there() -> None:
    got = by_code(judge_arch_list("9.0a", NVCC_13_0, "13.0.88", ARCHES, deepspeed=True))
    ds = got["arch_list.deepspeed"]
    assert ds.severity == "warning"
    assert "DeepSpeed" in ds.message and "'9.0a'" in ds.message
    assert "invalid literal for int() with base 10: '0a'" in ds.message
    assert ds.hint.startswith("export TORCH_CUDA_ARCH_LIST=9.0 ")
    # nvcc 13.0 builds compute_90a: the suffix is DeepSpeed's problem only
    assert got["arch_list.nvcc"].severity == "ok"


def test_without_deepspeed_the_suffix_is_only_info() -> None:
    assert by_code(judge_arch_list("9.0a", NVCC_13_0, "13.0.88", ARCHES, deepspeed=False))["arch_list.deepspeed"].severity == "info"


@pytest.mark.parametrize(
    ("value", "fixed"),
    [("8.0;9.0a;10.0a", "8.0;9.0;10.0"), ("8.0 9.0+PTX 12.0f", "8.0;9.0+PTX;12.0"), ("Hopper", "X.Y")],
)
def test_every_entry_deepspeed_cannot_parse_is_named_and_the_fix_keeps_the_arches(value: str, fixed: str) -> None:
    ds = by_code(judge_arch_list(value, NVCC_13_0, "13.0.88", ARCHES, deepspeed=True))["arch_list.deepspeed"]
    assert ds.severity == "warning" and ds.hint.startswith(f"export TORCH_CUDA_ARCH_LIST={fixed} ")


@pytest.mark.parametrize("value", ["9.0", "8.0;9.0+PTX", "7.5 8.6 9.0", None, "", "native"])
def test_what_deepspeed_parses_is_ok(value: str | None) -> None:
    assert by_code(judge_arch_list(value, NVCC_13_0, "13.0.88", ARCHES, deepspeed=True))["arch_list.deepspeed"].severity == "ok"


def test_an_entry_the_nvcc_cannot_build_is_an_error_with_what_it_needs() -> None:
    # Volta (7.0) was dropped from nvcc 13.0: the real list starts at compute_75
    got = by_code(judge_arch_list("7.0;9.0", NVCC_13_0, "13.0.88", ARCHES, deepspeed=False))["arch_list.nvcc"]
    assert got.severity == "error" and "7.0" in got.message and "Unsupported gpu architecture" in got.message
    assert "CUDA 9.0 to 12.9" in got.hint


# ----------------------------------------------------------------------------------------- the GPU


def test_the_h200_against_nvcc_13_0_is_ok() -> None:
    f = judge_nvcc(H200, "NVIDIA H200", NVCC_13_0, "13.0.88", "fix", ARCHES)
    assert f.severity == "ok" and "sm_90" in f.message


def test_a_volta_card_against_nvcc_13_0_is_an_error_saying_cuda_12_9_is_the_last() -> None:
    f = judge_nvcc((7, 0), "Tesla V100", NVCC_13_0, "13.0.88", "use a torch built for CUDA ≤ 12.9", ARCHES)
    assert f.severity == "error" and "compute_70" in f.message
    assert "sm_70 (Volta) builds with CUDA 9.0 to 12.9 only" in f.hint


def test_sm_120_needs_cuda_12_8() -> None:
    # an nvcc without compute_120 (the 13.0 list minus the Blackwell entries stands in for a 12.6 nvcc)
    older = {n for n in NVCC_13_0 if n < 100}
    f = judge_nvcc((12, 0), "NVIDIA RTX PRO 6000", older, "12.6.85", "fix", ARCHES)
    assert f.severity == "error" and "needs CUDA ≥ 12.8" in f.hint
    assert needs_cuda((12, 0), ARCHES).startswith("sm_120 (Blackwell")


def test_torch_kernels_same_major_lower_minor_run_and_arch_specific_ones_only_on_their_own() -> None:
    assert torch_runs_on((8, 6), ["sm_80"])  # a cubin runs on the same major at a higher minor
    assert not torch_runs_on((8, 0), ["sm_86"])
    assert not torch_runs_on((9, 0), ["sm_80", "sm_86"])  # ... never across majors
    assert torch_runs_on((9, 0), ["sm_80", "compute_80"])  # PTX is JIT-compiled for newer GPUs
    assert torch_runs_on((9, 0), ["sm_90a"]) and not torch_runs_on((10, 0), ["sm_90a"])


def test_a_torch_without_kernels_for_the_card_is_an_error_with_the_cuda_it_needs() -> None:
    torch = {"version": "2.7.1+cu126", "cuda": "12.6", "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]}
    f = judge_torch((12, 0), "NVIDIA GeForce RTX 5090", torch, "use a torch built for CUDA ≥ 12.8", ARCHES)
    assert f.severity == "error" and "no kernel image is available" in f.message
    assert "sm_120" in f.hint and "CUDA ≥ 12.8" in f.hint
    ok = judge_torch(H200, "NVIDIA H200", torch, "fix", ARCHES)
    assert ok.severity == "ok"


def test_no_arch_list_is_not_judged() -> None:
    assert judge_torch(H200, "NVIDIA H200", {"version": "2.11.0", "arch_list": []}, "fix", ARCHES).severity == "skipped"


# ------------------------------------------------------------------------------- through the CLI


SYSTEM_NVCC = Path("/usr/local/cuda/bin/nvcc")


@pytest.mark.skipif(not SYSTEM_NVCC.exists(), reason="no system CUDA nvcc on this machine")
def test_doctor_runs_the_real_nvcc_list_and_reads_the_arch_list(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA", "CUDA", "CPATH", "NVCC_", "TORCH_"))}
    env.update(
        CUDA_HOME=str(SYSTEM_NVCC.parent.parent), PYTHONPATH=os.pathsep.join(sys.path),
        TORCH_CUDA_ARCH_LIST="9.0a;7.0",
    )  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "envlock", "doctor", "--json", "--for", "deepspeed", "--python-exe", sys.executable],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    got = {f["code"]: f for f in json.loads(r.stdout)["findings"]}
    assert got["arch_list.deepspeed"]["severity"] == "warning"  # --for deepspeed
    assert got["arch_list.nvcc"]["severity"] == "error" and "7.0" in got["arch_list.nvcc"]["message"]
    assert set(got["arch_list.nvcc"]["details"]["nvcc_arches"]) == NVCC_13_0


def test_for_a_name_that_is_neither_a_path_nor_an_installed_package_exits_1(tmp_path: Path) -> None:
    """(nor a profiled project: `--for flash-attn` reads FlashAttention's saved scan since issue 35.4). A well-formed
    value envlock cannot serve exits 1, as a -p PATH that is not there (docs/reference.md)."""
    r = subprocess.run(
        [sys.executable, "-m", "envlock", "doctor", "--for", "no-such-project"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    error, hint = logical_lines(r.stderr.strip())  # each folded to 80 columns
    assert r.returncode == 1 and error.startswith("error: --for no-such-project: no such file or folder")
    assert hint.startswith("hint: give a source folder, an sdist")


# ----------------------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here")
def test_on_the_gpu_the_card_nvcc_and_torch_agree() -> None:
    """On the lent H200: the card is found, the system nvcc and torch can both target it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TORCH_CUDA_ARCH_LIST": "9.0a"}
    r = subprocess.run(
        [sys.executable, "-m", "envlock", "doctor", "--json", "--for", "deepspeed"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    got = {f["code"]: f for f in json.loads(r.stdout)["findings"]}
    nvcc, torch = got["gpu.arch.nvcc"], got["gpu.arch.torch"]
    assert nvcc["severity"] == "ok" and nvcc["details"]["capability"] == "9.0", nvcc
    assert torch["severity"] == "ok" and any(a.startswith("sm_90") for a in torch["details"]["arch_list"]), torch
    assert got["arch_list.deepspeed"]["severity"] == "warning"
    print(json.dumps({"gpu.arch.torch": torch["details"], "gpu.arch.nvcc": nvcc["details"]}))
