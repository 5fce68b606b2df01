"""The smaller tables: the NVIDIA driver each CUDA needs, GPU architectures, DeepSpeed's JIT ops, the PyPI
part's indexes and the Dockerfile's bases, each validated when loaded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from envlock import REINSTALL_HINT
from envlock.errors import EnvlockError, SpecError

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$")


def parse_driver(doc: Any) -> dict[str, Any]:
    """data/driver.yaml: CUDA -> driver minimums (doctor's driver.version check)."""
    if not isinstance(doc, dict) or doc.get("schema_version") != 1:
        raise SpecError(
            "envlock's package data is invalid: driver.yaml schema_version is not 1", hint=REINSTALL_HINT
        )
    return doc


def parse_gpu_arch(doc: Any) -> dict[str, dict[str, Any]]:
    """data/gpu_arch.yaml: capability X.Y -> {first, last, name}."""
    arches = doc.get("arches") if isinstance(doc, dict) and doc.get("schema_version") == 1 else None
    ok = isinstance(arches, dict) and all(
        re.match(r"^\d+\.\d+$", str(k)) and isinstance(v, dict) and re.match(r"^\d+\.\d+$", str(v.get("first")))
        for k, v in arches.items()
    )
    if not ok:
        raise EnvlockError("envlock's package data is invalid: gpu_arch.yaml", hint=REINSTALL_HINT)
    return arches  # type: ignore[return-value]  # checked above: a dict of X.Y -> {first, last, name}


def parse_deepspeed_ops(doc: Any) -> dict[str, Any]:
    """data/deepspeed_ops.yaml: {deepspeed: version, ops: {name: {cuda_headers, needs, ...}}}."""
    ops = doc.get("ops") if isinstance(doc, dict) and doc.get("schema_version") == 1 else None
    if not isinstance(ops, dict) or not all(isinstance(r.get("cuda_headers"), list) for r in ops.values()):
        raise EnvlockError("envlock's package data is invalid: deepspeed_ops.yaml", hint=REINSTALL_HINT)
    return doc  # type: ignore[no-any-return]  # checked above: a dict with ops


def parse_pypi(doc: Any) -> dict[str, Any]:
    """data/pypi.yaml: the PyTorch wheel index of each variant, packages every full env gets."""
    if not isinstance(doc, dict) or "{variant}" not in str(doc.get("variant_index", "")):
        raise SpecError("envlock's data/pypi.yaml is damaged", hint=REINSTALL_HINT)
    return doc


def split_ref(ref: str) -> tuple[str, str | None]:
    """(name[:tag], sha256 digest or None) of an image reference; EnvlockError when malformed."""
    name, at, digest = ref.partition("@")
    if not _REF.match(name) or (at and not _DIGEST.match(digest)):
        raise EnvlockError(
            f"{ref!r} is not an image reference",
            hint="give NAME[:TAG][@sha256:<64 hex digits>], e.g. debian:bookworm-slim@sha256:…",
        )
    return name, digest or None


@dataclass(frozen=True, slots=True)
class DockerTables:
    """envlock/data/docker.yaml, validated."""

    build_base: str
    runtime_base: str
    triplets: dict[str, str]
    compiler_exports: dict[str, dict[str, str]]  # package name pattern -> {VAR: the script's right-hand side}
    requires: dict[str, str]  # VAR -> the variable its script needs set


def parse_docker(doc: Any) -> DockerTables:
    """data/docker.yaml: the Dockerfile's pinned bases and the compiler packages' activation exports."""
    try:
        bases = {k: f"{v['image']}@{v['digest']}" for k, v in doc["bases"].items()}
        act = doc["compiler_activation"]
        tables = DockerTables(
            build_base=bases["build"],
            runtime_base=bases["runtime"],
            triplets={str(k): str(v) for k, v in act["triplets"].items()},
            compiler_exports={str(k): {str(a): str(b) for a, b in v.items()} for k, v in act["packages"].items()},
            requires={str(k): str(v) for k, v in (act.get("requires") or {}).items()},
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise EnvlockError(f"envlock's data/docker.yaml is malformed ({exc})", hint=REINSTALL_HINT) from None
    for ref in (tables.build_base, tables.runtime_base):
        if split_ref(ref)[1] is None:
            raise EnvlockError(f"data/docker.yaml: {ref} has no digest", hint=REINSTALL_HINT)
    return tables
