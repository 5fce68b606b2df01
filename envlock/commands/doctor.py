"""`envlock doctor` command (adapter: options → DoctorOptions → run_doctor → render)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

if TYPE_CHECKING:
    from envlock.models import Finding

_COLOURS = {"ok": "green", "info": "cyan", "skipped": "blue", "warning": "yellow", "error": "red"}


def render_human(findings: list[Finding], *, colour: bool) -> str:
    """One line per check; a `fix:` line under each warning/error that has one; a summary line."""
    from envlock.doctor import summary
    from envlock.names import printable

    width = max((len(f.code) for f in findings), default=0)
    lines = []
    for f in findings:
        tag = f"{f.severity:<7}"
        if colour:
            tag = typer.style(tag, fg=_COLOURS[f.severity], bold=f.severity == "error")
        lines.append(f"{tag} {f.code:<{width}}  {printable(f.message)}")  # a message may quote a path or a record
        if f.hint and f.severity != "ok":
            lines.append(f"{'':<7} {'':<{width}}  fix: {printable(f.hint)}")
    counts = summary(findings)
    lines.append(f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['ok']} ok, {counts['info']} info, "
                 f"{counts['skipped']} skipped")
    return "\n".join(lines) + "\n"


def doctor(
    prefix: Optional[Path] = typer.Option(
        None, "-p", "--prefix", help="Environment to check (default: $CONDA_PREFIX, else the system CUDA)."
    ),
    env_name: Optional[str] = typer.Option(
        None, "-n", "--name", help="Environment name, under the envs dir (as `envlock create -n`)."
    ),
    compile_: bool = typer.Option(
        False,
        "--compile",
        help="Also compile+link a .cu with nvcc, and build (and run on a GPU) a torch extension.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print a JSON object (doctor_result_version, findings) for CI."
    ),
    python_exe: Optional[str] = typer.Option(
        None,
        "--python-exe",
        help="The python whose torch to check (default: PREFIX/bin/python, else python3 on PATH).",
    ),
    for_: list[str] = typer.Option(
        [], "--for", help="Also check what sources need: a source folder, an sdist or wheel, an installed package "
        "(which of its extensions / JIT ops would build), or deepspeed (its 0.19.8 ops, no sources needed)."
    ),
) -> int:
    """Can this environment JIT-compile a CUDA extension? One line per check; exit 1 on any error."""
    from envlock.doctor import FOR_CHOICES, DoctorOptions, exit_code, result_json, run_doctor
    from envlock.errors import UsageError

    if any(not f.strip() for f in for_):
        raise UsageError("--for needs a value", hint=f"use {', '.join(FOR_CHOICES)}, a source folder, an sdist or a package")
    if prefix is not None and env_name:
        raise UsageError("give either -p/--prefix or -n/--name, not both", hint="-p takes a path, -n a name")
    if env_name:
        from envlock.create import envs_dir

        prefix = envs_dir() / env_name
        if not prefix.is_dir():
            from envlock.errors import SpecError

            raise SpecError(f"no environment named {env_name} in {envs_dir()}",
                            hint="create it with `envlock create -n NAME`, or pass -p PREFIX")
    scans = ()
    if any(f not in FOR_CHOICES for f in for_):
        from envlock.sources.load import load_scan

        python = python_exe or (str(prefix / "bin" / "python") if prefix and (prefix / "bin" / "python").exists() else None)
        scans = tuple(load_scan(f, python) for f in for_ if f not in FOR_CHOICES)
    options = DoctorOptions(prefix=prefix, compile=compile_, python_exe=python_exe, for_=tuple(for_), scans=scans)
    findings = run_doctor(options)
    if as_json:
        sys.stdout.write(json.dumps(result_json(findings), indent=2) + "\n")
    else:
        sys.stdout.write(render_human(findings, colour=sys.stdout.isatty()))
    code = exit_code(findings)
    if code:
        raise typer.Exit(code)
    return code


def register(app: typer.Typer) -> None:
    """Add `envlock doctor` to the app."""
    app.command("doctor")(doctor)
