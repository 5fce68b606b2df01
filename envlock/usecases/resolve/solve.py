"""The one solve: spec + anchor -> plan -> solve (conda part, and the PyPI part of a full env) -> files.

`resolve` runs it for a request, `lock` for every stale spec, `update` with every other package held at
its locked version; nothing is written here (envlock.project.write_files does, under the project lock).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock.core import anchor as anchors
from envlock.formats import LockFile
from envlock.formats.spec import EnvSpec, format_cutoff
from envlock.models import Anchor, Plan, PlatformResult, PypiPackage, field, record, replace
from envlock.project import ignored_toolchain_lines, plan_options, render_files, writable_project
from envlock.usecases.resolve.asked import Asked
from envlock.core.rules import make_plan
from envlock.core.tables import CudaTables, ExtrasTables, TorchTable, cuda_tables, extras_tables, torch_table
from envlock.core.torch_support import check_python


@record
class Tables:
    """The tables the pure core is handed (a test may hand it others)."""

    torch: TorchTable
    cuda: CudaTables
    extras: ExtrasTables


def shipped_tables() -> Tables:
    """envlock's own tables (envlock/data), loaded once per process."""
    return Tables(torch_table(), cuda_tables(), extras_tables())


@record
class SolveSettings:
    """How a solve reaches channels and indexes (`resolve`, `lock` and `update` take the same options)."""

    mirrors: Mapping[str, str] = field(default_factory=dict)
    offline: bool = False
    allow_insecure: bool = False


@record
class Solved:
    """What one solve produced, before anything is written (a dry run: the plan only)."""

    spec: EnvSpec
    anchor: Anchor
    plan: Plan
    results: tuple[PlatformResult, ...] = ()
    pypi: dict[str, tuple[PypiPackage, ...]] = field(default_factory=dict)
    files: tuple[tuple[Path, str], ...] = ()
    warnings: tuple[str, ...] = ()


# --------------------------------------------------------------------------- the anchor's sources


def sources(asked: Asked, settings: SolveSettings, *, python_exe: str | None = None,
            index_offline: bool | str | None = None, channel: bool = True) -> anchors.Sources:
    """The anchor's outside sources for this request, each only where it can answer (imported lazily:
    the index client and the solver are loaded only when the anchor asks them). `channel` False: no
    lookup of conda-forge's builds (a dry run asks no channel)."""
    installed = None
    if asked.torch.installed:
        from envlock.seams.installed_torch import probe

        installed = probe(python_exe)
    conda_forge = None
    if asked.torch_source == "conda-forge" and channel:
        first = asked.channel_names[0]
        from envlock.seams.mirror_urls import refuse_unconfirmed

        refuse_unconfirmed(settings.mirrors, [first])  # the anchor asks that channel before there is a plan

        def conda_forge(version: str) -> list[tuple[str, str]]:
            from envlock.seams.conda.solve import conda_forge_pytorch_lookup

            return conda_forge_pytorch_lookup(solve_options(settings, channels=(first,)), first)(version)

    offline = settings.offline if index_offline is None else index_offline

    def index(version: str) -> Any:
        from envlock.seams.pypi import torch_cuda_from_index

        return torch_cuda_from_index(version, offline=offline, allow_insecure=settings.allow_insecure)

    return anchors.Sources(installed=installed, conda_forge=conda_forge, index=index)


def spec_anchor(asked: Asked, lock_anchor: Any, tables: Tables, found: anchors.Sources | None) -> Anchor | None:
    """The anchor of a spec's inputs (envlock.usecases.resolve.asked.of_spec): the lock's recorded one where it stands
    for them and came from outside (a python, conda-forge, the index), else derived. With `found` None
    (offline: `check`), None when only an outside source could say (the spec's torch inputs changed)."""
    recorded = anchors.recorded(lock_anchor, tables.torch)
    if anchors.reusable(asked.torch, asked.cuda, asked.torch_source, recorded):
        return recorded
    if found is None and anchors.source_of(asked.torch, asked.cuda, asked.torch_source, tables.torch) in anchors.EXTERNAL_SOURCES:
        return None
    return anchors.derive(asked.torch, cuda=asked.cuda, torch_source=asked.torch_source, table=tables.torch,
                          sources=found or anchors.Sources())


