"""Where the test suite keeps what it builds once and reuses across runs (the real conda's venv, NVIDIA wheels,
the image build's wheels): $ENVLOCK_TEST_CACHE, else the user cache dir's `envlock-tests` (platformdirs: on Linux
$XDG_CACHE_HOME first, then ~/.cache), as every tool a user runs follows it."""

from __future__ import annotations

import os
from pathlib import Path


def suite_cache() -> Path:
    """The suite's cache root (not made here)."""
    env = os.environ.get("ENVLOCK_TEST_CACHE")
    if env:
        return Path(env)
    import platformdirs

    return platformdirs.user_cache_path("envlock-tests")
