"""The package cache: verified archives, extracted in rattler's cache format, shared safely between processes.

An entry is `<cache>/<dist>/` (the extracted package), rattler's `<dist>.lock` (u64 revision + the archive's
sha256: rattler trusts the entry when that sha256 equals the record's, so its installer never downloads
again) and envlock's `<dist>.envlock.json` sidecar, which marks it verified against a lock. Each entry is
fetched under its own file lock (envlock.fs.entry_lock), so creates sharing a cache on a cluster's shared
filesystem fetch every package once.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock import net
from envlock.conda.fetch import expected, fetch_archive, mirrored
from envlock.errors import EnvCreateError
from envlock.fs import entry_lock, new_dir_mode, new_file_mode, write_json_atomic
from envlock.gate import conda_dist, under
from envlock.models import LockedPackage
from envlock.pkgcheck import check_extracted
from envlock.progress import Progress
from envlock.untrusted import read_json


@dataclass(frozen=True)
class Fetched:
    """A verified cache entry."""

    pkg: LockedPackage
    sha256: str
    md5: str
    size: int
    downloaded: bool


def dist(pkg: LockedPackage) -> str:
    """The package's file name without its archive suffix (the cache entry's name), through envlock/gate.py:
    `<name>-<version>-<build>` of the lock record, or UnsafeNameError."""
    return conda_dist(pkg)


def entry(cache: Path, pkg: LockedPackage, suffix: str = "") -> Path:
    """`<cache>/<dist><suffix>`: the entry, its rattler `.lock` or envlock's `.envlock.json` (checked under `cache`)."""
    return under(cache, dist(pkg) + suffix, "the package cache entry")


def sidecar(cache: Path, pkg: LockedPackage) -> Path:
    return entry(cache, pkg, ".envlock.json")


def cached(cache: Path, pkg: LockedPackage) -> Fetched | None:
    """The verified cache entry for `pkg`, if there is one."""
    side = read_json(sidecar(cache, pkg))
    try:
        rattler_lock = entry(cache, pkg, ".lock").read_bytes()
    except OSError:
        return None
    if not isinstance(side, dict):
        return None
    algo, want = expected(pkg)
    if side.get(algo) != want or rattler_lock[8:40].hex() != side.get("sha256"):
        return None
    if not (entry(cache, pkg) / "info" / "index.json").is_file():
        return None
    return Fetched(pkg, side["sha256"], side["md5"], int(side.get("size", 0)), False)


def forget(cache: Path, pkg: LockedPackage) -> None:
    """Drop an entry's 'verified' mark, so the next run fetches it again."""
    sidecar(cache, pkg).unlink(missing_ok=True)


def _extract(archive: Path, dest: Path, filename: str) -> None:
    from rattler.package_streaming import extract

    from envlock.conda.errors import mapped

    with mapped(what=filename, default="package"):  # rattler raises its own types for corrupt archives
        extract(archive, dest)


def _fetch_entry(pkg: LockedPackage, cache: Path, work: Path, mirrors: Mapping[str, str], cancel: threading.Event,
                 session: Any, progress: Progress | None, sized: int) -> Fetched:
    """Get one archive, verify it against the lock, extract it into the cache (once per shared cache)."""
    with entry_lock(cache, dist(pkg)):
        hit = cached(cache, pkg)
        if hit is not None:  # another envlock process sharing this cache fetched it while we waited
            if sized and progress is not None:
                progress.expect("fetch", -sized)  # counted in the byte bar's total, not downloaded here
            return hit
        archive, sha256, md5, size = fetch_archive(pkg, mirrors, work, cancel, session, progress, bool(sized))
        target = entry(cache, pkg)
        staging = Path(tempfile.mkdtemp(prefix=f".{dist(pkg)}.", dir=work))
        try:
            _extract(archive, staging, pkg.filename)
        finally:
            if archive.parent == work:
                archive.unlink(missing_ok=True)
        # ../ or absolute paths and symlinks out of the prefix: refused before anything is linked (rattler
        # would link some, create some, and panic on others; envlock/pkgcheck.py).
        check_extracted(staging, pkg.filename)
        os.chmod(staging, new_dir_mode())  # mkdtemp's 0700 would hide the entry from the other users of a cache
        shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / "info" / "index.json").is_file():  # another envlock put it there first
                raise
            shutil.rmtree(staging, ignore_errors=True)
        entry(cache, pkg, ".lock").write_bytes(struct.pack(">Q", 1) + bytes.fromhex(sha256))
        # 0666 minus the umask: the cache may be shared by the users of a cluster
        write_json_atomic(sidecar(cache, pkg), {"sha256": sha256, "md5": md5, "size": size, "url": pkg.url},
                          mode=new_file_mode())
        return Fetched(pkg, sha256, md5, size, True)


def fill(packages: Sequence[LockedPackage], cache: Path, *, mirrors: Mapping[str, str], offline: bool, jobs: int,
         progress: Progress) -> list[Fetched]:
    """Verified cache entries for every package, in the given order (downloads in parallel; Ctrl-C stops them)."""
    results: dict[str, Fetched] = {}
    missing: list[LockedPackage] = []
    for pkg in packages:
        hit = cached(cache, pkg)
        if hit is None:
            missing.append(pkg)
        else:
            results[pkg.filename] = hit
    if missing and offline:
        names = ", ".join(p.filename for p in missing[:3]) + (" …" if len(missing) > 3 else "")
        raise EnvCreateError(f"{len(missing)} package(s) are not in the package cache and --offline is set: {names}",
                             hint=f"run once without --offline, or copy a filled package cache to {cache}")
    progress.start("fetch", len(packages))
    for hit in results.values():
        progress.advance("fetch", hit.pkg.name)
    if missing:
        cache.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".envlock-fetch-", dir=cache))
        try:
            sizes: Mapping[str, int] = {}
            if getattr(progress, "wants_sizes", False):  # a person watches: a total for the byte bar (and an ETA)
                with net.session() as s:
                    sizes = net.content_lengths([mirrored(p.url, mirrors) for p in missing], s)
                if sizes:
                    progress.expect("fetch", sum(sizes.values()))

            def fetch(p: LockedPackage, cancel: threading.Event, session: Any) -> Fetched:
                return _fetch_entry(p, cache, work, mirrors, cancel, session, progress,
                                    sizes.get(mirrored(p.url, mirrors), 0))

            for fetched in net.parallel(missing, fetch, jobs=jobs, on_done=lambda f: progress.advance("fetch", f.pkg.name)):
                results[fetched.pkg.filename] = fetched
        finally:
            shutil.rmtree(work, ignore_errors=True)
    progress.finish("fetch")
    return [results[p.filename] for p in packages]
