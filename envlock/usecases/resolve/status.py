"""`envlock check`, the offline peer of the solve: is every lock what its spec gives today?

No network, no solver and no process: each lock's header is read (not its packages), the spec is
anchored offline (a lock's recorded anchor stands for what only the network or a python could say) and
re-planned with the pure rules, and the hash inputs are compared (envlock.project.freshness). Importing
this module imports neither rattler, requests nor conda_lock (tests/test_check.py checks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from envlock import UPGRADE_HINT
from envlock.envname import HINT, arg_name, problem
from envlock.errors import EnvlockError, HintPart, LockfileError, NewerFormatError, Retry, SpecError, again, either
from envlock.formats import LockHead, read_head
from envlock.formats.spec import EnvSpec, read_spec
from envlock.project import (
    LOCK_NAME,
    RELOCK_HINT,
    Change,
    CheckReport,
    Current,
    EnvStatus,
    compare,
    discover,
    hash_inputs,
    locate,
    lock_path,
    plan_names,
    spec_path,
)
from envlock.usecases.resolve.asked import of_spec
from envlock.usecases.resolve.solve import Tables, plan_for, shipped_tables, spec_anchor


def current(spec: EnvSpec, lock: LockHead, tables: Tables) -> Current:
    """What the spec gives today, offline: its anchor, plan and hash inputs, or why there are none."""
    names = plan_names(spec, tables.extras)
    try:
        anchor = spec_anchor(of_spec(spec), lock.meta_json("anchor"), tables, None)
    except EnvlockError as exc:
        return Current(anchor_error=exc.message, plan_names=names)
    if anchor is None:
        return Current(rules_version=tables.cuda.rules_version, plan_names=names)
    try:
        plan = plan_for(spec, anchor, tables)
    except EnvlockError as exc:
        return Current(plan_error=f"{exc.message} ({exc.from_spec(spec.name).hint})", plan_names=names)
    inputs = {p: hash_inputs(spec, plan, p) for p in spec.platforms}
    return Current(inputs=inputs, rules_version=tables.cuda.rules_version, plan_names=names)


def _kind(exc: EnvlockError, other: str) -> str:
    """A spec or lock from a newer envlock ("newer-envlock") or one that does not read (`other`)."""
    return "newer-envlock" if isinstance(exc, NewerFormatError) else other


def env_status(project_dir: Path, name: str, spec_file: Path | None, lock_file: Path | None,
               tables: Tables | None = None) -> EnvStatus:
    """Freshness of one environment: no network, no solve."""
    why = problem(name)
    if why is not None:  # a folder or spec file another committer named: reported, never used
        msg = f"not a lock name: {why}"
        return EnvStatus(name, spec_file, lock_file, (), (Change("invalid-name", msg, hint=HINT),))
    lock_file = lock_file or lock_path(project_dir, name)
    if spec_file is None:
        msg = f"locks/{name}/{LOCK_NAME} has no spec environments/{name}.yml"
        return EnvStatus(name, None, lock_file, (), (Change("missing-spec", msg),))
    tables = tables or shipped_tables()
    try:
        spec = read_spec(spec_file, tables.extras)
    except EnvlockError as exc:
        return EnvStatus(name, spec_file, lock_file, (), (Change(_kind(exc, "invalid-spec"), exc.message, hint=exc.hint,
                                                                           parts=exc.hint_parts),))
    if spec.name != name:
        msg = f"{spec_file.name} says `name: {spec.name}`; envlock expects the file to be named {spec.name}.yml"
        return EnvStatus(name, spec_file, lock_file, spec.platforms, (Change("invalid-spec", msg),))
    if not lock_file.is_file():
        msg = f"environments/{name}.yml has no lock (locks/{name}/{LOCK_NAME})"
        return EnvStatus(name, spec_file, None, spec.platforms, (Change("missing-lock", msg),))
    try:
        lock = read_head(lock_file)
    except LockfileError as exc:
        change = Change(_kind(exc, "invalid-lock"), exc.message, hint=exc.hint, parts=exc.hint_parts)
        return EnvStatus(name, spec_file, lock_file, spec.platforms, (change,))
    return EnvStatus(name, spec_file, lock_file, spec.platforms, tuple(compare(spec, lock, current(spec, lock, tables))))


def check(project_dir: Path, names: Sequence[str] = (), *, tables: Tables | None = None,
          naming: Callable[[str], Retry] | None = None) -> CheckReport:
    """`envlock check`: the freshness of every environment (or of `names`).

    `naming`: the command that names one lock instead (default: the command run, with NAME as its argument).
    """
    for n in names:
        arg_name(n)
    found = discover(project_dir)
    missing = [n for n in names if n not in found]
    if missing:
        from envlock.core.tables import example_torch

        retry = naming or (lambda n: again(args=(n,)))
        fix: tuple[HintPart, ...] = ("pick one: ", *either(retry(n) for n in list(found)[:3])) if found else (
            "there is none: lock one first, e.g. ", again("--torch", example_torch(), command="resolve"))
        raise SpecError(f"no lock named {', '.join(missing)} in {project_dir} (locks here: {', '.join(found) or 'none'})",
                        hint=fix)
    picked = names or list(found)
    return CheckReport(project_dir, tuple(env_status(project_dir, n, *found[n], tables=tables) for n in picked))


def status_of(project_dir: Path, name_or_lock_path: str | Path) -> EnvStatus:
    """The freshness of the environment a name, a lock dir or a lock file (conda-lock.yml or .lock) names."""
    project_dir, name = locate(project_dir, name_or_lock_path)
    spec = spec_path(project_dir, name)
    return env_status(project_dir, name, spec if spec.is_file() else None, lock_path(project_dir, name))


def assert_fresh(project_dir: Path, name_or_lock_path: str | Path, platform: str | None = None) -> None:
    """Raise LockfileError naming what changed unless the lock is fresh (for `create --locked`).

    With `platform`, only that platform's lock (and environment-wide problems) must be fresh.
    """
    status = status_of(project_dir, name_or_lock_path)
    changes = status.for_platform(platform)
    if not changes:
        return
    first = changes[0]
    where = f" [{first.platform}]" if first.platform else ""
    more = f" (+{len(changes) - 1} more)" if len(changes) > 1 else ""
    hint = RELOCK_HINT + ", or pass --frozen to install the lock as it is"
    if first.kind == "newer-envlock":
        hint = UPGRADE_HINT
    elif first.kind == "missing-spec":
        hint = f"--locked compares the lock with environments/{status.name}.yml; restore it, or pass --frozen"
    raise LockfileError(f"the lock of {status.name} is stale: {first.message}{where}{more}", hint=hint)


def stale_warning(project_dir: Path, name_or_lock_path: str | Path, platform: str | None = None) -> str | None:
    """One warning line when the lock is stale (None when fresh, or when there is no spec to compare)."""
    status = status_of(project_dir, name_or_lock_path)
    changes = [c for c in status.for_platform(platform) if c.kind != "missing-spec"]
    if not changes:
        return None
    return (
        f"the lock of {status.name} is stale ({changes[0].message}); "
        "`--locked` would refuse it, `envlock lock` re-locks it"
    )
