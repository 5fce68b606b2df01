"""Orchestration of `envlock resolve` / `envlock lock`: spec → anchor → plan → solve → files.

No printing here: the command adapter renders the ResolveResult.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envlock import __version__
from envlock.errors import AnchorError, EnvlockError, SpecError, UsageError
from envlock.lockfile import (
    LOCK_FORMAT,
    META_PREFIX,
    canonical_json,
    content_hash,
    package_section_digest,
    packages_fingerprint,
    render_conda_lock,
    render_explicit,
    render_package_section,
    strip_credentials,
)
from envlock.config import default_platform
from envlock.fs import write_all_atomic
from envlock.models import KNOWN_SUBDIRS, Anchor, Candidate, LockedPackage, Plan, PlanOptions, PlatformResult, PypiPackage
from envlock.rules import make_plan
from envlock.spec import EnvSpec, normalise_with, render_spec, validate_name

#: Packages the plan itself asks for; any other dependency in a spec is the user's extra.
PLAN_NAMES = frozenset(
    {
        "cuda-version", "cuda-nvcc", "cuda-cudart-dev", "cuda-cccl", "libcusparse-dev", "libcublas-dev",
        "libcusolver-dev", "libcurand-dev", "cudatoolkit-dev", "cudnn", "python", "pytorch", "gcc_linux-64", "gxx_linux-64",
        "gcc_linux-aarch64", "gxx_linux-aarch64", "vs2019_win-64", "vs2022_win-64",
    }
)  # fmt: skip
MACOS = ("osx-64", "osx-arm64")


@dataclass(frozen=True)
class ResolveRequest:
    """Everything `envlock resolve` was asked for."""

    torch: str
    cuda: str | None = None
    torch_source: str = "pip"
    python: str | None = None
    platforms: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    mirrors: Mapping[str, str] = field(default_factory=dict)
    offline: bool = False
    name: str | None = None
    project_dir: Path = Path(".")
    dry_run: bool = False
    timestamp: bool = False
    python_exe: str | None = None
    allow_insecure: bool = False
    glibc: str = "2.28"
    cudnn: bool = True
    extra_specs: tuple[str, ...] = ()
    toolchain_only: bool = False  # no python, no PyPI part (beside a torch installed elsewhere)
    pip: tuple[str, ...] = ()  # the user's PyPI requirements (`--pip`)
    exclude_newer: str | None = None  # the resolution cutoff (default: the existing spec's, else now)
    with_extras: tuple[str, ...] = ()  # --with NAME (data/extras.yaml)


@dataclass(frozen=True)
class ResolveResult:
    anchor: Anchor
    plan: Plan
    spec: EnvSpec
    results: tuple[PlatformResult, ...] = ()
    files: tuple[Path, ...] = ()
    written: tuple[Path, ...] = ()  # the subset whose bytes changed
    dry_run: bool = False
    warnings: tuple[str, ...] = ()
    pypi: dict[str, tuple[PypiPackage, ...]] = field(default_factory=dict)

    def to_json(self, project_dir: Path) -> dict[str, Any]:
        """The stable --json shape (see README)."""
        by_platform = {r.platform: r for r in self.results}
        platforms: dict[str, Any] = {}
        for pp in self.plan.platforms:
            res = by_platform.get(pp.platform)
            cand = res.chosen if res else pp.candidates[0]
            platforms[pp.platform] = {
                "cuda": cand.cuda,
                "skew": cand.skew,
                "nvcc": nvcc_version(res) if res else None,
                "gcc_max": cand.gcc_max,
                "cudnn": (res.version_of("cudnn") if res else None) or cand.cudnn,
                "specs": list(cand.specs),
                "channels": [strip_credentials(c) for c in cand.channels],
                "virtual_packages": [str(v) for v in cand.virtual_packages],
                "packages": len(res.packages) if res else None,
                "attempts": [{"cuda": c, "error": e} for c, e in (res.attempts if res else ())],
                "candidates": [{"cuda": c.cuda, "skew": c.skew} for c in pp.candidates],
                "notes": list(cand.notes),
                "complaints": list(cand.complaints),
                "extras": [{"with": label, "spec": spec} for label, spec in cand.extras],
                "files": [_rel(f, project_dir) for f in self.files if pp.platform in f.name],
                "pypi": [{"name": w.name, "version": w.version} for w in self.pypi.get(pp.platform, ())],
            }
        return {
            "envlock_result_version": 1,
            "name": self.spec.name,
            "dry_run": self.dry_run,
            "anchor": anchor_json(self.anchor),
            "toolchain_only": self.spec.toolchain_only,
            "exclude_newer": self.spec.exclude_newer,
            "rules_version": self.plan.rules_version,
            "with": list(self.spec.with_extras),
            "platforms": platforms,
            "files": [_rel(f, project_dir) for f in self.files],
            "warnings": list(self.warnings),
        }


def _rel(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def anchor_json(anchor: Anchor) -> dict[str, Any]:
    return {
        "torch": anchor.torch,
        "cuda": anchor.cuda,
        "cudnn": anchor.cudnn,
        "source": anchor.source,
        "detail": anchor.detail,
        "torch_source": anchor.torch_source,
        "local_label": anchor.local_label,
    }


def nvcc_version(result: PlatformResult) -> str | None:
    return result.version_of("cuda-nvcc") or result.version_of("cudatoolkit-dev")


def check_platforms(platforms: Sequence[str]) -> tuple[str, ...]:
    """Validate --platform values; macOS and unknown subdirs are refused."""
    out: list[str] = []
    for p in platforms:
        if p in MACOS:
            raise AnchorError(
                f"{p}: torch on macOS has no CUDA, so there is no CUDA toolchain to lock",
                hint="lock linux-64, linux-aarch64 or win-64 (e.g. --platform linux-64)",
            )
        if p not in KNOWN_SUBDIRS or p == "linux-ppc64le":
            raise SpecError(
                f"unknown or unsupported platform {p!r}",
                hint="use linux-64, linux-aarch64 or win-64",
            )
        if p not in out:
            out.append(p)
    return tuple(out)


def default_python(torch: str) -> str:
    """A python every torch release of that line supports (1.13 predates 3.11 wheels)."""
    return "3.10" if torch.startswith("1.") else "3.11"


# --------------------------------------------------------------------------- anchor


def find_anchor(
    torch: str,
    *,
    cuda: str | None,
    torch_source: str,
    python_exe: str | None,
    offline: bool,
    lookup: Callable[[str], list[tuple[str, str]]] | None,
) -> Anchor:
    """Ask envlock.anchor (imported lazily: it may reach the network)."""
    from envlock import anchor as anchor_mod

    req = anchor_mod.AnchorRequest(
        torch=torch,
        cuda=cuda,
        torch_source=torch_source,  # type: ignore[arg-type]
        python_exe=python_exe,
        offline=offline,
        conda_forge_lookup=lookup,
    )
    return anchor_mod.resolve_anchor(req)


def default_name(anchor: Anchor) -> str:
    from envlock import anchor as anchor_mod

    return anchor_mod.default_env_name(anchor)


# --------------------------------------------------------------------------- plan


def plan_names(spec: EnvSpec) -> frozenset[str]:
    """Package names the plan makes for this spec: the toolchain's and those of its `with:` extras."""
    if not spec.with_extras:
        return PLAN_NAMES
    from envlock.rules import expand_extras
    from envlock.tables import extras_tables

    table = extras_tables()
    try:
        picked = expand_extras(spec.with_extras, table)
    except EnvlockError:
        return PLAN_NAMES  # make_plan reports the unknown name
    names = {_spec_name(s) for _, e, _ in picked for specs in table.extras[e].packages.values() for s in specs}
    return PLAN_NAMES | names


