"""A project's scan kept as data (envlock/data/profiles/<name>.yaml), and read back: `--for flash-attn` judges
an env by the saved scan of FlashAttention's sources, without the sources.

    document(scan, head)   the table tools/project_profiles.py writes (one per profile with a `table` under
                           profiles/), deterministic: the same sources give the same bytes
    saved_scan(name)       the Scan of a profile's table, its needs classified by today's data/sources.yaml
                           and extras.yaml (a group added since is named without regenerating)

A table holds, per build unit, its outside needs (CUDA headers and libraries, the driver, what no CUDA
package gives, what torch no longer ships; not torch's, Python's or the system's own headers), where each is
asked for, whether only under an undecided condition, and its build facts (facts.py); and for the project, the
union: the CUDA headers and libraries, the `--with` groups, the C++ standard and the host compiler and nvcc
it implies, the nvcc floor the project states, and the arch list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from envlock import REINSTALL_HINT
from envlock.errors import EnvlockError
from envlock.sources.facts import requirements, summary
from envlock.sources.pystatic import Fact
from envlock.sources.scan import Need, Scan, Unit

SCHEMA = 1
KEEP = ("cuda", "driver", "gone", "not_cuda", "unknown")
BOUNDS = ("nvcc_min", "nvcc_below", "nvcc_max")  # the facts doctor judges an env by (checks_sources)


def document(scan: Scan, head: Mapping[str, Any]) -> dict[str, Any]:
    """The saved form of `scan` (its units in name order), after `head` (project, version, source…)."""
    units: dict[str, Any] = {}
    facts: list[Fact] = []
    for u in sorted(scan.units, key=lambda u: (u.name, u.where)):
        if not u.sources and u.where not in ("CMakeLists.txt", "meson.build") and not u.where.endswith("/CMakeLists.txt"):
            continue  # none of its sources is in the tree (made at build time): nothing to say about it
        needs = []
        for n in sorted(u.needs, key=lambda n: (n.what, n.name)):
            if n.provider.kind not in KEEP:
                continue
            row: dict[str, Any] = {"name": n.name, "via": n.via}
            if n.what != "header":
                row["what"] = n.what
            if n.conditional:
                row["conditional"] = True
            needs.append(row)
        facts += u.facts
        bounds = sorted({f for f in u.facts if f.key in BOUNDS}, key=_fact_key)
        units[u.name] = {"kind": u.kind, "where": u.where, "sources": len(u.sources),
                         "build": summary(u.facts), "needs": needs,
                         "nvcc_checks": [[f.key, f.value, f.where] for f in bounds]}  # fmt: skip
        if u.note:
            units[u.name]["note"] = u.note
    cuda = [n for u in scan.units for n in u.needs if n.provider.kind == "cuda" and not n.conditional]
    outside = {n.name: n.provider.why or n.provider.kind for u in scan.units for n in u.needs
               if n.provider.kind in KEEP[1:] and not n.conditional}  # fmt: skip
    stated = requirements(summary(facts))
    if "arch" not in stated and any(u.kind in ("extension", "jit", "builder") for u in scan.units):
        stated["arch"] = ["TORCH_CUDA_ARCH_LIST (unset: torch's build targets the visible GPU)"]
    project = {
        **stated,
        "cuda_headers": sorted({n.name for n in cuda if n.what == "header"}),
        "cuda_libraries": sorted({n.name for n in cuda if n.what == "library"}),
        "groups": scan.groups(),
        "outside": dict(sorted(outside.items())),
    }
    return {"schema_version": SCHEMA, **head, "build": project, "units": units}


def _fact_key(f: Fact) -> tuple[str, str, str, str]:
    return (f.key, f.value, f.where, f.nvcc)


def text(doc: Mapping[str, Any], comment: str) -> str:
    import yaml

    lines = "".join(f"# {line}\n".replace("# \n", "#\n") for line in comment.splitlines())
    return lines + yaml.safe_dump(dict(doc), sort_keys=False, width=110, allow_unicode=True, default_flow_style=None)


@functools.cache
def saved_scan(name: str) -> Scan | None:
    """The saved scan of profile `name` (None when it has no table)."""
    from envlock.core.tables import _yaml
    from envlock.sources.classify import source_tables
    from envlock.sources.profiles import profiles

    profile = profiles().get(name)
    table = profile.get("table") if profile else None
    if not isinstance(table, str) or not table.startswith("profiles/"):
        return None
    doc = _yaml(table)
    try:
        return _scan(doc, source_tables(), name)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise EnvlockError(f"envlock's package data is invalid: {table} ({exc})", hint=REINSTALL_HINT) from None


def _scan(doc: Mapping[str, Any], tables: Any, name: str) -> Scan:
    if doc["schema_version"] != SCHEMA:
        raise ValueError(f"schema_version {doc['schema_version']}")
    units = []
    seen: dict[tuple[str, str], Any] = {}  # one classification per name: units share most of theirs
    for unit_name, u in doc["units"].items():
        needs = []
        for row in u["needs"]:
            what = row.get("what", "header")
            if what not in ("header", "library", "package"):
                raise ValueError(f"what: {what}")
            key = (what, str(row["name"]))
            if key not in seen:
                seen[key] = tables.header(key[1]) if what == "header" else tables.library(key[1])
            provider = seen[key]
            needs.append(Need(str(row["name"]), what, provider, str(row["via"]), bool(row.get("conditional", False))))
        facts = tuple(Fact(str(k), str(v), str(w)) for k, v, w in u["nvcc_checks"])
        count = int(u["sources"])
        units.append(Unit(str(unit_name), str(u["kind"]), str(u["where"]), tuple(f"({count} sources)" for _ in range(count)),
                          tuple(needs), note=u.get("note"), facts=facts))  # fmt: skip
    origin = f"{doc['project']} {doc['version']} ({doc['source']}, saved by envlock)"
    return Scan(origin, tuple(units), profile=name)


def normal(name: str) -> str:
    """A project name as PEP 503 writes it (flash_attn, Flash-Attn -> flash-attn)."""
    return re.sub(r"[-_.]+", "-", name).lower()
