"""The facts and tables doctor's checks judge by, loaded once and handed to the checks as one value.

HEADERS: what torch's ATen/cuda headers include (facts §7.3). The tables are package data, each read and
validated once by envlock.core.tables (cuda.yaml, extras.yaml, driver.yaml, gpu_arch.yaml, deepspeed_ops.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envlock.core.tables import (
    CudaTables,
    ExtrasTables,
    cuda_tables,
    deepspeed_ops_table,
    driver_table,
    extras_tables,
    gpu_arch_table,
)

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


@dataclass(frozen=True, slots=True)
class Tables:
    """Every table a check reads."""

    cuda: CudaTables  # gcc_max per nvcc minor, DeepSpeed's accepted minor pairs
    extras: ExtrasTables  # the `--with` header groups
    driver: Mapping[str, Any]  # minor_version_compatibility, toolkit_driver
    arches: Mapping[str, Mapping[str, Any]]  # GPU capability -> the CUDA that builds for it
    deepspeed: Mapping[str, Any]  # DeepSpeed's JIT ops and the CUDA headers each includes
    sources: Any = None  # envlock.sources.classify.SourceTables: who provides a header (its `--with` group)


def load_tables() -> Tables:
    """The package data, each file read and validated once per process."""
    from envlock.sources.classify import source_tables

    return Tables(cuda_tables(), extras_tables(), driver_table(), gpu_arch_table(), deepspeed_ops_table(),
                  source_tables())  # fmt: skip


def header_names(t: Tables) -> tuple[str, ...]:
    """Every header name a check may look for (observe looks for exactly these)."""
    names = [*HEADERS, CUDNN_HEADER[0]]
    names += [h for e in t.extras.extras.values() for h in e.headers]
    names += [h for row in t.deepspeed["ops"].values() for h in row["cuda_headers"]]
    return tuple(dict.fromkeys(names))