def plan_for(spec: EnvSpec, anchor: Anchor) -> tuple[Plan, tuple[str, ...]]:
    """The plan for a spec, and the user's extra dependencies (those the plan does not make)."""
    names = plan_names(spec)
    extras = tuple(d for d in spec.dependencies if _spec_name(d) not in names)
    options = PlanOptions(
        platforms=spec.platforms,
        python=None if spec.toolchain_only else spec.python,
        channels=spec.channels,
        glibc=spec.glibc,
        with_cudnn=spec.cudnn,
        extra_specs=extras,
        with_extras=spec.with_extras,
    )
    return make_plan(anchor, options), extras


def ignored_toolchain_lines(spec: EnvSpec, plan: Plan) -> tuple[str, ...]:
    """Spec dependencies on toolchain names that the plan replaces (hand edits envlock overrides)."""
    generated = {s.strip() for pp in plan.platforms for c in pp.candidates for s in c.specs}
    names = plan_names(spec)
    return tuple(d for d in spec.dependencies if _spec_name(d) in names and d.strip() not in generated)


def _spec_name(spec: str) -> str:
    name = spec.strip().split()[0] if spec.strip() else ""
    for ch in "=<>!~[":
        name = name.split(ch)[0]
    return name.split("::")[-1]


def candidate_json(c: Candidate) -> dict[str, Any]:
    return {
        "cuda": c.cuda,
        "skew": c.skew,
        # Sorted: a solve does not depend on the order of its specs, so neither does the hash
        # (reordering the spec's extra dependencies must not make a lock stale).
        "specs": sorted(c.specs),
        "channels": [strip_credentials(x) for x in c.channels],
        "virtual_packages": [str(v) for v in c.virtual_packages],
    }


