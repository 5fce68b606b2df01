"""`envlock create`: install a lock into a prefix — fetch + verify everything, then link (the install use case).

Order of work, and why:

1. Read the lock, pick the platform's packages, check the prefix (absent, empty, or a conda env).
2. Fill the package cache (envlock/seams/conda/cache.py): every archive fetched (envlock.seams.net) and checked against
   the lock's sha256 BEFORE anything is extracted (rattler skips that for `file://` and md5-only records),
   then extracted in rattler's cache format. The PyPI part's wheels likewise (envlock/seams/pypi/wheels.py).
3. Link with rattler's installer (envlock/seams/conda/install.py), then the wheels with uv. Nothing touches the
   prefix before this step, so a fetch failure (bad hash, unreachable URL, Ctrl-C) leaves an existing
   prefix untouched and a new one absent. A failure while linking removes a new prefix; an existing one
   is left marked `"state": "incomplete"` in conda-meta/envlock, so the next create repairs it.
4. Install the activation hooks and write conda-meta/envlock (JSON; read by doctor; envlock/seams/prefix.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envlock.seams import envrecord
from envlock.seams.dirs import envs_dir, package_cache_dir
from envlock.errors import EnvCreateError, EnvlockError, HintPart, Interrupted, LockfileError, SpecError, again, either
from envlock.formats import LockFile, read_to_install
from envlock.models import CUDNN_NAMES, LockedPackage, replace
from envlock.progress import NoProgress, Progress

Action = Literal["created", "updated", "unchanged"]
FreshnessCheck = Callable[[LockFile, str], None]


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
    allow_insecure: bool = False  # plain http off loopback (refused otherwise, as resolve refuses it)
    lock: LockFile | None = None  # lock_path's lock, when the caller has read it already (else create_env reads it)


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
    source: str = ""  # where `downloaded` came from when it is no download ("the archive": unpack)

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


def find_lock(project_dir: Path, name: str | None) -> Path:
    """`locks/NAME/conda-lock.yml`, or the only lock under locks/ when no name is given.

    Hints name the command that was run with a lock NAME (`Retry(args=…)`: the same command, named).
    """
    from envlock.core.tables import example_torch
    from envlock.envname import arg_name, validate_name

    locks = project_dir / "locks"
    if name:
        path = locks / arg_name(name) / "conda-lock.yml"
        if not path.is_file():
            known = available_locks(locks)
            fix: tuple[HintPart, ...] = ("pick one: ", *either(again(args=(k,), drop=("--lock",)) for k in known[:3])) \
                if known else ("lock one first, e.g. ", again("--torch", example_torch(), command="resolve"))
            raise LockfileError(f"no lock named {name!r} ({path} is missing; locks here: {', '.join(known) or 'none'})",
                                hint=fix)
        return path
    found = available_locks(locks)
    if not found and locks.is_dir():
        for other in sorted(locks.glob("*/conda-lock.yml")):  # only locks whose folder names no valid name
            validate_name(other.parent.name, "lock folder name", hint=f"rename or remove that folder of {locks}")
    if not found:
        raise LockfileError(f"no lock under {locks}",
                            hint=("lock one first, e.g. ", again("--torch", example_torch(), command="resolve"),
                                  ", or name a lock file with --lock FILE"))
    if len(found) > 1:
        raise SpecError(f"several locks under {locks}: {', '.join(found)}",
                        hint=("name one: ", *either(again(args=(n,)) for n in found[:3])))
    return locks / found[0] / "conda-lock.yml"


def available_locks(locks: Path) -> list[str]:
    """Names of the lock dirs holding a conda-lock.yml (only valid names: a hint names them as arguments)."""
    from envlock.envname import problem

    if not locks.is_dir():
        return []
    return sorted(n for n in (p.parent.name for p in locks.glob("*/conda-lock.yml")) if problem(n) is None)


def default_prefix(lock: LockFile, prefix: str | None, name: str | None) -> Path:
    """-p PREFIX, else -n NAME under envs_dir(), else the lock's env name under envs_dir()."""
    if prefix and name:
        raise SpecError("give either -p/--prefix or -n/--name, not both", hint="-p takes a path, -n a name")
    if prefix:
        return Path(prefix).expanduser().absolute()
    from envlock.seams.dirs import named_env

    if name:
        return named_env(name)
    env_name = lock.envlock_meta().get("env_name")
    if not env_name:
        raise SpecError("this lock does not name its environment", hint="pass -p PREFIX or -n NAME")
    return named_env(str(env_name), recorded=True)


