"""envlock's rule tables (package data `data/cuda.yaml`, `data/extras.yaml`), validated when loaded."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from envlock import REINSTALL_HINT
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
    return EnvlockError(f"envlock's package data is invalid: {what}", hint=REINSTALL_HINT)


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


@dataclass(frozen=True, slots=True)
class Extra:
    """One `--with NAME` group: the packages that add its headers, per toolchain generation."""

    name: str
    what: str
    headers: tuple[str, ...]
    packages: dict[str, tuple[str, ...]]  # toolchain -> match specs; () = the toolchain ships it
    platforms: tuple[str, ...] | None = None  # None: every platform


@dataclass(frozen=True, slots=True)
class Bundle:
    name: str
    what: str
    extras: tuple[str, ...]
    partial: bool = False  # leave out (with a note) what the CUDA/platform has no package for


@dataclass(frozen=True, slots=True)
class ExtrasTables:
    extras: dict[str, Extra]
    bundles: dict[str, Bundle]

    @property
    def names(self) -> tuple[str, ...]:
        """Every name `--with` accepts: extras, then bundles."""
        return (*self.extras, *self.bundles)


_EXTRA_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_PLATFORMS = ("linux-64", "linux-aarch64", "win-64")


def _parse_extras(raw: dict[str, Any]) -> ExtrasTables:
    if raw.get("schema_version") != 1:
        raise _table_error("extras.yaml schema_version is not 1")
    extras: dict[str, Extra] = {}
    for name, row in raw["extras"].items():
        if not _EXTRA_NAME.match(name):
            raise _table_error(f"extras.yaml: extra name {name!r} is not lower-case-with-dashes")
        packages = {str(k): tuple(str(s) for s in v) for k, v in row["packages"].items()}
        if set(packages) - set(TOOLCHAINS):
            raise _table_error(f"extras.yaml: {name}: unknown toolchain {sorted(set(packages) - set(TOOLCHAINS))}")
        platforms = row.get("platforms")
        if platforms is not None and set(platforms) - set(_PLATFORMS):
            raise _table_error(f"extras.yaml: {name}: unknown platform in {platforms}")
        headers = tuple(str(h) for h in row["headers"])
        if not headers:
            raise _table_error(f"extras.yaml: {name} names no header")
        extras[name] = Extra(name, str(row["what"]), headers, packages, tuple(platforms) if platforms else None)
    bundles: dict[str, Bundle] = {}
    for name, row in raw["bundles"].items():
        if name in extras or not _EXTRA_NAME.match(name):
            raise _table_error(f"extras.yaml: bundle name {name!r} is invalid or also an extra")
        members = tuple(str(e) for e in row["extras"])
        unknown = [e for e in members if e not in extras]
        if unknown or not members:
            raise _table_error(f"extras.yaml: bundle {name} names unknown extras {unknown}")
        bundles[name] = Bundle(name, str(row["what"]), members, bool(row.get("partial", False)))
    return ExtrasTables(extras, bundles)


@functools.cache
def extras_tables() -> ExtrasTables:
    """The validated `--with` table shipped with envlock."""
    text = resources.files("envlock").joinpath("data", "extras.yaml").read_text(encoding="utf-8")
    try:
        return _parse_extras(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))  # noqa: S506 - safe, C when built
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _table_error(f"extras.yaml: {exc}") from exc
