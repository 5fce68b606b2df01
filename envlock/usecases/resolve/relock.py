"""`envlock lock` (re-lock stale specs) and `envlock update PKG…` (move only those): the one solve, run for
specs already in the project.

Every selected environment is checked first (envlock.usecases.resolve.status), so a bad spec or a too-new lock
stops the run before anything is written; `update` solves every environment before its first write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock import UPGRADE_HINT
from envlock.errors import EnvlockError, Interrupted, LockfileError, Retry, SpecError, again
from envlock.formats import LockFile, custom_value, make_hint, read_head, read_lock
from envlock.formats.spec import EnvSpec, read_spec
from envlock.usecases.diff import Entries, LockDiff, PkgRef, conda_ref, diff_entries
from envlock.models import Anchor, LockedPackage, replace
from envlock.project import BLOCKING, Change, EnvStatus, lines_written, rel
from envlock.usecases.resolve.asked import of_spec
from envlock.usecases.resolve.status import check
from envlock.usecases.resolve.solve import (
    SolveSettings,
    Tables,
    cache_dir,
    now_cutoff,
    shipped_tables,
    solve,
    sources,
    spec_anchor,
    write,
)


@dataclass(frozen=True)
class LockOutcome:
    """What `envlock lock` did for one environment."""

    name: str
    action: str  # fresh | locked | rendered (only the files beside a fresh conda-lock.yml were written again)
    reasons: tuple[Change, ...] = ()
    written: tuple[Path, ...] = ()
    files: tuple[Path, ...] = ()
    removed: tuple[Path, ...] = ()  # files of the earlier lock that this one no longer has
    platforms: dict[str, dict[str, Any]] = field(default_factory=dict)
    cutoff: tuple[str | None, str | None] | None = None  # (old, new) resolution cutoff when it moved
    warnings: tuple[str, ...] = ()  # as resolve's (a spec line the plan replaces, …)

    def to_json(self, project_dir: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "warnings": list(self.warnings),
            "cutoff": list(self.cutoff) if self.cutoff else None,
            "reasons": [c.to_json() for c in self.reasons],
            "written": [rel(p, project_dir) for p in self.written],
            "removed": [rel(p, project_dir) for p in self.removed],
            "platforms": self.platforms,
        }


@dataclass(frozen=True)
class UpdateOutcome:
    """What `envlock update` moved in one environment (or, with `error`, why it could not update it)."""

    name: str
    diff: LockDiff | None
    written: tuple[Path, ...] = ()
    dry_run: bool = False
    cutoff: tuple[str | None, str | None] | None = None  # (old, new): update moves the cutoff to now
    removed: tuple[Path, ...] = ()  # files of the earlier lock that this one no longer has
    error: EnvlockError | None = None  # this environment could not be updated (the others were)

    def to_json(self, project_dir: Path) -> dict[str, Any]:
        if self.diff is None:
            err = self.error or EnvlockError("not updated")
            return {"name": self.name, "dry_run": self.dry_run,
                    "error": {"message": err.message, "hint": err.hint, "exit_code": err.exit_code}}
        return {
            "name": self.name,
            "dry_run": self.dry_run,
            "cutoff": list(self.cutoff) if self.cutoff else None,
            "platforms": self.diff.to_json()["platforms"],
            "written": [rel(p, project_dir) for p in self.written],
            "removed": [rel(p, project_dir) for p in self.removed],
        }


def _refuse(status: EnvStatus) -> EnvlockError:
    """The error for an environment `lock`/`update` must not touch."""
    first = next(c for c in status.changes if c.kind in BLOCKING)
    if first.kind == "missing-spec":
        return LockfileError(
            f"{first.message}: envlock cannot re-lock it",
            hint=f"restore environments/{status.name}.yml from git, or delete locks/{status.name}/",
        )
    if first.kind == "newer-envlock":
        return LockfileError(f"{status.name}: {first.message}", hint=UPGRADE_HINT)
    hint = first.parts or (first.hint or "fix the spec, or restore it from git",)
    return SpecError(f"{status.name}: {first.message}", hint=(*hint, "; nothing was written"))


def _select(project_dir: Path, names: Sequence[str], tables: Tables, naming: Any = None) -> list[EnvStatus]:
    report = check(project_dir, names, tables=tables, naming=naming)
    blocked = [e for e in report.envs if not e.relockable]
    if blocked:
        raise _refuse(blocked[0])
    return list(report.envs)


def _anchor(spec: EnvSpec, lock_anchor: Any, tables: Tables, settings: SolveSettings) -> Anchor:
    """The anchor `lock`/`update` re-plan from: the lock's own where it stands, else derived (as resolve)."""
    try:
        asked = of_spec(spec)  # the spec's inputs, read once
        anchor = spec_anchor(asked, lock_anchor, tables, sources(asked, settings))
    except EnvlockError as exc:
        raise exc.from_spec(spec.name) from None  # the spec is what the user edits: its hint names the spec's keys
    assert anchor is not None  # with sources, spec_anchor always answers
    return anchor


