"""A local channel holding exactly some locks' packages: conda channels indexed by rattler, wheels in a PEP 503
simple index. The shared part of `envlock pack` (a fresh one in the archive) and `envlock mirror` (kept and
added to).

Layout under the root:

    <channel>/<subdir>/<archive> + repodata.json   conda-forge/, nvidia/label/cuda-11.8.0/, <host>/<path>/
    pypi/files/<wheel> (+ <wheel>.metadata, PEP 658)  pypi/simple/index.html, pypi/simple/<name>/index.html
    pypi/wheels.json                                 each wheel's canonical URL, sha256 and upload bound

Every file is fetched through the seams (conda archives: envlock/seams/conda/fetch.py; wheels: envlock/seams/pypi/) and checked
against the lock's sha256 before it is placed. The repodata is the packages' own index.json (as any indexer
makes it): repodata patches of the upstream channel are not carried. Two timestamps are set so a re-lock
against the copy keeps the spec's resolution cutoff: each record's `indexed_timestamp` is its build
`timestamp` (rattler's indexer stamps "now"), and each wheel's `data-upload-time` is one second before the
earliest cutoff of the locks that hold it (a lock does not record the real upload time; uv keeps a file
uploaded strictly before the cutoff, which every locked file was).
"""

from __future__ import annotations

import hashlib
import html
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from envlock.errors import ChannelError, EnvlockError
from envlock.formats import LockFile
from envlock.seams.fs import move_in, remove_dead, work_dir, write_atomic
from envlock.seams.mirror_urls import CANONICAL_BASE, channel_of
from envlock.models import LockedPackage, PypiPackage
from envlock.seams.gate import component, conda_archive, relative, under, wheel_file
from envlock.names import strip_credentials
from envlock.formats.untrusted import read_json

PYPI_DIR = "pypi"
WHEELS_JSON = "pypi/wheels.json"
_FILE_MODE = 0o644


@dataclass(frozen=True)
class Content:
    """What some locks need, deduplicated: conda packages, wheels, and each wheel's upload bound."""

    packages: tuple[LockedPackage, ...]
    wheels: tuple[PypiPackage, ...]
    upload_bound: Mapping[str, str]  # wheel sha256 -> ISO time (the earliest spec cutoff that locked it)


def content_of(locks: Iterable[tuple[LockFile, Sequence[str]]]) -> Content:
    """The packages of each (lock, platforms) pair, once each (by URL), in lock order."""
    packages: dict[str, LockedPackage] = {}
    wheels: dict[str, PypiPackage] = {}
    bound: dict[str, str] = {}
    for lock, platforms in locks:
        for platform in platforms:
            for p in lock.packages_for(platform):
                packages.setdefault(p.url, p)
            cutoff = _second_before(cutoff_of(lock, platform))
            for w in lock.pypi_for(platform):
                wheels.setdefault(w.url, w)
                if cutoff and (w.sha256 not in bound or cutoff < bound[w.sha256]):
                    bound[w.sha256] = cutoff
    return Content(tuple(packages.values()), tuple(wheels.values()), bound)


def _second_before(cutoff: str | None) -> str | None:
    """The upload time a mirror gives a wheel its lock's cutoff admitted: uv keeps files uploaded strictly before."""
    if not cutoff:
        return None
    import datetime

    try:  # a lock's value: one that is no time UTC can hold is no cutoff (never an internal error)
        when = datetime.datetime.fromisoformat(cutoff.replace("Z", "+00:00")) - datetime.timedelta(seconds=1)
        return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError):
        return None


def cutoff_of(lock: LockFile, platform: str) -> str | None:
    """The spec's resolution cutoff a platform was locked with (envlock.inputs.<platform>), if any."""
    from envlock.formats.untrusted import json_value

    doc = json_value(lock.custom_metadata.get(f"envlock.inputs.{platform}") or "{}")  # the lock is untrusted:
    inputs = doc.get("inputs") if isinstance(doc, dict) else None  # any other shape is no cutoff, never a crash
    cutoff = inputs.get("exclude_newer") if isinstance(inputs, dict) else None
    return cutoff if isinstance(cutoff, str) and cutoff else None


def channel_dir(channel_url: str) -> str:
    """Where a channel lives under the root: `conda-forge`, `nvidia/label/cuda-11.8.0`, `<host>/<path>`.

    Every segment passes envlock/seams/gate.py (a URL's `/../`, `%2E%2E` or `%2F` never leads out of the root).
    """
    url = strip_credentials(channel_url).rstrip("/")
    if url.startswith(CANONICAL_BASE):
        rel = url[len(CANONICAL_BASE):]
    else:
        parts = urlsplit(url)
        host = parts.netloc.replace(":", "_") or parts.scheme
        rel = "/".join(x for x in (host, parts.path.strip("/")) if x)
    return str(relative(rel, f"the channel {url!r} as a directory"))


