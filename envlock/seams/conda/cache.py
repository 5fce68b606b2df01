"""The package cache: verified archives kept in the cache (shared between the users of a group cache) and this
user's own extracted entries in rattler's cache format, in its private store.

`<cache>/<dist>.conda|.tar.bz2` is a kept archive: a file anyone in the group may have replaced, so it is never
trusted by itself: it is extracted by rattler, which hashes the very bytes it reads, and used only when that sha256
(md5 where the lock has none) is the lock's. The extracted entry lives in this user's store
(envlock/seams/trust.py): `<cache>/.envlock-trust/<uid>/entries/<dist>/` and rattler's `<dist>.lock` (u64 revision +
the archive's sha256: rattler trusts the entry when that sha256 equals the record's, so its installer never
downloads again). rattler links from there, reached through the store's open directory: a group member can rename
the store away or plant an entry under `<cache>/<dist>`, and rattler still reads only this user's sealed files.
Each entry is fetched under its own file lock (envlock.seams.filelocks.entry_lock), so creates sharing a cache on a
cluster's shared filesystem fetch every package once.

An entry is used as it is only while it is the sealed one this user verified, file by file (trust.drifted: one
lstat per file). Anything else is extracted again from the kept archive (checked as it is extracted), or fetched
again; a changed one is named on stderr.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.seams import net
from envlock.seams.conda.fetch import copy_hashed, expected, fetch_archive, mirrored
from envlock.errors import EnvCreateError
from envlock.seams.filelocks import entry_lock
from envlock.seams.fs import move_in, new_dir_mode, new_file_mode, remove_dead, work_dir
from envlock.seams.gate import conda_archive, conda_dist, under
from envlock.models import LockedPackage
from envlock.seams.pkgcheck import check_extracted, summarize
from envlock.progress import Progress
from envlock.seams.trust import Store, Verdict, drifted, file_sha256, notify, seal, sums, swap_in


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
    seen: dict[str, Any] | None = None  # each file's ctime and link count as this use found them (trust.drifted)


def dist(pkg: LockedPackage) -> str:
    """The package's file name without its archive suffix (the cache entry's name), through envlock/seams/gate.py:
    `<name>-<version>-<build>` of the lock record, or UnsafeNameError."""
    return conda_dist(pkg)


def entry(cache: Path, pkg: LockedPackage, suffix: str = "") -> Path:
    """This user's entry for `pkg` (or its rattler `.lock`: `suffix`), in its private store (checked under it)."""
    return under(entries(cache), dist(pkg) + suffix, "the package cache entry")


def entries(cache: Path) -> Path:
    """This user's extracted entries (rattler's cache dir for a link), reached through the store's open directory."""
    root = store(cache).dir / "entries"
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    return root


def archive_of(cache: Path, pkg: LockedPackage) -> Path:
    """`<cache>/<name>-<version>-<build>.conda|.tar.bz2`: the verified archive, kept so that an entry can be
    extracted again (another user's, or one that changed) without a network."""
    return under(cache, conda_archive(pkg), "the cached archive")


def _digest(pkg: LockedPackage) -> str:
    return ":".join(expected(pkg))


def state(cache: Path, pkg: LockedPackage) -> tuple[Fetched | None, Verdict]:
    """The entry for `pkg` if this user may use it as it is (envlock/seams/trust.py), and the store's verdict on it.

    The hot path of a warm create (once per package): this user's record of the entry (one read), the entry's
    identity (one lstat: a link in its place is never trusted), every file's identity (one lstat each), rattler's
    `.lock` (rattler's installer must agree) and info/index.json.
    """
    key = dist(pkg)
    target = entry(cache, pkg)
    algo, want = expected(pkg)
    verdict, extra = store(cache).lookup(key, target, f"{algo}:{want}")
    if verdict == "changed" and not os.path.lexists(target):
        return None, "unknown"  # never extracted into this store (an older envlock's record): nothing to report
    if verdict != "trusted":
        return None, verdict
    side, files = extra.get("fetched") or {}, extra.get("files")
    rec = store(cache).get(key)  # as lookup just read it: the entry's own identity keys its live record
    seen = _files_hold(cache, key, target, files, rec.get("ino")) if isinstance(files, dict) else None
    if seen is None:
        return None, "changed"
    try:
        with open(f"{target}.lock", "rb") as fh:
            same = fh.read(40)[8:40].hex() == side.get("sha256")
    except OSError:
        same = False
    if not same or not os.path.isfile(os.path.join(target, "info", "index.json")):
        return None, "unknown"
    return Fetched(pkg, side["sha256"], side["md5"], int(side.get("size", 0)), False, extra.get("summary"),
                   target, seen), verdict