def lock(
    project_dir: Path,
    names: Sequence[str] = (),
    *,
    all_: bool = False,
    settings: SolveSettings | None = None,
    refresh: bool = False,
    tables: Tables | None = None,
) -> list[LockOutcome]:
    """`envlock lock`: re-solve stale environments (every one with all_); fresh files are not touched.

    `refresh` moves each selected spec's resolution cutoff to now and re-locks it (fresh or not): what
    changed on the index and the channels since comes in.
    """
    settings = settings or SolveSettings()
    tables = tables or shipped_tables()
    out: list[LockOutcome] = []
    for status in _select(project_dir, names, tables):
        if status.fresh and not (all_ or refresh):
            out.append(LockOutcome(status.name, "fresh"))
            continue
        if not (all_ or refresh) and all(c.kind == "derived" for c in status.changes):
            out.append(_render_again(project_dir, status))
            continue
        assert status.spec_path is not None
        spec = read_spec(status.spec_path, tables.extras)
        cutoff = None
        if refresh:  # everything moves: the cutoff to now, the pins of dateless indexes too (found again)
            cutoff = (spec.exclude_newer, now_cutoff())
            spec = replace(spec, exclude_newer=cutoff[1], undated_indexes=())
        recorded, written = None, frozenset[str]()
        if status.lock_path and status.lock_path.is_file():
            try:
                head = read_head(status.lock_path)
                recorded, written = head.meta_json("anchor"), lines_written(head.custom_metadata, head.platforms)
            except LockfileError:  # unreadable (a newer envlock's is refused above): re-created from the spec
                recorded = None
        solved = solve(spec, _anchor(spec, recorded, tables, settings), project_dir=project_dir,
                       settings=settings, tables=tables, written=written, keep_pins=not refresh)
        written, removed = write(project_dir, solved)
        platforms = {
            r.platform: {"cuda": r.chosen.cuda, "nvcc": r.nvcc, "packages": len(r.packages),
                         "pypi": len(solved.pypi.get(r.platform, ()))}
            for r in solved.results
        }
        out.append(LockOutcome(status.name, "locked", status.changes, tuple(written),
                               tuple(p for p, _ in solved.files), tuple(removed), platforms, cutoff, solved.warnings))
    return out


def _render_again(project_dir: Path, status: EnvStatus) -> LockOutcome:
    """conda-lock.yml is fresh, files beside it are not its rendering: render them again from it (no solve)."""
    from envlock.seams.dirs import cache_location
    from envlock.project import write_files
    from envlock.project.derived import of_lock, platform_envs, render

    assert status.lock_path is not None and status.spec_path is not None
    lock = read_lock(status.lock_path)
    rendered = {**render(of_lock(lock)), **platform_envs(lock, read_spec(status.spec_path))}
    files = [(status.lock_path.parent / name, text) for name, text in rendered.items()]
    written, removed = write_files(project_dir, status.name, files, cache_location().path / "file-locks")
    return LockOutcome(status.name, "rendered", status.changes, tuple(written), tuple(p for p, _ in files),
                       tuple(removed))


def _entries_of(packages: Iterable[LockedPackage], wheels: Iterable[Any] = ()) -> Entries:
    out: Entries = {}
    for p in packages:
        out.setdefault(p.platform, {})[("conda", p.name)] = conda_ref(p.name, p.version, p.build, p.url)
    for w in wheels:
        out.setdefault(w.platform, {})[("pip", w.name)] = PkgRef(w.name, w.version, "", "pip")
    return out


