"""`envlock doctor` command (adapter: options → DoctorOptions → run_doctor → render)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from envlock.commands import options
from envlock.commands.fastargs import opt, typer_command

if TYPE_CHECKING:
    from envlock.models import Finding

_COLOURS = {"ok": "green", "info": "cyan", "skipped": "blue", "warning": "yellow", "error": "red"}


#: The projects data/profiles.yaml keeps a saved scan of (`--for NAME`; tests/test_project_profiles.py checks the list).
PROFILED = "flash-attn, xformers, causal-conv1d, mamba-ssm, flashinfer, apex, bitsandbytes"


def render_human(findings: list[Finding], *, colour: bool, width: int = 80) -> str:
    """One line per check, its message folded under itself to `width` (never cut: a pipe or a CI log keeps all of
    it); then what to do, each piece of advice once: the findings that share a fix are named together above it (a
    warning's or an error's whole message first, folded to the width); a summary line."""
    from envlock.doctor import summary
    from envlock.names import printable
    from envlock.wrapping import fold, lines_of

    code_w = min(max((len(f.code) for f in findings), default=0), max(12, width // 3))
    lines = []
    for f in findings:
        head = f"{f.severity:<7} {f.code:<{code_w}}  "
        rest = " " * len(head) if len(head) <= width // 2 else " " * 10
        folded = lines_of(printable(f.message), head, rest, width)  # a message may quote a path or a record
        if colour:
            tag = typer.style(f"{f.severity:<7}", fg=_COLOURS[f.severity], bold=f.severity == "error")
            folded[0] = tag + folded[0][7:]
        lines += folded
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        if f.hint and f.severity != "ok":
            groups.setdefault(_advice_key(f), []).append(f)
    if groups:
        lines.append("what to do:")
    for key, group in groups.items():
        first = group[0]
        for f in group:
            if f.severity in ("error", "warning"):
                lines += lines_of(f"{f.code} ({f.severity}): {printable(f.message)}", "  ", "      ", width)
        shown = [f.code for f in group if f.severity not in ("error", "warning")]
        if shown:
            names = ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")
            lines += lines_of(f"{names}:", "  ", "      ", width)
        if len(group) == 1 or key == first.hint:
            lines += lines_of(printable(first.hint or ""), "    fix: ", "      ", width)
            continue
        if _COMMAND_GROUP.search(key):  # a command names the groups: each one, a command that runs as written
            groups_ = list(dict.fromkeys(_tokens(f)[0] for f in group))
            packages = ", ".join(dict.fromkeys(_tokens(f)[1] for f in group if _tokens(f)[1]))
            text = key.replace("--with GROUP", " ".join(f"--with {g}" for g in groups_))
            text = text.replace("GROUP", ", ".join(groups_)).replace("PACKAGE", packages)
            lines += lines_of(printable(text), "    fix: ", "      ", width)
            continue
        lines += lines_of(printable(key), "    fix: ", "      ", width)
        names = [n for n in ("GROUP", "PACKAGE") if n in key]
        values = ", ".join(dict.fromkeys(" ".join(v if i == 0 else f"({v})" for i, v in enumerate(
            _tokens(f)[k] for k, n in enumerate(("GROUP", "PACKAGE")) if n in names)) for f in group))
        label = " ".join(n if i == 0 else f"({n})" for i, n in enumerate(names))
        lines += lines_of(f"{label} is {printable(values)}", "      where ", "        ", width)
    counts = summary(findings)
    lines += fold(f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['ok']} ok, {counts['info']} info, "
                  f"{counts['skipped']} skipped", width)
    return "\n".join(lines) + "\n"


#: A fix whose envlock command takes the group (`… --with GROUP`): said with the groups' own names, never GROUP.
_COMMAND_GROUP = re.compile(r"envlock [^;()]*--with GROUP")


def _tokens(f: Finding) -> tuple[str, str]:
    """What makes one finding's fix its own: its group (the code's last part) and its package."""
    return f.code.partition(".")[2], str((f.details or {}).get("package") or "")


def _advice_key(f: Finding) -> str:
    """A fix with the finding's own group and package as GROUP and PACKAGE: the same advice groups together."""
    group, package = _tokens(f)
    text = f.hint or ""
    if package:
        text = text.replace(package, "PACKAGE")
    return re.sub(rf"(?<![\w.-]){re.escape(group)}(?![\w-])", "GROUP", text) if group else text


def doctor(
    prefix: Optional[str] = options.prefix(),
    env_name: Optional[str] = options.env_name(),
    compile_: bool = opt(
        False,
        "--compile",
        help="Also compile+link a .cu with nvcc, and build (and run on a GPU) a torch extension.",
    ),
    as_json: bool = options.as_json(),
    python_exe: Optional[str] = opt(
        None,
        "--python-exe",
        help="The python whose torch to check (default: the env's own python, else the active venv's or conda env's, "
        "else python3 on PATH: resolve's rule).",
    ),
    for_: list[str] = opt(
        [], "--for", help="Also check what sources need: a source folder, an sdist or wheel, an installed package "
        "(which of its extensions / JIT ops would build), deepspeed (its 0.19.8 ops, no sources needed), or a profiled "
        "project, no sources needed: " + PROFILED + "."
    ),
) -> int:
    """Can this environment JIT-compile a CUDA extension? One line per check; exit 1 on any error.

    The environment: -p PATH or -n NAME, else $CONDA_PREFIX, else the system's CUDA.
    """
    from envlock.doctor import FOR_CHOICES, DoctorOptions, exit_code, result_json, run_doctor
    from envlock.errors import UsageError

    if any(not f.strip() for f in for_):
        raise UsageError("--for needs a value", hint=f"use {', '.join(FOR_CHOICES)}, a source folder, an sdist or a package")
    if prefix is not None and env_name:
        raise UsageError("give either -p/--prefix or -n/--name, not both", hint="-p takes a path, -n a name")
    target = Path(prefix) if prefix is not None else None
    if env_name:
        from envlock.seams.dirs import envs_dir, named_env

        target = named_env(env_name)
        if not target.is_dir():
            from envlock.errors import SpecError

            from envlock.errors import quote_word

            raise SpecError(f"no environment named {env_name} in {envs_dir()}",
                            hint=f"create it (in the project that has its lock) with `envlock create -n "
                                 f"{quote_word(env_name)}`, or pass -p PREFIX")
    scans = ()
    if any(f not in FOR_CHOICES for f in for_):
        from envlock.sources.load import load_scan

        from envlock.seams.installed_torch import user_python

        # the rule doctor asks torch by, for the env under test: its own python once activated, else the user's
        own = str(target / "bin" / "python") if target and (target / "bin" / "python").exists() else None
        python = (own if not python_exe else None) or user_python(python_exe).exe
        scans = tuple(load_scan(f, python) for f in for_ if f not in FOR_CHOICES)
    options = DoctorOptions(prefix=target, compile=compile_, python_exe=python_exe, for_=tuple(for_), scans=scans)
    findings = run_doctor(options)
    if as_json:
        sys.stdout.write(json.dumps(result_json(findings), indent=2) + "\n")
    else:
        from envlock.wrapping import columns

        sys.stdout.write(render_human(findings, colour=sys.stdout.isatty(), width=columns(sys.stdout)))
    code = exit_code(findings)
    if code:
        raise typer.Exit(code)
    return code


def register(app: typer.Typer) -> None:
    """Add `envlock doctor` to the app."""
    app.command("doctor")(typer_command(doctor))
