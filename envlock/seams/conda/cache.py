"""The package cache: verified archives, extracted in rattler's cache format, shared safely between processes and
between the users of a group cache.

An entry is `<cache>/<dist>/` (the extracted package), rattler's `<dist>.lock` (u64 revision + the archive's
sha256: rattler trusts the entry when that sha256 equals the record's, so its installer never downloads
again), envlock's `<dist>.envlock.json` sidecar, and the verified archive itself (`<dist>.conda|.tar.bz2`).
Each entry is fetched under its own file lock (envlock.seams.filelocks.entry_lock), so creates sharing a cache on a
cluster's shared filesystem fetch every package once.

An entry is used as it is only while it is the sealed one this user verified (envlock/seams/trust.py: one lstat per
entry). Anything else (another user's entry, one replaced or unsealed since) is extracted again from the kept
archive once that archive's sha256 matches the lock again, or fetched again; a changed one is named on stderr.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.seams import net
from envlock.seams.conda.fetch import expected, fetch_archive, hash_file, mirrored
from envlock.errors import EnvCreateError
from envlock.seams.filelocks import entry_lock
from envlock.seams.fs import (copy_atomic, move_in, new_dir_mode, new_file_mode, remove_dead, work_dir, write_atomic,
                              write_json_atomic)
from envlock.seams.gate import conda_archive, conda_dist, under
from envlock.models import LockedPackage
from envlock.seams.pkgcheck import check_extracted, summarize
from envlock.progress import Progress
from envlock.seams.trust import Store, Verdict, notify, seal, swap_in


@dataclass(frozen=True)
class Fetched:
    """A verified cache entry."""

    pkg: LockedPackage
    sha256: str
    md5: str
    size: int
    downloaded: bool
    summary: dict[str, Any] | None = None  # envlock.seams.pkgcheck.summarize() of the entry, as this user verified it
    path: Path | None = None  # the entry (checked by envlock/seams/gate.py)


def dist(pkg: LockedPackage) -> str:
    """The package's file name without its archive suffix (the cache entry's name), through envlock/seams/gate.py:
    `<name>-<version>-<build>` of the lock record, or UnsafeNameError."""
    return conda_dist(pkg)


def entry(cache: Path, pkg: LockedPackage, suffix: str = "") -> Path:
    """`<cache>/<dist><suffix>`: the entry, its rattler `.lock` or envlock's `.envlock.json` (checked under `cache`)."""
    return under(cache, dist(pkg) + suffix, "the package cache entry")


def sidecar(cache: Path, pkg: LockedPackage) -> Path:
    return entry(cache, pkg, ".envlock.json")


def archive_of(cache: Path, pkg: LockedPackage) -> Path:
    """`<cache>/<name>-<version>-<build>.conda|.tar.bz2`: the verified archive, kept so that an entry can be
    extracted again (another user's, or one that changed) without a network."""
    return under(cache, conda_archive(pkg), "the cached archive")


def _digest(pkg: LockedPackage) -> str:
    return ":".join(expected(pkg))


def state(cache: Path, pkg: LockedPackage) -> tuple[Fetched | None, Verdict]:
    """The entry for `pkg` if this user may use it as it is (envlock/seams/trust.py), and the store's verdict on it.

    The hot path of a warm create (once per package): this user's record of the entry (one read), the entry's
    identity (one lstat: a link in its place is never trusted, so nothing here leads out of the cache), rattler's
    `.lock` (rattler's installer must agree) and info/index.json.
    """
    target = cache / dist(pkg)  # one component (envlock/seams/gate.py); _identity refuses a link in its place
    algo, want = expected(pkg)
    verdict, extra = store(cache).lookup(target.name, target, f"{algo}:{want}")
    if verdict != "trusted":
        return None, verdict
    side = extra.get("fetched") or {}
    try:
        with open(f"{target}.lock", "rb") as fh:
            same = fh.read(40)[8:40].hex() == side.get("sha256")
    except OSError:
        same = False
    if not same or not os.path.isfile(os.path.join(target, "info", "index.json")):
        return None, "unknown"
    return Fetched(pkg, side["sha256"], side["md5"], int(side.get("size", 0)), False, extra.get("summary"),
                   target), verdict


