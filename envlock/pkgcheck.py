"""Refuse a package archive that would write outside the environment, before anything is linked.

py-rattler 0.28 (measured, tests/reliability/test_security.py): an `info/paths.json` entry with
`../` fails only while linking (other packages may already be in the prefix), an absolute path
makes the installer panic and abort the whole process, and a symlink pointing outside the prefix
is created as is. create.py calls `check_extracted` on every archive it has just extracted.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from envlock.errors import EnvCreateError
from envlock.untrusted import read_json


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
            doc = read_json(paths_json)
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


# --------------------------------------------------------------------------- the prefix as it will be

#: What envlock itself writes into a prefix (besides the packages): checked like the packages' own paths.
OWN_DIRS = ("conda-meta", "etc/conda/activate.d", "etc/conda/deactivate.d", "bin", "share/envlock")
_MAX_HOPS = 40  # symlinks followed while resolving one path (the kernel's own limit is 40)


class Escape(Exception):
    """A path resolves out of the prefix (through the links of the prefix as it will be)."""


class PrefixView:
    """The prefix as it will be once some packages are linked: their symlinks over what is on disk now.

    `resolve` walks a prefix-relative path component by component as the kernel would, following each symlink
    it meets (a package's first, else one on disk), and raises Escape the moment it leaves the prefix.
    """

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.links: dict[str, str] = {}  # prefix-relative path -> target, from the packages
        self.owners: dict[str, str] = {}  # prefix-relative path -> the package (file name) that ships it
        self.listed: dict[str, list[str]] = {}  # package -> its prefix-relative paths
        self._disk: dict[str, str | None] = {}

    def add(self, entry: Path, filename: str, python: str = "") -> None:
        """A package's extracted cache entry: its paths (noarch: python ones moved where they will be linked)."""
        noarch_python = _is_noarch_python(entry)
        paths = []
        for rel in _listed_paths(entry):
            where = _linked_at(rel, python) if noarch_python else rel
            paths.append(where)
            self.owners.setdefault(where, filename)
            src = entry / rel
            if src.is_symlink():
                self.links[where] = os.readlink(src)
        self.listed[filename] = paths

    def _on_disk(self, rel: str) -> str | None:
        """The target of a symlink at `rel` in the prefix now, or None (absent, or not a link)."""
        if rel not in self._disk:
            try:
                self._disk[rel] = os.readlink(self.prefix / rel)
            except (OSError, ValueError):
                self._disk[rel] = None
        return self._disk[rel]

    def resolve(self, rel: str, follow_last: bool = True) -> str:
        """`rel` resolved inside the prefix (prefix-relative, '' for the prefix itself); Escape when it leaves."""
        todo = [p for p in rel.replace("\\", "/").split("/")][::-1]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if not done:
                    raise Escape(rel)
                done.pop()
                continue
            here = "/".join([*done, part])
            target = self.links.get(here) if here in self.links else self._on_disk(here)
            if target is None or (not todo and not follow_last):
                done.append(part)
                continue
            hops += 1
            norm = target.replace("\\", "/")
            if hops > _MAX_HOPS or norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
                raise Escape(rel)
            todo.extend(norm.split("/")[::-1])
        return "/".join(done)

    def problems(self, own: tuple[str, ...] = OWN_DIRS) -> list[tuple[str, str]]:
        """(package file name or 'envlock', why) for every path that leaves the prefix."""
        found: list[tuple[str, str]] = []
        checked: dict[str, bool] = {}

        def leaves(rel: str, follow_last: bool) -> bool:
            key = f"{follow_last}:{rel}"
            if key not in checked:
                try:
                    self.resolve(rel, follow_last)
                    checked[key] = False
                except Escape:
                    checked[key] = True
            return checked[key]

        for filename, paths in self.listed.items():
            for rel in paths:
                parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
                if leaves(parent, True) or (rel in self.links and leaves(rel, True)):
                    found.append((filename, f"{rel!r} leads out of the environment through its symlinks"))
                    break
        for rel in own:
            if leaves(rel, True):
                who = self.owners.get(rel) or next((self.owners[p] for p in self.links if rel.startswith(p + "/")),
                                                   "the environment")
                found.append((who, f"{rel!r}, where envlock writes, leads out of the environment"))
        return found


def _is_noarch_python(entry: Path) -> bool:
    doc = read_json(entry / "info" / "index.json")  # the package's own metadata: any shape at all
    return isinstance(doc, dict) and doc.get("noarch") == "python"


def _linked_at(rel: str, python: str) -> str:
    """Where a noarch: python package's path is linked (site-packages/ and python-scripts/ move)."""
    if rel.startswith("site-packages/"):
        return f"lib/python{python or '3'}/{rel}"
    if rel.startswith("python-scripts/"):
        return "bin/" + rel[len("python-scripts/"):]
    return rel


def check_prefix(prefix: Path, entries: list[tuple[Path, str]], python: str = "") -> None:
    """EnvCreateError when a package's paths, or envlock's own, would leave `prefix` once every package in
    `entries` ((cache entry, file name)) is linked over what the prefix holds now (chains included)."""
    view = PrefixView(prefix)
    for entry, filename in entries:
        view.add(entry, filename, python)
    found = view.problems(OWN_DIRS + ((f"lib/python{python}/site-packages",) if python else ()))
    if found:
        who, why = found[0]
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        if who == "the environment":  # a link already in the prefix, none of the packages'
            raise EnvCreateError(f"{prefix}: {why}{more}; nothing was linked",
                                 hint=f"a symlink in {prefix} leads out of it; remove it, or use a new -p PREFIX")
        raise EnvCreateError(
            f"{who} is unsafe: {why}{more}; nothing was linked",
            hint="a conda package may only write inside the environment; do not install it, and tell the channel's "
                 "maintainers (the lock names the package's URL)",
        )
