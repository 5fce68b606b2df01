"""envlock/data/tables.json: the tables every `resolve` and `check` reads (and pypi.yaml, a full env's), as JSON beside their YAML.

The YAML files stay the source (comments, sources, reviewed diffs). tables.json holds each one's parsed
document with the sha256 of the YAML text it came from; a table is read from the JSON only when that hash
is the YAML's own, else from the YAML (an edit not yet compiled is never missed). JSON loads in ~0.1 ms
where libyaml takes ~3 ms for the three, and a resolve then needs no PyYAML at all (benchmarks/README.md).
tests/test_tables_compiled.py fails when tables.json is stale; regenerate it with

    python -m envlock.core.tables.compiled
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from envlock.core.tables import DATA, text_of

SOURCES = ("torch.yaml", "cuda.yaml", "extras.yaml", "pypi.yaml")  # pypi.yaml: PyYAML was ~14 ms of a full-env resolve
COMPILED = "tables.json"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.cache
def _compiled() -> dict[str, Any]:
    try:
        doc = json.loads(text_of(COMPILED))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def document(name: str) -> Any | None:
    """The parsed document of data/<name> when tables.json was compiled from this very text, else None."""
    entry = _compiled().get(name)
    if isinstance(entry, dict) and entry.get("sha256") == _sha256(text_of(name)):
        return entry.get("document")
    return None


def compile_tables() -> str:
    """tables.json's text for the YAML files as they are (duplicate keys refused, as the torch table's loader does)."""
    from envlock.core.tables import _yaml
    from envlock.core.tables.torch import _yaml_load_unique

    out = {}
    for name in SOURCES:
        text = text_of(name)
        doc = _yaml_load_unique(text) if name == "torch.yaml" else _yaml(name)
        out[name] = {"sha256": _sha256(text), "document": doc}
    return json.dumps(out, indent=1, ensure_ascii=False) + "\n"  # key order kept: it is meaningful (sorted minors)


def main() -> int:
    (DATA / COMPILED).write_text(compile_tables(), encoding="utf-8")
    print(f"wrote {DATA / COMPILED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