# --------------------------------------------------------------------------- plan and solve


def plan_for(spec: EnvSpec, anchor: Anchor, tables: Tables) -> Plan:
    """The plan the rules make for a spec (its extra dependencies are `plan.options.extra_specs`)."""
    return make_plan(anchor, plan_options(spec, tables.extras)[0], tables.cuda, tables.extras)


def release_with_python(table: Any, torch: str, python: str) -> str | None:
    """The torch release of the table nearest to `torch` whose wheels include CPython `python` (None: none)."""
    from packaging.version import InvalidVersion, Version

    def key(xy: str) -> tuple[int, ...]:
        return tuple(int(p) for p in xy.split(".")[:2])

    try:
        want = Version(Version(torch).public)
        rows = [r for r in table.rows if r.python and key(r.python[0]) <= key(python) <= key(r.python[1])]
        releases = [Version(x) for r in rows for x in r.releases]
    except (InvalidVersion, ValueError):
        return None
    if not releases:
        return None
    newer = [v for v in releases if v > want]
    return str(min(newer) if newer else max(releases))


def default_python(torch: str) -> str:
    """A python every torch release of that line supports (1.13 predates 3.11 wheels)."""
    return "3.10" if torch.startswith("1.") else "3.11"


def now_cutoff() -> str:
    """The resolution cutoff of a first resolve, `update` and `lock --refresh`: now (UTC, to the millisecond)."""
    return format_cutoff(datetime.datetime.now(datetime.timezone.utc))


def solve_options(settings: SolveSettings, exclude_newer: str | None = None, channels: Sequence[str] = ()) -> Any:
    """rattler's settings; its repodata cache is this user's private one when a channel URL (or a mirror's)
    carries credentials: rattler keeps each URL whole there, and a group-shared cache would show them."""
    from envlock.seams.conda.solve import SolveOptions
    from envlock.seams.dirs import cache_dir as default_cache_dir
    from envlock.seams.dirs import private_cache
    from envlock.names import has_credentials

    cache = default_cache_dir()
    if any(has_credentials(u) for u in (*settings.mirrors.values(), *settings.mirrors, *channels)):
        cache = private_cache(cache)
    return SolveOptions(cache_dir=cache / "repodata", mirrors=dict(settings.mirrors),
                        offline=settings.offline, allow_insecure=settings.allow_insecure, exclude_newer=exclude_newer)


def cache_dir() -> Path:
    """envlock's cache dir, usable (SpecError naming it before anything slow starts)."""
    from envlock.seams.dirs import cache_location, ensure_writable

    return ensure_writable(cache_location().path)


def check_mirrors(mirrors: Mapping[str, str], channels: Sequence[str], *, label: str | None, torch_source: str,
                  toolchain_only: bool, tables: Tables | None = None) -> None:
    """Refuse a `--mirror` that no channel in play uses (with `tables`, before a plan: any channel the CUDA
    table may add). `label`: the torch's local label (a +cuXYZ wheel comes from the PyTorch index)."""
    from envlock.seams.mirror_urls import check_in_play, refuse_unconfirmed

    if tables is not None:
        channels = [*channels, *(r.channel for r in tables.cuda.minors.values() if r.channel)]
    index = []
    if not toolchain_only and label and torch_source == "pip":
        from envlock.seams.pypi.part import variant_index_url

        index.append(variant_index_url(label))
    refuse_unconfirmed(mirrors, channels, index, pypi=not toolchain_only)
    check_in_play(mirrors, channels, index, pypi=not toolchain_only)


def anchor_warnings(spec: EnvSpec, anchor: Anchor) -> tuple[str, ...]:
    """Warnings about the torch side of the plan that the rules (pure, torch-agnostic) cannot give."""
    out: tuple[str, ...] = ()
    if spec.torch_source == "pip" and "linux-aarch64" in spec.platforms and anchor.aarch64_cuda_wheels is False:
        out += (
            f"torch {anchor.torch}'s aarch64 wheels on PyPI are CPU-only (CUDA from 2.11): on linux-aarch64 "
            "install a CUDA torch from the PyTorch wheel index or use --torch-source conda-forge",
        )
    far = skew_beyond_one(anchor)
    return out + ((far,) if far else ())


