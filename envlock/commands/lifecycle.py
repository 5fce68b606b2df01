"""`envlock lifecycle` command(s) (adapter: options → request → one call → render)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
