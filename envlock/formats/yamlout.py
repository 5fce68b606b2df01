"""YAML out without PyYAML: the block-style documents envlock writes, byte for byte as PyYAML writes them.

Specs and conda-lock.yml files were dumped by PyYAML (`safe_dump(..., sort_keys=False,
default_flow_style=False, width=4096)`); a resolve then imported it (~6 ms) only to write them. The
documents are small trees of mappings, lists and strings, and the only real work is a string's style:
plain when YAML would read it back as the same string, else single-quoted. That is PyYAML's rule
(emitter.analyze_scalar + choose_scalar_style, resolver's implicit patterns) for one-line printable ASCII,
ported here; anything else (a line break, a tab, non-ASCII, a line near the 4096 width, a long key)
returns None and the caller asks PyYAML, so the bytes never differ. tests/test_yamlout.py compares
both on generated strings and documents (PyYAML's pure emitter and libyaml's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: PyYAML's implicit resolvers (yaml/resolver.py, YAML 1.1): a plain scalar matching one is not a string.
_IMPLICIT: dict[str, list[re.Pattern[str]]] = {}


def _resolver(pattern: str, first: str) -> None:
    compiled = re.compile(pattern, re.X)
    for ch in first or [""]:
        _IMPLICIT.setdefault(ch, []).append(compiled)


_resolver(r"""^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$""", "yYnNtTfFoO")
_resolver(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
              |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
              |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
              |[-+]?\.(?:inf|Inf|INF)
              |\.(?:nan|NaN|NAN))$""", "-+0123456789.")
_resolver(r"""^(?:[-+]?0b[0-1_]+
              |[-+]?0[0-7_]+
              |[-+]?(?:0|[1-9][0-9_]*)
              |[-+]?0x[0-9a-fA-F_]+
              |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""", "-+0123456789")
_resolver(r"^(?:<<)$", "<")
_resolver(r"""^(?: ~ |null|Null|NULL | )$""", "~nN")
_IMPLICIT.setdefault("", []).append(re.compile(r"""^(?: ~ |null|Null|NULL | )$""", re.X))
_resolver(r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
              |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
               (?:[Tt]|[ \t]+)[0-9][0-9]?
               :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
               (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""", "0123456789")
_resolver(r"^(?:=)$", "=")
_resolver(r"^(?:!|&|\*)$", "!&*")

_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*\Z")
_WIDTH = 4000  # below PyYAML's width=4096: no line of ours can be folded
_SIMPLE_KEY = 100  # PyYAML writes a key of 123+ characters as a complex `? key` entry


class NeedsPyYAML(Exception):
    """A value outside what this module writes (the caller asks PyYAML instead)."""


def _is_str(value: str) -> bool:
    """Whether YAML reads `value`, written plain, back as a string (no implicit resolver matches it)."""
    return not any(p.match(value) for p in _IMPLICIT.get(value[:1], ()))


def _plain_ok(value: str, key: bool) -> bool:
    """PyYAML's analyze_scalar for one line of printable ASCII: may it be written plain (block context)?"""
    if not value:
        return True  # (an empty value resolves to null below, so it is quoted)
    if value.startswith(("---", "...")) or value[0] == " " or value[-1] == " ":
        return False
    first, followed = value[0], len(value) == 1 or value[1] == " "
    if first in "#,[]{}&*!|>'\"%@`" or (first in "?:" and followed) or (first == "-" and followed):
        return False
    for i in range(1, len(value)):
        ch = value[i]
        if ch == ":" and (i + 1 == len(value) or value[i + 1] == " "):
            return False
        if ch == "#" and value[i - 1] == " ":
            return False
    return True


def scalar(value: str, *, key: bool = False, column: int = 0) -> str:
    """How PyYAML writes the string `value` in block context (a mapping key with `key`) starting at `column`."""
    if not _PRINTABLE_ASCII.match(value) or (key and not 0 < len(value) < _SIMPLE_KEY):
        raise NeedsPyYAML(value[:40])  # (an empty or long key is a complex `? key` entry)
    out = value if _plain_ok(value, key) and _is_str(value) else "'" + value.replace("'", "''") + "'"
    if column + len(out) > _WIDTH:
        raise NeedsPyYAML(value[:40])  # PyYAML may fold it at a space past its width
    return out


def _item(value: Any, column: int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return scalar(value, column=column)
    if isinstance(value, Mapping) and not value:
        return "{}"
    if isinstance(value, (list, tuple)) and not value:
        return "[]"
    raise NeedsPyYAML(type(value).__name__)


def _mapping(doc: Mapping[str, Any], indent: int, out: list[str], first_prefix: str = "") -> None:
    pad = " " * indent
    for n, (k, v) in enumerate(doc.items()):
        if not isinstance(k, str):
            raise NeedsPyYAML(type(k).__name__)
        lead = first_prefix if n == 0 and first_prefix else pad
        head = f"{lead}{scalar(k, key=True, column=len(lead))}:"
        if isinstance(v, Mapping) and v:
            out.append(head + "\n")
            _mapping(v, indent + 2, out)
        elif isinstance(v, (list, tuple)) and v:
            out.append(head + "\n")
            _sequence(v, indent, out)  # block sequences in a mapping are not indented (PyYAML's default)
        else:
            out.append(f"{head} {_item(v, len(head) + 1)}\n")


def _sequence(items: Sequence[Any], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for v in items:
        if isinstance(v, Mapping) and v:
            _mapping(v, indent + 2, out, first_prefix=pad + "- ")
        elif isinstance(v, (list, tuple)) and v:
            raise NeedsPyYAML("a list in a list")
        else:
            out.append(f"{pad}- {_item(v, indent + 2)}\n")


def dump(doc: Mapping[str, Any]) -> str:
    """`yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=4096)` for a mapping of
    mappings, lists, strings, ints, bools and None (NeedsPyYAML for anything else)."""
    if not doc:
        return "{}\n"
    out: list[str] = []
    _mapping(doc, 0, out)
    return "".join(out)
