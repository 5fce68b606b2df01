"""Refuse a package archive that would write outside the environment, before anything is linked.

py-rattler 0.28 (measured, tests/reliability/test_security.py): an `info/paths.json` entry with
`../` fails only while linking (other packages may already be in the prefix), an absolute path
makes the installer panic and abort the whole process, and a symlink pointing outside the prefix
is created as is. create.py calls `check_extracted` on every archive it has just extracted.
"""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path

from envlock.errors import EnvCreateError


def unsafe_path(rel: str) -> str | None:
    """Why a package-relative path is unsafe ('' / absolute / `..`), or None when it stays inside."""
    if not rel or not rel.strip():
        return "an empty path"
    norm = rel.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return f"the absolute path {rel!r}"
    if ".." in norm.split("/"):
        return f"the path {rel!r} climbs out with '..'"
    return None


def unsafe_link(rel: str, target: str) -> str | None:
    """Why a symlink at `rel` (package-relative) pointing at `target` leaves the prefix, or None."""
    norm = target.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return f"the symlink {rel!r} points at the absolute path {target!r}"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel.replace("\\", "/")), norm))
    if resolved == ".." or resolved.startswith("../"):
        return f"the symlink {rel!r} points outside the environment ({target!r})"
    return None


def _listed_paths(root: Path) -> list[str]:
    """The paths the installer will link: info/paths.json, else info/files."""
    paths_json = root / "info" / "paths.json"
    if paths_json.is_file():
        try:
            doc = json.loads(paths_json.read_text(encoding="utf-8"))
            return [str(entry.get("_path", "")) for entry in doc.get("paths", [])]
        except (ValueError, AttributeError, TypeError):
            return [""]  # unreadable: refuse rather than guess
    files = root / "info" / "files"
    if files.is_file():
        return [ln for ln in files.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return []


def problems(root: Path) -> list[str]:
    """Everything unsafe about an extracted package at `root` (empty list: safe to link)."""
    found = [why for rel in _listed_paths(root) if (why := unsafe_path(rel))]
    for dirpath, dirnames, filenames in os.walk(root):  # never follows symlinks
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            if path.is_symlink():
                rel = path.relative_to(root).as_posix()
                if why := unsafe_link(rel, os.readlink(path)):
                    found.append(why)
    return found


def check_extracted(root: Path, filename: str) -> None:
    """EnvCreateError when the extracted package at `root` would write or point outside the prefix."""
    found = problems(root)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        raise EnvCreateError(
            f"{filename} is unsafe: {found[0]}{more}; nothing was linked",
            hint="a conda package may only write inside the environment; do not install it, and tell the "
                 "channel's maintainers (the lock names the package's URL)",
        )
