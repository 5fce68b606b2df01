"""The CUDA tables (data/cuda.yaml: what conda packages make each CUDA minor's toolchain) and the `--with`
table (data/extras.yaml), validated into frozen values."""

from __future__ import annotations

import re
from typing import Any

from envlock.models import field, record
from envlock import REINSTALL_HINT
from envlock.errors import EnvlockError, PlanError
from envlock.names import match_spec_name

_MINOR = re.compile(r"^\d+\.\d+$")
TOOLCHAINS = ("cf-split", "nvidia-label", "cudatoolkit-dev")


@record
class CudaMinor:
    """What conda packages provide one CUDA minor."""

    cuda: str
    toolchain: str
    gcc_max: int
    platforms: tuple[str, ...]
    package_version: str | None = None
    channel: str | None = None
    note: str | None = None
    verified: bool = True

    @property
    def key(self) -> tuple[int, int]:
        return minor_key(self.cuda)


@record
class CudaTables:
    rules_version: str
    minors: dict[str, CudaMinor]
    toolchain_specs: dict[str, tuple[str, ...]]
    toolchain_notes: dict[str, str]
    compilers: dict[str, tuple[str, ...]]
    cudnn: dict[int, tuple[str, ...]]
    deepspeed_ok: dict[int, tuple[str, ...]]
    virtual_packages: dict[str, dict[str, str]]
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


def table_error(what: str) -> EnvlockError:
    return EnvlockError(f"envlock's package data is invalid: {what}", hint=REINSTALL_HINT)


def parse_cuda(raw: dict[str, Any]) -> CudaTables:
    """data/cuda.yaml's document, validated."""
    if raw.get("schema_version") != 1:
        raise table_error("cuda.yaml schema_version is not 1")
    minors: dict[str, CudaMinor] = {}
    for cuda, row in raw["cuda"].items():
        if not _MINOR.match(cuda):
            raise table_error(f"CUDA minor {cuda!r} is not X.Y")
        if row["toolchain"] not in TOOLCHAINS:
            raise table_error(f"CUDA {cuda}: unknown toolchain {row['toolchain']!r}")
        minors[cuda] = CudaMinor(
            cuda=cuda,
            toolchain=row["toolchain"],
            gcc_max=int(row["gcc_max"]),
            platforms=tuple(row["platforms"]),
            package_version=row.get("package_version"),
            channel=row.get("channel"),
            note=row.get("note"),
            verified=bool(row.get("verified", True)),
        )
    keys = [minor_key(c) for c in minors]
    if keys != sorted(keys):
        raise table_error("CUDA minors are not sorted")
    return CudaTables(
        rules_version=str(raw["rules_version"]),
        minors=minors,
        toolchain_specs={k: tuple(v["specs"]) for k, v in raw["toolchains"].items()},
        toolchain_notes={k: v["note"] for k, v in raw["toolchains"].items() if "note" in v},
        compilers={k: tuple(v) for k, v in raw["compilers"].items()},
        cudnn={int(k): tuple(v) for k, v in raw["cudnn"].items()},
        deepspeed_ok={int(k): tuple(v) for k, v in raw["skew_checks"]["deepspeed_minor_mismatch_ok"].items()},
        virtual_packages={k: {n: str(v) for n, v in vp.items()} for k, vp in raw["virtual_packages"].items()},
        never_released=tuple(raw.get("never_released", ())),
    )


@record
class Extra:
    """One `--with NAME` group: the packages that add its headers, per toolchain generation."""

    name: str
    what: str
    headers: tuple[str, ...]
    packages: dict[str, tuple[str, ...]]  # toolchain -> match specs; () = the toolchain ships it
    platforms: tuple[str, ...] | None = None  # None: every platform
    beside: bool = False  # a library conda-forge ships beside the toolkit (NCCL, cuSPARSELt, Eigen, …)
    include_dir: str | None = None  # the headers' folder under include/ when builds name them without it


@record
class Bundle:
    name: str
    what: str
    extras: tuple[str, ...]
    partial: bool = False  # leave out (with a note) what the CUDA/platform has no package for


