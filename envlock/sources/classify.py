"""Who provides a header or a library that a project's sources use but do not contain (pure over the tables).

data/sources.yaml says which section a name falls in (CUDA toolkit, torch, python, system, another platform,
an outside library no CUDA package gives); extras.yaml and cuda.yaml say which `--with` group ships a CUDA
package and whether the default dev set already has it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from envlock import REINSTALL_HINT
from envlock.errors import EnvlockError

#: The kinds of provider, in the order findings list them.
KINDS = ("cuda", "driver", "gone", "not_cuda", "unknown", "torch", "python", "system", "other_platform")


@dataclass(frozen=True, slots=True)
class Provider:
    """What gives one outside header or library."""

    kind: str  # one of KINDS
    package: str | None = None  # the conda-forge package (kind cuda)
    group: str | None = None  # its `--with` group (extras.yaml), None when no group lists it
    default: bool = False  # the default dev set (cuda.yaml's cf-split toolchain) has the package
    why: str = ""  # gone / not_cuda: what it is and where it comes from


@dataclass(frozen=True)
class SourceTables:
    headers: dict[str, Any]
    through_torch: dict[str, tuple[str, ...]]
    libraries: dict[str, Any]
    groups: dict[str, str]  # package -> `--with` group
    default: frozenset[str]  # packages of the default dev set

    def header(self, name: str) -> Provider:
        """The provider of `#include <name>` when the project does not have it."""
        h = self.headers
        for package, globs in h["cuda"].items():
            if _any(name, globs):
                return self._cuda(package)
        for section in ("torch", "python", "system", "other_platform"):
            if _any(name, h[section]):
                return Provider(section)
        for section in ("gone", "not_cuda"):
            for glob, why in h[section].items():
                if fnmatchcase(name, glob):
                    return Provider(section, why=why)
        return Provider("unknown")

    def library(self, name: str) -> Provider:
        """The provider of `-lname`."""
        lib = self.libraries
        for package, globs in lib["cuda"].items():
            if _any(name, globs):
                return self._cuda(package)
        for section in ("driver", "torch", "system"):
            if _any(name, lib[section]):
                return Provider(section)
        if name in lib["not_cuda"]:
            return Provider("not_cuda", why=lib["not_cuda"][name])
        return Provider("unknown")

    def _cuda(self, package: str) -> Provider:
        return Provider("cuda", package, self.groups.get(package), package in self.default)


def _any(name: str, globs: Any) -> bool:
    return any(fnmatchcase(name, g) for g in globs)


@functools.cache
def source_tables() -> SourceTables:
    """data/sources.yaml with the groups of extras.yaml and the default set of cuda.yaml, validated once."""
    from envlock.names import match_spec_name
    from envlock.core.tables import _yaml, cuda_tables, extras_tables

    doc = _yaml("sources.yaml")
    try:
        headers, libraries = doc["headers"], doc["libraries"]
        ok = doc["schema_version"] == 1 and all(
            isinstance(headers[k], dict) for k in ("cuda", "gone", "not_cuda")
        ) and all(isinstance(headers[k], list) for k in ("torch", "python", "system", "other_platform"))
        through = {str(k): tuple(v) for k, v in doc["through_torch"].items()}
        ok = ok and isinstance(libraries["cuda"], dict) and isinstance(libraries["not_cuda"], dict)
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise EnvlockError("envlock's package data is invalid: sources.yaml", hint=REINSTALL_HINT)
    extras = extras_tables().extras
    groups = {}
    for name, extra in extras.items():
        for spec in extra.packages.get("cf-split", ()):
            groups.setdefault(match_spec_name(spec), name)
    default = frozenset(match_spec_name(s) for s in cuda_tables().toolchain_specs["cf-split"]) | {"cuda-cccl"}
    return SourceTables(headers, through, libraries, groups, default)
