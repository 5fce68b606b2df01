"""The user's own pip settings, for the few test helpers that must reach the real package index.

The default tier points every test's pip at a loopback index (tests/fixtures/pypi.py sets PIP_INDEX_URL
and PIP_CONFIG_FILE for the session). Downloading NVIDIA's wheels or envlock's dependency wheels needs the
index this machine is configured with: the session fixture keeps the original values in ENVLOCK_TESTS_USER_PIP
and `user_pip_environ()` puts them back. Outside pytest (benchmarks) it is os.environ unchanged.
"""

from __future__ import annotations

import json
import os

PIP_VARS = ("PIP_CONFIG_FILE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
MARKER = "ENVLOCK_TESTS_USER_PIP"


def remember() -> str:
    """The current PIP_* values as the marker's JSON (call before overriding them)."""
    return json.dumps({k: os.environ.get(k) for k in PIP_VARS})


def user_pip_environ() -> dict[str, str]:
    """os.environ with the user's own PIP_CONFIG_FILE / PIP_INDEX_URL / PIP_EXTRA_INDEX_URL restored."""
    env = dict(os.environ)
    saved = env.pop(MARKER, None)
    if saved is None:
        return env
    for key, value in json.loads(saved).items():
        env.pop(key, None)
        if value is not None:
            env[key] = value
    return env
