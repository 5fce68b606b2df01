"""data/profiles.yaml: projects whose build units need more than the generic reading (DeepSpeed's op
builders), recognised by a marker file or by name. Adding a profile is a data change."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from envlock import REINSTALL_HINT
from envlock.errors import EnvlockError


@functools.cache
def profiles() -> dict[str, dict[str, Any]]:
    """name -> profile (with its name under 'name'), validated once."""
    from envlock.core.tables import _yaml

    doc = _yaml("profiles.yaml")
    rows = doc.get("profiles") if isinstance(doc, dict) and doc.get("schema_version") == 1 else None
    if not isinstance(rows, dict) or not all(_valid(r) for r in rows.values()):
        raise EnvlockError("envlock's package data is invalid: profiles.yaml", hint=REINSTALL_HINT)
    return {str(k): {**v, "name": str(k)} for k, v in rows.items()}


def _valid(row: Any) -> bool:
    if not isinstance(row, dict) or not isinstance(row.get("marker"), str):
        return False
    lists = all(isinstance(row.get(k, []), list) and all(isinstance(x, str) for x in row.get(k, []))
                for k in ("units", "jit_calls", "read", "skip_modules", "skip_bases"))  # fmt: skip
    source = row.get("source", {"file": "", "version": ""})
    return lists and isinstance(row.get("defines", {}), dict) and isinstance(source, dict) and all(
        isinstance(source.get(k), str) for k in ("file", "version"))


def profile_named(value: str) -> dict[str, Any] | None:
    """The profile a `--for` value names (flash-attn, flash_attn, FlashInfer: PEP 503's spelling) that has a
    saved table, if any."""
    from envlock.sources.saved import normal

    want = normal(value)
    return next((p for n, p in profiles().items() if normal(n) == want and p.get("table")), None)


def profile_for(files: Mapping[str, str]) -> dict[str, Any] | None:
    """The profile whose marker file the project has, if any."""
    return next((p for p in profiles().values() if p["marker"] in files), None)