def skew_beyond_one(anchor: Anchor) -> str | None:
    """The plain words for an override more than one minor from torch's own CUDA (None: within ±1). A major
    mismatch never gets here: the anchor refuses it, as torch's extension builder does."""
    if not anchor.torch_cuda:
        return None
    (tmaj, tmin), (amaj, amin) = (tuple(int(p) for p in c.split(".")[:2]) for c in (anchor.torch_cuda, anchor.cuda))
    if tmaj != amaj or abs(amin - tmin) <= 1:
        return None
    return (f"--cuda {anchor.cuda} is {abs(amin - tmin)} minors from CUDA {anchor.torch_cuda}, which torch "
            f"{anchor.torch} was built with: torch's extension builder only warns about a minor mismatch (a major "
            "one fails), and envlock's rule keeps nvcc within ±1 of torch's CUDA; without --cuda the toolchain follows "
            f"torch ({anchor.torch_cuda})")


def replaced_lines(spec: EnvSpec, plan: Plan, tables: Tables, written: frozenset[str]) -> tuple[str, ...]:
    """A warning per line of the user's that the plan replaces (a toolchain line, a `- pip:` torch line); the
    lines envlock wrote itself (`written`) are replaced in silence."""
    out = tuple(
        f"spec line {line!r} is replaced by the plan: toolchain packages follow the `envlock:` block "
        "(torch, cuda, python, cudnn), so edit that instead"
        for line in ignored_toolchain_lines(spec, plan, tables.extras, written)
    )
    if spec.toolchain_only:
        return out
    from envlock.formats.spec import pip_requirements

    return out + tuple(
        f"`- pip:` line {line!r} is replaced by torch=={spec.torch}: the torch release follows the `envlock:` block"
        for line in pip_requirements(spec.pip, spec.torch, spec.torch_source)[2] if line.strip() not in written
    )


def solve(
    spec: EnvSpec,
    anchor: Anchor,
    *,
    project_dir: Path,
    settings: SolveSettings,
    tables: Tables,
    dry_run: bool = False,
    timestamp: bool = False,
    hold: LockFile | None = None,
    move: frozenset[str] = frozenset(),
    make_project: bool = True,
    written: frozenset[str] = frozenset(),
    keep_pins: bool = True,
) -> Solved:
    """Plan, solve and render one spec. `hold`: a lock whose packages stay at their versions except those
    named in `move` (`envlock update`). `make_project`: create the project dir (and check it can be
    written) once the plan stands, before the solve. `written`: the spec lines envlock wrote for the earlier
    lock (envlock.project.lines_written): the plan replaces them without a warning, which is for the user's.
    `keep_pins`: where the cutoff cannot apply to the PyPI part (an index without upload times), the spec's
    earlier lock's PyPI pins are kept where they still fit."""
    if spec.exclude_newer is None and not dry_run:
        spec = replace(spec, exclude_newer=now_cutoff())  # the first resolve of a spec fixes its cutoff
    if not spec.toolchain_only and not spec.python:
        spec = replace(spec, python=default_python(anchor.torch))  # the PyPI part installs into that python
    if not spec.toolchain_only and spec.torch_source == "pip" and spec.python:
        check_python(anchor.torch, spec.python, anchor.python_span,  # torch's wheels for that python
                     release_for=release_with_python(tables.torch, anchor.torch, spec.python))
    plan = plan_for(spec, anchor, tables)
    check_mirrors(settings.mirrors, sorted({c for pp in plan.platforms for cand in pp.candidates for c in cand.channels}),
                  label=spec.torch_label, torch_source=spec.torch_source, toolchain_only=spec.toolchain_only)
    warnings = anchor_warnings(spec, anchor) + replaced_lines(spec, plan, tables, written)
    if dry_run:
        return Solved(spec, anchor, plan, warnings=warnings)
    made = _missing_top(project_dir) if make_project else None
    if make_project:
        writable_project(project_dir)
    try:
        cache = cache_dir()  # before the solve, not blamed on the project after it
        try:
            prefer = _earlier_pins(project_dir, spec) if keep_pins and hold is None and not spec.toolchain_only else {}
            results, pypi, warnings, undated = _solve(spec, anchor, plan, settings, hold, move, warnings, prefer)
            spec = replace(spec, undated_indexes=undated) if not spec.toolchain_only else spec
        finally:  # what rattler and uv wrote into a group-shared cache, readable by its other users (failed or not)
            from envlock.seams.fs import share_with_group

            share_with_group(cache, cache / "repodata", cache / "uv")
    except BaseException:
        if made is not None:  # a failed first resolve leaves no empty project dir behind
            _remove_empty(project_dir, made)
        raise
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if timestamp else None
    files = render_files(project_dir, spec, plan, results, timestamp=stamp, pypi=pypi)
    return Solved(spec, anchor, plan, tuple(results), dict(pypi), tuple(files), warnings)


