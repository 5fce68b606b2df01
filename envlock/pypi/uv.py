"""uv itself (the `uv` package envlock depends on, run as a subprocess): its binary, environment and runs.

uv does not read pip's configuration; envlock passes the indexes itself. It runs with its cache inside
envlock's and without the user's UV_* settings (they would change what a spec locks to), except TLS and
timeout ones. ENVLOCK_UV_TIMEOUT bounds one run (600 s).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from envlock import REINSTALL_HINT, proc
from envlock.errors import EnvlockError, SpecError

#: UV_* variables that may reach uv; every other one (UV_INDEX_URL, UV_EXCLUDE_NEWER …) would change
#: what a spec locks to, so the command line alone decides.
_UV_ENV_KEEP = frozenset({"UV_NATIVE_TLS", "UV_HTTP_TIMEOUT", "UV_CONCURRENT_DOWNLOADS", "UV_INSECURE_HOST"})


def uv_binary() -> str:
    """The uv executable of the `uv` package envlock depends on."""
    try:
        import uv  # noqa: PLC0415 - lazy: only resolve/create of a full env pay for it

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError) as exc:
        raise SpecError(
            f"uv is not installed ({exc})",
            hint=f"{REINSTALL_HINT[:-1]}: it brings uv), or lock with --toolchain-only",
        ) from None


def cache_dir(override: Path | None = None) -> Path:
    """envlock's cache dir (uv's own cache lives in its uv/)."""
    if override is not None:
        return override
    from envlock.dirs import cache_dir as _cache_dir  # noqa: PLC0415

    return _cache_dir()


def uv_environ(cache: Path) -> dict[str, str]:
    """The environment uv runs in: uv's cache inside envlock's, no user UV_* settings, no colour."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k in _UV_ENV_KEEP}
    env.update({"UV_CACHE_DIR": str(cache / "uv"), "NO_COLOR": "1", "UV_NO_PROGRESS": "1"})
    return env


def timeout() -> float:
    """Seconds one uv run may take: ENVLOCK_UV_TIMEOUT, else 600."""
    try:
        return float(os.environ.get("ENVLOCK_UV_TIMEOUT", "600"))
    except ValueError:
        return 600.0


def run(args: Sequence[str], *, cache: Path, what: str, failed: Callable[[str], EnvlockError],
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`uv ARGS…` in uv's environment, bounded by the uv timeout (envlock.proc); its exit status is the caller's."""
    return proc.run([uv_binary(), *args], what=what, timeout=timeout(), failed=failed, input=stdin,
                    env=uv_environ(cache))