def hash_inputs(spec: EnvSpec, plan: Plan, platform: str, extras: Sequence[str]) -> dict[str, Any]:
    """Normalised inputs of one platform: what a lock's content_hash covers.

    The plan's candidates stand for the rule tables: a rules change that changes a plan changes the
    hash, one that does not, does not. Paths, the machine, mirrors and YAML layout never enter.
    """
    pp = next(p for p in plan.platforms if p.platform == platform)
    pip: list[str] = []
    if not spec.toolchain_only:
        from envlock.pypi.part import pip_requirements

        pip = sorted(pip_requirements(spec.pip, spec.torch, spec.torch_source)[0])
    return {
        "pip": pip,
        "platform": platform,
        "inputs": spec.inputs(),
        "channels": [strip_credentials(c) for c in spec.channels],
        "platforms": sorted(spec.platforms),
        "extras": sorted(extras),
        "anchor": {"torch": plan.anchor.torch, "cuda": plan.anchor.cuda, "cudnn": plan.anchor.cudnn},
        "candidates": [candidate_json(c) for c in pp.candidates],
    }


def content_hashes(spec: EnvSpec, plan: Plan, extras: Sequence[str]) -> dict[str, str]:
    return {p: content_hash(hash_inputs(spec, plan, p, extras)) for p in spec.platforms}


# --------------------------------------------------------------------------- write


def lock_dir(project_dir: Path, name: str) -> Path:
    return project_dir / "locks" / name


def spec_path(project_dir: Path, name: str) -> Path:
    return project_dir / "environments" / f"{name}.yml"


def custom_metadata(
    spec: EnvSpec, plan: Plan, results: Sequence[PlatformResult], pypi: Mapping[str, Sequence[PypiPackage]]
) -> dict[str, str]:
    meta = {
        f"{META_PREFIX}version": __version__,
        f"{META_PREFIX}lock_format": str(LOCK_FORMAT),
        f"{META_PREFIX}rules_version": plan.rules_version,
        f"{META_PREFIX}env_name": spec.name,
        f"{META_PREFIX}spec": f"environments/{spec.name}.yml",
        f"{META_PREFIX}anchor": json.dumps(anchor_json(plan.anchor), sort_keys=True),
    }
    for res in results:
        c = res.chosen
        meta[f"{META_PREFIX}plan.{res.platform}"] = json.dumps(
            {
                "cuda": c.cuda,
                "skew": c.skew,
                "nvcc": nvcc_version(res),
                "gcc_max": c.gcc_max,
                "cudnn": res.version_of("cudnn"),
                "specs": list(c.specs),
                "virtual_packages": [str(v) for v in c.virtual_packages],
                "channels": [strip_credentials(x) for x in c.channels],
                "attempts": [{"cuda": a, "error": e} for a, e in res.attempts],
                "notes": list(c.notes),
                "complaints": list(c.complaints),
                **({"extras": [[label, spec] for label, spec in c.extras]} if c.extras else {}),
                "packages": len(res.packages),
            },
            sort_keys=True,
        )
        # What the content hash covered and what was installed: `envlock check` names what changed
        # from these and spots a hand-edited package list (envlock.lifecycle).
        meta[f"{META_PREFIX}inputs.{res.platform}"] = canonical_json(
            hash_inputs(spec, plan, res.platform, plan.options.extra_specs)
        )
        meta[f"{META_PREFIX}packages.{res.platform}"] = packages_fingerprint(res.packages)
        if res.platform in pypi:
            from envlock.lockfile import pypi_fingerprint

            meta[f"{META_PREFIX}pypi.{res.platform}"] = pypi_fingerprint(pypi[res.platform])
    return meta