def update(
    project_dir: Path,
    packages: Sequence[str],
    *,
    name: str | None = None,
    dry_run: bool = False,
    settings: SolveSettings | None = None,
    tables: Tables | None = None,
) -> list[UpdateOutcome]:
    """`envlock update PKG…`: re-solve with every other package held at its locked version (per platform);
    `envlock update` (no package): every package moves, within the rules (the plan's pins, the skew rule).

    The spec's resolution cutoff moves to now (what lets the packages move at all). Without `name`, an
    environment that cannot be updated comes back with its error, and the others are updated and written.
    """
    settings = settings or SolveSettings()
    tables = tables or shipped_tables()
    wanted = frozenset(p.strip().lower() for p in packages if p.strip())
    every = not wanted  # no package named: all of them
    statuses = _select(project_dir, [name] if name else [], tables, naming=lambda n: again("--lock", n))
    cache_dir()
    jobs: list[tuple[EnvStatus, LockFile]] = []
    for status in statuses:
        if status.lock_path is None or not status.lock_path.is_file():
            if name:
                raise LockfileError(f"{status.name} has no lock to update", hint="run `envlock lock` first")
            continue
        edited = [c for c in status.changes if c.kind == "hand-edited"]
        if edited:
            where = f" [{edited[0].platform}]" if edited[0].platform else ""
            raise LockfileError(
                f"{status.name}: {edited[0].message}{where}; "
                "update holds locked versions, so it refuses an edited lock",
                hint=f"restore locks/{status.name}/ from git, or re-lock it with `envlock lock {status.name}`",
            )
        old = read_lock(status.lock_path)
        if every or wanted & ({p.name for p in old.packages} | {w.name for w in old.pypi}):
            jobs.append((status, old))
    names_in = {p.name for _, old in jobs for p in old.packages} | {w.name for _, old in jobs for w in old.pypi}
    unknown = sorted(wanted - names_in)
    if every and not jobs:
        raise LockfileError("there is no lock to update", hint=make_hint("lock one first with"))
    if unknown or not jobs:
        raise SpecError(
            f"{', '.join(unknown or sorted(wanted))} is not in {name or 'any lock'}",
            hint=("update moves packages a lock already has; add new ones to the spec's dependencies, then run ",
                  Retry(args=(name,) if name else (), command="lock")),
        )
    solved, failed = [], []
    for status, old in jobs:
        move = frozenset({p.name for p in old.packages} | {w.name for w in old.pypi}) if every else wanted
        try:
            solved.append(_update_one(project_dir, status, old, move, settings, tables))
        except Interrupted:
            raise
        except EnvlockError as exc:
            if name:
                raise
            failed.append(UpdateOutcome(status.name, None, dry_run=dry_run, error=exc))
    # Every environment is solved before the first write; one that cannot be updated keeps its lock as it
    # was and is returned with its error, and the others are written.
    out: list[UpdateOutcome] = []
    for result, diff, cutoff in solved:
        written, removed = ((), ()) if dry_run or not result.files else write(project_dir, result)
        out.append(UpdateOutcome(result.spec.name, diff, tuple(written), dry_run, cutoff, tuple(removed)))
    return out + failed


def _update_one(project_dir: Path, status: EnvStatus, old: LockFile, wanted: frozenset[str], settings: SolveSettings,
                tables: Tables) -> tuple[Any, LockDiff, tuple[str | None, str | None] | None]:
    """Solve one environment with every package but `wanted` held at its locked version (nothing written)."""
    assert status.spec_path is not None
    spec = read_spec(status.spec_path, tables.extras)
    now = now_cutoff()
    cutoff: tuple[str | None, str | None] | None = (spec.exclude_newer, now)
    spec = replace(spec, exclude_newer=now)
    anchor = _anchor(spec, custom_value(old.custom_metadata, "anchor"), tables, settings)
    result = solve(spec, anchor, project_dir=project_dir, settings=settings, tables=tables, hold=old,
                   move=wanted, make_project=False, written=lines_written(old.custom_metadata, old.platforms))
    diff = diff_entries(
        _entries_of(old.packages, old.pypi),
        _entries_of((p for r in result.results for p in r.packages), (w for ws in result.pypi.values() for w in ws)),
        str(status.lock_path), "updated",
    )  # fmt: skip
    if diff.empty and status.fresh:
        # Nothing moved: the lock stays as it is, bytes and mtime (the cutoff moves only with a package).
        result, cutoff = replace(result, files=()), None
    return result, diff, cutoff
