"""`envlock resolve` (adapter: options → ResolveRequest → resolve() → render)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

# Parameters are declared with opt()/arg() (typer.Option/Argument's arguments), never typer's own objects:
# a plain command line runs this module without importing typer (envlock/commands/fastargs.py).
from envlock.commands.fastargs import opt, typer_command

if TYPE_CHECKING:
    import typer

    from envlock.mirrors import MirrorMap
    from envlock.resolve import ResolveResult


def parse_mirrors(values: list[str], project_dir: Path = Path(".")) -> MirrorMap:
    """`--mirror NAME=URL` entries over ENVLOCK_MIRRORS and the envlock.toml files (envlock/config.py)."""
    from envlock.config import mirrors_in_force

    return mirrors_in_force(values, project_dir)


def resolve_cmd(
    torch: str = opt(..., "--torch", help="torch version (2.3.0, 2.3.0+cu118) or 'installed'."),
    cuda: Optional[str] = opt(None, "--cuda", help="Override the CUDA anchor (X.Y)."),
    torch_source: str = opt("pip", "--torch-source", help="Where torch comes from: pip or conda-forge."),
    python: Optional[str] = opt(None, "--python", help="Python X.Y for the env (default 3.11)."),
    platform: list[str] = opt([], "--platform", help="Platform to lock (repeatable)."),
    channel: list[str] = opt([], "--channel", help="Channel name or URL (repeatable)."),
    mirror: list[str] = opt(
        [], "--mirror", help="NAME=URL or NAME=PATH: fetch channel NAME (and its labels) from there; the lock keeps "
        "canonical URLs. Adds to ENVLOCK_MIRRORS and envlock.toml (see `envlock config`)."
    ),
    offline: bool = opt(False, "--offline", help="Use only the cache."),
    name: Optional[str] = opt(None, "--name", help="Environment name (default torch<ver>-cu<XY>)."),
    project_dir: Path = opt(Path("."), "--project-dir", help="Project directory (default: cwd)."),
    dry_run: bool = opt(False, "--dry-run", help="Anchor and plan only: no solve, no network, no files."),
    as_json: bool = opt(False, "--json", help="Machine-readable result on stdout (a failure's detail too)."),
    verbose: bool = opt(
        False, "--verbose", "-v", help="On a failed solve, print every attempt in full (what the solver said)."
    ),
    timestamp: bool = opt(False, "--timestamp", help="Record the creation time in the lock."),
    python_exe: Optional[str] = opt(None, "--python-exe", help="Python whose torch `installed` means."),
    allow_insecure: bool = opt(False, "--allow-insecure", help="Allow plain-http channels."),
    toolchain_only: bool = opt(
        False, "--toolchain-only", help="Only the conda toolchain: no python, no torch (beside a torch you have)."
    ),
    pip: list[str] = opt([], "--pip", help="A PyPI requirement for the env's `- pip:` list (repeatable)."),
    exclude_newer: Optional[str] = opt(
        None, "--exclude-newer", help="Resolution cutoff (ISO UTC; default: the spec's, else now)."
    ),
    with_: list[str] = opt(
        [], "--with", help="Add a group of CUDA headers (repeatable): curand, profiler-api, cufft, nvrtc, nvtx, "
        "cufile, nvml, cupti, nvjitlink, npp, nvjpeg, or the bundles deepspeed, all."
    ),
    for_: list[str] = opt(
        [], "--for", help="Add the --with groups these sources need (repeatable): a source folder, an sdist or "
        "wheel, an installed package, or deepspeed (see `envlock doctor --for`)."
    ),
) -> int:
    """Anchor on torch's CUDA, plan the toolchain, solve every platform and write spec + locks."""
    from envlock.resolve import ResolveRequest, resolve

    if for_:  # the spec records the groups, not the sources: `envlock lock` re-locks without them
        from envlock.sources.load import groups_for

        found, lines = groups_for(for_, python_exe)
        for line in lines:
            sys.stderr.write(f"envlock: {line}\n")
        with_ = [*with_, *(g for g in found if g not in with_)]

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
    from envlock.progress import reporting, wanted

    with reporting(wanted(as_json=as_json)):  # status lines on a terminal only
        result = resolve(req)
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(project_dir), indent=2, sort_keys=True) + "\n")
    else:
        render_summary(result, project_dir)
    return 0


def render_summary(result: ResolveResult, project_dir: Path) -> None:
    """The terminal summary: anchor → per platform choice → why → files (envlock/commands/summary.py)."""
    from envlock.commands.summary import PlainConsole, render, width

    if not sys.stdout.isatty() and "FORCE_COLOR" not in os.environ:
        render(result, project_dir, PlainConsole())  # a pipe or a CI log: no styles, so no rich to import
        return
    from rich.console import Console

    render(result, project_dir, Console(highlight=False, width=width(), no_color="NO_COLOR" in os.environ))


#: The command a plain `envlock resolve ...` line runs without typer (envlock/commands/fastargs.py).
FAST = {"resolve": resolve_cmd}


def register(app: typer.Typer) -> None:
    """Add `resolve` to the app."""
    app.command("resolve")(typer_command(resolve_cmd))
