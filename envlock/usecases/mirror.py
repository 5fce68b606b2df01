"""`envlock mirror`: a directory holding exactly what some locks need, servable by any static HTTP server.

Conda packages per channel and subdir with rattler-indexed repodata (+ .zst and shards), wheels in a PEP 503
simple index (envlock/usecases/channeldir.py). Incremental: a file already there is kept, only what is new is
fetched, and the indexes are brought up to date. Use it with `--mirror conda-forge=file://DIR/conda-forge`
(or `http://host/DIR/conda-forge`) and `pypi=…/pypi/simple`; `MirrorResult.mirror_entries` says which.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock import UPGRADE_HINT, __version__
from envlock.errors import SpecError
from envlock.seams.mirror_urls import MIRROR_MANIFEST
from envlock.formats.untrusted import read_json

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class MirrorRequest:
    """Which locks (and platforms) to mirror into which directory, fetching through which mirrors."""

    dest: Path
    locks: tuple[Path, ...]
    platforms: tuple[str, ...] = ()  # default: every platform of each lock
    mirrors: Mapping[str, str] = field(default_factory=dict)
    jobs: int = 4
    allow_insecure: bool = False  # plain http off loopback (refused otherwise, as resolve refuses it)


@dataclass(frozen=True)
class MirrorResult:
    """What the directory holds now, and what this run added."""

    dest: Path
    locks: tuple[str, ...]
    packages: int
    fetched: int
    wheels: int
    wheels_added: int
    channels: dict[str, str]  # mirror key (conda-forge, nvidia, or a channel URL) -> dir under dest
    pypi: bool  # the directory has a PyPI part (pypi/simple)
    seconds: float

    def mirror_entries(self, base: str | None = None) -> list[str]:
        """`NAME=URL` entries for ENVLOCK_MIRRORS (base: the URL dest is served at; default file://)."""
        root = (base or self.dest.absolute().as_uri()).rstrip("/")
        out = [f"{k}={root}/{v}" for k, v in sorted(self.channels.items())]
        return out + ([f"pypi={root}/pypi/simple"] if self.pypi else [])

    def to_json(self) -> dict[str, Any]:
        return {"dest": str(self.dest), "locks": list(self.locks), "packages": self.packages, "fetched": self.fetched,
                "wheels": self.wheels, "wheels_added": self.wheels_added, "channels": self.channels,
                "pypi": self.pypi, "mirrors": self.mirror_entries(), "seconds": round(self.seconds, 3)}


def mirror_key(channel_url: str) -> tuple[str, str]:
    """(key, dir): `https://conda.anaconda.org/nvidia/label/x/` -> ("nvidia", "nvidia"); others keep their URL."""
    from envlock.usecases.channeldir import channel_dir
    from envlock.seams.mirror_urls import CANONICAL_BASE

    if channel_url.startswith(CANONICAL_BASE):
        top = channel_url[len(CANONICAL_BASE):].strip("/").split("/", 1)[0]
        return top, top  # a channel name covers its labels
    return channel_url.rstrip("/"), channel_dir(channel_url)


def selected(lock_paths: Sequence[Path], platforms: Sequence[str]) -> list[tuple[Any, tuple[str, ...]]]:
    """(lock, its platforms to mirror) for each lock; SpecError for a platform no lock has."""
    from envlock.formats import read_lock

    out = []
    for path in lock_paths:
        lock = read_lock(path)
        out.append((lock, tuple(p for p in lock.platforms if not platforms or p in platforms)))
    missing = sorted(set(platforms) - {p for _, ps in out for p in ps})
    if missing:
        have = sorted({p for lock, _ in out for p in lock.platforms})
        raise SpecError(f"no lock given has {', '.join(missing)} (they lock {', '.join(have) or 'nothing'})",
                        hint="drop that --platform, or re-lock with it")
    return out


def mirror(req: MirrorRequest, progress: Any = None) -> MirrorResult:
    """Fill (or bring up to date) `req.dest` with every package of the locks' platforms, then index it."""
    from envlock.usecases.channeldir import content_of, index_channels, store_packages, store_wheels
    from envlock.seams.dirs import cache_location
    from envlock.seams.filelocks import FileLock
    from envlock.seams.conda.channels import check_fetch_urls
    from envlock.seams.gate import check_entries
    from envlock.seams.mirror_urls import channel_of, check_in_play

    started = time.perf_counter()
    if not req.locks:
        raise SpecError("nothing to mirror: no lock given", hint="name locks (envlock mirror NAME… DIR) or pass --lock FILE")
    chosen = selected(req.locks, req.platforms)
    content = content_of(chosen)
    check_entries(content.packages, content.wheels)  # every name a path is made of: envlock/seams/gate.py
    check_fetch_urls([p.url for p in content.packages], [w.url for w in content.wheels], req.mirrors,
                     allow_insecure=req.allow_insecure)
    check_in_play(req.mirrors, {channel_of(p.url) for p in content.packages}, [w.url for w in content.wheels])
    if req.dest.exists() and not req.dest.is_dir():
        raise SpecError(f"{req.dest} exists and is not a directory", hint="give a directory to mirror into")
    try:
        req.dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"cannot create {req.dest}: {exc.strerror or exc}", hint="choose a directory you can write to") from None
    with FileLock(req.dest / ".envlock-mirror.lock", f"the mirror {req.dest}", root=req.dest):
        fetched = store_packages(req.dest, content.packages, mirrors=req.mirrors, jobs=req.jobs, progress=progress)
        index_channels(req.dest, content.packages, zst_and_shards=True)
        added = store_wheels(req.dest, content.wheels, content.upload_bound, mirrors=req.mirrors,
                             cache=cache_location().path, jobs=req.jobs)
        manifest = _update_manifest(req.dest, chosen, {mirror_key(channel_of(p.url)) for p in content.packages},
                                    bool(content.wheels))
    return MirrorResult(req.dest, tuple(sorted(manifest["locks"])), len(content.packages), fetched,
                        len(content.wheels), added, dict(manifest["channels"]), bool(manifest["pypi"]),
                        time.perf_counter() - started)