def package_path(pkg: LockedPackage) -> str:
    """`conda-forge/linux-64/x.conda` (relative to the root; every part checked by envlock/seams/gate.py)."""
    subdir = component(pkg.subdir or pkg.url.rsplit("/", 2)[-2], f"the subdir of {pkg.name}")
    return f"{channel_dir(channel_of(pkg.url))}/{subdir}/{conda_archive(pkg)}"


def channels_of(packages: Iterable[LockedPackage]) -> dict[str, str]:
    """canonical channel URL -> its dir under the root."""
    return {c: channel_dir(c) for c in sorted({channel_of(p.url) for p in packages})}


# --------------------------------------------------------------------------- conda packages


def store_packages(root: Path, packages: Sequence[LockedPackage], *, mirrors: Mapping[str, str], jobs: int = 4,
                   progress: Any = None) -> int:
    """Put every package's verified archive under `root` (a file already there is kept); how many were fetched.

    Every package is tried; the first failure in lock order is raised, so the error names the first one
    that is missing whatever finished first.
    """
    from envlock.seams.net import parallel

    todo = [p for p in packages if not _present(root, p)]
    if progress is not None:
        progress.start("fetch", len(packages))
        for p in set(packages) - set(todo):
            progress.advance("fetch", p.name)
    if not todo:
        if progress is not None:
            progress.finish("fetch")
        return 0

    def one(pkg: LockedPackage, cancel: threading.Event, session: Any) -> tuple[LockedPackage, EnvlockError | None]:
        return pkg, _store_one(root, pkg, mirrors, work, cancel, session)

    def done(result: tuple[LockedPackage, EnvlockError | None]) -> None:
        if progress is not None:
            progress.advance("fetch", result[0].name)

    remove_dead(root, ".envlock-fetch-*")  # what a killed run left
    try:
        with work_dir(root, ".envlock-fetch-", root=root) as work:
            outcomes = {p.url: err for p, err in parallel(todo, one, jobs=jobs, on_done=done)}
    finally:
        if progress is not None:
            progress.finish("fetch")
    failed = [err for p in todo if (err := outcomes.get(p.url)) is not None]
    if failed:
        err = failed[0]
        more = f" ({len(failed) - 1} more not reachable)" if len(failed) > 1 else ""
        raise err.saying(f"{err.message}{more}")
    return len(todo)


def _store_one(root: Path, pkg: LockedPackage, mirrors: Mapping[str, str], work: Path, cancel: threading.Event,
               session: Any) -> EnvlockError | None:
    from envlock.seams.conda.fetch import fetch_archive

    try:
        dest = under(root, package_path(pkg), "the package's place in the mirror")
        archive, *_ = fetch_archive(pkg, mirrors, work, cancel, session)
    except EnvlockError as exc:
        return exc
    archive.chmod(_FILE_MODE)  # this run's own copy in its work folder (a file:// source is copied there too)
    move_in(archive, dest, root=root)
    return None


def _present(root: Path, pkg: LockedPackage) -> bool:
    """Whether the archive under root is the locked one, by its bytes: a file of the right size (or one its index
    record vouches for) may still have been damaged or edited, and re-running mirror repairs it."""
    rel = package_path(pkg)
    path = under(root, rel, "the package's place in the mirror")
    if not path.is_file() or path.is_symlink():
        return False
    digest = hashlib.sha256() if pkg.sha256 else hashlib.md5()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest() == (pkg.sha256 or pkg.md5)


def index_channels(root: Path, packages: Sequence[LockedPackage], *, zst_and_shards: bool) -> list[str]:
    """rattler's indexer over every channel dir the packages live in (envlock/seams/conda/index.py); returns those dirs."""
    from envlock.seams.conda.index import index_dirs

    dirs = sorted(set(channels_of(packages).values()))
    for d in dirs:
        under(root, d, "the channel's place in the mirror")
    index_dirs(root, dirs, zst_and_shards=zst_and_shards)
    return dirs


# --------------------------------------------------------------------------- wheels