def _files_hold(cache: Path, key: str, target: Path, files: dict[str, Any], ino: Any) -> dict[str, Any] | None:
    """What this use saw of each file of the entry when every one is the one sealed (trust.drifted); None when one
    is not. A file whose ctime moved with nothing to explain it is hashed (the sha256 of the verified archive's
    paths.json, or this user's own when sealed)."""
    live = store(cache).live(key)
    changed, unsure, seen = drifted(target, files, live if isinstance(live, dict) and live.get("e") == ino else None)
    if changed:
        return None
    if unsure:
        known = store(cache).get(f"{key}.sums") or {}
        for rel in unsure:
            path = os.path.join(target, rel)
            got = "link:" + os.readlink(path) if os.path.islink(path) else file_sha256(path)
            if known.get(rel) != got:
                return None
    return seen


def refresh(cache: Path, fetched: Sequence[Fetched], window: tuple[int, int], linked: bool) -> None:
    """After a link (`window`: when, in ns, with a margin for the kernel's coarse ctime clock; `linked`: whether the
    prefix is on the store's filesystem, so rattler hard-linked): what this use saw of each file, so that the next
    use tells this link and later links and removals (the link count moves) from an in-place write (it does not)."""
    trust = store(cache)
    for f in fetched:
        key = dist(f.pkg)
        rec = trust.get(key)
        extra = rec.get("extra") if isinstance(rec, dict) else None
        files = extra.get("files") if isinstance(extra, dict) else None
        if not isinstance(rec, dict) or not isinstance(files, dict):
            continue
        seen = f.seen or {"c": [row[3] for row in files.values()], "n": [row[4] for row in files.values()]}
        trust.set_live(key, {"e": rec.get("ino"), "t": [window[0], window[1], int(linked)], **seen})


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
    store(cache).forget(dist(pkg))


def _extract(archive: Path, dest: Path, filename: str) -> tuple[str, str]:
    """Extract `archive` into `dest`: (sha256, md5) of the very bytes rattler read to do so."""
    from rattler.package_streaming import extract

    from envlock.seams.conda.errors import mapped

    with mapped(what=filename, default="package"):  # rattler raises its own types for corrupt archives
        sha256, md5 = extract(archive, dest)
    return sha256.hex(), md5.hex()


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
    """_fetch_entry's work: the archive extracted into this user's store and checked by the bytes extracted,
    checked for paths out of the prefix, sealed, swapped in, remembered file by file."""
    with work_dir(store(cache).dir, ".staging-", root=store(cache).dir) as held:  # a killed run's: remove_dead
        return _seal_in(pkg, cache, *_extracted(pkg, cache, held, mirrors, cancel, session, progress, sized,
                                                offline))


def _seal_in(pkg: LockedPackage, cache: Path, staging: Path, sha256: str, md5: str, size: int,
             downloaded: bool) -> Fetched:
    """The extracted, verified `staging` checked, sealed and made this user's entry for `pkg`, remembered."""
    # ../ or absolute paths and symlinks out of the prefix: refused before anything is linked (rattler
    # would link some, create some, and panic on others; envlock/seams/pkgcheck.py).
    check_extracted(staging, pkg.filename)
    os.chmod(staging, new_dir_mode() & ~0o022)  # the store is 0700; the prefix's hard links keep the files' modes
    known, linkable = _paths_json(staging)
    files = seal(staging, linkable)  # nobody else may write into it, and each file's identity (envlock/seams/trust.py)
    key = dist(pkg)
    store(cache).put(f"{key}.sums", sums(staging, files, known))
    target = entry(cache, pkg)
    swap_in(staging, target)
    lock = f"{target}.lock"
    tmp = f"{lock}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), _sealed_file_mode())
    with os.fdopen(fd, "wb") as fh:
        fh.write(struct.pack(">Q", 1) + bytes.fromhex(sha256))
    os.replace(tmp, lock)
    summary = summarize(target)
    fetched = {"sha256": sha256, "md5": md5, "size": size}
    store(cache).remember(key, target, _digest(pkg), {"summary": summary, "fetched": fetched, "files": files})
    return Fetched(pkg, sha256, md5, size, downloaded, summary, target)


