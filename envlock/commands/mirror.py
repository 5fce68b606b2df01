"""`envlock mirror` (adapter: options → envlock.mirror.mirror → render)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from envlock.commands import with_bars
from envlock.errors import UsageError
from envlock.names import printable


def lock_paths(project_dir: Path, names: list[str], locks: list[Path]) -> tuple[Path, ...]:
    """Named locks (locks/NAME/), --lock files, or every lock of the project when neither is given."""
    from envlock.create import available_locks, find_lock

    if names and locks:
        raise UsageError("give lock NAMEs or --lock FILEs, not both", hint="`envlock mirror NAME DIR` reads locks/NAME/")
    if locks:
        return tuple(locks)
    chosen = names or available_locks(project_dir / "locks")
    return tuple(find_lock(project_dir, n) for n in chosen) if chosen else (find_lock(project_dir, None),)


def mirror_cmd(
    args: list[str] = typer.Argument(..., help="[NAME…] DIR: locks to mirror (default: every lock) and the directory."),
    lock: list[Path] = typer.Option([], "--lock", help="A conda-lock.yml to mirror (repeatable)."),
    platform: list[str] = typer.Option([], "--platform", help="Only these platforms (repeatable; default: every one locked)."),
    mirror: list[str] = typer.Option([], "--mirror", help="NAME=URL or NAME=PATH: fetch channel NAME from there."),
    allow_insecure: bool = typer.Option(False, "--allow-insecure", help="Allow plain-http channels and indexes."),
    project_dir: Path = typer.Option(Path("."), "--project-dir", help="Project directory holding locks/."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="The URL DIR will be served at (for the printed mirrors)."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress and no summary."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable result on stdout."),
) -> int:
    """A local channel of exactly what the locks need (conda + PyPI), incremental, servable by any static HTTP server."""
    from envlock.commands.resolve import parse_mirrors
    from envlock.mirror import MirrorRequest
    from envlock.mirror import mirror as run_mirror

    *names, dest = args
    req = MirrorRequest(dest=Path(dest).expanduser().absolute(), locks=lock_paths(project_dir, names, lock),
                        platforms=tuple(platform), mirrors=parse_mirrors(mirror, project_dir),
                        allow_insecure=allow_insecure)
    result = with_bars(lambda p: run_mirror(req, p), as_json=as_json, quiet=quiet)
    if not as_json and not quiet:
        err = sys.stderr.write
        dest = printable(str(result.dest))
        err(f"mirrored {printable(', '.join(result.locks))} into {dest}: {result.packages} conda packages "
            f"({result.fetched} fetched now), {result.wheels} wheels ({result.wheels_added} new); every hash verified\n")
        err(f"use it here:  ENVLOCK_MIRRORS={printable(','.join(result.mirror_entries()))}\n")
        served = base_url or "http://HOST:PORT"
        err(f"served (any static HTTP server over {dest}, e.g. python -m http.server -d {dest}):\n"
            f"              ENVLOCK_MIRRORS={printable(','.join(result.mirror_entries(served)))}\n")
    return 0


def register(app: typer.Typer) -> None:
    """Add `mirror` to the app."""
    app.command("mirror")(mirror_cmd)
