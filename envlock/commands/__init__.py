"""One module per group of commands; each exposes register(app)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def with_bars(call: Callable[[Any], Any], *, as_json: bool, quiet: bool) -> Any:
    """`call(progress)` with create's byte bars on a terminal (none on a pipe, with --json or -q); with --json
    the result's JSON goes to stdout. Returns the result (create, pack, unpack and mirror share this)."""
    import json
    import sys

    from envlock.progress import CreateBars, wanted

    progress = CreateBars() if wanted(as_json=as_json, quiet=quiet) else None
    try:
        result = call(progress)
    finally:
        if progress is not None:
            progress.close()
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n")
    return result
