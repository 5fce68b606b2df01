"""The facts and tables doctor's checks judge by, loaded once and handed to the checks as one value.

HEADERS: what torch's ATen/cuda headers include (facts §7.3). The tables are package data: cuda.yaml
(gcc limits, DeepSpeed's accepted pairs) and extras.yaml through envlock.tables; driver.yaml,
gpu_arch.yaml and deepspeed_ops.yaml here, each validated when loaded.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from envlock import REINSTALL_HINT
from envlock.errors import EnvlockError, SpecError
from envlock.tables import CudaTables, ExtrasTables, cuda_tables, extras_tables

#: Headers torch's ATen/cuda/CUDAContextLight.h includes (facts §7.3), with the conda-forge package of each.
HEADERS: dict[str, str] = {
    "cuda_runtime.h": "cuda-cudart-dev",
    "cuda_runtime_api.h": "cuda-cudart-dev",
    "cusparse.h": "libcusparse-dev",
    "cublas_v2.h": "libcublas-dev",
    "cublasLt.h": "libcublas-dev",
    "cusolverDn.h": "libcusolver-dev",
}
CUDNN_HEADER = ("cudnn.h", "cudnn")
FOR_CHOICES = ("deepspeed",)  # `--for NAME`


def _read(name: str) -> Any:
    return yaml.safe_load(resources.files("envlock").joinpath("data", name).read_text(encoding="utf-8"))


@functools.cache
def driver_table() -> dict[str, Any]:
    """CUDA → driver minimums (data/driver.yaml)."""
    doc = _read("driver.yaml")
    if doc.get("schema_version") != 1:
        raise SpecError(
            "envlock's package data is invalid: driver.yaml schema_version is not 1", hint=REINSTALL_HINT
        )
    return doc


@functools.cache
def arch_table() -> dict[str, dict[str, Any]]:
    """data/gpu_arch.yaml, validated: capability X.Y -> {first, last, name}."""
    doc = _read("gpu_arch.yaml")
    arches = doc.get("arches") if isinstance(doc, dict) and doc.get("schema_version") == 1 else None
    ok = isinstance(arches, dict) and all(
        re.match(r"^\d+\.\d+$", str(k))
        and isinstance(v, dict)
        and re.match(r"^\d+\.\d+$", str(v.get("first")))
        for k, v in arches.items()
    )
    if not ok:
        raise EnvlockError("envlock's package data is invalid: gpu_arch.yaml", hint=REINSTALL_HINT)
    return arches  # type: ignore[return-value]


@functools.cache
def deepspeed_ops() -> dict[str, Any]:
    """data/deepspeed_ops.yaml: {deepspeed: version, ops: {name: {cuda_headers, needs, ...}}}."""
    doc = _read("deepspeed_ops.yaml")
    ops = doc.get("ops") if isinstance(doc, dict) and doc.get("schema_version") == 1 else None
    if not isinstance(ops, dict) or not all(isinstance(r.get("cuda_headers"), list) for r in ops.values()):
        raise EnvlockError("envlock's package data is invalid: deepspeed_ops.yaml", hint=REINSTALL_HINT)
    return doc


@dataclass(frozen=True, slots=True)
class Tables:
    """Every table a check reads."""

    cuda: CudaTables  # gcc_max per nvcc minor, DeepSpeed's accepted minor pairs
    extras: ExtrasTables  # the `--with` header groups
    driver: Mapping[str, Any]  # minor_version_compatibility, toolkit_driver
    arches: Mapping[str, Mapping[str, Any]]  # GPU capability -> the CUDA that builds for it
    deepspeed: Mapping[str, Any]  # DeepSpeed's JIT ops and the CUDA headers each includes


def load_tables() -> Tables:
    """The package data, each file read and validated once per process."""
    return Tables(cuda_tables(), extras_tables(), driver_table(), arch_table(), deepspeed_ops())


def header_names(t: Tables) -> tuple[str, ...]:
    """Every header name a check may look for (observe looks for exactly these)."""
    names = [*HEADERS, CUDNN_HEADER[0]]
    names += [h for e in t.extras.extras.values() for h in e.headers]
    names += [h for row in t.deepspeed["ops"].values() for h in row["cuda_headers"]]
    return tuple(dict.fromkeys(names))