def render_files(
    project_dir: Path,
    spec: EnvSpec,
    plan: Plan,
    extras: Sequence[str],
    results: Sequence[PlatformResult],
    *,
    timestamp: str | None = None,
    pypi: Mapping[str, Sequence[PypiPackage]] | None = None,
    extra_indexes: Sequence[str] = (),
) -> list[tuple[Path, str]]:
    """Every file a resolve writes, as (path, text), the authoritative conda-lock.yml last but one."""
    pypi = pypi or {}
    hashes = content_hashes(spec, plan, extras)
    packages: list[LockedPackage] = [p for r in results for p in r.packages]
    ldir = lock_dir(project_dir, spec.name)
    files: list[tuple[Path, str]] = []
    for res in results:
        files.append(
            (
                ldir / f"conda-{res.platform}.lock",
                render_explicit(packages=packages, platform=res.platform, content_hash_value=hashes[res.platform], env_name=spec.name),
            )
        )
    if pypi:
        from envlock.pypi.part import render_requirements

        for res in results:
            files.append(
                (
                    ldir / f"requirements-{res.platform}.txt",
                    render_requirements(pypi.get(res.platform, ()), platform=res.platform,
                                        content_hash_value=hashes[res.platform], env_name=spec.name,
                                        extra_indexes=extra_indexes),
                )
            )
    files.extend(_activation_files(ldir, spec, results))
    meta = custom_metadata(spec, plan, results, pypi)
    # The package section does not depend on the metadata: render it once, digest it, record the digest.
    wheels = [w for r in results for w in pypi.get(r.platform, ())]
    section = render_package_section(packages, spec.platforms, wheels)
    meta[f"{META_PREFIX}packages_digest"] = package_section_digest(section) or ""
    lock_text = render_conda_lock(
        packages=packages,
        platforms=spec.platforms,
        channels=_lock_channels(results, spec),
        content_hashes=hashes,
        # Relative to the lock file's folder, as conda-lock writes it (its install finds the spec from there).
        sources=[f"../../environments/{spec.name}.yml"],
        custom_metadata=meta,
        timestamp=timestamp,
        package_section=section,
    )
    files.append((ldir / "conda-lock.yml", lock_text))
    # The spec written is the spec solved: each platform's chosen candidate (a widened or dropped cuDNN,
    # a moved CUDA minor), so conda and conda-lock reading it ask for what the lock holds.
    per_platform = {res.platform: res.chosen.specs for res in results}
    toolchain = {p: [s for s in specs if s not in extras] for p, specs in per_platform.items()}
    pip: tuple[str, ...] = ()
    if not spec.toolchain_only:
        from envlock.pypi.part import pip_requirements

        pip = pip_requirements(spec.pip, spec.torch, spec.torch_source)[0]
    files.append(
        (spec_path(project_dir, spec.name), render_spec(spec, toolchain, extras, solved_notes(plan, results), pip))
    )
    return files


def solved_notes(plan: Plan, results: Sequence[PlatformResult]) -> list[str]:
    """Why a platform's spec lines differ from the plan's first choice (comments in the spec)."""
    first = {pp.platform: pp.candidates[0] for pp in plan.platforms}
    out = []
    for res in results:
        planned, chosen = first[res.platform], res.chosen
        if chosen.specs == planned.specs:
            continue
        why = [n for n in chosen.notes if n not in planned.notes]
        if chosen.cuda != planned.cuda:
            why.insert(0, f"CUDA {planned.cuda} did not solve: {chosen.cuda} ({chosen.skew}) was")
        out.append(f"{res.platform}: written as solved, not as first planned: " + "; ".join(why or ["see the lock"]))
    return out


def _lock_channels(results: Sequence[PlatformResult], spec: EnvSpec) -> list[str]:
    out: list[str] = []
    for res in results:
        for c in res.chosen.channels:
            if c not in out:
                out.append(c)
    return out or list(spec.channels)


