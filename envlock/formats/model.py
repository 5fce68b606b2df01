"""What every lock reader returns (LockFile), what envlock records in a lock's custom metadata, and the
locked packages' dependency order (every writer's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envlock.models import LockedPackage, PypiPackage, record
from envlock.names import match_spec_name
from envlock.formats.untrusted import json_value

#: Version of what envlock writes into `custom_metadata` (refuse newer ones on read).
LOCK_FORMAT = 1
META_PREFIX = "envlock."


def custom_value(custom: dict[str, str], key: str, default: Any = None) -> Any:
    """envlock's JSON value `envlock.<key>` of a lock's custom metadata (default when absent or unreadable)."""
    raw = custom.get(META_PREFIX + key)
    return json_value(raw, default) if raw else default


def dependency_order(packages: Sequence[LockedPackage]) -> list[LockedPackage]:
    """Packages sorted so that every dependency comes before its dependents (ties by name)."""
    by_name = {p.name: p for p in packages}
    deps = {p.name: sorted({match_spec_name(d) for d in p.depends} & by_name.keys() - {p.name}) for p in packages}
    done: set[str] = set()
    out: list[LockedPackage] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in done or name in visiting:
            return  # a cycle (rare, e.g. python <-> pip) is broken by name order
        visiting.add(name)
        for dep in deps[name]:
            visit(dep)
        visiting.discard(name)
        done.add(name)
        out.append(by_name[name])

    for name in sorted(by_name):
        visit(name)
    return out


@record
class ForeignEntry:
    """A lock entry of a manager envlock does not install (diff still compares it)."""

    platform: str
    manager: str
    name: str
    version: str


@record
class LockFile:
    """A parsed lock: conda-lock v1/v2, @EXPLICIT or pixi.lock, with its conda and PyPI packages."""

    path: Path | None
    platforms: tuple[str, ...]
    channels: tuple[str, ...]
    content_hash: dict[str, str]
    sources: tuple[str, ...]
    custom_metadata: dict[str, str]
    packages: tuple[LockedPackage, ...]
    pypi: tuple[PypiPackage, ...] = ()  # `manager: pip` entries (the PyPI part of a full environment)
    foreign: tuple[ForeignEntry, ...] = ()  # entries of other managers, which envlock does not install
    kind: str = "conda-lock"  # conda-lock | explicit | pixi
    version: int = 1  # the file format's version (conda-lock 1/2, pixi 4-6)

    def packages_for(self, platform: str) -> tuple[LockedPackage, ...]:
        """Conda packages of one platform, in dependency order."""
        return tuple(p for p in self.packages if p.platform == platform)

    def pypi_for(self, platform: str) -> tuple[PypiPackage, ...]:
        """PyPI wheels of one platform, in dependency order."""
        return tuple(p for p in self.pypi if p.platform == platform)

    def env_name(self) -> str:
        """The environment's name: what envlock recorded (checked when the lock was read), else the name of the
        folder the file lies in (locks/NAME/), checked by the one name rule (envlock/envname.py)."""
        from envlock.envname import validate_name

        recorded = self.custom_metadata.get(f"{META_PREFIX}env_name")
        if recorded:
            return validate_name(recorded, "environment name the lock records")
        folder = self.path.parent.name if self.path is not None else ""
        return validate_name(folder, "lock folder name", hint="a lock's folder is its name: rename the folder, or "
                             "keep the lock in locks/NAME/")

    def envlock_meta(self, platform: str | None = None) -> dict[str, Any]:
        """envlock's own metadata (anchor, plan of `platform`), or {} for a lock envlock did not write."""
        meta = self.custom_metadata
        if f"{META_PREFIX}version" not in meta:
            return {}
        out: dict[str, Any] = {
            "envlock_version": meta.get(f"{META_PREFIX}version"),
            "lock_format": int(meta.get(f"{META_PREFIX}lock_format", "1")),
            "rules_version": meta.get(f"{META_PREFIX}rules_version"),
            "env_name": meta.get(f"{META_PREFIX}env_name"),
            "spec": meta.get(f"{META_PREFIX}spec"),
            "anchor": custom_value(meta, "anchor", {}),
        }
        if platform is not None:
            out["plan"] = custom_value(meta, f"plan.{platform}", {})
        return out
