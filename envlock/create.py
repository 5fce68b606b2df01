"""Install a lock into a prefix with py-rattler's installer: fetch + verify everything, then link.

Order of work, and why:

1. Read the lock, pick the platform's packages, check the prefix (absent, empty, or a conda env).
2. Fetch every archive ourselves and check its sha256 (md5 where a lock has no sha256) against the
   lock BEFORE anything is extracted into the package cache: rattler 0.28 skips the hash for
   `file://` URLs and for cached md5-only records (DESIGN.md traps). A verified archive is extracted
   into `<cache>/pkgs/<dist>/`, with rattler's `<dist>.lock` (revision + sha256) so rattler's
   installer takes it from the cache, and an `<dist>.envlock.json` sidecar that marks it verified.
3. Link with `rattler.install` (no conda binary). Nothing touches the prefix before this step, so
   a fetch failure (bad hash, unreachable URL, Ctrl-C) leaves an existing prefix untouched and a
   new one absent. A failure while linking removes a new prefix; an existing one is left marked
   `"state": "incomplete"` in conda-meta/envlock, so the next create repairs it.
4. Install the activation hooks and write conda-meta/envlock (JSON; read by doctor).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from envlock import __version__
from envlock.activation import hook_files
from envlock.activation.conda import host_platform  # noqa: F401 - commands/create.py, commands/pack.py
from envlock.errors import ChannelError, EnvCreateError, Interrupted, LockfileError, SpecError
from envlock.formats import LockFile, read_lock
from envlock.models import CUDNN_NAMES, LockedPackage
from envlock.names import conda_stem
from envlock.pkgcheck import check_extracted

#: conda-meta/envlock: JSON without a .json suffix, like pixi's conda-meta/pixi and conda's
#: conda-meta/state. conda, micromamba and rattler parse every conda-meta/*.json as a package
#: record; an envlock.json there makes rattler fail with "failed to determine the currently
#: installed packages" (measured) and conda's PrefixData choke.
ENVLOCK_JSON = "envlock"
ENVLOCK_JSON_VERSION = 1
_CHUNK = 1 << 20
_RETRIES = 3

Action = Literal["created", "updated", "unchanged"]
FreshnessCheck = Callable[[LockFile, str], None]


class Progress(Protocol):
    """What create reports while it works (the CLI renders it with rich; tests may record it)."""

    def start(self, phase: str, total: int) -> None: ...

    def advance(self, phase: str, item: str) -> None: ...

    def finish(self, phase: str) -> None: ...

    def expect(self, phase: str, nbytes: int) -> None: ...  # bytes about to be downloaded in `phase`

    def transfer(self, phase: str, nbytes: int) -> None: ...  # bytes received (negative: a retry starts over)


class _NoProgress:
    wants_sizes = False

    def start(self, phase: str, total: int) -> None:
        pass

    def advance(self, phase: str, item: str) -> None:
        pass

    def finish(self, phase: str) -> None:
        pass

    def expect(self, phase: str, nbytes: int) -> None:
        pass

    def transfer(self, phase: str, nbytes: int) -> None:
        pass


@dataclass(frozen=True)
class CreateRequest:
    """Everything `create_env` needs; `freshness_check` is the hook for `--locked`/`--frozen`."""

    lock_path: Path
    prefix: Path
    platform: str
    offline: bool = False
    cache_dir: Path | None = None  # package cache; None: <envlock cache dir>/pkgs
    mirrors: Mapping[str, str] = field(default_factory=dict)  # channel name or URL → URL to download from instead
    freshness_check: FreshnessCheck | None = None  # raises LockfileError for a stale lock (lock lifecycle)
    jobs: int = 4
    lock_record: Path | None = None  # the lock path conda-meta/envlock records (unpack: a copy in the prefix)


@dataclass(frozen=True)
class CreateResult:
    """What `create_env` did."""

    action: Action
    prefix: Path
    lock_path: Path
    platform: str
    packages: int
    downloaded: int  # archives fetched and verified this run
    cached: int  # verified archives reused from the package cache
    content_hash: str
    hooks: tuple[str, ...]
    seconds: float
    wheels: int = 0  # the PyPI part (installed after the conda part)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "prefix": str(self.prefix),
            "lock": str(self.lock_path),
            "platform": self.platform,
            "packages": self.packages,
            "downloaded": self.downloaded,
            "cached": self.cached,
            "content_hash": self.content_hash,
            "hooks": list(self.hooks),
            "seconds": round(self.seconds, 3),
            "wheels": self.wheels,
        }


# --------------------------------------------------------------------------- locations


def envs_dir() -> Path:
    """Where `-n NAME` envs live: $ENVLOCK_ENVS_DIR, else <platformdirs user data dir>/envlock/envs."""
    from envlock.config import envs_location

    return envs_location().path


def package_cache_dir() -> Path:
    """<envlock cache dir>/pkgs ($ENVLOCK_CACHE_DIR, else the platform's user cache dir)."""
    from envlock.config import cache_location

    return cache_location().path / "pkgs"


def find_lock(project_dir: Path, name: str | None) -> Path:
    """`locks/NAME/conda-lock.yml`, or the only lock under locks/ when no name is given."""
    locks = project_dir / "locks"
    if name:
        path = locks / name / "conda-lock.yml"
        if not path.is_file():
            known = ", ".join(available_locks(locks)) or "none"
            raise LockfileError(f"no lock named {name!r} ({path} is missing; locks here: {known})",
                                hint="pick one of the listed names, or pass --lock PATH")
        return path
    found = available_locks(locks)
    if not found:
        raise LockfileError(f"no lock under {locks}",
                            hint="run `envlock resolve --torch VERSION` first, or pass --lock PATH")
    if len(found) > 1:
        raise SpecError(f"several locks under {locks}: {', '.join(found)}",
                        hint=f"name one: `envlock create {found[0]}`")
    return locks / found[0] / "conda-lock.yml"


def available_locks(locks: Path) -> list[str]:
    """Names of the lock dirs holding a conda-lock.yml."""
    if not locks.is_dir():
        return []
    return sorted(p.parent.name for p in locks.glob("*/conda-lock.yml"))


def default_prefix(lock: LockFile, prefix: str | None, name: str | None) -> Path:
    """-p PREFIX, else -n NAME under envs_dir(), else the lock's env name under envs_dir()."""
    if prefix and name:
        raise SpecError("give either -p/--prefix or -n/--name, not both", hint="-p takes a path, -n a name")
    if prefix:
        return Path(prefix).expanduser().absolute()
    env_name = name or lock.envlock_meta().get("env_name")
    if not env_name:
        raise SpecError("this lock does not name its environment", hint="pass -p PREFIX or -n NAME")
    if "/" in env_name or "\\" in env_name or env_name in (".", ".."):
        raise SpecError(f"-n takes a name, not a path: {env_name!r}", hint="use -p PREFIX for a path")
    return (envs_dir() / env_name).absolute()


# --------------------------------------------------------------------------- the prefix


def prefix_state(prefix: Path) -> Literal["absent", "empty", "env"]:
    """What is at `prefix`; EnvCreateError for a file or a non-empty dir that is not a conda env."""
    if not prefix.exists():
        return "absent"
    if not prefix.is_dir():
        raise EnvCreateError(f"{prefix} exists and is not a directory",
                             hint="choose another -p PREFIX, or remove that file")
    if (prefix / "conda-meta").is_dir():
        return "env"
    if any(prefix.iterdir()):
        raise EnvCreateError(f"{prefix} exists, is not empty and is not a conda environment (no conda-meta/)",
                             hint="choose another -p PREFIX; envlock never installs over unrelated files")
    return "empty"


def check_writable(prefix: Path) -> None:
    """Try to create a file where the prefix will be written (os.access says yes to root)."""
    probe_dir = prefix if prefix.is_dir() else prefix.parent
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=".envlock-probe-", dir=probe_dir)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise EnvCreateError(f"cannot write to {probe_dir}: {exc.strerror or exc}",
                             hint="choose a -p PREFIX you can write to (or fix the permissions)") from None