def _missing_top(path: Path) -> Path | None:
    """The topmost folder of `path` that does not exist yet (None when `path` exists)."""
    top = None
    for p in (path, *path.absolute().parents):
        if p.exists():
            break
        top = p
    return top


def _remove_empty(path: Path, top: Path) -> None:
    """Remove `path` and its parents up to `top` while they are empty (what writable_project made)."""
    for p in (path.absolute(), *path.absolute().parents):
        try:
            p.rmdir()
        except OSError:
            return
        if p == top.absolute():
            return


def _earlier_pins(project_dir: Path, spec: EnvSpec) -> dict[str, tuple[PypiPackage, ...]]:
    """The PyPI pins of the spec's lock as it stands (none where there is no readable one)."""
    from envlock.errors import EnvlockError
    from envlock.formats import read_lock
    from envlock.project.layout import lock_path

    path = lock_path(project_dir, spec.name)
    if not path.is_file():
        return {}
    try:
        lock = read_lock(path)
    except (EnvlockError, OSError):
        return {}
    return {p: tuple(lock.pypi_for(p)) for p in spec.platforms}


def _solve(spec: EnvSpec, anchor: Anchor, plan: Plan, settings: SolveSettings, hold: LockFile | None,
           move: frozenset[str], warnings: tuple[str, ...], prefer: Mapping[str, Sequence[PypiPackage]],
           ) -> tuple[Any, dict[str, Any], tuple[str, ...], tuple[str, ...]]:
    """The solve itself: the conda part, and the PyPI part of a full env (and the indexes without upload times)."""
    options = solve_options(settings, spec.exclude_newer, spec.channels)

    def conda_part(plan: Plan, *, locked: Any, optional: tuple[str, ...]) -> list[PlatformResult]:
        # The solver's module brings rattler and asyncio (~40-60 ms of import): a full env's uv is already running.
        from envlock.seams.conda.solve import RattlerSolver

        return RattlerSolver(options).solve(plan, locked=locked, optional=optional)

    locked = {p: [q for q in hold.packages_for(p) if q.name not in move] for p in spec.platforms} if hold else None
    pypi: dict[str, tuple[PypiPackage, ...]] = {}
    undated: tuple[str, ...] = ()
    if spec.toolchain_only:
        results = conda_part(plan, locked=locked, optional=("ninja",))
    else:
        from envlock.usecases.pypi_lock import lock_pypi_part

        held = {p: [w for w in hold.pypi_for(p) if w.name not in move] for p in spec.platforms} if hold else None
        upgrade = sorted(move & {w.name for w in hold.pypi}) if hold else []
        results, part = lock_pypi_part(spec, anchor, conda_part, plan, mirrors=settings.mirrors, offline=settings.offline,
                                       locked=locked, pypi_locked=held, upgrade=upgrade, prefer=prefer,
                                       allow_insecure=settings.allow_insecure)
        pypi = part.packages
        warnings += part.warnings
        undated = part.undated
    return results, pypi, warnings, undated


def write(project_dir: Path, solved: Solved) -> tuple[list[Path], list[Path]]:
    """Write a solve's files under the environment's file lock: (the paths whose bytes changed, the earlier
    lock's files it removed)."""
    from envlock.seams.dirs import cache_location
    from envlock.project import write_files

    return write_files(project_dir, solved.spec.name, solved.files, cache_location().path / "file-locks")

