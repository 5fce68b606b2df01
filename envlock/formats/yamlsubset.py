"""The block-style YAML envlock writes, written and read without PyYAML, byte for byte and value for value.

Specs and conda-lock.yml files are small trees of mappings, lists and one-line strings. Writing them through
PyYAML cost a resolve its import (~6 ms) and a pure-Python dumper call per value; reading them cost every
`check`, `create` and `export` PyYAML's Python constructor, node by node (~40 ms for a 3-platform lock of
2,000 lines, with libyaml's parser under it). This module does both for that subset only:

* `scalar` / `dump`: PyYAML's style rule for one line of printable ASCII (emitter.analyze_scalar +
  choose_scalar_style, and the implicit resolvers of YAML 1.1 below), in block style as envlock dumps
  (`sort_keys=False, default_flow_style=False, width=4096`). Anything else (a line break, a tab, non-ASCII,
  a line near the width, an empty or long key) raises NeedsPyYAML: the caller asks PyYAML.
* `parse`: what `yaml.safe_load` returns for block mappings and block sequences (a mapping's sequence not
  indented, PyYAML's default), one-line plain or single-quoted scalars, `[]`/`{}` and one-line flow sequences
  of plain scalars, and comments. At the first thing outside that (a tab or control character, an anchor,
  alias or tag, a double-quoted or multi-line scalar, a number other than a plain decimal int, a date, a
  duplicate key, nesting past MAX_DEPTH) it raises NotSimple, and the caller reads the text with the checked
  PyYAML loader (envlock.formats.untrusted) instead: nothing it accepts can be an alias bomb or nest without bound.

Pure: imports nothing of envlock. tests/test_yamlout.py and tests/test_yamlin.py compare both directions with
PyYAML (its pure emitter and libyaml's) on generated documents, on envlock's files and on edits of them.
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
    # past the first character: a ':' followed by a space or the end, a '#' after a space (str.find: a URL or
    # a sha256 is scanned in C, not character by character)
    return value.find(": ", 1) < 0 and not (len(value) > 1 and value[-1] == ":") and " #" not in value


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


def _write_mapping(doc: Mapping[str, Any], indent: int, out: list[str], first_prefix: str = "") -> None:
    pad = " " * indent
    for n, (k, v) in enumerate(doc.items()):
        if not isinstance(k, str):
            raise NeedsPyYAML(type(k).__name__)
        lead = first_prefix if n == 0 and first_prefix else pad
        head = f"{lead}{scalar(k, key=True, column=len(lead))}:"
        if isinstance(v, Mapping) and v:
            out.append(head + "\n")
            _write_mapping(v, indent + 2, out)
        elif isinstance(v, (list, tuple)) and v:
            out.append(head + "\n")
            _write_sequence(v, indent, out)  # block sequences in a mapping are not indented (PyYAML's default)
        else:
            out.append(f"{head} {_item(v, len(head) + 1)}\n")


def _write_sequence(items: Sequence[Any], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for v in items:
        if isinstance(v, Mapping) and v:
            _write_mapping(v, indent + 2, out, first_prefix=pad + "- ")
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
    _write_mapping(doc, 0, out)
    return "".join(out)


# --------------------------------------------------------------------------- reading


class NotSimple(Exception):
    """The text is outside what this reader reads (the caller reads it with PyYAML)."""


_BOOL = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
#: A plain scalar on one line: no leading indicator (PyYAML's analyze_scalar), no ": " or " #" inside.
_PLAIN_START = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`]|[-?:](?=[^\s,\[\]{}])")
_KEY = re.compile(r"((?:'(?:[^']|'')*'|[^\s'\"#][^\t]*?)):(?: +|\Z)")
#: Characters YAML reads as line breaks or refuses (PyYAML's reader), and the BOM: PyYAML's to handle.
_ODD = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
MAX_DEPTH = 64  # envlock's documents nest 4 deep; deeper is PyYAML's (and its checked loader's) to bound


def _read_scalar(text: str) -> Any:
    """One scalar as PyYAML constructs it (`text` stripped, its comment gone), or NotSimple."""
    if not text:
        return None
    if text[0] == "'":
        if len(text) < 2 or text[-1] != "'" or "'" in text[1:-1].replace("''", ""):
            raise NotSimple(text[:40])
        return text[1:-1].replace("''", "'")
    if (not _PLAIN_START.match(text) or ": " in text or " #" in text or text.endswith(":") or "\t" in text
            or text.startswith(("---", "..."))):
        raise NotSimple(text[:40])
    for pattern in _IMPLICIT.get(text[0], ()):
        if pattern.match(text):
            low = text.lower()
            if low in _BOOL:
                return _BOOL[low]
            if _NULL.match(text):
                return None
            if _INT.match(text):
                return int(text)
            raise NotSimple(text[:40])  # a float, a date, an octal, a sexagesimal …: PyYAML's to read
    return text


def _strip_comment(text: str) -> str:
    """`text` without a trailing ` # comment` (outside a single-quoted scalar)."""
    if "#" not in text:
        return text.rstrip()
    quoted = False
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif ch == "#" and not quoted and (i == 0 or text[i - 1] == " "):
            return text[:i].rstrip()
    return text.rstrip()


def _read_value(text: str) -> Any:
    """A value on its key's or dash's line: a scalar, `[]`, `{}` or a one-line flow sequence of scalars."""
    if text[:1] == "[":
        if not text.endswith("]") or "[" in text[1:-1] or "{" in text or "]" in text[1:-1]:
            raise NotSimple(text[:40])
        inner = text[1:-1].strip()
        if not inner:
            return []
        if "'" in inner or inner.endswith(","):
            raise NotSimple(text[:40])  # quoted items could hold commas: PyYAML's to split
        items = [part.strip() for part in inner.split(",")]
        if any(not item or ":" in item or "#" in item for item in items):
            raise NotSimple(text[:40])
        return [_read_scalar(item) for item in items]
    if text[:1] == "{":
        if text != "{}":
            raise NotSimple(text[:40])
        return {}
    return _read_scalar(text)


class _Lines:
    """The document's meaningful lines as (indent, content), comments and blank lines dropped."""

    def __init__(self, text: str) -> None:
        if _ODD.search(text):
            raise NotSimple("a control character, a tab, a BOM or a YAML line break")
        self.items: list[tuple[int, str]] = []
        for raw in text.split("\n"):
            content = raw.lstrip(" ")
            if not content or content[0] == "#":
                continue
            if content.startswith(("---", "...", "%", "&", "*", "!", "? ")) or content == "?":
                raise NotSimple(content[:40])
            self.items.append((len(raw) - len(content), _strip_comment(content)))
        self.pos = 0
        self.depth = 0

    def peek(self) -> tuple[int, str] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None


