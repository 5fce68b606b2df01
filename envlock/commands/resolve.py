"""`envlock resolve` (adapter: options → ResolveRequest → resolve() → render)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

# Parameters are declared with opt()/arg() (typer.Option/Argument's arguments), never typer's own objects:
# a plain command line runs this module without importing typer (envlock/commands/fastargs.py).
from envlock.commands import options
from envlock.commands.fastargs import opt, typer_command
from envlock.errors import EnvlockError, UsageError, again

if TYPE_CHECKING:
    import typer

    from envlock.seams.mirror_urls import MirrorMap
    from envlock.usecases.resolve import ResolveResult


def parse_mirrors(values: list[str], project_dir: Path = Path("."), *, solving: bool = False) -> MirrorMap:
    """`--mirror NAME=URL` entries over ENVLOCK_MIRRORS and the envlock.toml files (envlock/seams/config.py);
    `solving`: for resolve, lock and update (a mirror only the project's file names is not solved from)."""
    from envlock.seams.config import mirrors_in_force

    return mirrors_in_force(values, Path(project_dir), solving=solving)


def resolve_cmd(
    torch: str = opt(..., "--torch", metavar="VERSION", help="torch release (2.3.0, 2.3.0+cu118) or 'installed'."),
    cuda: Optional[str] = opt(None, "--cuda", metavar="X.Y", help="The toolchain's CUDA (default: the CUDA torch was built for; the skew is still measured from torch's, beyond ±1 a warning)."),
    torch_source: str = opt("pip", "--torch-source", metavar="[pip|conda-forge]", show_default=False, help="Where torch comes from (default: pip; with --toolchain-only, the build the toolchain is planned for)."),
    python: Optional[str] = opt(None, "--python", metavar="X.Y", help="The env's Python (default: 3.11; 3.10 for torch 1.x)."),
    platform: list[str] = options.platform(many=True, default="the host's if it has CUDA, else linux-64"),
    channel: list[str] = opt([], "--channel", metavar="NAME|URL", help="Channel (repeatable; default: conda-forge)."),
    mirror: list[str] = options.mirror(),
    offline: bool = options.offline(),
    lock: Optional[str] = opt(None, "--lock", metavar="NAME", help="The lock to write: environments/NAME.yml and locks/NAME/ (default: torch<ver>-cu<XY>)."),
    old_name: Optional[str] = opt(None, "--name", metavar="NAME", help="Old spelling of --lock NAME (still works)."),
    project_dir: str = options.project_dir(),
    dry_run: bool = opt(False, "--dry-run", help="Anchor and plan only: no solve, no network, no files."),
    as_json: bool = options.as_json(),
    quiet: bool = options.quiet(),
    verbose: bool = options.verbose(),
    timestamp: bool = opt(False, "--timestamp", help="Record the creation time in the lock."),
    python_exe: Optional[str] = opt(None, "--python-exe", metavar="PYTHON", help="The python whose torch `--torch installed` means (default: the active venv's or conda env's python, else python3 on PATH)."),
    allow_insecure: bool = options.allow_insecure(),
    toolchain_only: bool = opt(
        False, "--toolchain-only", help="Only the conda toolchain: no python, no torch (beside a torch you have)."
    ),
    pip: list[str] = opt([], "--pip", metavar="REQ", help="A PyPI requirement for the env's `- pip:` list (repeatable)."),
    exclude_newer: Optional[str] = opt(
        None, "--exclude-newer", metavar="ISO", help="Resolution cutoff, ISO UTC (default: the spec's, else now)."
    ),
    with_: list[str] = opt(
        [], "--with", metavar="GROUP", help="Add a group of CUDA headers (repeatable, or a comma list): curand, profiler-api, "
        "cufft, nvrtc, nvtx, cufile, nvml, cupti, nvjitlink, npp, nvjpeg; beside the toolkit nccl, cusparselt, cudss, "
        "cutensor, cutlass, libaio, eigen; or the bundles deepspeed, all (envlock/data/extras.yaml)."
    ),
    for_: list[str] = opt(
        [], "--for", metavar="SOURCE", help="Add the --with groups these sources need (repeatable): a source folder, an sdist or "
        "wheel, an installed package, deepspeed, or a profiled project (flash-attn, xformers, …: see `envlock doctor --help`)."
    ),
) -> int:
    """Anchor on torch's CUDA, plan the toolchain, solve every platform and write spec + locks."""
    from envlock.usecases.resolve import ResolveRequest, resolve

    platform = options.platforms(platform)
    if old_name is not None:
        options.deprecated("--name NAME", "--lock NAME", "resolve")
        if lock is not None and lock != old_name:
            raise UsageError("--lock and --name name two different locks", hint="give --lock NAME alone")
        lock = old_name
    if for_:  # the spec records the groups, not the sources: `envlock lock` re-locks without them
        from envlock.sources.load import groups_for
        from envlock.wrapping import say

        found, lines = groups_for(for_, python_exe)
        for line in lines:
            say("envlock", line)
        with_ = [*with_, *(g for g in found if g not in with_)]
    project = Path(project_dir)
    req = ResolveRequest(
        torch=torch,
        cuda=cuda,
        torch_source=options.choice("--torch-source", torch_source, ("pip", "conda-forge"), "a torch source") or "pip",
        python=_checked_python(python),
        platforms=tuple(platform),
        channels=_checked_channels(channel),
        mirrors=parse_mirrors(mirror, project, solving=True),
        offline=offline,
        name=_checked_name(lock),
        project_dir=project,
        dry_run=dry_run,
        timestamp=timestamp,
        python_exe=python_exe,
        allow_insecure=allow_insecure,
        toolchain_only=toolchain_only,
        pip=tuple(pip),
        exclude_newer=_checked_cutoff(exclude_newer),
        with_extras=_checked_with(with_, quiet=quiet),
    )
    try:
        asked = req.read()  # --torch, --cuda, --torch-source, --platform, --channel: read once, here
    except EnvlockError as err:
        raise _as_usage(err) from None
    from envlock.progress import reporting, wanted

    with reporting(wanted(as_json=as_json, quiet=quiet)):  # status lines on a terminal only
        result = resolve(req, asked=asked)
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(project), indent=2, sort_keys=True) + "\n")
    elif quiet:  # no summary; a warning is still said
        from envlock.names import printable
        from envlock.wrapping import say

        for warning in result.warnings:
            say("warning", printable(warning))
    else:
        render_summary(result, project)
    return 0


