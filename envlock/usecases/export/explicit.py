"""`envlock export explicit --mirror NAME=URL`: @EXPLICIT files that plain conda installs from a mirror.

A lock records canonical URLs (https://conda.anaconda.org/conda-forge/...), and conda redirects those neither
through `channel_alias` nor `migrated_channel_aliases`, so a site behind a mirror cannot `conda create --file`
the lock's own conda-<platform>.lock. These files are the same packages, in the same order, with the same
md5s (what conda checks) and sha256 lines (what envlock checks), each URL taken through the mirrors in force
exactly as `envlock create` fetches it (--mirror > ENVLOCK_MIRRORS > envlock.toml; envlock/seams/mirror_urls.py).
Credentials of a mirror URL are never written: conda reads them from its own configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envlock.errors import HintPart, Retry, SpecError, UsageError, again
from envlock.formats import LockFile, read_lock
from envlock.formats.explicit import render_explicit
from envlock.models import replace
from envlock.seams.fs import write_atomic
from envlock.seams.mirror_urls import MirrorMap, channel_of, check_in_play, display, mirrored
from envlock.names import strip_credentials

STDOUT = Path("-")


@dataclass(frozen=True)
class ExplicitRequest:
    """Options of `envlock export explicit`."""

    project_dir: Path
    mirrors: MirrorMap
    name: str | None = None
    lock: Path | None = None
    platforms: tuple[str, ...] = ()  # () = every platform of the lock
    output: Path | None = None  # a folder (default: the current one), or STDOUT
    force: bool = False


@dataclass(frozen=True)
class ExplicitResult:
    lock: Path
    texts: dict[str, str]  # platform -> file text
    written: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def export_explicit(req: ExplicitRequest) -> ExplicitResult:
    """Check everything, render every platform's file, then write them (nothing is written on an error)."""
    from envlock.usecases.create import find_lock

    if req.lock is not None and req.name:
        raise UsageError("give either a lock NAME or --lock NAME|FILE, not both",
                         hint=("the NAME alone: ", again(args=(req.name,), drop=("--lock",))))
    lock_path = (req.lock if req.lock is not None else find_lock(req.project_dir, req.name)).resolve()
    lock = read_lock(lock_path)
    platforms = _platforms(lock, lock_path, req.platforms)
    if lock.kind != "conda-lock":  # the lock's own @EXPLICIT file: it must be what conda-lock.yml beside it renders
        from envlock.project.derived import refuse_disagreeing

        for platform in platforms:
            refuse_disagreeing(lock, lock_path, platform)
    channels = sorted({channel_of(p.url) for p in lock.packages})
    if not [k for k in req.mirrors if k != "pypi"]:
        raise UsageError("no mirror in force: name the one conda should install from",
                         hint=_mirror_hint(req, lock_path, channels))
    check_in_play(req.mirrors, channels)
    uncovered = sorted({display(c) for c in channels if mirrored(c, req.mirrors) == c})
    warnings = tuple(f"no mirror covers {c}: its packages keep their canonical URLs" for c in uncovered)
    texts = {p: _render(lock, lock_path, p, req.mirrors) for p in platforms}
    if req.output == STDOUT:
        if len(texts) != 1:
            raise UsageError(f"-o - prints one file, and the lock has {len(texts)} platforms",
                             hint="pick one with --platform, or write them to a folder with -o DIR")
        return ExplicitResult(lock_path, texts, (), warnings)
    folder = (req.output or Path(".")).resolve()
    targets = {p: folder / f"conda-{p}.lock" for p in platforms}
    for target in targets.values():
        if target.parent == lock_path.parent:
            raise SpecError(f"{target} is the lock's own @EXPLICIT file (canonical URLs)",
                            hint="write the mirror's files elsewhere: -o DIR")
        if target.exists() and not req.force:
            raise SpecError(f"{target} exists", hint=("replace it: ", again("--force"), ", or -o another folder"))
    written = []
    try:
        for platform, target in targets.items():
            write_atomic(target, texts[platform], skip_unchanged=False, root=folder)
            written.append(target)
    except OSError as exc:
        raise SpecError(f"cannot write {exc.filename or folder}: {exc.strerror or exc}",
                        hint="check the folder given with -o and its permissions") from None
    return ExplicitResult(lock_path, texts, tuple(written), warnings)


def _mirror_hint(req: ExplicitRequest, lock_path: Path, channels: list[str]) -> tuple[HintPart, ...]:
    """Commands that run as written: `envlock mirror` into ./mirror (where the channels are reachable), then this
    export with a --mirror per channel at that folder (an `envlock mirror` folder's root stands for each of its
    channels: envlock/seams/mirror_urls.py); conda installs the lock's own conda-<platform>.lock without one."""
    from envlock.usecases.mirror import mirror_key

    keys = sorted({k for k in (mirror_key(c)[0] for c in channels) if "://" not in k})
    if not keys:
        return ("pass --mirror CHANNEL_URL=MIRROR_URL for the lock's channels (or set ENVLOCK_MIRRORS); without one, "
                f"conda installs {lock_path.parent.name}'s own conda-<platform>.lock",)
    folder = Path("mirror").absolute()
    lock = (("--lock", str(req.lock)),) if req.lock is not None else ()
    make = Retry(set=lock, args=(*((req.name,) if req.name else ()), "mirror"), command="mirror")
    use = again(*(w for k in keys for w in ("--mirror", f"{k}={folder.as_uri()}")))
    return ("make a mirror where the channels are reachable: ", make, ", then ", use,
            " (or set ENVLOCK_MIRRORS); without one, conda installs the lock's own conda-<platform>.lock")


def _platforms(lock: LockFile, path: Path, wanted: tuple[str, ...]) -> tuple[str, ...]:
    for platform in wanted:
        if platform not in lock.platforms:
            raise SpecError(f"{path} has no {platform} platform; it has: {', '.join(lock.platforms) or 'none'}",
                            hint="pick one of them with --platform")
    return tuple(dict.fromkeys(wanted)) or lock.platforms


def _render(lock: LockFile, path: Path, platform: str, mirrors: MirrorMap) -> str:
    """The platform's @EXPLICIT text with every URL as fetched through the mirrors."""
    packages = [replace(p, url=mirrored(p.url, mirrors)) for p in lock.packages_for(platform)]
    name = lock.env_name()
    used = ", ".join(f"{k}={strip_credentials(v)}" for k, v in sorted(mirrors.items()) if k != "pypi")
    return render_explicit(
        packages=packages, platform=platform, content_hash_value=lock.content_hash.get(platform, "") or "unknown",
        env_name=name,
        header=(f"# for mirrors: {used} (from {path.name}; re-write it with `envlock export explicit`)",
                f"# install: conda create -p PREFIX --file conda-{platform}.lock   "
                "(then the activation: envlock hook -p PREFIX)"),
    )
