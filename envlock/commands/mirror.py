"""`envlock mirror` (adapter: options → envlock.usecases.mirror.mirror → render)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from envlock.commands import options, with_bars
from envlock.commands.fastargs import arg, opt, typer_command
from envlock.errors import EnvlockError, Retry, UsageError, again
from envlock.names import printable


def replace_args(retry: Retry, args: tuple[str, ...]) -> Retry:
    """`retry` with these positional arguments."""
    return Retry(retry.set, retry.drop, retry.flags, args, retry.command)


def lock_paths(project_dir: Path, names: list[str], locks: list[str]) -> tuple[Path, ...]:
    """Named locks (locks/NAME/), --lock NAME|FILE values, or every lock of the project when neither is given."""
    from envlock.usecases.create import available_locks, find_lock

    if names and locks:
        raise UsageError("give lock NAMEs or --lock NAME|FILE values, not both",
                         hint=("the NAMEs alone: ", again(drop=("--lock",))))
    if locks:
        return tuple(find_lock(project_dir, v) if options.is_lock_name(v) else options.lock_file(v) for v in locks)
    chosen = names or available_locks(project_dir / "locks")
    return tuple(find_lock(project_dir, n) for n in chosen) if chosen else (find_lock(project_dir, None),)


def mirror_cmd(
    args: Optional[list[str]] = arg(
        None, metavar="[NAME]... DIR", show_default=False,
        help="The locks to mirror (default: every lock of the project), then the directory to mirror into.",
    ),
    lock: list[str] = options.lock(many=True),
    platform: list[str] = options.platform(many=True, default="every platform the locks hold"),
    mirror: list[str] = options.mirror(),
    allow_insecure: bool = options.allow_insecure(),
    project_dir: str = options.project_dir(),
    base_url: Optional[str] = opt(None, "--base-url", metavar="URL", help="The URL DIR will be served at (for the printed mirrors)."),
    quiet: bool = options.quiet(),
    as_json: bool = options.as_json(),
) -> int:
    """A local channel of exactly what the locks need (conda + PyPI), incremental, servable by any static HTTP server."""
    from envlock.commands.resolve import parse_mirrors
    from envlock.usecases.mirror import MirrorRequest
    from envlock.usecases.mirror import mirror as run_mirror

    platform = options.platforms(platform)
    if not args:
        raise UsageError("which directory? `envlock mirror` needs the DIR to mirror into",
                         hint=("e.g. every lock of the project into ./mirror: ", again(args=("mirror",))))
    *names, dest = args
    project = Path(project_dir)
    try:
        locks = lock_paths(project, names, lock)
    except EnvlockError as err:  # find_lock's hints name a lock as the command's arguments: DIR stays the last one
        raise err.saying(hint=tuple(replace_args(p, (*p.args, dest)) if isinstance(p, Retry) and p.args is not None
                                    and p.command is None else p for p in err.hint_parts)) from None
    req = MirrorRequest(dest=Path(dest).expanduser().absolute(), locks=locks,
                        platforms=tuple(platform), mirrors=parse_mirrors(mirror, project),
                        allow_insecure=allow_insecure)
    result = with_bars(lambda p: run_mirror(req, p), as_json=as_json, quiet=quiet)
    if not as_json and not quiet:
        _render(result, base_url)
    return 0


def _render(result: Any, base_url: str | None) -> None:
    """What was mirrored, and the ENVLOCK_MIRRORS lines to use it here and served (folded to the width)."""
    from envlock.wrapping import columns, fold

    width = columns(sys.stderr)
    served = base_url or "http://HOST:PORT"
    dest = printable(str(result.dest))  # names and paths with control characters escaped
    lines = [
        f"mirrored {printable(', '.join(result.locks))} into {dest}: {result.packages} conda packages "
        f"({result.fetched} fetched now), {result.wheels} wheels ({result.wheels_added} new); every hash verified",
        "use it here:",
        f"  ENVLOCK_MIRRORS={printable(','.join(result.mirror_entries()))}",
        f"served (any static HTTP server over {dest}, e.g. python -m http.server -d {dest}):",
        f"  ENVLOCK_MIRRORS={printable(','.join(result.mirror_entries(served)))}",
    ]
    sys.stderr.write("".join(f"{ln}\n" for line in lines for ln in fold(line, width)))


def register(app: typer.Typer) -> None:
    """Add `mirror` to the app."""
    app.command("mirror")(typer_command(mirror_cmd))