def cached(cache: Path, pkg: LockedPackage) -> Fetched | None:
    """The verified cache entry for `pkg`, if this user may use it as it is."""
    return state(cache, pkg)[0]


_STORES: dict[Path, Store] = {}


def store(cache: Path) -> Store:
    """This user's trust store of one package cache (one per process and cache)."""
    if cache not in _STORES:
        _STORES[cache] = Store(cache)
    return _STORES[cache]


def damaged(cache: Path, packages: Sequence[LockedPackage]) -> list[LockedPackage]:
    """The packages whose cache entry lacks a file its own info/paths.json lists (deleted by hand, a half-removed
    entry): after a failed link, the entries to forget. Read from the entries, never from an error's text."""
    from envlock.formats.untrusted import read_json

    out = []
    for pkg in packages:
        root = entry(cache, pkg)
        doc = read_json(root / "info" / "paths.json")
        paths = doc.get("paths") if isinstance(doc, dict) else None
        if not isinstance(paths, list):
            out.append(pkg)
            continue
        rels = (p.get("_path") for p in paths if isinstance(p, dict))
        if any(not isinstance(rel, str) or not os.path.lexists(root / rel) for rel in rels):
            out.append(pkg)
    return out


def forget(cache: Path, pkg: LockedPackage) -> None:
    """Drop an entry's 'verified' mark, so the next run fetches it again."""
    sidecar(cache, pkg).unlink(missing_ok=True)
    store(cache).forget(dist(pkg))


def _extract(archive: Path, dest: Path, filename: str) -> None:
    from rattler.package_streaming import extract

    from envlock.seams.conda.errors import mapped

    with mapped(what=filename, default="package"):  # rattler raises its own types for corrupt archives
        extract(archive, dest)


def _fetch_entry(pkg: LockedPackage, cache: Path, work: Path, mirrors: Mapping[str, str], cancel: threading.Event,
                 session: Any, progress: Progress | None, sized: int, offline: bool = False) -> Fetched:
    """Verify one archive against the lock (the kept one, else a fetched one) and extract it into the cache as this
    user's sealed entry (once per shared cache: under the entry's file lock)."""
    with entry_lock(cache, dist(pkg)):
        hit, verdict = state(cache, pkg)
        if hit is not None:  # another envlock process of this user fetched it while we waited
            if sized and progress is not None:
                progress.expect("fetch", -sized)  # counted in the byte bar's total, not downloaded here
            return hit
        if verdict == "changed":
            notify(f"the package cache entry {dist(pkg)} is not the one you verified (replaced or made writable "
                   "since); it is extracted again from its archive, checked against the lock")
        try:
            return _verify_and_extract(pkg, cache, work, mirrors, cancel, session, progress, sized, offline)
        except OSError as exc:  # a disk full or read-only under the cache: not the package's fault
            raise EnvCreateError(f"cannot put {pkg.filename} into the package cache {cache}: {exc.strerror or exc}",
                                 hint="free space there (or point ENVLOCK_CACHE_DIR elsewhere), then run the command "
                                      "again") from None


def _verify_and_extract(pkg: LockedPackage, cache: Path, work: Path, mirrors: Mapping[str, str],
                        cancel: threading.Event, session: Any, progress: Progress | None, sized: int,
                        offline: bool) -> Fetched:
    """_fetch_entry's work: the archive checked, extracted and checked, sealed, swapped in, remembered."""
    archive, sha256, md5, size, downloaded = _verified_archive(pkg, cache, work, mirrors, cancel, session,
                                                               progress, sized, offline)
    target = entry(cache, pkg)
    staging = Path(tempfile.mkdtemp(prefix=f".{dist(pkg)}.", dir=work))
    _extract(archive, staging, pkg.filename)
    # ../ or absolute paths and symlinks out of the prefix: refused before anything is linked (rattler
    # would link some, create some, and panic on others; envlock/seams/pkgcheck.py).
    check_extracted(staging, pkg.filename)
    os.chmod(staging, new_dir_mode())  # mkdtemp's 0700 would hide the entry from the other users of a cache
    seal(staging)  # nobody else may write into it once it is in the cache (envlock/seams/trust.py)
    swap_in(staging, target)
    write_atomic(entry(cache, pkg, ".lock"), struct.pack(">Q", 1) + bytes.fromhex(sha256), mode=_sealed_file_mode(),
                 skip_unchanged=False, root=cache.parent)
    # 0666 minus the umask: the cache may be shared by the users of a cluster
    write_json_atomic(sidecar(cache, pkg), {"sha256": sha256, "md5": md5, "size": size, "url": pkg.url},
                      mode=new_file_mode(), root=cache.parent)
    summary = summarize(target)
    fetched = {"sha256": sha256, "md5": md5, "size": size}
    store(cache).remember(dist(pkg), target, _digest(pkg), {"summary": summary, "fetched": fetched})
    return Fetched(pkg, sha256, md5, size, downloaded, summary, target)


