"""What `envlock check` reads of a conda-lock.yml: the metadata before `package:` (YAML, small), and the package
section without YAML when it is exactly what envlock writes.

The section is matched entry by entry against envlock's layout (one compiled pattern), and every value's text
must be exactly the text envlock writes for that value (condalock's emitter, byte-identical to PyYAML's): then
a YAML reader of the file reads the same entries. Anything else (a hand-edited layout, a comment, a
double-quoted value) is parsed as YAML: slower, the same answer (benchmarks/README.md has the figures).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from envlock.formats.condalock import (
    _bad,
    _MultiLine,
    _scalar,
    check_header,
    load_yaml,
    parse,
)
from envlock.formats.model import META_PREFIX, LockFile, custom_value
from envlock.models import LockedPackage, PypiPackage, field, record, replace
from envlock.names import conda_build


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


@record
class LockHead:
    """The metadata part of a conda-lock.yml (read without parsing its packages)."""

    path: Path
    platforms: tuple[str, ...]
    content_hash: dict[str, str]
    custom_metadata: dict[str, str]
    package_digest: str | None  # digest of the package section as it is on disk
    text: str = field(repr=False, default="")
    header: dict[str, Any] = field(repr=False, default_factory=dict)  # the YAML before `package:`
    _parsed: list[LockFile] = field(default_factory=list, repr=False, compare=False)  # full(), once

    def meta(self, key: str) -> str | None:
        return self.custom_metadata.get(META_PREFIX + key)

    def meta_json(self, key: str) -> Any:
        return custom_value(self.custom_metadata, key, default=None)

    def packages_read(self) -> LockFile:
        """The lock as its files and fingerprints read it: every package, without YAML where the section is
        envlock's own text (then without dependency lists, which neither reads)."""
        if not self._parsed:
            section = read_section(self.text, self.platforms) if "package" not in self.header else None
            if section is None:
                self._parsed.append(parse(load_yaml(self.text, self.path), self.path))
            else:
                head = parse({**self.header, "package": []}, self.path)
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
    return LockHead(path, platforms, hashes, custom, package_section_digest(text), text, doc)


# --------------------------------------------------------------------------- the section without YAML

# One entry in envlock's layout (condalock._emit_entries). What the files beside the lock are made of must read
# exactly as YAML reads it: a URL is one plain (`scheme://`, no space) or single-quoted scalar, a hash hex
# digits with at least one letter (all digits would be a YAML number), and name, version and platform are
# checked to be the text envlock writes for the value (_value). A dependency line is one key and one value,
# plain (no indicator first, no quote or `#`, no `: ` anywhere, no space or `:` last: nothing YAML reads otherwise;
# inner spaces are the exact pins of run_exports, `ld_impl_linux-64: 2.45.1 default_hbd61a6d_102`) or
# single-quoted; what it says is not read here (no derived file holds it), only that it is a line of its own.
_QUOTED = r"'(?:[^'\n]|'')*'"
_PLAIN = r"(?![^\n]*: )[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^\n'\"#]*[^\s'\"#:])?"  # no YAML indicator first
_KEY = r"[A-Za-z0-9_.][^\s'\"#:]*"
_HEXV = r"(?=[0-9]*[a-fA-F])[0-9a-fA-F]+"
_ENTRY = re.compile(
    r"- name: (?P<name>[^\n]+)\n  version: (?P<version>[^\n]+)\n  manager: (?P<manager>conda|pip)\n"
    rf"  platform: (?P<platform>[^\n]+)\n  dependencies:(?: {{}}\n|\n(?:    (?:{_KEY}|{_QUOTED}): (?:{_PLAIN}|{_QUOTED})\n)+)"
    rf"  url: (?P<url>[a-z][a-z0-9+.-]*://[^\s'\"]+|{_QUOTED})\n  hash:\n(?:    md5: (?P<md5>{_HEXV})\n)?"
    rf"(?:    sha256: (?P<sha256>{_HEXV})\n)?  category: main\n  optional: false\n"
)


def read_section(text: str, platforms: tuple[str, ...]) -> tuple[tuple[LockedPackage, ...], tuple[PypiPackage, ...]] | None:
    """(conda packages, PyPI packages) of the `package:` section when it is exactly in envlock's form (each entry
    envlock's layout, its values as above, the entries platform by platform, conda before pip); None otherwise:
    the caller parses YAML. The packages carry no dependency lists (neither the files beside the lock nor its
    fingerprints read them)."""
    cut = text.find("\npackage:")  # where parse_head cuts: the header is everything before it
    if cut < 0 or not text.startswith("\npackage:\n", cut):
        return None
    section, at = text[cut + len("\npackage:\n") :], 0
    if not (section.isascii() and section.replace("\n", "").isprintable()):
        return None  # a character other than a line break or printable ASCII: YAML may refuse it, or envlock
        # quotes it another way (what the regex [^\n\x20-\x7e] found, with str methods in C at ~3x its speed)
    conda: list[LockedPackage] = []
    pypi: list[PypiPackage] = []
    order: list[tuple[str, str]] = []  # (platform, manager) of each entry, in the file's order
    for m in _ENTRY.finditer(section):
        if m.start() != at:
            return None  # something between two entries
        at = m.end()
        name, version, platform = _value(m["name"]), _value(m["version"]), _value(m["platform"])
        url, md5, sha256, manager = _unquoted(m["url"]), m["md5"], m["sha256"], m["manager"]
        if name is None or version is None or platform is None or (md5 is not None and len(md5) != 32) \
                or (sha256 is not None and len(sha256) != 64) or not url.strip() or url.endswith(":"):
            return None  # (a hash of another length: the YAML reader names it)
        if manager == "conda" and md5 is not None:
            conda.append(LockedPackage(name, version, conda_build(url, name, version), platform, url, md5, sha256,
                                       subdir=url.rsplit("/", 2)[-2] if url.count("/") >= 2 else ""))
        elif manager == "pip" and sha256 is not None and md5 is None:
            pypi.append(PypiPackage(name, version, platform, url, sha256))
        else:
            return None
        order.append((platform, manager))
    wanted = [(p, m) for p in platforms for m in ("conda", "pip") for _ in range(order.count((p, m)))]
    if at != len(section) or order != wanted:
        return None  # not the end of the file, or not platform by platform, conda before pip
    return tuple(conda), tuple(pypi)


def _unquoted(raw: str) -> str:
    return raw[1:-1].replace("''", "'") if raw[:1] == "'" else raw


def _value(raw: str) -> str | None:
    """The string a scalar's text stands for when that text is exactly how envlock writes it, else None."""
    value = _unquoted(raw) if len(raw) > 1 and raw[0] == raw[-1] == "'" else raw
    try:
        return value if _scalar(value) == raw else None
    except _MultiLine:
        return None