def _activation_files(ldir: Path, spec: EnvSpec, results: Sequence[PlatformResult]) -> list[tuple[Path, str]]:
    """locks/<name>/activate.sh etc. (+ .ps1/.bat when win-64 is locked), rendered by envlock.activation."""
    from envlock.activation import ActivationSpec, render_scripts

    has_cudnn = any(r.version_of("cudnn") or r.version_of("libcudnn-dev") for r in results)
    scripts = render_scripts(
        ActivationSpec(
            platforms=tuple(r.platform for r in results),
            torch_source=spec.torch_source,  # type: ignore[arg-type]
            has_cudnn=has_cudnn,
        )
    )
    return [(ldir / name, text) for name, text in sorted(scripts.items())]


# --------------------------------------------------------------------------- entry points


def spec_from_request(req: ResolveRequest, anchor: Anchor) -> EnvSpec:
    platforms = check_platforms(req.platforms or (default_platform(),))
    name = validate_name(req.name) if req.name else default_name(anchor)
    if req.toolchain_only and (req.python or req.pip):
        raise UsageError(
            "--toolchain-only locks no python and no PyPI part, so --python/--pip have nothing to act on",
            hint="drop --python/--pip, or drop --toolchain-only for the full environment",
        )
    return EnvSpec(
        name=name,
        torch=req.torch if req.torch != "installed" else anchor.torch,
        torch_source=req.torch_source,
        cuda=req.cuda,
        python=None if req.toolchain_only else (req.python or default_python(anchor.torch)),
        platforms=platforms,
        channels=tuple(req.channels) or ("conda-forge",),
        glibc=req.glibc,
        cudnn=req.cudnn,
        dependencies=tuple(req.extra_specs),
        pip=tuple(req.pip),
        toolchain_only=req.toolchain_only,
        # Same spec again: same cutoff (what makes a re-resolve byte-identical); a new spec: now.
        exclude_newer=_given_cutoff(req.exclude_newer) or existing_cutoff(req.project_dir, name),
        with_extras=normalise_with(req.with_extras),
    )


def _given_cutoff(text: str | None) -> str | None:
    from envlock.spec import _cutoff

    return _cutoff(text, "--exclude-newer") if text else None


def existing_cutoff(project_dir: Path, name: str) -> str | None:
    """The resolution cutoff an existing spec of that name holds (None: none, or unreadable)."""
    from envlock.spec import read_spec

    path = spec_path(project_dir, name)
    if not path.is_file():
        return None
    try:
        return read_spec(path).exclude_newer
    except EnvlockError:
        return None


def now_cutoff() -> str:
    """The resolution cutoff of a first resolve, `update` and `lock --refresh`: now (UTC, whole seconds)."""
    import datetime

    from envlock.spec import format_cutoff

    return format_cutoff(datetime.datetime.now(datetime.timezone.utc))


def solve_options(req_mirrors: Mapping[str, str], offline: bool, allow_insecure: bool, exclude_newer: str | None = None):  # type: ignore[no-untyped-def]
    from envlock.conda.solve import SolveOptions
    from envlock.config import cache_dir as default_cache_dir

    return SolveOptions(
        cache_dir=default_cache_dir() / "repodata", mirrors=dict(req_mirrors), offline=offline, allow_insecure=allow_insecure,
        exclude_newer=exclude_newer,
    )