def _update_manifest(dest: Path, chosen: Sequence[tuple[Any, tuple[str, ...]]], keys: set[tuple[str, str]],
                     has_wheels: bool) -> dict[str, Any]:
    """envlock-mirror.json: which locks (name, platforms, content hashes) and channels the directory serves."""
    from envlock.usecases.channeldir import write_text_atomic

    path = dest / MIRROR_MANIFEST
    doc = read_json(path)  # whoever can write the directory wrote it: what is not of envlock's shape is dropped
    doc = doc if isinstance(doc, dict) else {}
    version = doc.get("envlock_mirror_version", MANIFEST_VERSION)
    if isinstance(version, int) and version > MANIFEST_VERSION:
        raise SpecError(f"{path} was written by a newer envlock", hint=UPGRADE_HINT)
    locks = {k: v for k, v in _mapping(doc.get("locks")).items() if isinstance(v, dict)}
    for lock, platforms in chosen:
        name = lock.env_name()
        had = (locks.get(name) or {}).get("platforms")
        had = [p for p in had if isinstance(p, str)] if isinstance(had, list) else []
        locks[name] = {"platforms": sorted(set(platforms) | set(had)),
                       "content_hash": {p: lock.content_hash.get(p, "") for p in platforms}}
    channels = {**{k: v for k, v in _mapping(doc.get("channels")).items() if isinstance(v, str)}, **dict(keys)}
    doc = {"envlock_mirror_version": MANIFEST_VERSION, "envlock_version": __version__, "locks": locks,
           "channels": channels, "pypi": bool(doc.get("pypi")) or has_wheels}
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", root=dest)
    return doc


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
