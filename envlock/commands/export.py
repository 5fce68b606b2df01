"""`envlock export dockerfile|explicit|pixi` (adapters: options → one call in envlock.usecases.export → render)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from envlock.commands import options
from envlock.commands.fastargs import opt, typer_command
from envlock.names import printable


def dockerfile_cmd(
    name: Optional[str] = options.lock_arg(),
    lock: Optional[str] = options.lock(),
    platform: Optional[str] = options.platform(options.LINUX_PLATFORMS, default="the lock's only linux platform"),
    output: Optional[Path] = opt(None, "-o", "--output", help="Dockerfile to write (default: ./Dockerfile; - for stdout)."),
    force: bool = opt(False, "--force", help="Replace existing output files."),
    base: Optional[str] = opt(None, "--base", help="Build-stage image (python with pip), IMAGE@sha256:DIGEST."),
    runtime_base: Optional[str] = opt(
        None, "--runtime-base", help="Final-stage image (glibc, /bin/sh), IMAGE@sha256:DIGEST."
    ),
    with_devcontainer: bool = opt(
        False, "--devcontainer", help="Also write .devcontainer/devcontainer.json beside the Dockerfile."
    ),
    project_dir: str = options.project_dir(),
    quiet: bool = opt(False, "-q", "--quiet", help="No `wrote` lines and no build command (warnings still)."),
) -> int:
    """A multi-stage Dockerfile that installs the lock into /opt/env, activated by ENV, checked at build time.

    The build context is the project directory.
    """
    from envlock.usecases.export.service import STDOUT, ExportRequest, export_dockerfile, warn

    options.platforms(platform, options.LINUX_PLATFORMS)
    out = STDOUT if output is not None and str(output) == "-" else output
    lock_path = options.chosen_lock(project_dir, name, lock)
    result = export_dockerfile(ExportRequest(
        project_dir=Path(project_dir), name=None, lock=lock_path, platform=platform, output=out, force=force,
        base=base, runtime_base=runtime_base, devcontainer=with_devcontainer,
    ))
    warn(result.warnings)
    if not result.written:
        sys.stdout.write(result.text)
        return 0
    if quiet:
        return 0
    from envlock.wrapping import columns, fold, fold_command

    width = columns(sys.stderr)
    lines = [ln for path in result.written for ln in fold(f"wrote {printable(str(path))}", width)]
    lines += fold(f"{printable(result.platform)} image of {printable(str(result.lock))}"
                  f"{' with its PyPI part' if result.requirements else ''}; build it with:", width)
    lines += fold_command("  ", printable(result.build_command), width)
    sys.stderr.write("".join(f"{ln}\n" for ln in lines))
    return 0


def explicit_cmd(
    name: Optional[str] = options.lock_arg(),
    lock: Optional[str] = options.lock(),
    platform: list[str] = options.platform(many=True, default="every one the lock has"),
    mirror: list[str] = options.mirror(),
    output: Optional[Path] = opt(
        None, "-o", "--output", metavar="DIR",
        help="Folder for conda-<platform>.lock (default: the current one; - prints one platform's)."
    ),
    force: bool = opt(False, "--force", help="Replace existing files."),
    project_dir: str = options.project_dir(),
    quiet: bool = opt(False, "-q", "--quiet", help="No `wrote` lines and no install command (warnings still)."),
) -> int:
    """@EXPLICIT files with every package URL on a mirror, for `conda create --file` behind it."""
    from envlock.commands.resolve import parse_mirrors
    from envlock.usecases.export.explicit import STDOUT, ExplicitRequest, export_explicit
    from envlock.usecases.export.service import warn
    from envlock.wrapping import columns, fold, fold_command

    platform = options.platforms(platform)
    out = STDOUT if output is not None and str(output) == "-" else output
    project = Path(project_dir)
    result = export_explicit(ExplicitRequest(
        project_dir=project, mirrors=parse_mirrors(mirror, project), lock=options.chosen_lock(project_dir, name, lock),
        platforms=tuple(platform), output=out, force=force,
    ))
    warn(result.warnings)
    if not result.written:
        sys.stdout.write(next(iter(result.texts.values())))
        return 0
    if quiet:
        return 0
    width = columns(sys.stderr)
    lines = [ln for path in result.written for ln in fold(f"wrote {printable(str(path))}", width)]
    lines += fold_command("install one with: ", f"conda create -p PREFIX --file {printable(str(result.written[0]))} "
                          "&& envlock hook -p PREFIX", width)
    sys.stderr.write("".join(f"{ln}\n" for ln in lines))
    return 0


def pixi_cmd(
    name: Optional[str] = options.lock_arg(),
    lock: Optional[str] = options.lock(),
    output: Optional[Path] = opt(
        None, "-o", "--output", metavar="DIR",
        help="Folder of the pixi workspace: pixi.toml, pixi.lock, envlock's activation script (default: the current one).",
    ),
    feature: Optional[str] = opt(
        None, "--feature", metavar="NAME",
        help="Add the lock to an existing manifest as feature NAME and environment NAME (nothing else in it changes).",
    ),
    manifest: Optional[Path] = opt(
        None, "--manifest", metavar="FILE",
        help="The pixi.toml or pyproject.toml --feature goes into (default: the one in -o's folder).",
    ),
    force: bool = opt(False, "--force", help="Replace existing files (and a pixi.lock holding other environments)."),
    project_dir: str = options.project_dir(),
    quiet: bool = opt(False, "-q", "--quiet", help="No `wrote` lines and no install command (warnings still)."),
) -> int:
    """A pixi workspace of the lock: pixi.lock holding exactly its packages, pixi.toml with envlock's activation.

    From conda-lock.yml alone (no solve, no network). Then `pixi install --frozen` installs the lock as written,
    and `pixi run python setup.py build_ext` builds with the toolchain active.
    """
    from envlock.usecases.export.pixi import PixiRequest, export_pixi
    from envlock.wrapping import columns, fold, fold_command

    result = export_pixi(PixiRequest(lock=options.chosen_lock(project_dir, name, lock), output=output,
                                     feature=feature, manifest=manifest, force=force))
    if quiet:
        return 0
    width = columns(sys.stderr)
    lines = [ln for path in result.written for ln in fold(f"wrote {printable(str(path))}", width)]
    lines += [ln for path in result.unchanged for ln in fold(f"unchanged {printable(str(path))}", width)]
    env = "" if result.environment == "default" else f" -e {result.environment}"
    manifest_opt = "" if result.manifest.parent == Path.cwd() else f" --manifest-path {printable(str(result.manifest))}"
    lines += fold_command("install it with: ", f"pixi install --frozen{env}{manifest_opt}", width)
    sys.stderr.write("".join(f"{ln}\n" for ln in lines))
    return 0


def register(app: typer.Typer) -> None:
    """Add `envlock export …` to the app."""
    export_app = typer.Typer(help="Export a lock to other tools' formats.", no_args_is_help=True)
    export_app.command("dockerfile")(typer_command(dockerfile_cmd))
    export_app.command("explicit")(typer_command(explicit_cmd))
    export_app.command("pixi")(typer_command(pixi_cmd))
    app.add_typer(export_app, name="export")
