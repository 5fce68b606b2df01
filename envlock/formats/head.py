"""What `envlock check` reads of a conda-lock.yml: the metadata before `package:` (YAML, small), and the package
section without YAML when it is exactly what envlock writes.

The section is read line by line, then rendered again (condalock's own emitter, byte-identical to PyYAML's);
only when the two texts are equal are the packages taken, so they are exactly what a YAML reader of the file
gets. Anything else (a hand-edited layout, a comment, a double-quoted value) is parsed as YAML: slower, the
same answer. A 3-platform lock reads in ~1 ms this way against ~10 ms of YAML (benchmarks/README.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envlock.errors import LockfileError
from envlock.formats.condalock import (
    _bad,
    _emit_entries,
    _MultiLine,
    _package_from_entry,
    _pypi_from_entry,
    check_header,
    load_yaml,
    package_entries,
    parse,
)
from envlock.formats.model import META_PREFIX, LockFile, custom_value
from envlock.models import LockedPackage, PypiPackage


def package_section_digest(text: str) -> str | None:
    """sha256 of the top-level `package:` section of conda-lock text, or None when there is none.

    Line endings, trailing blanks, blank lines and comment lines are ignored, so a CRLF checkout or an
    end-of-file fixer leaves it unchanged; `envlock check` compares it without parsing the packages.
    """
    idx = -1 if text.startswith("package:") else text.find("\npackage:")
    if idx < 0 and not text.startswith("package:"):
        return None
    section = text[idx + 1 :]
    if _normal(section):  # as envlock writes it: its lines are the kept lines already
        return hashlib.sha256(section.removesuffix("\n").encode()).hexdigest()
    lines = [ln.rstrip() for ln in section.splitlines()]
    kept = [ln for ln in lines if ln and not ln.lstrip().startswith("#")]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()


def _normal(section: str) -> bool:
    """Whether the digest's normal form leaves `section` as it is: ASCII without a comment, a blank line, a
    trailing blank or a character splitlines() splits at (str methods in C, not a per-line loop)."""
    return (section.isascii() and "#" not in section and "\n\n" not in section and " \n" not in section
            and not section.endswith(" ") and not any(c in section for c in "\t\r\x0b\x0c\x1c\x1d\x1e\x1f"))


@dataclass(frozen=True)
class LockHead:
    """The metadata part of a conda-lock.yml (read without parsing its packages)."""

    path: Path
    platforms: tuple[str, ...]
    content_hash: dict[str, str]
    custom_metadata: dict[str, str]
    package_digest: str | None  # digest of the package section as it is on disk
    text: str = field(repr=False, default="")
    _parsed: list[LockFile] = field(default_factory=list, repr=False, compare=False)  # full(), once

    def meta(self, key: str) -> str | None:
        return self.custom_metadata.get(META_PREFIX + key)

    def meta_json(self, key: str) -> Any:
        return custom_value(self.custom_metadata, key, default=None)

    def full(self) -> LockFile:
        """The whole lock (its packages parsed: without YAML where the section is envlock's own text)."""
        if not self._parsed:
            section = read_section(self.text, self.platforms)
            if section is None:
                self._parsed.append(parse(load_yaml(self.text, self.path), self.path))
            else:
                cut = self.text.find("\npackage:")
                head = parse({**load_yaml(self.text[: cut + 1], self.path), "package": []}, self.path)
                self._parsed.append(replace(head, packages=section[0], pypi=section[1]))
        return self._parsed[0]


def parse_head(text: str, path: Path) -> LockHead:
    """Only the part of a conda-lock.yml before `package:`; LockfileError when unreadable or too new."""
    cut = text.find("\npackage:")
    doc = load_yaml(text if cut < 0 else text[: cut + 1], path)
    meta, custom = check_header(doc, path)
    try:
        platforms = tuple(str(p) for p in meta.get("platforms") or ())
        hashes = {str(k): str(v) for k, v in (meta.get("content_hash") or {}).items()}
    except (TypeError, AttributeError):
        raise _bad(path, "unexpected structure") from None
    return LockHead(path, platforms, hashes, custom, package_section_digest(text), text)


# --------------------------------------------------------------------------- the section without YAML


def read_section(text: str, platforms: tuple[str, ...]) -> tuple[tuple[LockedPackage, ...], tuple[PypiPackage, ...]] | None:
    """(conda packages, PyPI packages) of the `package:` section when it is envlock's own rendering of them
    (rendered again and compared); None otherwise: the caller parses YAML."""
    cut = text.find("\npackage:")
    if cut < 0:
        return None
    section = text[cut + 1 :]
    entries = _entries(section)
    if entries is None:
        return None
    try:
        conda = [_package_from_entry(e, False) for e in entries if e.get("manager") == "conda"]
        pypi = [_pypi_from_entry(e, False) for e in entries if e.get("manager") == "pip"]
        again = _emit_entries(package_entries(conda, platforms, pypi))
    except (KeyError, TypeError, ValueError, AttributeError, _MultiLine, LockfileError):
        return None
    return (tuple(conda), tuple(pypi)) if again == section else None


def _entries(section: str) -> list[dict[str, Any]] | None:
    """The entries of a section in the block layout envlock writes, values unquoted; None for any other."""
    lines = section.split("\n")
    if lines[0] != "package:" or lines[-1] != "":
        return None
    entries: list[dict[str, Any]] = []
    entry: dict[str, Any] = {}
    block: dict[str, str] | None = None
    for line in lines[1:-1]:
        if line.startswith("- name: "):
            entry = {"name": _plain(line[8:]), "dependencies": {}, "hash": {}}
            entries.append(entry)
            block = None
        elif line.startswith("    ") and block is not None:
            key, sep, value = line[4:].partition(": ")
            if not sep:
                return None
            block[_plain(key)] = _plain(value)
        elif line.startswith("  ") and entries:
            key, sep, value = line[2:].partition(":")
            if key in ("dependencies", "hash") and value == "":
                block = entry[key]
            elif key == "dependencies" and value == " {}":
                block = None
            elif sep and value.startswith(" "):
                entry[key] = _plain(value[1:])
                block = None
            else:
                return None
        else:
            return None
    return entries  # values _plain could not read are None: the caller's rendering then differs


def _plain(value: str) -> Any:
    """A YAML scalar as envlock writes it: plain, or single-quoted ('' for a quote). None for anything else."""
    if value.startswith("'"):
        return value[1:-1].replace("''", "'") if len(value) > 1 and value.endswith("'") else None
    if value.startswith(('"', "&", "*", "!", "{", "[", "|", ">")):
        return None
    return value
