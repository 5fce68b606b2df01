"""`envlock config` (adapter: options → envlock.seams.config.load → render): what is in force, and from where."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from envlock.commands import options
from envlock.commands.fastargs import typer_command


def config_cmd(
    mirror: list[str] = options.mirror(),
    project_dir: str = options.project_dir(),
    as_json: bool = options.as_json(),
) -> int:
    """Print the mirrors in force and where each comes from (--mirror > ENVLOCK_MIRRORS > project > user)."""
    from envlock.seams.config import load
    from envlock.names import printable

    cfg = load(mirror, Path(project_dir))
    if as_json:
        sys.stdout.write(json.dumps(cfg.to_json(), indent=2, sort_keys=True) + "\n")
        return 0
    from envlock.wrapping import columns, fold

    cols = columns(sys.stdout)

    def out(text: str) -> None:  # folded to the width (80 on a pipe); paths and values from config files with
        # control characters escaped
        sys.stdout.write("".join(f"{ln}\n" for line in text.splitlines() for ln in fold(printable(line), cols, "    ")))

    out("mirrors (precedence: --mirror > ENVLOCK_MIRRORS > project envlock.toml > user envlock.toml):\n")
    if not cfg.entries:
        out("  none: every channel and index is fetched from its own URL\n")
    entries = [e.shown() for e in cfg.entries]  # credentials marked, never shown
    width = max((len(e.key) for e in entries), default=0)
    for e in entries:
        out(f"  {e.key.ljust(width)}  {e.url}  (from {e.origin})\n")
        for url, origin in e.shadows:
            out(f"  {' ' * width}  overrides {url} (from {origin})\n")
    out("config files:\n")
    for scope, path, present in cfg.files:
        out(f"  {scope:<8} {path}  ({'read' if present else 'absent'})\n")
    out(f"cache dir   {cfg.cache_dir.path}  (from {cfg.cache_dir.origin})\n")
    out(f"envs dir    {cfg.envs_dir.path}  (from {cfg.envs_dir.origin})\n")
    return 0


def register(app: typer.Typer) -> None:
    """Add `config` to the app."""
    app.command("config")(typer_command(config_cmd))
