"""rattler's indexer over a local channel directory (`envlock pack` and `envlock mirror`, envlock/usecases/channeldir.py).

Incremental: records of files already indexed are kept. Each record's `indexed_timestamp` is set to its build
`timestamp` (rattler's indexer stamps "now"), so a re-lock against the copy keeps the spec's resolution
cutoff; then a second pass writes .zst and shards from that.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from envlock.errors import ChannelError
from envlock.seams import beneath
from envlock.seams.fs import write_atomic


def index_dirs(root: Path, dirs: Sequence[str], *, zst_and_shards: bool) -> None:
    """Index every channel dir (relative to `root`); ChannelError naming the one that fails."""
    import asyncio

    from rattler.index import index_fs

    for rel in dirs:
        chan = root / rel
        with beneath.directory(root, f"{rel}/noarch", inside_links=True):  # rattler's indexer requires noarch
            pass
        _no_link_out(root, chan)  # rattler reads and writes by path: nothing in the channel may lead out of root
        try:
            asyncio.run(index_fs(chan, write_zst=False, write_shards=False))
            for sub in chan.iterdir():
                if (sub / "repodata.json").is_file():
                    _pin_timestamps(sub / "repodata.json", root)
            if zst_and_shards:
                asyncio.run(index_fs(chan, write_zst=True, write_shards=True))
        except Exception as exc:  # noqa: BLE001 - rattler's own exception types, and the OSErrors of the directory
            raise ChannelError(f"indexing {chan} failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                               hint="check the directory is writable and its archives are whole") from None


def _no_link_out(root: Path, chan: Path) -> None:
    """UnsafeNameError for a symlink anywhere in the channel dir `chan` that leads out of `root` (a planted
    `linux-64/repodata.json -> /etc/…` would have the indexer write there, an archive link read a file elsewhere)."""
    import os

    top = os.path.realpath(root)
    for here, dirs, files in os.walk(chan):
        for name in (*dirs, *files):
            path = os.path.join(here, name)
            if os.path.islink(path):
                real = os.path.realpath(path)
                if real != top and not real.startswith(top.rstrip(os.sep) + os.sep):
                    raise beneath.outside(root, os.path.relpath(path, root))


def _pin_timestamps(repodata: Path, root: Path) -> None:
    doc = json.loads(repodata.read_text(encoding="utf-8"))
    changed = False
    for key in ("packages", "packages.conda"):
        for rec in (doc.get(key) or {}).values():
            if "timestamp" in rec and rec.get("indexed_timestamp") != rec["timestamp"]:
                rec["indexed_timestamp"] = rec["timestamp"]
                changed = True
    if changed:  # a mirror is served by another user's web server: world-readable
        write_atomic(repodata, json.dumps(doc, indent=1, sort_keys=True) + "\n", mode=0o644, skip_unchanged=False,
                     root=root)