# --------------------------------------------------------------------------- what the env records


def packages_digest(packages: Sequence[LockedPackage], wheels: Sequence[Any] = ()) -> str:
    """sha256 over the sorted (url, hash) pairs of conda packages and wheels: equal digests = the same packages."""
    rows = sorted([*(f"{p.url} {p.sha256 or 'md5:' + p.md5}" for p in packages), *(f"pip {w.url} {w.sha256}" for w in wheels)])
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _env_meta(lock: LockFile, req: CreateRequest, digest: str, state: str, has_cudnn: bool) -> dict[str, Any]:
    meta = lock.envlock_meta(req.platform)
    anchor = meta.get("anchor") or {}
    plan = meta.get("plan") or {}
    return {
        "lock_path": str((req.lock_record or req.lock_path).absolute()),
        "prefix": os.path.realpath(req.prefix),  # the place it was made for (an update's recovery adopts only that)
        "content_hash": lock.content_hash.get(req.platform, ""),
        "platform": req.platform,
        "anchor": envrecord.record_anchor(anchor),
        "env_name": meta.get("env_name"),
        # additions beyond doctor's contract
        "plan": {k: plan.get(k) for k in ("cuda", "skew", "nvcc")} if plan else {},
        "packages_digest": digest,
        "activation": {"torch_source": anchor.get("torch_source") or "pip", "has_cudnn": has_cudnn},
        "state": state,
    }


# --------------------------------------------------------------------------- create


def create_env(req: CreateRequest, progress: Progress | None = None) -> CreateResult:
    """Install the lock's `req.platform` packages into `req.prefix` (see the module docstring)."""
    from envlock.seams.dirs import ensure_writable
    from envlock.seams.conda.channels import check_fetch_urls
    from envlock.seams.gate import check_entries
    from envlock.seams.mirror_urls import channel_of, check_in_play
    from envlock.seams.prefix import prefix_lock
    from envlock.project.derived import refuse_disagreeing

    started = time.perf_counter()
    progress = progress or NoProgress()
    lock = req.lock if req.lock is not None else read_to_install(req.lock_path)
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
    if req.platform.startswith("linux") and any(p.name.startswith("cuda-nvcc") for p in packages):
        # a path nvcc cannot build in (cuda-nvcc's Linux activation: NVCC_PREPEND_FLAGS): refused, with why
        from envlock.seams.prefix import refuse_unusable

        refuse_unusable(req.prefix, envs_dir())
    check_in_play(req.mirrors, {channel_of(p.url) for p in packages}, [w.url for w in lock.pypi_for(req.platform)])
    check_entries(packages, lock.pypi_for(req.platform))  # every name a path is made of: envlock/seams/gate.py
    from envlock.seams.activation import checked_prefix, is_windows

    checked_prefix(str(req.prefix), is_windows(req.platform))  # its activation hooks must carry it as data
    check_fetch_urls([p.url for p in packages], [w.url for w in lock.pypi_for(req.platform)], req.mirrors,
                     allow_insecure=req.allow_insecure)
    if req.freshness_check is not None:
        req.freshness_check(lock, req.platform)
    refuse_disagreeing(lock, req.lock_path, req.platform)  # what conda and pip would install from beside it is the lock's
    cache = req.cache_dir or package_cache_dir()
    ensure_writable(cache.parent)  # the file locks and packages live there
    # Two creates of one prefix at once: the second waits, naming the holder (envlock.seams.fs.FileLock).
    with prefix_lock(req.prefix, package_cache_dir().parent):
        from envlock.usecases.update import recover, remove_leftovers

        real = Path(os.path.realpath(req.prefix))  # a symlinked prefix: its target is what an update swaps
        recover(real)  # an update killed between two renames (envlock/usecases/update.py)
        remove_leftovers(real)
        return _install(req, lock, packages, cache, progress, started)


