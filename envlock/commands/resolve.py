"""`envlock resolve` (adapter: options → ResolveRequest → resolve() → render)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer


if TYPE_CHECKING:
    from envlock.mirrors import MirrorMap
    from envlock.resolve import ResolveResult


def parse_mirrors(values: list[str], project_dir: Path = Path(".")) -> MirrorMap:
    """`--mirror NAME=URL` entries over ENVLOCK_MIRRORS and the envlock.toml files (envlock/config.py)."""
    from envlock.config import mirrors_in_force

    return mirrors_in_force(values, project_dir)


def resolve_cmd(
    torch: str = typer.Option(..., "--torch", help="torch version (2.3.0, 2.3.0+cu118) or 'installed'."),
    cuda: Optional[str] = typer.Option(None, "--cuda", help="Override the CUDA anchor (X.Y)."),
    torch_source: str = typer.Option("pip", "--torch-source", help="Where torch comes from: pip or conda-forge."),
    python: Optional[str] = typer.Option(None, "--python", help="Python X.Y for the env (default 3.11)."),
    platform: list[str] = typer.Option([], "--platform", help="Platform to lock (repeatable)."),
    channel: list[str] = typer.Option([], "--channel", help="Channel name or URL (repeatable)."),
    mirror: list[str] = typer.Option(
        [], "--mirror", help="NAME=URL or NAME=PATH: fetch channel NAME (and its labels) from there; the lock keeps "
        "canonical URLs. Adds to ENVLOCK_MIRRORS and envlock.toml (see `envlock config`)."
    ),
    offline: bool = typer.Option(False, "--offline", help="Use only the cache."),
    name: Optional[str] = typer.Option(None, "--name", help="Environment name (default torch<ver>-cu<XY>)."),
    project_dir: Path = typer.Option(Path("."), "--project-dir", help="Project directory (default: cwd)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Anchor and plan only: no solve, no network, no files."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable result on stdout (a failure's detail too)."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="On a failed solve, print every attempt in full (what the solver said)."
    ),
    timestamp: bool = typer.Option(False, "--timestamp", help="Record the creation time in the lock."),
    python_exe: Optional[str] = typer.Option(None, "--python-exe", help="Python whose torch `installed` means."),
    allow_insecure: bool = typer.Option(False, "--allow-insecure", help="Allow plain-http channels."),
    toolchain_only: bool = typer.Option(
        False, "--toolchain-only", help="Only the conda toolchain: no python, no torch (beside a torch you have)."
    ),
    pip: list[str] = typer.Option([], "--pip", help="A PyPI requirement for the env's `- pip:` list (repeatable)."),
    exclude_newer: Optional[str] = typer.Option(
        None, "--exclude-newer", help="Resolution cutoff (ISO UTC; default: the spec's, else now)."
    ),
    with_: list[str] = typer.Option(
        [], "--with", help="Add a group of CUDA headers (repeatable): curand, profiler-api, cufft, nvrtc, nvtx, "
        "cufile, nvml, cupti, nvjitlink, npp, nvjpeg, or the bundles deepspeed, all."
    ),
) -> int:
    """Anchor on torch's CUDA, plan the toolchain, solve every platform and write spec + locks."""
    from envlock.resolve import ResolveRequest, resolve

    req = ResolveRequest(
        torch=torch.strip(),
        cuda=cuda,
        torch_source=torch_source,
        python=python,
        platforms=tuple(platform),
        channels=tuple(channel),
        mirrors=parse_mirrors(mirror, project_dir),
        offline=offline,
        name=name,
        project_dir=project_dir,
        dry_run=dry_run,
        timestamp=timestamp,
        python_exe=python_exe,
        allow_insecure=allow_insecure,
        toolchain_only=toolchain_only,
        pip=tuple(pip),
        exclude_newer=exclude_newer,
        with_extras=tuple(with_),
    )
    result = resolve(req)
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(project_dir), indent=2, sort_keys=True) + "\n")
    else:
        render_summary(result, project_dir)
    return 0


def render_summary(result: ResolveResult, project_dir: Path) -> None:
    """The terminal summary: anchor → per platform choice and why → files."""
    from rich.console import Console
    from rich.table import Table

    from envlock.resolve import nvcc_version

    console = Console(highlight=False, soft_wrap=True, no_color="NO_COLOR" in os.environ)
    a = result.anchor
    cudnn = f", cuDNN {a.cudnn}" if a.cudnn else ""
    console.print(f"torch {a.torch} → CUDA {a.cuda}{cudnn}  [dim]({a.detail})[/dim]")
    by_platform = {r.platform: r for r in result.results}
    table = Table(show_edge=False, pad_edge=False)
    for col in ("platform", "CUDA", "nvcc", "gcc ≤", "cuDNN", "packages", "PyPI", "why"):
        table.add_column(col)
    for pp in result.plan.platforms:
        res = by_platform.get(pp.platform)
        cand = res.chosen if res else pp.candidates[0]
        if cand.skew == "exact":
            why = "exact minor"
        else:
            missed = "; ".join(f"{c}: {e[:90]}" for c, e in (res.attempts if res else ()))
            why = f"{cand.skew}" + (f" ({missed})" if missed else "")
        if res is None:
            tried = " → ".join(c.cuda for c in pp.candidates)
            why = f"plan only; would try {tried}"
        table.add_row(
            pp.platform,
            cand.cuda,
            (nvcc_version(res) if res else None) or "-",
            str(cand.gcc_max) if cand.gcc_max else "msvc",
            ((res.version_of("cudnn") if res else None) or cand.cudnn or "-"),
            str(len(res.packages)) if res else "-",
            _pypi_cell(result, pp.platform),
            why,
        )
    console.print(table)
    notes = {n for pp in result.plan.platforms for c in pp.candidates[:1] for n in (*c.notes, *c.complaints)}
    for r in result.results:
        notes.update((*r.chosen.notes, *r.chosen.complaints))
    for note in sorted(notes):
        console.print(f"[yellow]note:[/yellow] {note}")
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if result.dry_run:
        console.print("dry run: nothing solved, nothing written")
        return
    mode = "toolchain only (no python, no PyPI part)" if result.spec.toolchain_only else "full environment"
    console.print(f"{mode}; resolution cutoff {result.spec.exclude_newer} (envlock.exclude_newer)")
    changed = set(result.written)
    for f in result.files:
        state = "wrote" if f in changed else "unchanged"
        try:
            shown = f.resolve().relative_to(project_dir.resolve())
        except ValueError:
            shown = f
        console.print(f"{state} {shown}")


def _pypi_cell(result: ResolveResult, platform: str) -> str:
    """`torch 2.7.1 +24` for the platform's PyPI part ('-' when there is none)."""
    wheels = result.pypi.get(platform, ())
    if not wheels:
        return "-"
    torch = next((w.version for w in wheels if w.name == "torch"), None)
    return (f"torch {torch} +{len(wheels) - 1}" if torch else f"{len(wheels)} wheels")


def register(app: typer.Typer) -> None:
    """Add `resolve` to the app."""
    app.command("resolve")(resolve_cmd)