def render_summary(result: ResolveResult, project_dir: Path) -> None:
    """The terminal summary: anchor → per platform choice → why → files (envlock/commands/summary.py)."""
    from envlock.commands.summary import PlainConsole, render, width

    if not sys.stdout.isatty() and "FORCE_COLOR" not in os.environ:
        render(result, project_dir, PlainConsole())  # a pipe or a CI log: no styles, so no rich to import
        return
    from rich.console import Console

    render(result, project_dir, Console(highlight=False, width=width(), no_color="NO_COLOR" in os.environ))


# --------------------------------------------------------------------------- the form of each value (exit 2)


def _as_usage(err: EnvlockError) -> UsageError:
    return UsageError(err.message, hint=err.hint_parts)


def _checked_python(value: str | None) -> str | None:
    from envlock.formats.spec_values import parse_python

    try:
        return None if value is None else parse_python(value) and value.strip()
    except EnvlockError as err:
        raise _as_usage(err) from None


def _checked_channels(values: list[str]) -> tuple[str, ...]:
    for value in values:
        if not value.strip():
            raise UsageError("--channel '' names no channel", hint=("give a name or URL, e.g. ",
                                                                    again("--channel", "conda-forge")))
    return tuple(values)


def _checked_name(value: str | None) -> str | None:
    from envlock.envname import validate_name

    try:
        return None if value is None else validate_name(value)
    except EnvlockError as err:
        raise _as_usage(err) from None


def _checked_cutoff(value: str | None) -> str | None:
    from envlock.formats.spec import read_cutoff

    try:
        return None if value is None else read_cutoff(value, "--exclude-newer") and value
    except EnvlockError as err:
        raise _as_usage(err) from None


def _checked_with(values: list[str], *, quiet: bool = False) -> tuple[str, ...]:
    """--with's groups (comma lists split): each a group of envlock's extras table; a name of the default set
    (`cusparse`: every lock has it) is answered as such and left out; anything else is a usage error."""
    names = options.many(values)
    if not names:
        return ()
    from envlock.formats.spec import normalise_with
    from envlock.core.tables import extras_tables

    tables = extras_tables()
    out = []
    for name in normalise_with(names):
        if name in tables.default_set:
            if not quiet:
                from envlock.wrapping import say

                say("note", f"--with {name}: {tables.default_set[name]} is in the default set: every lock has it, "
                            "so it is not a group to add")
            continue
        if name not in tables.names:
            raise UsageError(f"--with {name!r} is not a group envlock knows",
                             hint=f"one of: {', '.join(tables.names)} (envlock/data/extras.yaml); every lock has "
                                  f"{', '.join(tables.default_set)} already")
        out.append(name)
    return tuple(out)


#: The command a plain `envlock resolve ...` line runs without typer (envlock/commands/fastargs.py).
FAST = {"resolve": resolve_cmd}


def register(app: typer.Typer) -> None:
    """Add `resolve` to the app."""
    app.command("resolve")(typer_command(resolve_cmd))