def _install(req: CreateRequest, lock: LockFile, packages: Sequence[LockedPackage], cache: Path, progress: Progress,
             started: float) -> CreateResult:
    """create_env once the prefix is ours: fetch + verify, link, hooks, conda-meta/envlock."""
    from envlock.seams import prefix as env
    from envlock.seams.conda import cache as pkgcache
    from envlock.seams.conda import install
    from envlock.seams.gate import conda_archive
    from envlock.seams.pkgcheck import check_prefix, summarize

    state = env.prefix_state(req.prefix)
    env.check_writable(req.prefix)
    wheels = lock.pypi_for(req.platform)
    digest = packages_digest(packages, wheels)
    has_cudnn = any(p.name in CUDNN_NAMES for p in packages)
    new_meta = _env_meta(lock, req, digest, "complete", has_cudnn)

    if state == "env" and env.is_unchanged(req.prefix, new_meta, [pkgcache.dist(p) for p in packages]):
        env.share_records(req.prefix)  # an env of an older envlock has 0600 records
        return replace(_result("unchanged", req, lock, packages, 0, len(packages), started), wheels=len(wheels))

    fetched = pkgcache.fill(packages, cache, mirrors=req.mirrors, offline=req.offline, jobs=req.jobs,
                            progress=progress)
    records = install.records(fetched, cache)
    summaries = [(f.summary or summarize(f.path or pkgcache.entry(cache, f.pkg)), conda_archive(f.pkg)) for f in fetched]
    # The PyPI part: every wheel downloaded and sha256-checked before the prefix is touched.
    python = _python_of(packages) if wheels else ""
    wheel_paths = _fetch_pypi_part(wheels, req, cache.parent, python, progress)

    # A new prefix is built where it is (a failure removes it); an existing env is changed in a clone beside it
    # and swapped in at once (envlock/usecases/update.py), so a failure or a kill anywhere leaves it as it was.
    real = Path(os.path.realpath(req.prefix))
    linking_from = file_clock_ns()  # the window in which this create links (and clones) cache files: trust.drifted
    work = _update_clone(real) if state == "env" else req.prefix
    try:
        # Symlinks (chains too) of the packages over those already in the prefix: none may lead out of it.
        check_prefix(work, summaries, python=_python_version(packages))
        # Linking may stop half-way (even SIGKILL): a new prefix says so until it has finished, so doctor and the
        # next create recognise a half-built one.
        env.write_env_meta(work, {**new_meta, "state": "incomplete"})
        if state == "env":
            _prepare_update(work, [pkgcache.dist(p) for p in packages], wheels)
        install.link(records, work, req.platform, cache, progress, final=req.prefix,
                     root_paths=any("" in summary.get("dirs", [""]) for summary, _ in summaries))
        if wheel_paths:  # after the conda part (its python)
            from envlock.seams.pypi.uvlinks import private_links
            from envlock.seams.pypi.wheels import install_wheels

            progress.start("pypi", 1)
            with private_links(wheel_paths, cache.parent) as verified:  # uv reads what was checked, nothing swapped in
                install_wheels(work, verified, platform=req.platform, python=python,
                               glibc=_glibc_of(lock, req.platform), cache=cache.parent, final=req.prefix)
            progress.advance("pypi", f"{len(wheel_paths)} wheels")
            progress.finish("pypi")
        hooks = env.install_hooks(work, req.platform, new_meta["activation"]["torch_source"], has_cudnn,
                                  prefix=req.prefix)
        env.write_env_meta(work, new_meta)
        env.share_records(work)
        if work != req.prefix:
            from envlock.usecases.update import exchange

            exchange(work, real)  # the complete new env is the prefix; the old one is now at `work`
    except BaseException as exc:
        _linking_failed(exc, req.prefix, work, state, packages, cache)
        raise
    if work != req.prefix:
        shutil.rmtree(work, ignore_errors=True)
    # what this create saw of each cache file, and when it linked them (a hard link moves a file's ctime and link
    # count: the next create tells this link from an in-place write), read from the clock the kernel stamps ctimes by
    pkgcache.refresh(cache, fetched, (linking_from, file_clock_ns()), _same_device(req.prefix, pkgcache.entries(cache)))
    downloaded = sum(1 for f in fetched if f.downloaded)
    action: Action = "updated" if state == "env" else "created"
    done = _result(action, req, lock, packages, downloaded, len(fetched) - downloaded, started, hooks)
    return replace(done, wheels=len(wheel_paths))


