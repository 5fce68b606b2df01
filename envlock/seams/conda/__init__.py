"""The rattler seam: the only place envlock imports py-rattler (0.28.0, pinned; DESIGN.md's known traps).

    solve.py     Gateway + one solve per platform (RattlerSolver), the conda-forge pytorch lookup
    why.py       why a candidate failed, asked of the channel (extras.py: which `--with` extra lacks a build)
    channels.py  channel URLs: canonical form, mirrors, the security and scheme checks (no rattler)
    client.py    rattler's HTTP client from envlock.seams.net's settings (timeout, retries, CA bundle)
    errors.py    ONE map of rattler's exceptions to EnvlockErrors
    fetch.py     an archive fetched through envlock.seams.net and checked against the lock's sha256
    cache.py     the package cache: verified entries, extracted, in rattler's cache format
    install.py   link a prefix from the cache (rattler.install)
    index.py     rattler's indexer over a local channel (envlock pack / mirror)

Importing this package imports nothing of rattler: each module that needs it imports it itself, so only
the commands that solve or install pay for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

#: The Gateways the solves of one command share, by settings (envlock.seams.conda.solve): `lock --all` reads each
#: channel's repodata once, not once per spec. None outside a command: a library caller's solve gets a Gateway
#: of its own, dropped with it (its in-memory repodata never outlives the call that read it).
shared_gateways: dict[Any, Any] | None = None
_kept: list[Any] = []


@contextlib.contextmanager
def one_command(*, process_exits: bool = False) -> Iterator[None]:
    """The solves in the block share their Gateways. `process_exits`: the process ends with os._exit right after
    (the CLI), so they are kept, not dropped: rattler frees a Gateway's repodata in ~5-20 ms, for nothing."""
    global shared_gateways
    if shared_gateways is not None:  # nested: the outer command owns them
        yield
        return
    shared_gateways = {}
    try:
        yield
    finally:
        if process_exits:
            _kept.append(shared_gateways)
        shared_gateways = None