def resolve(req: ResolveRequest) -> ResolveResult:
    """`envlock resolve`: anchor → plan → solve → write (or plan only with dry_run)."""
    if req.torch_source not in ("pip", "conda-forge"):
        close = "conda-forge" if "conda" in req.torch_source.lower() else "pip"
        raise UsageError(
            f"--torch-source {req.torch_source!r} is not a torch source (pip or conda-forge)",
            hint=f"did you mean --torch-source {close}? pip: torch from the package index; "
            "conda-forge: conda-forge's pytorch builds",
        )
    check_platforms(req.platforms or (default_platform(),))
    lookup = None
    if req.torch_source == "conda-forge" and not req.dry_run:
        # The anchor asks the channel before there is a plan: a typo'd mirror must not send that to the network.
        check_mirrors(req.mirrors, list(req.channels or ("conda-forge",)), torch=req.torch,
                      torch_source=req.torch_source, toolchain_only=req.toolchain_only, before_plan=True)
        from envlock.conda.solve import conda_forge_pytorch_lookup

        channel = (req.channels or ("conda-forge",))[0]
        lookup = conda_forge_pytorch_lookup(solve_options(req.mirrors, req.offline, req.allow_insecure), channel)
    from envlock import progress

    progress.report("torch", f"finding the CUDA torch {req.torch} was built for")
    try:
        anchor = find_anchor(
            req.torch,
            cuda=req.cuda,
            torch_source=req.torch_source,
            python_exe=req.python_exe,
            offline=req.offline or req.dry_run,
            lookup=lookup,
        )
    finally:
        progress.done("torch")
    spec = spec_from_request(req, anchor)
    return lock_spec(
        spec,
        anchor,
        project_dir=req.project_dir,
        mirrors=req.mirrors,
        offline=req.offline,
        allow_insecure=req.allow_insecure,
        dry_run=req.dry_run,
        timestamp=req.timestamp,
    )


def anchor_warnings(spec: EnvSpec, anchor: Anchor) -> tuple[str, ...]:
    """Warnings about the torch side of the plan that the rules (pure, torch-agnostic) cannot give."""
    if spec.torch_source != "pip" or "linux-aarch64" not in spec.platforms:
        return ()
    from packaging.version import InvalidVersion, Version

    from envlock.anchor import load_torch_table

    try:
        row = load_torch_table().row_for(Version(anchor.torch))
    except InvalidVersion:
        return ()
    if row is not None and not row.aarch64_pypi_cuda:
        return (
            f"torch {anchor.torch}'s aarch64 wheels on PyPI are CPU-only (CUDA from 2.11): on linux-aarch64 "
            "install a CUDA torch from the PyTorch wheel index or use --torch-source conda-forge",
        )
    return ()


def lock_spec(
    spec: EnvSpec,
    anchor: Anchor,
    *,
    project_dir: Path,
    mirrors: Mapping[str, str] | None = None,
    offline: bool = False,
    allow_insecure: bool = False,
    dry_run: bool = False,
    timestamp: bool = False,
    locked: Mapping[str, Sequence[LockedPackage]] | None = None,
    pypi_locked: Mapping[str, Sequence[PypiPackage]] | None = None,
    upgrade: Sequence[str] = (),
) -> ResolveResult:
    """Plan, solve and write one spec (also used by `envlock lock`)."""
    spec = replace(spec, anchor={"cuda": anchor.cuda, "cudnn": anchor.cudnn, "source": anchor.source})
    if spec.exclude_newer is None and not dry_run:
        spec = replace(spec, exclude_newer=now_cutoff())  # the first resolve of a spec fixes its cutoff
    if not spec.toolchain_only and not spec.python:
        spec = replace(spec, python=default_python(anchor.torch))  # the PyPI part installs into that python
    if not spec.toolchain_only and spec.torch_source == "pip" and spec.python:
        from envlock.torch_support import check_python

        from envlock.anchor import python_span

        check_python(anchor.torch, spec.python, python_span(anchor.torch))  # torch's wheels for that python
    plan, extras = plan_for(spec, anchor)
    check_mirrors(mirrors or {}, sorted({c for pp in plan.platforms for cand in pp.candidates for c in cand.channels}),
                  torch=spec.torch, torch_source=spec.torch_source, toolchain_only=spec.toolchain_only)
    warnings = anchor_warnings(spec, anchor) + tuple(
        f"spec line {line!r} is replaced by the plan: toolchain packages follow the `envlock:` block "
        "(torch, cuda, python, cudnn), so edit that instead"
        for line in ignored_toolchain_lines(spec, plan)
    )
    if dry_run:
        return ResolveResult(anchor=anchor, plan=plan, spec=spec, dry_run=True, warnings=warnings)
    project_dir = _writable_project(project_dir)
    from envlock.conda.solve import RattlerSolver
    from envlock.config import cache_dir as default_cache_dir, ensure_writable

    ensure_writable(default_cache_dir())  # before the solve, not blamed on the project after it

    solver = RattlerSolver(solve_options(mirrors or {}, offline, allow_insecure, spec.exclude_newer))
    if spec.toolchain_only:
        results, pypi, extra_indexes = solver.solve(plan, locked=locked, optional=("ninja",)), {}, ()
    else:
        from envlock.pypi_lock import lock_pypi_part

        results, part = lock_pypi_part(spec, anchor, solver, plan, mirrors=mirrors or {}, offline=offline,
                                       locked=locked, pypi_locked=pypi_locked, upgrade=upgrade)
        pypi, extra_indexes = part.packages, part.extra_indexes
        warnings += part.warnings
    stamp = None
    if timestamp:
        import datetime

        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    files = render_files(project_dir, spec, plan, extras, results, timestamp=stamp, pypi=pypi,
                         extra_indexes=extra_indexes)
    try:
        with project_lock(project_dir, spec.name):
            written = write_all_atomic(files)
    except OSError as exc:
        where = exc.filename or project_dir
        raise SpecError(
            f"cannot write {where}: {exc.strerror or exc}",
            hint="check that environments/ and locks/ are writable directories, or pass --project-dir DIR",
        ) from None
    return ResolveResult(
        anchor=anchor,
        plan=plan,
        spec=spec,
        results=tuple(results),
        files=tuple(p for p, _ in files),
        written=tuple(written),
        warnings=warnings,
        pypi=dict(pypi),
    )