@record
class ExtrasTables:
    extras: dict[str, Extra]
    bundles: dict[str, Bundle]
    default_set: dict[str, str] = field(default_factory=dict)  # name -> what every lock has (not a `--with` group)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name `--with` accepts: extras, then bundles."""
        return (*self.extras, *self.bundles)

    def expand(self, names: tuple[str, ...]) -> list[tuple[str, str, bool]]:
        """`--with` names -> (label, extra, partial) in the order asked, bundles expanded, each extra once."""
        out: list[tuple[str, str, bool]] = []
        for name in names:
            if name in self.bundles:
                bundle = self.bundles[name]
                members = [(f"{name} ({e})", e, bundle.partial) for e in bundle.extras]
            elif name in self.extras:
                members = [(name, name, False)]
            else:
                raise PlanError(
                    f"--with {name!r} is not an extra envlock knows",
                    hint=f"use one of: {', '.join(self.names)} (envlock/data/extras.yaml)",
                )
            out += [m for m in members if m[1] not in {e for _, e, _ in out}]
        return out

    def package_names(self, names: tuple[str, ...]) -> frozenset[str]:
        """The conda package names the `--with` extras `names` may add (any toolchain generation)."""
        picked = self.expand(names)
        return frozenset(match_spec_name(s) for _, e, _ in picked for specs in self.extras[e].packages.values()
                         for s in specs)


_EXTRA_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_PLATFORMS = ("linux-64", "linux-aarch64", "win-64")


def parse_extras(raw: dict[str, Any]) -> ExtrasTables:
    """data/extras.yaml's document, validated."""
    if raw.get("schema_version") != 1:
        raise table_error("extras.yaml schema_version is not 1")
    extras: dict[str, Extra] = {}
    for name, row in raw["extras"].items():
        if not _EXTRA_NAME.match(name):
            raise table_error(f"extras.yaml: extra name {name!r} is not lower-case-with-dashes")
        packages = {str(k): tuple(str(s) for s in v) for k, v in row["packages"].items()}
        if set(packages) - set(TOOLCHAINS):
            raise table_error(f"extras.yaml: {name}: unknown toolchain {sorted(set(packages) - set(TOOLCHAINS))}")
        platforms = row.get("platforms")
        if platforms is not None and set(platforms) - set(_PLATFORMS):
            raise table_error(f"extras.yaml: {name}: unknown platform in {platforms}")
        headers = tuple(str(h) for h in row["headers"])
        if not headers:
            raise table_error(f"extras.yaml: {name} names no header")
        include_dir = row.get("include_dir")
        if include_dir is not None and not re.match(r"^[A-Za-z0-9_.-]+$", str(include_dir)):
            raise table_error(f"extras.yaml: {name}: include_dir {include_dir!r} is not one folder name")
        if include_dir is not None and not all(h.startswith(f"{include_dir}/") for h in headers):
            raise table_error(f"extras.yaml: {name}: its headers are not under include_dir {include_dir}")
        beside = row.get("beside", False)
        if not isinstance(beside, bool):
            raise table_error(f"extras.yaml: {name}: beside is not true or false")
        extras[name] = Extra(name, str(row["what"]), headers, packages, tuple(platforms) if platforms else None,
                             beside, None if include_dir is None else str(include_dir))  # fmt: skip
    bundles: dict[str, Bundle] = {}
    for name, row in raw["bundles"].items():
        if name in extras or not _EXTRA_NAME.match(name):
            raise table_error(f"extras.yaml: bundle name {name!r} is invalid or also an extra")
        members = tuple(str(e) for e in row["extras"])
        unknown = [e for e in members if e not in extras]
        if unknown or not members:
            raise table_error(f"extras.yaml: bundle {name} names unknown extras {unknown}")
        if name == "all" and {e.name for e in extras.values() if not e.beside} != set(members):
            raise table_error("extras.yaml: bundle all is not every group of the toolkit (beside: false)")
        bundles[name] = Bundle(name, str(row["what"]), members, bool(row.get("partial", False)))
    default_set = {str(k): str(v) for k, v in (raw.get("default_set") or {}).items()}
    if set(default_set) & (set(extras) | set(bundles)):
        raise table_error(f"extras.yaml: default_set names a group: {sorted(set(default_set) & (set(extras) | set(bundles)))}")
    return ExtrasTables(extras, bundles, default_set)
