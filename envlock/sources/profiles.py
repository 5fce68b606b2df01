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
    if not isinstance(rows, dict) or not all(isinstance(r, dict) and isinstance(r.get("marker"), str) for r in rows.values()):
        raise EnvlockError("envlock's package data is invalid: profiles.yaml", hint=REINSTALL_HINT)
    return {str(k): {**v, "name": str(k)} for k, v in rows.items()}


def profile_for(files: Mapping[str, str]) -> dict[str, Any] | None:
    """The profile whose marker file the project has, if any."""
    return next((p for p in profiles().values() if p["marker"] in files), None)
