"""`envlock pack` and `envlock unpack` (adapters: options → envlock.pack / envlock.unpack → render)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from envlock.commands import with_bars
from envlock.errors import SpecError, UsageError
from envlock.names import printable


def pack_cmd(
    name: Optional[str] = typer.Argument(None, help="Lock name: locks/NAME/conda-lock.yml (default: the only lock)."),
    lock: Optional[Path] = typer.Option(None, "--lock", help="A conda-lock.yml (or @EXPLICIT file) to pack."),
    platform: Optional[str] = typer.Option(
        None, "--platform", help="Platform to pack (default: the lock's only one, else this machine's)."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="The archive to write (FILE.tar)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing archive."),
    mirror: list[str] = typer.Option([], "--mirror", help="NAME=URL or NAME=PATH: fetch channel NAME from there."),
    allow_insecure: bool = typer.Option(False, "--allow-insecure", help="Allow plain-http channels and indexes."),
    project_dir: Path = typer.Option(Path("."), "--project-dir", help="Project directory holding locks/."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress and no summary."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable result on stdout."),
) -> int:
    """One archive with every package of the lock (conda + PyPI), a channel index, the lock and the spec."""
    from envlock.commands.resolve import parse_mirrors
    from envlock.models import host_platform
    from envlock.create import find_lock
    from envlock.formats import read_lock
    from envlock.pack import PackRequest, pack

    if lock is not None and name:
        raise UsageError("give either a lock NAME or --lock PATH, not both", hint="`envlock pack NAME` reads locks/NAME/")
    lock_path = lock if lock is not None else find_lock(project_dir, name)
    if platform is None:
        platforms = read_lock(lock_path).platforms
        platform = platforms[0] if len(platforms) == 1 else host_platform()
    req = PackRequest(lock_path=lock_path, platform=platform, output=output, force=force,
                      mirrors=parse_mirrors(mirror, project_dir), allow_insecure=allow_insecure)
    result = with_bars(lambda p: pack(req, p), as_json=as_json, quiet=quiet)
    if not as_json and not quiet:
        name, output = printable(result.name), printable(str(result.output))
        sys.stderr.write(
            f"packed {name} ({printable(result.platform)}) into {output}: {result.packages} conda packages"
            f"{f' + {result.wheels} wheels' if result.wheels else ''}, {result.size / 1e6:.1f} MB, every hash verified\n"
            f"on the target node (no network needed): envlock unpack {output} -p PREFIX\n"
        )
    return 0


def unpack_cmd(
    archive: Path = typer.Argument(..., help="An archive written by `envlock pack`."),
    prefix: Optional[str] = typer.Option(None, "-p", "--prefix", help="Environment path."),
    env_name: Optional[str] = typer.Option(None, "-n", "--name", help="Environment name, under the envs dir."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress and no summary."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable result on stdout."),
) -> int:
    """Create the archive's environment offline: every package checked against the lock, atomic like create."""
    from envlock.commands.create import _render_create
    from envlock.create import envs_dir
    from envlock.unpack import UnpackRequest, unpack

    if bool(prefix) == bool(env_name):
        raise UsageError("give -p PREFIX or -n NAME (one of them)", hint="e.g. envlock unpack env.tar -p ~/envs/train")
    if env_name and ("/" in env_name or env_name in (".", "..")):
        raise SpecError(f"-n takes a name, not a path: {env_name!r}", hint="use -p PREFIX for a path")
    target = Path(prefix).expanduser().absolute() if prefix else (envs_dir() / str(env_name)).absolute()
    result = with_bars(lambda p: unpack(UnpackRequest(archive=archive, prefix=target), p), as_json=as_json, quiet=quiet)
    if not as_json and not quiet:
        _render_create(result)
    return 0


def register(app: typer.Typer) -> None:
    """Add `pack` and `unpack` to the app."""
    app.command("pack")(pack_cmd)
    app.command("unpack")(unpack_cmd)