def _paths_json(root: Path) -> tuple[dict[str, str], frozenset[str]]:
    """From the verified archive's own info/paths.json: each file's sha256 (where it gives one), and the files
    rattler hard-links into a prefix (a `hardlink` path without a prefix placeholder or `no_link`; the others it
    copies or makes as links)."""
    from envlock.formats.untrusted import read_json

    doc = read_json(root / "info" / "paths.json")
    paths = [p for p in (doc.get("paths") if isinstance(doc, dict) else None) or []
             if isinstance(p, dict) and isinstance(p.get("_path"), str)]
    known = {p["_path"]: p["sha256"] for p in paths if isinstance(p.get("sha256"), str)}
    linkable = frozenset(p["_path"] for p in paths if p.get("path_type", "hardlink") == "hardlink"
                         and not p.get("prefix_placeholder") and not p.get("no_link"))
    return known, linkable


def _sealed_file_mode() -> int:
    return new_file_mode() & ~0o022


def _extracted(pkg: LockedPackage, cache: Path, held: Path, mirrors: Mapping[str, str], cancel: threading.Event,
               session: Any, progress: Progress | None, sized: int,
               offline: bool) -> tuple[Path, str, str, int, bool]:
    """(staging folder in the store, sha256, md5, size, fetched now): the kept archive when it matches the lock,
    else a fetched one (then kept, for the next time). Either is first made a file of this user's private store
    (`held`), hashed as it is copied or downloaded there, and extracted from there: another user's swap of the kept
    archive or of a mirror's file after the check is never what is extracted."""
    kept = archive_of(cache, pkg)
    algo, want = expected(pkg)
    local = under(held, conda_archive(pkg), "the package file")
    if os.path.isfile(kept) and not os.path.islink(kept):
        sha256, md5, size = copy_hashed(kept, local, cancel)
        if (sha256 if algo == "sha256" else md5) == want:
            if sized and progress is not None:
                progress.expect("fetch", -sized)
            return _extract_checked(local, held / "kept", pkg, sha256, md5), sha256, md5, size, False
        local.unlink()
        notify(f"the cached archive {kept.name} does not match the lock (changed since it was fetched); "
               + ("it cannot be fetched again with --offline" if offline else "fetching it again"))
    if offline:
        raise EnvCreateError(f"{pkg.filename} is not in the package cache as the lock pins it, and --offline is set",
                             hint=f"run once without --offline (it fetches and checks it again), or copy a filled "
                                  f"package cache to {cache}")
    archive, sha256, md5, size = fetch_archive(pkg, mirrors, held, cancel, session, progress, bool(sized))
    staging = _extract_checked(archive, held / "fetched", pkg, sha256, md5)
    os.chmod(archive, _sealed_file_mode())
    move_in(archive, kept, root=cache.parent)  # kept for the next time (checked again then); never through a link
    return staging, sha256, md5, size, True


def _extract_checked(archive: Path, staging: Path, pkg: LockedPackage, sha256: str, md5: str) -> Path:
    """`archive` (this user's private copy, checked) extracted into `staging`; rattler's own hash of the bytes it
    extracted must be the same (nobody but this user or root can have changed the copy meanwhile)."""
    os.mkdir(staging, 0o700)
    if _extract(archive, staging, pkg.filename) != (sha256, md5):
        raise EnvCreateError(f"{pkg.filename} changed in envlock's private store while it was extracted",
                             hint="run the command again; something running as you (or root) is writing into "
                                  "envlock's cache")
    return staging


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def fill(packages: Sequence[LockedPackage], cache: Path, *, mirrors: Mapping[str, str], offline: bool, jobs: int,
         progress: Progress) -> list[Fetched]:
    """Verified cache entries for every package, in the given order (downloads in parallel; Ctrl-C stops them)."""
    store(cache).revisit()
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
    remove_dead(cache, ".envlock-old-*")  # entries an older envlock replaced in the shared cache
    remove_dead(entries(cache), ".envlock-old-*")  # this user's entries replaced (envlock/seams/trust.py swap_in)
    remove_dead(store(cache).dir, ".staging-*")  # extractions a killed run left in the store
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
