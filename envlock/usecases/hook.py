"""`envlock hook`: envlock's activation in an env another tool installed from a lock, and the lock's anchor.

conda (`--file conda-<platform>.lock`), conda-lock and conda-pack install a lock's packages but not what envlock
knows of them: the hook scripts (`conda activate` then sets CUDA_HOME, CPATH, …) and the anchor (the torch and
CUDA the toolchain was resolved for), which doctor compares nvcc with when the env has no torch of its own. The
anchor is taken from the lock the env was installed from: `--lock NAME|FILE`, else the one lock of the project
whose packages for the env's platform are exactly the env's. A lock is read, never trusted further than that:
its anchor is a value shown and compared, nothing is run or fetched from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envlock.errors import EnvlockError, SpecError
from envlock.models import record
from envlock.seams import envrecord


@record
class HookResult:
    written: tuple[str, ...]
    platform: str
    torch_source: str
    lock: Path | None  # the lock whose anchor was recorded
    why_no_lock: str  # when lock is None: why no anchor was recorded


def _dists(lock: Any, platform: str) -> set[str]:
    return {p.filename.removesuffix(".conda").removesuffix(".tar.bz2") for p in lock.packages_for(platform)}


def _matching(project_dir: Path, platform: str, installed: set[str]) -> tuple[Path | None, str]:
    """The project's one lock whose `platform` packages are the env's, or (None, why)."""
    from envlock.formats import read_lock
    from envlock.project import discover

    try:
        found = discover(project_dir)
    except EnvlockError:
        return None, f"{project_dir} has no locks/"
    same = []
    for _spec, lock_path in found.values():
        if not lock_path.is_file():
            continue
        try:
            lock = read_lock(lock_path)
        except EnvlockError:
            continue  # `envlock check` names a lock that does not read; the hook does not need it
        if platform in lock.platforms and _dists(lock, platform) == installed:
            same.append(lock_path)
    if len(same) == 1:
        return same[0], ""
    if not same:
        return None, f"no lock in {project_dir / 'locks'} has exactly the env's {platform} packages"
    return None, f"{len(same)} locks in {project_dir / 'locks'} have the env's packages"


def _named(project_dir: Path, name_or_file: str, platform: str, installed: set[str]) -> Path:
    from envlock.formats import read_lock
    from envlock.project import layout

    where, name = layout.locate(project_dir, name_or_file)
    path = Path(name_or_file) if Path(name_or_file).is_file() else layout.lock_path(where, name)
    lock = read_lock(path)
    if platform not in lock.platforms:
        raise SpecError(f"{path} has no {platform} packages (it locks {', '.join(lock.platforms)})",
                        hint="pass the lock this env was installed from with --lock, or leave --lock out")
    missing, extra = _dists(lock, platform) - installed, installed - _dists(lock, platform)
    if missing or extra:
        first = sorted(missing)[:1] or sorted(extra)[:1]
        raise SpecError(
            f"the env's packages are not {path}'s: {len(missing)} of the lock's are not installed, {len(extra)} "
            f"installed are not in the lock (first: {first[0]})",
            hint="pass the lock this env was installed from with --lock, or leave --lock out (then no anchor "
                 "is recorded unless one of the project's locks matches)")
    return path


def hook(prefix: Path, torch_source: str | None, project_dir: Path, lock: str | None) -> HookResult:
    """Install the hooks and record the anchor of the lock the env was installed from (see the module doc)."""
    from envlock.formats import read_lock
    from envlock.seams.activation.conda import prefix_activation
    from envlock.seams.prefix import add_hooks, installed_dists

    platform, _guessed, _ = prefix_activation(prefix)
    installed = installed_dists(prefix)
    why = ""
    if lock is not None:
        chosen: Path | None = _named(project_dir, lock, platform, installed)
    else:
        chosen, why = _matching(project_dir, platform, installed)
    extra: Mapping[str, Any] = {}
    if chosen is not None:
        meta = read_lock(chosen).envlock_meta(platform)
        anchor = meta.get("anchor") or {}
        extra = {"anchor": envrecord.record_anchor(anchor),
                 "env_name": meta.get("env_name"), "installed_from": str(chosen.absolute())}
        if torch_source is None and anchor.get("torch_source") in ("pip", "conda-forge"):
            torch_source = str(anchor["torch_source"])
    written, platform, used, _ = add_hooks(prefix, torch_source, extra)
    return HookResult(written, platform, used, chosen, why)