def _sealed_file_mode() -> int:
    return new_file_mode() & ~0o022


def _verified_archive(pkg: LockedPackage, cache: Path, work: Path, mirrors: Mapping[str, str], cancel: threading.Event,
                      session: Any, progress: Progress | None, sized: int,
                      offline: bool) -> tuple[Path, str, str, int, bool]:
    """(archive, sha256, md5, size, fetched now): the kept archive when it still matches the lock, else a fetched
    one (then kept, sealed, for the next time)."""
    kept = archive_of(cache, pkg)
    if os.path.isfile(kept) and not os.path.islink(kept):
        sha256, md5, size = hash_file(kept, cancel)
        algo, want = expected(pkg)
        if (sha256 if algo == "sha256" else md5) == want:
            if sized and progress is not None:
                progress.expect("fetch", -sized)
            return kept, sha256, md5, size, False
        notify(f"the cached archive {kept.name} does not match the lock (changed since it was fetched); "
               + ("it cannot be fetched again with --offline" if offline else "fetching it again"))
    if offline:
        raise EnvCreateError(f"{pkg.filename} is not in the package cache as the lock pins it, and --offline is set",
                             hint=f"run once without --offline (it fetches and checks it again), or copy a filled "
                                  f"package cache to {cache}")
    archive, sha256, md5, size = fetch_archive(pkg, mirrors, work, cancel, session, progress, bool(sized))
    if archive.parent == work:  # downloaded: kept as it is
        os.chmod(archive, _sealed_file_mode())
        move_in(archive, kept, root=cache.parent)  # never through a link out of the cache
    else:  # a file:// source: copied, never moved (the user's file)
        copy_atomic(archive, kept, mode=_sealed_file_mode(), root=cache.parent)
    return kept, sha256, md5, size, True


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
    absent = [p for p in missing if not os.path.isfile(archive_of(cache, p))]  # no archive to extract again
    if absent and offline:
        names = ", ".join(p.filename for p in absent[:3]) + (" …" if len(absent) > 3 else "")
        raise EnvCreateError(f"{len(absent)} package(s) are not in the package cache and --offline is set: {names}",
                             hint=f"run once without --offline, or copy a filled package cache to {cache}")
    progress.start("fetch", len(packages))
    for hit in results.values():
        progress.advance("fetch", hit.pkg.name)
    remove_dead(cache, ".envlock-fetch-*")  # what killed runs left: downloads half done, extractions
    remove_dead(cache, ".envlock-old-*")  # entries replaced by another (envlock/seams/trust.py swap_in)
    if missing:
        with work_dir(cache, ".envlock-fetch-", root=cache.parent) as work:
            sizes: Mapping[str, int] = {}
            if getattr(progress, "wants_sizes", False) and not offline:  # a person watches: a total for the byte bar (and an ETA)
                with net.session() as s:
                    sizes = net.content_lengths([mirrored(p.url, mirrors) for p in missing], s)
                if sizes:
                    progress.expect("fetch", sum(sizes.values()))

            def fetch(p: LockedPackage, cancel: threading.Event, session: Any) -> Fetched:
                return _fetch_entry(p, cache, work, mirrors, cancel, session, progress,
                                    sizes.get(mirrored(p.url, mirrors), 0), offline)

            for fetched in net.parallel(missing, fetch, jobs=jobs, on_done=lambda f: progress.advance("fetch", f.pkg.name)):
                results[fetched.pkg.filename] = fetched
    progress.finish("fetch")
    return [results[p.filename] for p in packages]