def store_wheels(root: Path, wheels: Sequence[PypiPackage], upload_bound: Mapping[str, str], *,
                 mirrors: Mapping[str, str], cache: Path, jobs: int = 4) -> int:
    """Every wheel (verified through envlock's wheel cache) under pypi/files/, and the simple index rewritten."""
    from envlock.seams.pypi.wheels import fetch_wheels

    record = _read_wheels_json(root)
    if not wheels and not record:
        return 0
    paths, _ = fetch_wheels(wheels, cache, offline=False, mirrors=mirrors, jobs=jobs)
    files = root / PYPI_DIR / "files"
    added = 0
    for w, src in zip(wheels, paths):
        fn = wheel_file(w)
        dest = under(files, fn, "the wheel's place in the mirror")
        if not (dest.is_file() and not dest.is_symlink() and record.get(fn, {}).get("sha256") == w.sha256
                and _sha256_of(dest) == w.sha256.lower()):  # the bytes, not the record: a damaged copy is repaired
            _copy_checked(src, dest, w.sha256, root)  # a copy: editing the mirror never edits the cache
            added += 1
        meta = dest.with_name(dest.name + ".metadata")
        if not meta.is_file() or meta.is_symlink():  # a link in its place is replaced, never read or followed
            write_atomic(meta, _core_metadata(dest), mode=_FILE_MODE, skip_unchanged=False, root=root)
        old = record.get(fn, {})
        times = [t for t in (old.get("upload_time"), upload_bound.get(w.sha256)) if t]
        record[fn] = {"name": w.name, "sha256": w.sha256, "url": strip_credentials(w.url),
                              "metadata_sha256": hashlib.sha256(meta.read_bytes()).hexdigest(),
                              **({"upload_time": min(times)} if times else {})}
    _write_simple_index(root, record)
    write_text_atomic(root / WHEELS_JSON, json.dumps(record, indent=1, sort_keys=True) + "\n", root=root)
    return added


def _copy_checked(src: Path, dest: Path, sha256: str, root: Path) -> None:
    """`src` (a wheel in envlock's cache, which the other users of a group cache may write) copied to `dest` from the
    one file opened and hashed as it is copied (issue 33.1): the mirror gets the bytes checked, whatever is swapped
    into the cache after fetch_wheels checked it."""
    import os

    from envlock.seams.conda.fetch import copy_hashed

    with work_dir(root, ".envlock-fetch-", root=root) as work:
        tmp = under(work, dest.name, "the wheel's place in the mirror")
        if copy_hashed(src, tmp)[0] != sha256.lower():
            raise ChannelError(f"{dest.name} changed in envlock's cache while it was copied into the mirror",
                               hint="run the command again (the wheel is checked again); another user of the cache "
                                    "may be tampering with it")
        os.chmod(tmp, _FILE_MODE)
        move_in(tmp, dest, root=root)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _read_wheels_json(root: Path) -> dict[str, dict[str, str]]:
    data = read_json(root / WHEELS_JSON)
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _core_metadata(wheel: Path) -> bytes:
    """The wheel's METADATA (served as <wheel>.metadata, PEP 658: a resolver need not fetch the wheel)."""
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
            return zf.read(name)
    except (OSError, zipfile.BadZipFile, StopIteration):
        raise ChannelError(f"{wheel.name} has no readable .dist-info/METADATA", hint="the wheel is damaged; re-lock") from None


def _write_simple_index(root: Path, record: Mapping[str, Mapping[str, str]]) -> None:
    """PEP 503 pages (with PEP 658 metadata and PEP 700-style upload times), deterministic."""
    by_name: dict[str, list[str]] = {}
    for fn, rec in record.items():
        by_name.setdefault(rec["name"], []).append(fn)
    simple = root / PYPI_DIR / "simple"
    head = "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\"></head><body>\n"
    for name, fns in sorted(by_name.items()):
        rows = []
        for fn in sorted(fns):
            rec = record[fn]
            attrs = f' data-dist-info-metadata="sha256={rec["metadata_sha256"]}"' \
                    f' data-core-metadata="sha256={rec["metadata_sha256"]}"'
            if rec.get("upload_time"):
                attrs += f' data-upload-time="{html.escape(rec["upload_time"])}"'
            rows.append(f'<a href="../../files/{quote(fn)}#sha256={rec["sha256"]}"{attrs}>{html.escape(fn)}</a><br>\n')
        page = under(simple, component(str(name), "the project name", decode=False), "the project's index page")
        write_text_atomic(page / "index.html", head + "".join(rows) + "</body></html>\n", root=root)
    links = "".join(f'<a href="{quote(n)}/">{html.escape(n)}</a><br>\n' for n in sorted(by_name))
    write_text_atomic(simple / "index.html", head + links + "</body></html>\n", root=root)


# --------------------------------------------------------------------------- files


def write_text_atomic(path: Path, text: str, *, root: Path) -> None:
    """Write a world-readable file atomically under `root`, never through a link out of it (a mirror is served while
    it grows, by another user's server)."""
    write_atomic(path, text, mode=_FILE_MODE, skip_unchanged=False, root=root)
