"""envlock's cache dir must be usable before anything slow starts (repodata, uv, packages, file locks).

A cache dir that cannot be created or written failed late and was blamed on the project ("check that
environments/ and locks/ are writable") or on the PyPI requirements (uv's own cache under it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from envlock.errors import SpecError


def ensure_writable(path: Path) -> Path:
    """`path`, created if needed; SpecError naming it and ENVLOCK_CACHE_DIR when it cannot be used."""
    value = os.environ.get("ENVLOCK_CACHE_DIR")
    where = f"it is {value}" if value else "unset, so it is the user cache dir"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise SpecError(
            f"envlock's cache dir {path} cannot be used: {exc.strerror or exc}",
            hint=f"set ENVLOCK_CACHE_DIR to a directory you can write ({where}); the project is not the problem",
        ) from None
    return path
