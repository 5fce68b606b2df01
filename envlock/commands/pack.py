"""`envlock pack` and `envlock unpack` (adapters: options → envlock.usecases.pack / envlock.usecases.unpack → render)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from envlock.commands import options, with_bars
from envlock.commands.fastargs import arg, opt, typer_command
from envlock.errors import UsageError
from envlock.names import printable


def pack_cmd(
    name: Optional[str] = options.lock_arg(),
    lock: Optional[str] = options.lock(),
    platform: Optional[str] = options.platform(default="the lock's only one, else this machine's"),
    output: Path = opt(..., "-o", "--output", metavar="FILE.tar", help="The archive to write."),
    force: bool = opt(False, "--force", help="Replace an existing archive."),
    mirror: list[str] = options.mirror(),
    allow_insecure: bool = options.allow_insecure(),
    project_dir: str = options.project_dir(),
    quiet: bool = options.quiet(),
    as_json: bool = options.as_json(),
) -> int:
    """One archive with every package of the lock (conda + PyPI), a channel index, the lock and the spec."""
    from envlock.commands.resolve import parse_mirrors
    from envlock.models import host_platform
    from envlock.formats import read_lock
    from envlock.usecases.pack import PackRequest, pack

    options.platforms(platform)
    lock_path = options.chosen_lock(project_dir, name, lock)
    if platform is None:
        platforms = read_lock(lock_path).platforms
        platform = platforms[0] if len(platforms) == 1 else host_platform()
    project = Path(project_dir)
    req = PackRequest(lock_path=lock_path, platform=platform, output=output, force=force,
                      mirrors=parse_mirrors(mirror, project), allow_insecure=allow_insecure)
    result = with_bars(lambda p: pack(req, p), as_json=as_json, quiet=quiet)
    if not as_json and not quiet:
        from envlock.errors import quote_word
        from envlock.wrapping import columns, fold, fold_command

        width = columns(sys.stderr)
        name, output = printable(result.name), printable(str(result.output))
        lines = fold(f"packed {name} ({printable(result.platform)}) into {output}: {result.packages} conda packages"
                     f"{f' + {result.wheels} wheels' if result.wheels else ''}, {result.size / 1e6:.1f} MB, "
                     "every hash verified", width)
        lines += fold_command("on the target node (no network needed): ",
                              f"envlock unpack {printable(quote_word(str(result.output)))} -p PREFIX", width)
        sys.stderr.write("".join(f"{ln}\n" for ln in lines))
    return 0


def unpack_cmd(
    archive: Path = arg(..., metavar="FILE.tar", help="An archive written by `envlock pack`."),
    prefix: Optional[str] = options.prefix(),
    env_name: Optional[str] = options.env_name(),
    quiet: bool = options.quiet(),
    as_json: bool = options.as_json(),
) -> int:
    """Create the archive's environment offline: every package checked against the lock, atomic like create."""
    from envlock.commands.create import render_create
    from envlock.seams.dirs import named_env
    from envlock.usecases.unpack import UnpackRequest, unpack

    if bool(prefix) == bool(env_name):
        raise UsageError("give -p PREFIX or -n NAME (one of them)", hint="e.g. envlock unpack env.tar -p ~/envs/train")
    target = Path(prefix).expanduser().absolute() if prefix else named_env(str(env_name))
    result = with_bars(lambda p: unpack(UnpackRequest(archive=archive, prefix=target), p), as_json=as_json, quiet=quiet)
    if not as_json and not quiet:
        render_create(result)
    return 0


def register(app: typer.Typer) -> None:
    """Add `pack` and `unpack` to the app."""
    app.command("pack")(typer_command(pack_cmd))
    app.command("unpack")(typer_command(unpack_cmd))
