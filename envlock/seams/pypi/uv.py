"""uv itself (the `uv` package envlock depends on, run as a subprocess): its binary, environment and runs.

uv does not read pip's configuration; envlock passes the indexes itself. It runs with its cache inside
envlock's and without the user's UV_* settings (they would change what a spec locks to), except TLS and
timeout ones. ENVLOCK_UV_TIMEOUT bounds one run (600 s).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envlock import REINSTALL_HINT

from envlock.seams import proc
from envlock.errors import EnvlockError, SpecError
from envlock.names import has_credentials, split_userinfo

if TYPE_CHECKING:
    import subprocess

#: UV_* variables of the user's that may reach uv; every other one (UV_INDEX_URL, UV_EXCLUDE_NEWER …) would
#: change what a spec locks to, so envlock alone decides (the command line, and the indexes in UV_INDEX_URL /
#: UV_EXTRA_INDEX_URL: credentials stay off the command line).
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
    from envlock.seams.dirs import cache_dir as _cache_dir  # noqa: PLC0415

    return _cache_dir()


def uv_environ(cache: Path) -> dict[str, str]:
    """The environment uv runs in: uv's cache inside envlock's, no user UV_* settings, no colour, and
    ENVLOCK_HTTP_RETRIES as uv's retries per request (as for every other request envlock makes)."""
    from envlock.seams.net import settings  # noqa: PLC0415 - read when uv runs, as the other requests read it

    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k in _UV_ENV_KEEP}
    env.update({"UV_CACHE_DIR": str(cache / "uv"), "NO_COLOR": "1", "UV_NO_PROGRESS": "1",
                "UV_HTTP_RETRIES": str(settings().retries)})
    return env


def index_environ(urls: Sequence[str]) -> dict[str, str]:
    """The indexes (the default one first) in uv's environment, readable by this user alone, never on its command
    line, which every user reads in /proc/<pid>/cmdline (`ps`). A URL's login goes to uv's variables for a named
    index (UV_INDEX_<NAME>_USERNAME/_PASSWORD), not into the URL: uv keeps index URLs in its cache, user names
    too (a token alone as userinfo is one)."""
    env: dict[str, str] = {}
    named = []
    for i, url in enumerate(urls):
        name = "main" if i == 0 else f"extra{i}"
        plain, user, password = split_userinfo(url)
        named.append(f"{name}={plain}")
        env.update({f"UV_INDEX_{name.upper()}_USERNAME": user} if user is not None else {})
        env.update({f"UV_INDEX_{name.upper()}_PASSWORD": password} if password is not None else {})
    env["UV_DEFAULT_INDEX"] = named[0]
    return {**env, **({"UV_INDEX": " ".join(named[1:])} if named[1:] else {})}


def cache_for(cache: Path, urls: Sequence[str]) -> Path:
    """Where uv keeps its cache (`cache`/uv): this user's private corner of envlock's cache when an index URL holds a
    token in its path (conda's /t/<token>/), which stays in the URL uv records, so a shared cache never shows it."""
    from envlock.seams.dirs import private_cache  # noqa: PLC0415 - lazy, as cache_dir above

    return private_cache(cache) if any(has_credentials(split_userinfo(u)[0]) for u in urls) else cache


def timeout() -> float:
    """Seconds one uv run may take: ENVLOCK_UV_TIMEOUT, else 600."""
    from envlock.environ import BadSetting, number
    from envlock.errors import UsageError

    try:
        return number("ENVLOCK_UV_TIMEOUT")
    except BadSetting as bad:
        raise UsageError(bad.message, hint=bad.hint) from None


def run(args: Sequence[str], *, cache: Path, what: str, failed: Callable[[proc.Failure], EnvlockError],
        stdin: str | None = None, environ: Mapping[str, str] | None = None,
        started: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    """`uv ARGS…` in uv's environment (plus `environ`: what must not be on a command line, such as index URLs
    with credentials), bounded by the uv timeout (envlock.seams.proc); its exit status is the caller's.
    `started()`: called once uv runs (envlock.seams.proc.run)."""
    return proc.run([uv_binary(), *args], what=what, timeout=timeout(), failed=failed, input=stdin,
                    env={**uv_environ(cache), **(environ or {})}, started=started)

