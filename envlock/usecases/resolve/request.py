"""`envlock resolve`: a request (the command line's options) -> anchor -> spec -> the one solve -> files.

No printing here: the command adapter renders the ResolveResult.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock.core import anchor as anchors
from envlock.models import default_platform
from envlock.errors import AnchorError, EnvlockError, SpecError, UsageError
from envlock.formats.spec import (
    EnvSpec,
    check_torch_source,
    normalise_with,
    read_cutoff,
    read_spec,
    validate_name,
)
from envlock.models import KNOWN_SUBDIRS, Anchor, Plan, PlatformResult, PypiPackage
from envlock.names import strip_credentials
from envlock.project import anchor_json, rel, spec_path
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
            "anchor": anchor_json(self.anchor),
            "toolchain_only": self.spec.toolchain_only,
            "exclude_newer": self.spec.exclude_newer,
            "rules_version": self.plan.rules_version,
            "with": list(self.spec.with_extras),
            "platforms": platforms,
            "files": [rel(f, project_dir) for f in self.files],
            "removed": [rel(f, project_dir) for f in self.removed],
            "warnings": list(self.warnings),
        }


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


def existing_cutoff(project_dir: Path, name: str) -> str | None:
    """The resolution cutoff an existing spec of that name holds (None: none, or unreadable)."""
    path = spec_path(project_dir, name)
    if not path.is_file():
        return None
    try:
        return read_spec(path).exclude_newer
    except EnvlockError:
        return None


def spec_from_request(req: ResolveRequest, anchor: Anchor, ask: anchors.TorchAsk) -> EnvSpec:
    platforms = check_platforms(req.platforms or (default_platform(),))
    name = validate_name(req.name) if req.name else anchor.env_name
    if req.toolchain_only and (req.python or req.pip):
        raise UsageError(
            "--toolchain-only locks no python and no PyPI part, so --python/--pip have nothing to act on",
            hint="drop --python/--pip, or drop --toolchain-only for the full environment",
        )
    return EnvSpec(
        name=name,
        torch=anchor.torch if ask.installed else ask.text,
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
        exclude_newer=(read_cutoff(req.exclude_newer, "--exclude-newer") if req.exclude_newer else None)
        or existing_cutoff(req.project_dir, name),
        with_extras=normalise_with(req.with_extras),
    )


def resolve(req: ResolveRequest, *, tables: Tables | None = None) -> ResolveResult:
    """`envlock resolve`: anchor -> plan -> solve -> write (or plan only with dry_run)."""
    source = check_torch_source(req.torch_source, "--torch-source", UsageError)
    check_platforms(req.platforms or (default_platform(),))
    tables = tables or shipped_tables()
    settings = SolveSettings(req.mirrors, req.offline, req.allow_insecure)
    if source == "conda-forge" and not req.dry_run:
        # The anchor asks the channel before there is a plan: a typo'd mirror must not send that to the network.
        check_mirrors(req.mirrors, list(req.channels or ("conda-forge",)), label=req.torch.partition("+")[2] or None,
                      torch_source=source, toolchain_only=req.toolchain_only, tables=tables)
    from envlock import progress

    progress.report("torch", f"finding the CUDA torch {req.torch} was built for")
    try:
        cuda = anchors.parse_cuda(req.cuda) if req.cuda is not None else None
        ask = anchors.read_torch(req.torch)
        found = sources(ask, source, req.channels, settings, python_exe=req.python_exe,
                        index_offline=req.offline or req.dry_run, channel=not req.dry_run)
        anchor = anchors.derive(ask, cuda=cuda, torch_source=source, table=tables.torch, sources=found)
    finally:
        progress.done("torch")
    spec = spec_from_request(req, anchor, ask)
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