def file_clock_ns() -> int:
    """Now, by the clock the kernel stamps a file's ctime with (Linux: CLOCK_REALTIME_COARSE, which lags the
    precise one by up to a tick, never leads it): a ctime at or after this reading is a change made after it."""
    coarse = getattr(time, "CLOCK_REALTIME_COARSE", 5 if sys.platform.startswith("linux") else None)
    if coarse is not None:
        try:
            return time.clock_gettime_ns(coarse)
        except OSError:
            pass
    return time.time_ns() - 20_000_000  # elsewhere: a tick's margin, on the side that hashes rather than trusts


def _same_device(a: Path, b: Path) -> bool:
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


def _update_clone(prefix: Path) -> Path:
    from envlock.usecases.update import clone

    try:
        return clone(prefix)
    except OSError as exc:
        raise EnvCreateError(f"cannot update {prefix}: making its new version beside it failed: {exc.strerror or exc}",
                             hint=f"free space next to {prefix} (or make its parent folder writable), then run the "
                                  "command again; the environment was left as it was") from None


def _prepare_update(work: Path, dists: list[str], wheels: Sequence[Any]) -> None:
    """In the clone of an existing env: its records and PyPI part brought to what the lock will link over them."""
    from envlock.seams import beneath
    from envlock.seams import prefix as env
    from envlock.seams.gate import canonical_project
    from envlock.usecases.update import drop_pypi_part

    env.drop_duplicate_records(work, dists)
    for record in env.damaged_records(work):
        beneath.unlink(work, f"conda-meta/{record.name}")  # re-link packages whose files went missing
    drop_pypi_part(work, {(canonical_project(w.name), w.version) for w in wheels})


def _linking_failed(exc: BaseException, prefix: Path, work: Path, state: str, packages: Sequence[LockedPackage],
                    cache: Path) -> None:
    """Roll back (a new prefix removed, an update's clone dropped), forget the damaged cache entries, and raise what
    the user sees (conda/ has mapped rattler's exceptions to EnvlockErrors already)."""
    from envlock.seams import prefix as env
    from envlock.seams.conda import cache as pkgcache
    from envlock.seams.net import scrub

    if work != prefix:
        env.roll_back(work, "absent")  # the clone goes; the env at the prefix was never touched
    else:
        env.roll_back(prefix, state)
    for pkg in pkgcache.damaged(cache, packages):  # their 'verified' mark goes: the next run fetches them again
        pkgcache.forget(cache, pkg)
    hint = env.rollback_hint(prefix, state)
    if isinstance(exc, (KeyboardInterrupt, Interrupted)):
        raise Interrupted("interrupted while linking", hint=hint) from None
    if isinstance(exc, EnvlockError):
        raise exc.saying(hint=hint) from None
    if isinstance(exc, Exception):  # not rattler's (conda/ maps those): the PyPI part's, say
        raise EnvCreateError(f"linking into {prefix} failed ({type(exc).__name__}: {scrub(str(exc))[:300]})",
                             hint=hint) from None


def _python_version(packages: Sequence[LockedPackage]) -> str:
    """X.Y of the lock's conda python, '' when it has none."""
    return next((".".join(p.version.split(".")[:2]) for p in packages if p.name == "python"), "")


def _python_of(packages: Sequence[LockedPackage]) -> str:
    """X.Y of the lock's conda python (the PyPI part installs into its site-packages)."""
    if _python_version(packages):
        return _python_version(packages)
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
    from envlock.seams.pypi.wheels import fetch_wheels

    progress.start("wheels", len(wheels))
    paths, _ = fetch_wheels(wheels, cache_root, offline=req.offline, mirrors=req.mirrors, jobs=req.jobs,
                            progress=progress)
    for w in wheels:
        progress.advance("wheels", w.name)
    progress.finish("wheels")
    return paths


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