def read_env_meta(prefix: Path) -> dict[str, Any]:
    """conda-meta/envlock (JSON), or {} when absent or unreadable."""
    try:
        data = json.loads((prefix / "conda-meta" / ENVLOCK_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def packages_digest(packages: Sequence[LockedPackage], wheels: Sequence[Any] = ()) -> str:
    """sha256 over the sorted (url, hash) pairs of conda packages and wheels: equal digests = the same packages."""
    rows = sorted([*(f"{p.url} {p.sha256 or 'md5:' + p.md5}" for p in packages), *(f"pip {w.url} {w.sha256}" for w in wheels)])
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _dist(pkg: LockedPackage) -> str:
    return conda_stem(pkg.filename)


def _installed_dists(prefix: Path) -> set[str]:
    meta = prefix / "conda-meta"
    return {p.stem for p in meta.glob("*.json")}


def damaged_records(prefix: Path) -> list[Path]:
    """conda-meta records of packages with a file missing from the prefix (deleted by hand, say).

    rattler decides what to link from these records alone, so a damaged package looks installed;
    dropping its record makes the next link put its files back.
    """
    damaged = []
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            files = json.loads(record.read_text(encoding="utf-8")).get("files") or []
        except (OSError, ValueError):
            damaged.append(record)
            continue
        if any(not os.path.lexists(prefix / f) for f in files):
            damaged.append(record)
    return damaged


def _env_meta(lock: LockFile, req: CreateRequest, digest: str, state: str, has_cudnn: bool) -> dict[str, Any]:
    meta = lock.envlock_meta(req.platform)
    anchor = meta.get("anchor") or {}
    plan = meta.get("plan") or {}
    return {
        "envlock_json_version": ENVLOCK_JSON_VERSION,
        "envlock_version": __version__,
        "lock_path": str((req.lock_record or req.lock_path).absolute()),
        "content_hash": lock.content_hash.get(req.platform, ""),
        "platform": req.platform,
        "anchor": {k: anchor.get(k) for k in ("torch", "cuda", "cudnn", "torch_source")},
        "env_name": meta.get("env_name"),
        # additions beyond doctor's contract
        "plan": {k: plan.get(k) for k in ("cuda", "skew", "nvcc")} if plan else {},
        "packages_digest": digest,
        "activation": {"torch_source": anchor.get("torch_source") or "pip", "has_cudnn": has_cudnn},
        "state": state,
    }


def _shared_mode() -> int:
    """0666 minus the umask: the mode open() gives a new file (0644 under the usual 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def share_records(prefix: Path) -> None:
    """Give conda-meta's records the usual file mode (rattler writes them 0600).

    A shared env (a cluster's) must be readable by its other users: conda, `conda list` and envlock's
    doctor read conda-meta/*.json and conda-meta/envlock.
    """
    mode = _shared_mode()
    for path in (prefix / "conda-meta").iterdir():
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)


def _write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, _shared_mode())  # mkstemp makes 0600: other users' doctor must read it
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- fetch + verify


@dataclass(frozen=True)
class _Fetched:
    pkg: LockedPackage
    sha256: str
    md5: str
    size: int
    downloaded: bool


class _Cancelled(Exception):
    """A worker saw the cancel flag (Ctrl-C in the main thread)."""


def _expected(pkg: LockedPackage) -> tuple[str, str]:
    """(algorithm, hex digest) the archive must have."""
    return ("sha256", pkg.sha256.lower()) if pkg.sha256 else ("md5", pkg.md5.lower())


def _sidecar(cache: Path, pkg: LockedPackage) -> Path:
    return cache / f"{_dist(pkg)}.envlock.json"


def _cached(cache: Path, pkg: LockedPackage) -> _Fetched | None:
    """The verified cache entry for `pkg`, if there is one."""
    try:
        side = json.loads(_sidecar(cache, pkg).read_text())
        rattler_lock = (cache / f"{_dist(pkg)}.lock").read_bytes()
    except (OSError, ValueError):
        return None
    algo, want = _expected(pkg)
    if side.get(algo) != want or rattler_lock[8:40].hex() != side.get("sha256"):
        return None
    if not (cache / _dist(pkg) / "info" / "index.json").is_file():
        return None
    return _Fetched(pkg, side["sha256"], side["md5"], int(side.get("size", 0)), False)


def _mirrored(url: str, mirrors: Mapping[str, str]) -> str:
    """Where to fetch a locked URL from (`--mirror conda-forge=URL`; `nvidia=` covers nvidia/label/…)."""
    from envlock.mirrors import mirrored

    return mirrored(url, mirrors)


def _local_path(url: str) -> Path:
    """file:///C:/x → C:\\x on Windows, file:///a%20b → /a b everywhere."""
    from urllib.request import url2pathname

    return Path(url2pathname(urlsplit(url).path))


def _hash_file(path: Path, cancel: threading.Event) -> tuple[str, str, int]:
    sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            if cancel.is_set():
                raise _Cancelled
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return sha.hexdigest(), md5.hexdigest(), size


def _download(url: str, dest: Path, pkg: LockedPackage, cancel: threading.Event, session: Any,
              progress: Progress | None = None, sized: bool = False) -> None:
    """GET `url` into `dest` (a few retries for resets, truncation and 5xx); bytes go to `progress`.

    `sized`: the byte bar's total already holds this file's size (else its Content-Length is added).
    """
    import requests

    progress = progress or _NoProgress()
    host = urlsplit(url).netloc
    last = ""
    for attempt in range(_RETRIES):
        if attempt:
            time.sleep(0.2 * attempt)
        got = 0
        try:
            with session.get(url, stream=True, timeout=(10, _read_timeout())) as resp:
                if resp.status_code >= 500:
                    last = f"HTTP {resp.status_code}"
                    continue
                if resp.status_code != 200:
                    raise ChannelError(f"cannot download {pkg.filename}: HTTP {resp.status_code} from {host}",
                                       hint=f"is {url} still published? re-lock with `envlock lock` if it moved")
                expected_len = int(resp.headers.get("Content-Length") or -1)
                if not sized and expected_len > 0:
                    progress.expect("fetch", expected_len)
                    sized = True
                with dest.open("wb") as fh:
                    for chunk in resp.iter_content(_CHUNK):
                        if cancel.is_set():
                            raise _Cancelled
                        fh.write(chunk)
                        got += len(chunk)
                        progress.transfer("fetch", len(chunk))
                if expected_len >= 0 and got != expected_len:
                    last = f"connection closed after {got} of {expected_len} bytes"
                    progress.transfer("fetch", -got)  # the retry downloads it all again
                    continue
                return
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            progress.transfer("fetch", -got)
            last = _net_reason(exc)
    raise ChannelError(f"cannot download {pkg.filename} from {host} ({last}, {_RETRIES} attempts)",
                       hint="check the network or proxy settings; --offline uses only the package cache")


def _read_timeout() -> float:
    """Seconds without a byte before a download is retried ($ENVLOCK_HTTP_TIMEOUT, else 60)."""
    try:
        return float(os.environ.get("ENVLOCK_HTTP_TIMEOUT") or 60)
    except ValueError:
        return 60.0


def _net_reason(exc: BaseException) -> str:
    """A short reason for a network error (requests' messages nest three exceptions deep)."""
    text = str(exc)
    for needle, reason in (("Name or service not known", "host not found"), ("NameResolution", "host not found"),
                           ("Connection refused", "connection refused"), ("timed out", "timed out"),
                           ("Connection reset", "connection reset"), ("RemoteDisconnected", "connection closed"),
                           ("IncompleteRead", "connection closed mid-download")):
        if needle in text:
            return reason
    return type(exc).__name__


def fetch_archive(pkg: LockedPackage, mirrors: Mapping[str, str], work: Path, cancel: threading.Event,
                  session: Any, progress: Progress | None = None, sized: bool = False) -> tuple[Path, str, str, int]:
    """`pkg`'s archive checked against the lock: (path, sha256, md5, size).

    http(s) archives are downloaded into `work`; a file:// one is read where it lies (the path returned
    is then outside `work`, and is the caller's to keep). Also used by `envlock pack` and `envlock mirror`.
    """
    url = _mirrored(pkg.url, mirrors)
    scheme = urlsplit(url).scheme
    if scheme == "file":
        archive = _local_path(url)
        if not archive.is_file():
            from envlock.mirrors import missing_file_hint

            raise EnvCreateError(f"package file {archive} is missing (locked as {pkg.url})",
                                 hint=missing_file_hint(archive, pkg.url)
                                 or "the local channel moved or was cleaned; restore it or re-lock")
    elif scheme in ("http", "https"):
        archive = work / pkg.filename
        _download(url, archive, pkg, cancel, session, progress, sized)
    else:
        raise EnvCreateError(f"cannot fetch {pkg.url}: unsupported URL scheme {scheme!r}",
                             hint="envlock installs from http(s):// and file:// URLs")
    try:
        sha256, md5, size = _hash_file(archive, cancel)
        algo, want = _expected(pkg)
        got = sha256 if algo == "sha256" else md5
        if got != want:
            raise EnvCreateError(
                f"{algo} mismatch for {pkg.filename}: the lock says {want}, the archive from {url} has {got}",
                hint="the package is not the one that was locked, so nothing was installed; check the mirror or "
                     "proxy, or re-lock (`envlock lock`) if the channel really changed",
            )
    except BaseException:
        if scheme != "file":
            archive.unlink(missing_ok=True)
        raise
    return archive, sha256, md5, size


def _fetch_one(pkg: LockedPackage, cache: Path, work: Path, req: CreateRequest, cancel: threading.Event,
               session: Any, progress: Progress | None = None, sized: int = 0) -> _Fetched:
    """Get one archive, verify it against the lock, extract it into the cache (once per shared cache)."""
    from envlock.filelock import entry_lock

    with entry_lock(cache, _dist(pkg)):
        hit = _cached(cache, pkg)
        if hit is not None:  # another envlock process sharing this cache fetched it while we waited
            if sized and progress is not None:
                progress.expect("fetch", -sized)  # counted in the byte bar's total, not downloaded here
            return hit
        return _fetch_locked(pkg, cache, work, req, cancel, session, progress, sized)


def _fetch_locked(pkg: LockedPackage, cache: Path, work: Path, req: CreateRequest, cancel: threading.Event,
                  session: Any, progress: Progress | None = None, sized: int = 0) -> _Fetched:
    from rattler.package_streaming import extract

    archive, sha256, md5, size = fetch_archive(pkg, req.mirrors, work, cancel, session, progress, bool(sized))
    target = cache / _dist(pkg)
    staging = Path(tempfile.mkdtemp(prefix=f".{_dist(pkg)}.", dir=work))
    try:
        extract(archive, staging)
    except Exception as exc:  # rattler raises its own types for corrupt archives
        raise EnvCreateError(f"cannot unpack {pkg.filename}: {exc}",
                             hint="the archive matches the lock but is not a valid conda package; re-lock") from None
    finally:
        if archive.parent == work:
            archive.unlink(missing_ok=True)
    # ../ or absolute paths and symlinks out of the prefix: refused before anything is linked (rattler
    # would link some, create some, and panic on others; envlock/pkgcheck.py).
    check_extracted(staging, pkg.filename)
    shutil.rmtree(target, ignore_errors=True)
    try:
        os.rename(staging, target)
    except OSError:
        if not (target / "info" / "index.json").is_file():  # another envlock put it there first
            raise
        shutil.rmtree(staging, ignore_errors=True)
    # rattler's cache lock file: u64 revision + the archive's sha256; rattler trusts the entry when
    # that sha256 equals the record's, so the install step never downloads again.
    (cache / f"{_dist(pkg)}.lock").write_bytes(struct.pack(">Q", 1) + bytes.fromhex(sha256))
    _write_json_atomic(_sidecar(cache, pkg), {"sha256": sha256, "md5": md5, "size": size, "url": pkg.url})
    return _Fetched(pkg, sha256, md5, size, True)


def fetch_all(packages: Sequence[LockedPackage], req: CreateRequest, cache: Path, progress: Progress) -> list[_Fetched]:
    """Verified cache entries for every package (downloads in parallel; Ctrl-C stops them)."""
    results: dict[str, _Fetched] = {}
    missing: list[LockedPackage] = []
    for pkg in packages:
        hit = _cached(cache, pkg)
        if hit is None:
            missing.append(pkg)
        else:
            results[pkg.filename] = hit
    if missing and req.offline:
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
            for fetched in _fetch_parallel(missing, cache, work, req, progress):
                results[fetched.pkg.filename] = fetched
        finally:
            shutil.rmtree(work, ignore_errors=True)
    progress.finish("fetch")
    return [results[p.filename] for p in packages]


def _fetch_parallel(missing: Sequence[LockedPackage], cache: Path, work: Path, req: CreateRequest,
                    progress: Progress) -> list[_Fetched]:
    def done(fetched: _Fetched) -> None:
        progress.advance("fetch", fetched.pkg.name)

    sizes: Mapping[str, int] = {}
    if getattr(progress, "wants_sizes", False):  # a person watches: a total for the byte bar (and an ETA)
        import requests

        from envlock.sizes import content_lengths

        with requests.Session() as session:
            sizes = content_lengths([_mirrored(p.url, req.mirrors) for p in missing], session)
        if sizes:
            progress.expect("fetch", sum(sizes.values()))

    def fetch(p: LockedPackage, cancel: threading.Event, session: Any) -> _Fetched:
        return _fetch_one(p, cache, work, req, cancel, session, progress, sizes.get(_mirrored(p.url, req.mirrors), 0))

    return run_parallel(missing, fetch, jobs=req.jobs, on_done=done)


def run_parallel(items: Sequence[Any], worker: Callable[[Any, threading.Event, Any], Any], *, jobs: int,
                 on_done: Callable[[Any], None] = lambda _: None) -> list[Any]:
    """`worker(item, cancel, session)` for every item on a thread pool sharing one requests session.

    Results in completion order; the first failure raises and stops the rest; Ctrl-C -> Interrupted.
    """
    import requests

    cancel = threading.Event()
    session = requests.Session()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="envlock-fetch")
    futures = [pool.submit(worker, item, cancel, session) for item in items]
    out: list[Any] = []
    try:
        pending = set(futures)
        while pending:
            # A timeout keeps the main thread responsive to Ctrl-C.
            done, pending = concurrent.futures.wait(pending, timeout=0.2,
                                                    return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in done:
                result = fut.result()  # the first failure raises; `finally` stops the rest
                on_done(result)
                out.append(result)
    except KeyboardInterrupt:
        raise Interrupted("interrupted while downloading; nothing was installed",
                          hint="run the command again; verified packages stay in the package cache") from None
    finally:
        cancel.set()
        # Do not wait for a worker stuck in a slow read: the process is about to report and exit.
        pool.shutdown(wait=False, cancel_futures=True)
        session.close()
    return out


# --------------------------------------------------------------------------- link


class _LinkReporter:
    """rattler InstallerReporter → Progress (called from rattler's threads, with the GIL)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.names: dict[int, str] = {}
        self.next = 0

    def on_link_start(self, operation: int, package_name: str) -> int:
        self.next += 1
        self.names[self.next] = package_name
        return self.next

    def on_link_complete(self, index: int) -> None:
        self.progress.advance("link", self.names.pop(index, ""))
        _test_pause_in_link()


_PAUSED: list[bool] = []


def _test_pause_in_link() -> None:
    """Test hook: ENVLOCK_TEST_PAUSE_IN_LINK=SECONDS sleeps after the first linked package.

    It holds the prefix half-linked so tests/reliability/test_create_faults.py can SIGKILL a create
    there; unset, it costs one dict lookup.
    """
    pause = os.environ.get("ENVLOCK_TEST_PAUSE_IN_LINK")
    if pause and not _PAUSED:
        _PAUSED.append(True)  # once per process
        sys.stderr.write("envlock-test: pausing while linking\n")
        sys.stderr.flush()
        time.sleep(float(pause))


def _records(fetched: Sequence[_Fetched], cache: Path) -> list[Any]:
    """RepoDataRecords from each verified archive's own index.json, with the lock's URL."""
    from rattler import PackageRecord, RepoDataRecord

    records = []
    for f in fetched:
        pkg = f.pkg
        rec = PackageRecord.from_index_json(cache / _dist(pkg) / "info" / "index.json", f.size, f.sha256, f.md5)
        if (rec.name.normalized, str(rec.version), str(rec.build)) != (pkg.name.lower(), pkg.version, pkg.build):
            raise EnvCreateError(
                f"{pkg.filename} holds {rec.name.normalized} {rec.version} {rec.build}, not what the lock names",
                hint="the lock or the channel is inconsistent; re-lock with `envlock lock`",
            )
        channel = pkg.url.rsplit("/", 2)[0]
        records.append(RepoDataRecord(rec, pkg.filename, pkg.url, channel))
    return records


def link(records: list[Any], prefix: Path, platform: str, cache: Path, progress: Progress) -> None:
    """rattler.install into `prefix` (also removes packages the lock no longer has)."""
    from rattler import Client, Subdir, install

    from envlock.tls import rattler_client

    # Every archive is in the cache, verified: the client is never used, but without one rattler builds its
    # own from the system's CA certificates and panics where there are none (envlock/tls.py).
    client = rattler_client(Client)
    progress.start("link", len(records))
    try:
        asyncio.run(install(records, target_prefix=prefix, cache_dir=cache, platform=Subdir(platform), client=client,
                            show_progress=False, reporter=_LinkReporter(progress), execute_link_scripts=False))
    finally:
        progress.finish("link")


# --------------------------------------------------------------------------- create


def create_env(req: CreateRequest, progress: Progress | None = None) -> CreateResult:
    """Install the lock's `req.platform` packages into `req.prefix` (see the module docstring)."""
    started = time.perf_counter()
    progress = progress or _NoProgress()
    lock = read_lock(req.lock_path)
    if req.platform not in lock.platforms:
        raise LockfileError(
            f"{req.lock_path} has no {req.platform} packages (it locks {', '.join(lock.platforms) or 'nothing'})",
            hint=f"pass --platform {lock.platforms[0]} to create that platform's env, or re-lock with "
                 f"`--platform {req.platform}`" if lock.platforms else "re-lock with envlock resolve",
        )
    packages = lock.packages_for(req.platform)
    if not packages:
        raise LockfileError(f"{req.lock_path} lists no conda packages for {req.platform}",
                            hint="re-lock with `envlock resolve`")
    from envlock.mirrors import channel_of, check_in_play

    check_in_play(req.mirrors, {channel_of(p.url) for p in packages}, [w.url for w in lock.pypi_for(req.platform)])
    if req.freshness_check is not None:
        req.freshness_check(lock, req.platform)
    from envlock.cache_dir import ensure_writable

    ensure_writable((req.cache_dir or package_cache_dir()).parent)  # the file locks and packages live there
    # Two creates of one prefix at once: the second waits, naming the holder (envlock/filelock.py).
    with prefix_lock(req.prefix):
        return _install(req, lock, packages, progress, started)


def prefix_lock(prefix: Path) -> Any:
    """The file lock of one prefix (kept in the cache dir, keyed by the prefix's absolute path)."""
    from envlock.filelock import FileLock

    key = hashlib.sha256(str(prefix.absolute()).encode()).hexdigest()[:24]
    base = package_cache_dir().parent
    return FileLock(base / "file-locks" / f"prefix-{prefix.name[:40]}-{key}.lock", f"the environment {prefix}")


def _install(req: CreateRequest, lock: LockFile, packages: Sequence[LockedPackage], progress: Progress,
             started: float) -> CreateResult:
    """create_env once the prefix is ours: fetch + verify, link, hooks, conda-meta/envlock."""
    state = prefix_state(req.prefix)
    check_writable(req.prefix)
    wheels = lock.pypi_for(req.platform)
    digest = packages_digest(packages, wheels)
    has_cudnn = any(p.name in CUDNN_NAMES for p in packages)
    new_meta = _env_meta(lock, req, digest, "complete", has_cudnn)

    if state == "env" and _is_unchanged(req.prefix, new_meta, packages):
        share_records(req.prefix)  # an env of an older envlock has 0600 records
        return replace(_result("unchanged", req, lock, packages, 0, len(packages), started), wheels=len(wheels))

    cache = req.cache_dir or package_cache_dir()
    fetched = fetch_all(packages, req, cache, progress)
    records = _records(fetched, cache)
    # The PyPI part: every wheel downloaded and sha256-checked before the prefix is touched.
    python = _python_of(packages) if wheels else ""
    wheel_paths = _fetch_pypi_part(wheels, req, cache.parent, python, progress)

    # Linking may stop half-way (even SIGKILL): say so in the prefix until it has finished, for a new
    # prefix too, so doctor and the next create recognise a half-built one.
    _write_json_atomic(req.prefix / "conda-meta" / ENVLOCK_JSON, {**new_meta, "state": "incomplete"})
    if state == "env":
        for record in damaged_records(req.prefix):
            record.unlink()  # re-link packages whose files went missing
    try:
        link(records, req.prefix, req.platform, cache, progress)
        if wheel_paths:  # after the conda part (its python), rolled back with it
            from envlock.pypi_install import install_wheels

            progress.start("pypi", 1)
            install_wheels(req.prefix, wheel_paths, platform=req.platform, python=python,
                           glibc=_glibc_of(lock, req.platform), cache=cache.parent)
            progress.advance("pypi", f"{len(wheel_paths)} wheels")
            progress.finish("pypi")
    except BaseException as exc:
        _after_failed_link(req.prefix, state)
        _forget_named_entries(str(exc), packages, cache)
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted("interrupted while linking", hint=_rollback_hint(req.prefix, state)) from None
        if isinstance(exc, EnvCreateError):
            raise EnvCreateError(exc.message, hint=_rollback_hint(req.prefix, state)) from None
        if isinstance(exc, Exception):
            raise EnvCreateError(f"linking into {req.prefix} failed: {_first_line(exc)}",
                                 hint=_rollback_hint(req.prefix, state)) from None
        raise
    hooks = install_hooks(req.prefix, req.platform, new_meta["activation"]["torch_source"], has_cudnn)
    _write_json_atomic(req.prefix / "conda-meta" / ENVLOCK_JSON, new_meta)
    share_records(req.prefix)
    downloaded = sum(1 for f in fetched if f.downloaded)
    action: Action = "updated" if state == "env" else "created"
    done = _result(action, req, lock, packages, downloaded, len(fetched) - downloaded, started, hooks)
    return replace(done, wheels=len(wheel_paths))


def _python_of(packages: Sequence[LockedPackage]) -> str:
    """X.Y of the lock's conda python (the PyPI part installs into its site-packages)."""
    for p in packages:
        if p.name == "python":
            return ".".join(p.version.split(".")[:2])
    raise LockfileError("the lock has PyPI packages but no python to install them into",
                        hint="re-lock with `envlock lock` (a toolchain-only lock has no PyPI part)")


def _glibc_of(lock: LockFile, platform: str) -> str:
    """The glibc the lock was solved for (its __glibc virtual package), for the wheels' platform tags."""
    for vp in (lock.envlock_meta(platform).get("plan") or {}).get("virtual_packages") or ():
        if str(vp).startswith("__glibc="):
            return str(vp).split("=")[1]
    return "2.28"


def _fetch_pypi_part(wheels: Sequence[Any], req: CreateRequest, cache_root: Path, python: str,
                     progress: Progress) -> list[Path]:
    if not wheels:
        return []
    from envlock.pypi_install import fetch_wheels

    progress.start("wheels", len(wheels))
    paths, _ = fetch_wheels(wheels, cache_root, offline=req.offline, mirrors=req.mirrors, jobs=req.jobs,
                            progress=progress)
    for w in wheels:
        progress.advance("wheels", w.name)
    progress.finish("wheels")
    return paths


def _is_unchanged(prefix: Path, new_meta: Mapping[str, Any], packages: Sequence[LockedPackage]) -> bool:
    old = read_env_meta(prefix)
    same = all(old.get(k) == new_meta[k] for k in ("lock_path", "content_hash", "packages_digest", "platform"))
    if not same or old.get("state") != "complete":
        return False
    act = new_meta["activation"]
    wanted = hook_files(new_meta["platform"], str(prefix), act["torch_source"], act["has_cudnn"])
    # Hooks of an older envlock are rewritten: their text is part of what `create` promises.
    hooks_current = all(_read_bytes(prefix / rel) == text.encode("utf-8") for rel, text in wanted.items())
    return hooks_current and {_dist(p) for p in packages} <= _installed_dists(prefix) and not damaged_records(prefix)


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _after_failed_link(prefix: Path, state: str) -> None:
    if state in ("absent", "empty"):
        _remove_settled(prefix)
    if state == "empty":
        prefix.mkdir(parents=True, exist_ok=True)


def _remove_settled(path: Path, quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
    """Remove `path`, again and again until it stays gone.

    rattler's install returns on the first failing package while its other link tasks still run on
    rattler's own threads (there is no way to join them from Python), and they recreate files.
    """
    deadline = time.monotonic() + limit_s
    while True:
        shutil.rmtree(path, ignore_errors=True)
        time.sleep(quiet_s)
        if not path.exists() or time.monotonic() > deadline:
            return


def _forget_named_entries(message: str, packages: Sequence[LockedPackage], cache: Path) -> None:
    """Drop the 'verified' mark of cache entries a link error names, so the next run fetches them again."""
    for pkg in packages:
        if pkg.filename in message or _dist(pkg) in message:
            _sidecar(cache, pkg).unlink(missing_ok=True)


def _rollback_hint(prefix: Path, state: str) -> str:
    if state == "env":
        return f"{prefix} is marked incomplete in conda-meta/envlock; run `envlock create` again to repair it"
    return f"the new environment was removed; run the command again (or use another -p than {prefix})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def install_hooks(prefix: Path, platform: str, torch_source: str, has_cudnn: bool) -> tuple[str, ...]:
    """Write etc/conda/{activate,deactivate}.d/envlock-cuda.* for the prefix; return their paths."""
    written = []
    for rel, text in hook_files(platform, str(prefix), torch_source, has_cudnn).items():
        path = prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        written.append(rel)
    return tuple(sorted(written))


def _result(action: Action, req: CreateRequest, lock: LockFile, packages: Sequence[LockedPackage],
            downloaded: int, cached: int, started: float, hooks: tuple[str, ...] = ()) -> CreateResult:
    return CreateResult(
        action=action,
        prefix=req.prefix,
        lock_path=req.lock_path,
        platform=req.platform,
        packages=len(packages),
        downloaded=downloaded,
        cached=cached,
        content_hash=lock.content_hash.get(req.platform, ""),
        hooks=hooks,
        seconds=time.perf_counter() - started,
    )
