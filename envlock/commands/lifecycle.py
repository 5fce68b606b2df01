"""`envlock lock`, `check`, `update`, `diff` (adapters: options → one call in envlock.usecases.resolve → render).

`check` prints plain text (no rich): it runs in pre-commit hooks and CI, and must stay fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

# Parameters are declared with opt()/arg() (typer.Option/Argument's arguments), never typer's own objects:
# a plain command line runs this module without importing typer (envlock/commands/fastargs.py).
from envlock.commands import options
from envlock.commands.fastargs import arg, opt, typer_command
from envlock.errors import UsageError
from envlock.names import printable

if TYPE_CHECKING:
    import typer

    from envlock.usecases.diff import LockDiff
    from envlock.usecases.resolve import SolveSettings

def _out(line: str = "") -> None:
    """One line of human output, folded to the width (80 on a pipe) at spaces: names from specs, locks and
    folders arrive with control characters escaped."""
    from envlock.wrapping import columns, fold

    sys.stdout.write("".join(f"{ln}\n" for ln in fold(printable(line), columns(sys.stdout), "    ")))


def _warn(warnings: list[str]) -> None:
    """Warnings on stderr (what -q still says)."""
    from envlock.wrapping import say

    for warning in warnings:
        say("warning", printable(warning))


def _dump(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _settings(mirror: list[str], offline: bool, allow_insecure: bool, project_dir: str | Path) -> SolveSettings:
    from envlock.commands.resolve import parse_mirrors
    from envlock.usecases.resolve import SolveSettings

    return SolveSettings(mirrors=parse_mirrors(mirror, Path(project_dir), solving=True), offline=offline,
                         allow_insecure=allow_insecure)


def _columns(rows: list[list[str]], indent: str = "") -> None:
    """Rows as left-aligned columns (the last column is not padded)."""
    if not rows:
        return
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
    for row in rows:
        cells = [c.ljust(widths[i]) if i < len(row) - 1 else c for i, c in enumerate(row)]
        _out(indent + "  ".join(cells).rstrip())


# --------------------------------------------------------------------------- check


def check_cmd(
    names: Optional[list[str]] = arg(
        None, metavar="[NAME]...", help="Locks to check (default: every one).", show_default=False
    ),
    project_dir: str = options.project_dir(),
    as_json: bool = options.as_json(),
    quiet: bool = opt(False, "-q", "--quiet", help="No rows: the exit code, and the `error:` line when a lock is stale."),
) -> int:
    """Exit 0 if every lock matches its spec, else 1 naming what changed. No network, no solve."""
    from envlock.usecases.resolve import check

    # project_dir is a str, not a Path: typer >= 0.29 coerces Path parameters through pydantic (~0.1 s of
    # imports) and check runs in every commit's pre-commit hook.
    report = check(Path(project_dir), names or ())
    if as_json:
        _dump(report.to_json())
        return 0 if report.fresh else 1
    # One row per lock that is fresh and per change of one that is not: what, the lock, the platforms it is
    # about (`all`: a change of the whole lock), why.
    rows: list[list[str]] = []
    for env in report.envs:
        if env.fresh:
            rows.append(["fresh", env.name, ",".join(env.platforms) or "all", "matches its spec"])
        grouped: dict[tuple[str, str], list[str]] = {}
        for c in env.changes:
            grouped.setdefault((c.kind, c.message), []).append(c.platform or "all")
        for (kind, message), platforms in grouped.items():
            rows.append([kind, env.name, ",".join(dict.fromkeys(platforms)), message])
    if not quiet:
        _columns(rows)
    err = report.error()
    if err is not None:
        raise err
    return 0


# --------------------------------------------------------------------------- lock


def lock_cmd(
    names: Optional[list[str]] = arg(
        None, metavar="[NAME]...", help="Locks to re-lock (default: every stale one).", show_default=False
    ),
    all_: bool = opt(False, "--all", help="Re-solve every lock, fresh or not."),
    project_dir: str = options.project_dir(),
    mirror: list[str] = options.mirror(),
    offline: bool = options.offline(),
    allow_insecure: bool = options.allow_insecure(),
    as_json: bool = options.as_json(),
    refresh: bool = opt(
        False, "--refresh", help="Move the resolution cutoff (envlock.exclude_newer) to now and re-lock."
    ),
    quiet: bool = options.quiet(),
    verbose: bool = options.verbose(),
) -> int:
    """Re-lock stale environments from environments/*.yml; files whose bytes would not change are not touched."""
    from envlock.progress import reporting, wanted
    from envlock.usecases.resolve import lock

    project = Path(project_dir)
    with reporting(wanted(as_json=as_json, quiet=quiet)):
        outcomes = lock(
            project, names or (), all_=all_, settings=_settings(mirror, offline, allow_insecure, project),
            refresh=refresh,
        )
    if as_json:
        _dump({"envlock_result_version": 1, "environments": [o.to_json(project) for o in outcomes]})
        return 0
    if quiet:  # no summary; a warning is still said
        _warn([f"{o.name}: {w}" for o in outcomes for w in o.warnings])
        return 0
    for o in outcomes:
        if o.action == "fresh":
            _out(f"fresh   {o.name}: unchanged")
            continue
        messages = list(dict.fromkeys(c.message for c in o.reasons))  # one line per reason, not per platform
        why = "; ".join(messages[:3]) + ("; …" if len(messages) > 3 else "") or ("--refresh" if o.cutoff else "--all")
        if o.action == "rendered":
            _out(f"rendered {o.name}: the files beside its fresh conda-lock.yml, again from it (no solve)")
        else:
            _out(f"locked  {o.name} ({why})")
        if any(c.kind == "invalid-lock" for c in o.reasons):
            _out(f"  the lock was not usable (above): re-created from environments/{o.name}.yml")
        if o.cutoff:
            _out(f"  resolution cutoff moved: {o.cutoff[0] or 'none'} → {o.cutoff[1]}")
        _columns(
            [
                [p, f"CUDA {v['cuda']}", f"nvcc {v['nvcc'] or '-'}", f"{v['packages']} packages",
                 f"{v['pypi']} wheels"]
                for p, v in o.platforms.items()
            ],
            indent="  ",
        )
        for warning in o.warnings:
            _out(f"  warning: {warning}")
        written = set(o.written)
        for f in o.files:
            _out(f"  {'wrote' if f in written else 'unchanged'} {_shown(f, project)}")
        for f in o.removed:
            _out(f"  removed {_shown(f, project)} (not in the new lock)")
    return 0


def _shown(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------- update


def update_cmd(
    packages: Optional[list[str]] = arg(
        None, metavar="[PKG]...", help="Packages to move; everything else stays as locked (none named: every "
        "package moves, within the rules).", show_default=False
    ),
    lock_name: Optional[str] = opt(
        None, "--lock", metavar="NAME", help="Only this lock, locks/NAME/ (default: every lock that has them)."
    ),
    old_name: Optional[str] = opt(None, "--name", metavar="NAME", help="Old spelling of --lock NAME (still works)."),
    dry_run: bool = opt(False, "--dry-run", help="Solve and show what would move; write nothing."),
    project_dir: str = options.project_dir(),
    mirror: list[str] = options.mirror(),
    offline: bool = options.offline(),
    allow_insecure: bool = options.allow_insecure(),
    as_json: bool = options.as_json(),
    quiet: bool = options.quiet(),
    verbose: bool = options.verbose(),
) -> int:
    """Move the named packages, every other one held at its locked version (per platform); with none named, move
    every package within the rules. Show what moved."""
    from envlock.progress import reporting, wanted
    from envlock.usecases.resolve import update

    if old_name is not None:
        options.deprecated("--name NAME", "--lock NAME", "update")
        if lock_name is not None and lock_name != old_name:
            raise UsageError("--lock and --name name two different locks", hint="give --lock NAME alone")
        lock_name = old_name
    project = Path(project_dir)
    with reporting(wanted(as_json=as_json, quiet=quiet)):
        outcomes = update(
            project, packages or (), name=lock_name, dry_run=dry_run,
            settings=_settings(mirror, offline, allow_insecure, project),
        )
    failed = [o for o in outcomes if o.error is not None]
    if as_json:
        _dump({"envlock_result_version": 1, "environments": [o.to_json(project) for o in outcomes]})
        return failed[0].error.exit_code if failed and failed[0].error else 0
    for o in outcomes if not quiet else ():
        if o.diff is None:
            continue
        _out(f"{o.name}:")
        if o.cutoff:
            _out(f"  resolution cutoff moved: {o.cutoff[0] or 'none'} → {o.cutoff[1]}")
        if o.diff.empty:
            which = "the named packages are" if packages else "every package is"
            _out(f"  nothing moved ({which} already at the newest version the rules allow)"
                 + ("; nothing written" if not o.written and not dry_run else ""))
        _render_platforms(o.diff, indent="  ")
        for f in o.written:
            _out(f"  wrote {_shown(f, project)}")
        for f in o.removed:
            _out(f"  removed {_shown(f, project)} (not in the new lock)")
    if dry_run and not quiet:
        _out("dry run: nothing written")
    if failed:  # the others were updated: one error for the first that was not, naming the rest
        first = failed[0].error
        assert first is not None
        rest = f" ({', '.join(o.name for o in failed[1:])} not updated either)" if failed[1:] else ""
        raise first.saying(f"{failed[0].name}: {first.message}{rest}")
    return 0


# --------------------------------------------------------------------------- diff


def _render_platforms(diff: LockDiff, indent: str = "") -> None:
    for p in diff.platforms:
        if p.empty:
            continue
        _out(
            f"{indent}{p.platform}: {len(p.changed)} changed, {len(p.added)} added, "
            f"{len(p.removed)} removed, {p.unchanged} unchanged"
        )
        rows = [
            ["~", a.name, a.label(a.channel != b.channel), "→", b.label(a.channel != b.channel)]
            for a, b in p.changed
        ]
        rows += [["+", x.name, x.label()] for x in p.added]
        rows += [["-", x.name, x.label()] for x in p.removed]
        _columns(rows, indent=indent + "  ")


def diff_cmd(
    paths: Optional[list[str]] = arg(
        None, metavar="[A B | LOCK]", help="Two locks (A B), or with --git one (optional); each a NAME (locks/NAME/) "
        "or a FILE (a conda-lock.yml, @EXPLICIT file or pixi.lock anywhere).", show_default=False
    ),
    git: Optional[str] = opt(
        None, "--git", metavar="REF", help="Compare the working tree's locks with their version at REF."
    ),
    project_dir: str = options.project_dir(),
    as_json: bool = options.as_json(),
) -> int:
    """Per platform: packages added, removed and changed (old → new version and build). Exit 0."""
    from envlock.usecases.diff import diff_files, diff_git

    given = list(paths or ())
    if git is not None:
        if len(given) > 1:
            raise UsageError(
                "--git takes at most one lock path",
                hint="envlock diff --git HEAD~1 [locks/NAME/conda-lock.yml]",
            )
        diffs = diff_git(Path(project_dir), git, _lock_or_file(project_dir, given[0]) if given else None)
    else:
        if len(given) != 2:
            raise UsageError(
                "envlock diff needs two locks, or --git REF",
                hint="envlock diff A B (lock NAMEs or files), or envlock diff --git HEAD~1",
            )
        diffs = [diff_files(_lock_or_file(project_dir, given[0]), _lock_or_file(project_dir, given[1]))]
    if as_json:
        _dump({"envlock_result_version": 1, "diffs": [d.to_json() for d in diffs]})
        return 0
    for d in diffs:
        # a diff's file lines stay whole, as in any unified diff: tools and eyes read the path on that line
        sys.stdout.write(f"--- {printable(str(d.old))}\n+++ {printable(str(d.new))}\n")
        if d.empty:
            total = sum(p.unchanged for p in d.platforms)
            _out(f"no differences ({total} packages on {len(d.platforms)} platform(s))")
        _render_platforms(d)
    return 0


def _lock_or_file(project_dir: str, value: str) -> Path:
    """A lock NAME (locks/NAME/conda-lock.yml of the project, as every command names a lock) or a FILE as given."""
    if options.is_lock_name(value):
        from envlock.usecases.create import find_lock

        return find_lock(Path(project_dir), value)
    return Path(value)


# --------------------------------------------------------------------------- create --locked / --frozen


def freshness_check(project_dir: Path, lock_path: Path, *, locked: bool) -> Callable[[Any, str], None]:
    """The hook `envlock create` runs before it installs: refuse (--locked) or warn about a stale lock."""
    from envlock.usecases.resolve import assert_fresh, stale_warning

    def check(lock: Any, platform: str) -> None:
        if locked:
            assert_fresh(project_dir, lock_path, platform)
            return
        warning = stale_warning(project_dir, lock_path, platform)
        if warning:
            from envlock.wrapping import say

            say("warning", printable(warning))

    return check


#: The commands a plain command line runs without typer (envlock/commands/fastargs.py): `check` runs in
#: pre-commit hooks and CI on every commit.
FAST = {"check": check_cmd}


def register(app: typer.Typer) -> None:
    """Add `lock`, `check`, `update` and `diff` to the app."""
    app.command("lock")(typer_command(lock_cmd))
    app.command("check")(typer_command(check_cmd))
    app.command("update")(typer_command(update_cmd))
    app.command("diff")(typer_command(diff_cmd))