def check_mirrors(mirrors: Mapping[str, str], channels: Sequence[str], *, torch: str, torch_source: str,
                  toolchain_only: bool, before_plan: bool = False) -> None:
    """Refuse a `--mirror` that no channel in play uses (before a plan: any channel the CUDA table may add)."""
    from envlock.mirrors import check_in_play

    if before_plan:
        from envlock.tables import cuda_tables

        channels = [*channels, *(r.channel for r in cuda_tables().minors.values() if r.channel)]
    index = []
    label = torch.partition("+")[2]
    if not toolchain_only and label and torch_source == "pip":
        from envlock.pypi.part import variant_index_url

        index.append(variant_index_url(label))
    check_in_play(mirrors, channels, index, pypi=not toolchain_only)


def _writable_project(project_dir: Path) -> Path:
    import os

    if not project_dir.exists():
        try:
            project_dir.mkdir(parents=True)  # a new project: environments/ and locks/ go there
        except OSError as exc:
            raise SpecError(f"cannot create the project dir {project_dir}: {exc.strerror or exc}",
                            hint="pass --project-dir with a directory you can write") from None
    if not project_dir.is_dir():
        raise SpecError(f"project dir {project_dir} is not a directory", hint="pass --project-dir DIR")
    for sub in ("environments", "locks"):
        d = project_dir / sub
        target = d if d.exists() else project_dir
        if not os.access(target, os.W_OK | os.X_OK):
            raise SpecError(f"cannot write to {target}", hint="check its permissions, or pass --project-dir DIR")
    return project_dir


class project_lock:  # noqa: N801 - used as a context manager
    """An advisory file lock per environment: two writers of the same lock are serialised.

    The second waits, and after a second names the holder (envlock.fs).
    """

    def __init__(self, project_dir: Path, name: str) -> None:
        import hashlib

        from envlock.fs import FileLock
        from envlock.config import cache_dir as default_cache_dir

        # Kept in the cache dir, not in locks/: nothing envlock does should dirty the user's repo.
        key = hashlib.sha256(str(lock_dir(project_dir, name).resolve()).encode()).hexdigest()[:24]
        self.path = default_cache_dir() / "file-locks" / f"{name}-{key}.lock"
        self._lock = FileLock(self.path, f"the lock of {name} ({lock_dir(project_dir, name)})")
        # write_all_atomic's temp names: .<file>.<random>.tmp
        self._dirs = [(lock_dir(project_dir, name), ".*.tmp"), (project_dir / "environments", f".{name}.yml.*.tmp")]

    def __enter__(self) -> project_lock:
        self._lock.__enter__()
        # Temp files of a run killed mid-write (SIGKILL skips its cleanup); nobody else writes here now.
        from envlock.fs import remove_stale_temps

        remove_stale_temps(self._dirs)
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


def describe_error(exc: EnvlockError) -> str:
    return f"{exc.message} ({exc.hint})"