def _read_block(lines: _Lines, indent: int) -> Any:
    """The node whose lines start at `indent`."""
    head = lines.peek()
    assert head is not None and head[0] == indent
    lines.depth += 1
    if lines.depth > MAX_DEPTH:
        raise NotSimple("nested too deeply")
    try:
        if head[1] == "-" or head[1].startswith("- "):
            return _read_sequence(lines, indent)
        return _read_mapping(lines, indent)
    finally:
        lines.depth -= 1


def _read_child(lines: _Lines, parent: int, *, in_mapping: bool) -> Any:
    """The nested node after `key:` or `-` with nothing on its line (a mapping's sequence may sit at `parent`)."""
    nxt = lines.peek()
    if nxt is None or nxt[0] < parent or (nxt[0] == parent and not (in_mapping and nxt[1].startswith("- "))):
        return None  # an empty value: null
    if nxt[0] == parent:
        return _read_sequence(lines, parent)
    return _read_block(lines, nxt[0])


def _read_mapping(lines: _Lines, indent: int, first: str | None = None) -> dict[str, Any]:
    out: dict[Any, Any] = {}
    while True:
        if first is not None:
            content, first = first, None
        else:
            line = lines.peek()
            if line is None or line[0] < indent:
                return out
            if line[0] > indent or line[1].startswith("- ") or line[1] == "-":
                if line[0] == indent:
                    return out  # a sequence at this indent belongs to the mapping above
                raise NotSimple(line[1][:40])
            content = line[1]
            lines.pos += 1
        m = _KEY.match(content)
        if m is None:
            raise NotSimple(content[:40])
        key = _read_scalar(m.group(1).rstrip())
        if isinstance(key, (list, dict)) or key in out:
            raise NotSimple(str(key)[:40])  # a duplicate key: PyYAML (and the checked loader) decide
        rest = content[m.end():]
        out[key] = _read_value(rest) if rest else _read_child(lines, indent, in_mapping=True)


def _read_sequence(lines: _Lines, indent: int) -> list[Any]:
    out: list[Any] = []
    while True:
        line = lines.peek()
        if line is None or line[0] != indent or not (line[1] == "-" or line[1].startswith("- ")):
            if line is not None and line[0] > indent:
                raise NotSimple(line[1][:40])
            return out
        lines.pos += 1
        rest = line[1][2:].lstrip(" ") if line[1] != "-" else ""
        if not rest:
            out.append(_read_child(lines, indent, in_mapping=False))
        elif rest.startswith("- ") or rest == "-":
            raise NotSimple("a sequence in a sequence")
        elif rest[0] not in "[{" and _KEY.match(rest):  # `- key: value`: a mapping, its keys below this one's
            lines.depth += 1
            if lines.depth > MAX_DEPTH:
                raise NotSimple("nested too deeply")
            out.append(_read_mapping(lines, indent + len(line[1]) - len(rest), first=rest))
            lines.depth -= 1
        else:
            out.append(_read_value(rest))


def parse(text: str) -> Any:
    """`yaml.safe_load(text)` for envlock's block-style subset; NotSimple for anything else."""
    lines = _Lines(text)
    head = lines.peek()
    if head is None:
        raise NotSimple("an empty document")  # PyYAML: None; let it say so
    if head[0] != 0:
        raise NotSimple("an indented document")
    if len(lines.items) == 1 and not head[1].startswith(("- ", "[", "{")) and head[1] != "-" \
            and not _KEY.match(head[1]):
        return _read_value(head[1])  # a document of one scalar (a spec's dependency line, read alone)
    doc = _read_block(lines, 0)
    if lines.peek() is not None:
        raise NotSimple(lines.peek()[1][:40])  # type: ignore[index]  # peek() is not None here (tested on the line above)
    return doc
