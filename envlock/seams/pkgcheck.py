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
from typing import Any

from envlock.errors import EnvCreateError
from envlock.formats.untrusted import read_json


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


def summarize(entry: Path) -> dict[str, Any]:
    """What check_prefix needs of an extracted package: its symlinks (path -> target), the directories its paths
    lie in, and whether it is noarch: python. Made once, when the entry is verified, and kept in the user's trust
    store (envlock/seams/trust.py), so a warm create does not read every package's paths.json again."""
    links: dict[str, str] = {}
    dirs: set[str] = set()
    for rel in _listed_paths(entry):
        dirs.add(rel.rsplit("/", 1)[0] if "/" in rel else "")
        if os.path.islink(os.path.join(entry, rel)):
            links[rel] = os.readlink(os.path.join(entry, rel))
    return {"links": links, "dirs": sorted(dirs), "noarch_python": _is_noarch_python(entry)}


class PrefixView:
    """The prefix as it will be once some packages are linked: their symlinks over what is on disk now.

    `resolve` walks a prefix-relative path component by component as the kernel would, following each symlink
    it meets (a package's first, else one on disk), and raises Escape the moment it leaves the prefix.
    """

    def __init__(self, prefix: Path) -> None:
        self.prefix = str(prefix)
        self.on_disk = os.path.isdir(prefix)  # a new prefix has no links yet
        self.links: dict[str, str] = {}  # prefix-relative path -> target, from the packages
        self.owners: dict[str, str] = {}  # prefix-relative link path -> the package (file name) that ships it
        self.checks: list[tuple[str, str]] = []  # (package, a link or a directory of its paths) to resolve
        self._disk: dict[str, str | None] = {}

    def add(self, summary: dict[str, Any], filename: str, python: str = "") -> None:
        """A package (its summarize()): its links and directories, where they will be linked (noarch: python
        ones moved to site-packages and bin/)."""
        noarch = bool(summary.get("noarch_python"))
        for rel, target in (summary.get("links") or {}).items():
            where = _linked_at(rel, python) if noarch else rel
            self.links[where] = str(target)
            self.owners.setdefault(where, filename)
            self.checks.append((filename, where))
        for rel in summary.get("dirs") or ():
            self.checks.append((filename, _linked_at(rel, python) if noarch else rel))

    def _on_disk(self, rel: str) -> str | None:
        """The target of a symlink at `rel` in the prefix now, or None (absent, or not a link)."""
        if not self.on_disk:
            return None
        if rel not in self._disk:
            try:
                self._disk[rel] = os.readlink(os.path.join(self.prefix, rel))
            except (OSError, ValueError):
                self._disk[rel] = None
        return self._disk[rel]

    def resolve(self, rel: str, follow_last: bool = True) -> str:
        """`rel` resolved inside the prefix (prefix-relative, '' for the prefix itself); Escape when it leaves."""
        todo = rel.replace("\\", "/").split("/")[::-1]
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

    def leaves(self, rel: str) -> bool:
        try:
            self.resolve(rel)
            return False
        except Escape:
            return True

    def problems(self, own: tuple[str, ...] = OWN_DIRS) -> list[tuple[str, str]]:
        """(package file name or 'the environment', why) for every path that leaves the prefix."""
        found: list[tuple[str, str]] = []
        flagged: set[str] = set()
        for filename, rel in dict.fromkeys(self.checks):
            if filename not in flagged and self.leaves(rel):
                flagged.add(filename)
                found.append((filename, f"{rel!r} leads out of the environment through its symlinks"))
        for rel in own:
            if self.leaves(rel):
                who = self.owners.get(rel) or next((self.owners[p] for p in self.links if rel.startswith(p + "/")),
                                                   "the environment")
                found.append((who, f"{rel!r}, where envlock writes, leads out of the environment"))
        return found


def _is_noarch_python(entry: Path) -> bool:
    doc = read_json(entry / "info" / "index.json")  # the package's own metadata: any shape at all
    return isinstance(doc, dict) and doc.get("noarch") == "python"


def _linked_at(rel: str, python: str) -> str:
    """Where a noarch: python package's path is linked (site-packages/ and python-scripts/ move)."""
    if rel == "site-packages" or rel.startswith("site-packages/"):
        return f"lib/python{python or '3'}/{rel}"
    if rel == "python-scripts" or rel.startswith("python-scripts/"):
        return "bin" + rel[len("python-scripts"):]
    return rel


def check_prefix(prefix: Path, packages: list[tuple[dict[str, Any], str]], python: str = "") -> None:
    """EnvCreateError when a package's paths, or envlock's own, would leave `prefix` once every package in
    `packages` ((summarize() of its entry, file name)) is linked over what the prefix holds now (chains included)."""
    view = PrefixView(prefix)
    for summary, filename in packages:
        view.add(summary, filename, python)
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
