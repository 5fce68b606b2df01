"""`envlock resolve`: a request (the command line's options) -> anchor -> spec -> the one solve -> files.

No printing here: the command adapter renders the ResolveResult.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock.core import anchor as anchors
from envlock.core.rules import torch_skew
from envlock.errors import EnvlockError, UsageError
from envlock.envname import validate_name
from envlock.formats.spec import EnvSpec, normalise_with, read_cutoff, read_spec
from envlock.models import Anchor, Plan, PlatformResult, PypiPackage
from envlock.names import strip_credentials
from envlock.project import anchor_json, rel, spec_path
from envlock.usecases.resolve.asked import Asked, of_request
from envlock.usecases.resolve.solve import (
    SolveSettings,
    Tables,
    check_mirrors,
    default_python,
    shipped_tables,
    solve,
    sources,
    write,
)


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

    def read(self) -> Asked:
        """Its inputs read (envlock.usecases.resolve.asked.of_request): the one place they are parsed."""
        return of_request(self.torch, cuda=self.cuda, torch_source=self.torch_source, platforms=self.platforms,
                          channels=self.channels)


@dataclass(frozen=True)
class ResolveResult:
    anchor: Anchor
    plan: Plan
    spec: EnvSpec
    results: tuple[PlatformResult, ...] = ()
    files: tuple[Path, ...] = ()
    written: tuple[Path, ...] = ()  # the subset whose bytes changed
    removed: tuple[Path, ...] = ()  # files of the earlier lock that this one no longer has
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
                "torch_cuda": self.anchor.own_cuda,  # the CUDA torch was built with, and nvcc's distance from it
                "torch_skew": torch_skew(self.anchor.own_cuda, cand.cuda),
                "nvcc": res.nvcc if res else None,
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
                "files": [rel(f, project_dir) for f in self.files if pp.platform in f.name],
                "pypi": [{"name": w.name, "version": w.version} for w in self.pypi.get(pp.platform, ())],
            }
        return {
            "envlock_result_version": 1,
            "name": self.spec.name,
            "dry_run": self.dry_run,
            "anchor": {**anchor_json(self.anchor), "torch_cuda": self.anchor.own_cuda},
            "toolchain_only": self.spec.toolchain_only,
            "exclude_newer": self.spec.exclude_newer,
            "rules_version": self.plan.rules_version,
            "with": list(self.spec.with_extras),
            "platforms": platforms,
            "files": [rel(f, project_dir) for f in self.files],
            "removed": [rel(f, project_dir) for f in self.removed],
            "warnings": list(self.warnings),
        }


def existing_cutoff(project_dir: Path, name: str) -> str | None:
    """The resolution cutoff an existing spec of that name holds (None: none, or unreadable)."""
    path = spec_path(project_dir, name)
    if not path.is_file():
        return None
    try:
        return read_spec(path).exclude_newer
    except EnvlockError:
        return None


def spec_from_request(req: ResolveRequest, anchor: Anchor, asked: Asked) -> EnvSpec:
    """The spec a resolve writes: the request's inputs as read (`asked`), the rest of its options as given."""
    name = validate_name(req.name) if req.name else anchor.env_name
    if req.toolchain_only and (req.python or req.pip):
        raise UsageError(
            "--toolchain-only locks no python and no PyPI part, so --python/--pip have nothing to act on",
            hint="drop --python/--pip, or drop --toolchain-only for the full environment",
        )
    return EnvSpec(
        name=name,
        torch=anchor.torch if asked.torch.installed else asked.torch.text,
        torch_source=asked.torch_source,
        cuda=req.cuda,  # as written (the spec records the user's words; `asked.cuda` is its reading)
        python=None if req.toolchain_only else (req.python or default_python(anchor.torch)),
        platforms=asked.platforms,
        channels=asked.channel_names,
        glibc=req.glibc,
        cudnn=req.cudnn,
        dependencies=tuple(req.extra_specs),
        pip=tuple(req.pip),
        toolchain_only=req.toolchain_only,
        # Same spec again: same cutoff (what makes a re-resolve byte-identical); a new spec: now.
        exclude_newer=(read_cutoff(req.exclude_newer, "--exclude-newer") if req.exclude_newer else None)
        or existing_cutoff(req.project_dir, name),
        with_extras=normalise_with(req.with_extras),
    )


def resolve(req: ResolveRequest, *, tables: Tables | None = None, asked: Asked | None = None) -> ResolveResult:
    """`envlock resolve`: anchor -> plan -> solve -> write (or plan only with dry_run). `asked`: the request's
    inputs as the command adapter read them (`req.read()`); read here only when the caller did not."""
    asked = asked or req.read()
    tables = tables or shipped_tables()
    settings = SolveSettings(req.mirrors, req.offline, req.allow_insecure)
    if asked.torch_source == "conda-forge" and not req.dry_run:
        # The anchor asks the channel before there is a plan: a typo'd mirror must not send that to the network.
        check_mirrors(req.mirrors, list(asked.channel_names), label=asked.label, torch_source=asked.torch_source,
                      toolchain_only=req.toolchain_only, tables=tables)
    from envlock import progress

    progress.report("torch", f"finding the CUDA torch {asked.torch.text} was built for")
    try:
        cache_only = "--offline" if req.offline else "--dry-run" if req.dry_run else False  # the option that says so
        found = sources(asked, settings, python_exe=req.python_exe, index_offline=cache_only, channel=not req.dry_run)
        anchor = anchors.derive(asked.torch, cuda=asked.cuda, torch_source=asked.torch_source, table=tables.torch,
                                sources=found)
    finally:
        progress.done("torch")
    spec = spec_from_request(req, anchor, asked)
    solved = solve(spec, anchor, project_dir=req.project_dir, settings=settings, tables=tables, dry_run=req.dry_run,
                   timestamp=req.timestamp)
    written, removed = ((), ()) if req.dry_run else write(req.project_dir, solved)
    return ResolveResult(
        anchor=anchor,
        plan=solved.plan,
        spec=solved.spec,
        results=solved.results,
        files=tuple(p for p, _ in solved.files),
        written=tuple(written),
        removed=tuple(removed),
        dry_run=req.dry_run,
        warnings=solved.warnings,
        pypi=solved.pypi,
    )
