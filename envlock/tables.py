"""envlock's CUDA rule tables (package data `data/cuda.yaml`), validated when loaded."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from envlock.errors import EnvlockError

_MINOR = re.compile(r"^\d+\.\d+$")
TOOLCHAINS = ("cf-split", "nvidia-label", "cudatoolkit-dev")


@dataclass(frozen=True, slots=True)
class CudaMinor:
    """What conda packages provide one CUDA minor."""

    cuda: str
    toolchain: str
    gcc_max: int
    platforms: tuple[str, ...]
    nvcc: tuple[str, ...] = ()
    package_version: str | None = None
    channel: str | None = None
    note: str | None = None
    verified: bool = True

    @property
    def key(self) -> tuple[int, int]:
        return minor_key(self.cuda)


@dataclass(frozen=True, slots=True)
class CudaTables:
    schema_version: int
    rules_version: str
    minors: dict[str, CudaMinor]
    toolchain_specs: dict[str, tuple[str, ...]]
    toolchain_notes: dict[str, str]
    compilers: dict[str, tuple[str, ...]]
    cudnn: dict[int, tuple[str, ...]]
    deepspeed_ok: dict[int, tuple[str, ...]]
    virtual_packages: dict[str, dict[str, str]]
    targets: dict[str, str]
    sources: dict[str, str]
    never_released: tuple[str, ...] = ()

    def minor(self, cuda: str) -> CudaMinor | None:
        return self.minors.get(cuda)

    def gcc_max(self, cuda: str) -> int | None:
        """Newest gcc major that nvcc of this CUDA minor accepts (None when the minor is unknown)."""
        row = self.minors.get(cuda)
        return row.gcc_max if row else None


def minor_key(cuda: str) -> tuple[int, int]:
    major, minor = cuda.split(".")[:2]
    return int(major), int(minor)


def _table_error(what: str) -> EnvlockError:
    return EnvlockError(f"envlock's package data is invalid: {what}", hint="reinstall envlock")


def _parse(raw: dict[str, Any]) -> CudaTables:
    if raw.get("schema_version") != 1:
        raise _table_error("cuda.yaml schema_version is not 1")
    minors: dict[str, CudaMinor] = {}
    for cuda, row in raw["cuda"].items():
        if not _MINOR.match(cuda):
            raise _table_error(f"CUDA minor {cuda!r} is not X.Y")
        if row["toolchain"] not in TOOLCHAINS:
            raise _table_error(f"CUDA {cuda}: unknown toolchain {row['toolchain']!r}")
        minors[cuda] = CudaMinor(
            cuda=cuda,
            toolchain=row["toolchain"],
            gcc_max=int(row["gcc_max"]),
            platforms=tuple(row["platforms"]),
            nvcc=tuple(row.get("nvcc", ())),
            package_version=row.get("package_version"),
            channel=row.get("channel"),
            note=row.get("note"),
            verified=bool(row.get("verified", True)),
        )
    keys = [minor_key(c) for c in minors]
    if keys != sorted(keys):
        raise _table_error("CUDA minors are not sorted")
    return CudaTables(
        schema_version=1,
        rules_version=str(raw["rules_version"]),
        minors=minors,
        toolchain_specs={k: tuple(v["specs"]) for k, v in raw["toolchains"].items()},
        toolchain_notes={k: v["note"] for k, v in raw["toolchains"].items() if "note" in v},
        compilers={k: tuple(v) for k, v in raw["compilers"].items()},
        cudnn={int(k): tuple(v) for k, v in raw["cudnn"].items()},
        deepspeed_ok={int(k): tuple(v) for k, v in raw["skew_checks"]["deepspeed_minor_mismatch_ok"].items()},
        virtual_packages={k: {n: str(v) for n, v in vp.items()} for k, vp in raw["virtual_packages"].items()},
        targets=dict(raw["targets"]),
        sources=dict(raw["sources"]),
        never_released=tuple(raw.get("never_released", ())),
    )


@functools.cache
def cuda_tables() -> CudaTables:
    """The validated CUDA tables shipped with envlock."""
    text = resources.files("envlock").joinpath("data", "cuda.yaml").read_text(encoding="utf-8")
    try:
        return _parse(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))  # noqa: S506 - safe, C when built
    except (KeyError, TypeError, ValueError) as exc:
        raise _table_error(f"cuda.yaml: {exc}") from exc
