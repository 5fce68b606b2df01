"""The CMake language, read as data: commands out of a CMakeLists.txt, `${}` references expanded, `if()`
conditions decided in three values (pure: text in, values out; nothing is run).

Untrusted input, bounded: the lexer is one linear pass (no backtracking regex over the text); an expansion
stops after MAX_EXPANSIONS rounds and MAX_VALUE characters; an `if()` nests at most MAX_NESTING parentheses;
a block structure at most MAX_NESTING deep is kept (deeper blocks are skipped, not followed).

A value is a string (a CMake list is `;`-separated, as CMake keeps it); UNKNOWN marks a part envlock cannot
know (an environment variable, a result computed at configure time): as a path it becomes `*`, in a condition
it makes the condition undecided (None).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNKNOWN = "\x01"
MAX_VALUE = 64 << 10
MAX_EXPANSIONS = 32
MAX_NESTING = 64
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACKET = re.compile(r"\[(=*)\[")
_REF = re.compile(r"\$(ENV|CACHE)?\{([^${}]*)\}")  # an innermost reference: no `${` inside
_FALSE = {"", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND"}
_TRUE = {"1", "ON", "YES", "TRUE", "Y"}
_VARNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_UNARY = {"EXISTS", "COMMAND", "DEFINED", "TARGET", "POLICY", "TEST", "IS_DIRECTORY", "IS_SYMLINK",
          "IS_ABSOLUTE", "IS_READABLE", "IS_WRITABLE", "IS_EXECUTABLE"}  # fmt: skip
_BINARY = {"STREQUAL", "STRLESS", "STRGREATER", "STRLESS_EQUAL", "STRGREATER_EQUAL", "EQUAL", "LESS", "GREATER",
           "LESS_EQUAL", "GREATER_EQUAL", "VERSION_EQUAL", "VERSION_LESS", "VERSION_GREATER",
           "VERSION_LESS_EQUAL", "VERSION_GREATER_EQUAL", "MATCHES", "IN_LIST", "PATH_EQUAL", "IS_NEWER_THAN"}  # fmt: skip
Tri = bool | None


@dataclass(frozen=True, slots=True)
class Arg:
    text: str
    quoted: bool = False  # "..." or a bracket argument: one argument, never split on `;`
    bracket: bool = False  # [[...]]: no expansion either


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # lower case (CMake command names are case-insensitive)
    args: tuple[Arg, ...]
    line: int


@dataclass
class Block:
    """if/foreach/while/function/macro/block: (the opening or elseif/else command, its body) per part."""

    kind: str
    parts: list[tuple[Command, list[Command | Block]]] = field(default_factory=list)

    @property
    def line(self) -> int:
        return self.parts[0][0].line


_OPEN = {"if": "endif", "foreach": "endforeach", "while": "endwhile", "function": "endfunction",
         "macro": "endmacro", "block": "endblock"}  # fmt: skip


def commands(text: str) -> Iterator[Command]:
    """Every command invocation of a CMake file, in order (comments and stray text skipped)."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c == "#":
            i, line = _comment(text, i, line)
        elif c.isalpha() or c == "_":
            m = _IDENT.match(text, i)
            assert m is not None
            j = m.end()
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "(":
                args, i, end_line = _args(text, j + 1, line)
                yield Command(m.group(0).lower(), tuple(args), line)
                line = end_line
            else:
                i = j
        else:
            i += 1


def _comment(text: str, i: int, line: int) -> tuple[int, int]:
    m = _BRACKET.match(text, i + 1)
    if m:
        close = "]" + m.group(1) + "]"
        end = text.find(close, m.end())
        end = len(text) if end < 0 else end + len(close)
        return end, line + text.count("\n", i, end)
    end = text.find("\n", i)
    return (len(text) if end < 0 else end), line


def _args(text: str, i: int, line: int) -> tuple[list[Arg], int, int]:
    out: list[Arg] = []
    n, depth = len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif c == "#":
            i, line = _comment(text, i, line)
        elif c == "(":
            depth += 1
            out.append(Arg("("))
            i += 1
        elif c == ")":
            depth -= 1
            i += 1
            if depth == 0:
                break
            out.append(Arg(")"))
        elif c == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    nxt = text[j + 1]
                    if nxt == "\n":
                        line += 1
                    else:
                        buf.append({"n": "\n", "t": "\t", "r": "\r", ";": ";"}.get(nxt, nxt))
                    j += 2
                    continue
                if text[j] == "\n":
                    line += 1
                buf.append(text[j])
                j += 1
            out.append(Arg("".join(buf), quoted=True))
            i = j + 1
        elif c == "[" and _BRACKET.match(text, i):
            m = _BRACKET.match(text, i)
            assert m is not None
            close = "]" + m.group(1) + "]"
            end = text.find(close, m.end())
            end = n if end < 0 else end
            body = text[m.end() : end]
            out.append(Arg(body, quoted=True, bracket=True))
            line += body.count("\n")
            i = min(n, end + len(close))
        else:
            j = i
            while j < n and text[j] not in " \t\r\n()":
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] not in "\n" else 1
            out.append(Arg(text[i:j].replace("\\;", ";")))
            i = j
    return out, i, line


def blocks(cmds: Iterator[Command]) -> list[Command | Block]:
    """Commands nested into their blocks; an end without an opening is dropped, an unclosed block is closed at
    the end of the file; blocks deeper than MAX_NESTING are dropped whole."""
    top: list[Command | Block] = []
    stack: list[tuple[Block, list[Command | Block]]] = []
    dropped = 0  # open blocks below the depth cap
    for cmd in cmds:
        name = cmd.name
        body = stack[-1][1] if stack else top
        if name in _OPEN:
            if dropped or len(stack) >= MAX_NESTING:
                dropped += 1
                continue
            blk = Block(name, [(cmd, [])])
            body.append(blk)
            stack.append((blk, blk.parts[0][1]))
        elif dropped:
            dropped -= any(name == end for end in _OPEN.values())
        elif stack and name in ("elseif", "else") and stack[-1][0].kind == "if":
            blk = stack[-1][0]
            blk.parts.append((cmd, []))
            stack[-1] = (blk, blk.parts[-1][1])
        elif stack and name == _OPEN[stack[-1][0].kind]:
            stack.pop()
        elif name not in _OPEN.values():
            body.append(cmd)
    return top


# ------------------------------------------------------------------------------------------- values


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """`${NAME}` (nested too), `$ENV{X}` (UNKNOWN), `$CACHE{X}` replaced; an undefined name is UNKNOWN."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) == "ENV":
            return UNKNOWN
        got = lookup(m.group(2))
        return UNKNOWN if got is None else got

    for _ in range(MAX_EXPANSIONS):
        if "{" not in text or "$" not in text:
            break
        new = _REF.sub(one, text)
        if new == text:
            break
        text = new[:MAX_VALUE]
    return text


def split(value: str) -> list[str]:
    """A CMake list's items (empty ones dropped)."""
    return [x for x in value.split(";") if x]


def truth(value: str) -> Tri:
    """A constant's truth as `if()` reads it; None when it holds something unknown."""
    if UNKNOWN in value:
        return None
    up = value.upper()
    if up in _TRUE:
        return True
    if up in _FALSE or up.endswith("-NOTFOUND"):
        return False
    try:
        return float(value) != 0
    except ValueError:
        return None


def version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"\s*(\d+(?:\.\d+){0,3})", text or "")
    return tuple(int(x) for x in m.group(1).split(".")) if m and UNKNOWN not in text else None


class Condition:
    """One `if()`/`elseif()`/`while()` argument list, decided in three values.

    `var(name)` gives a variable's value, None when it is not set here (it may come from `-D`, or be set by
    CMake at configure time: undecided), or raises KeyError when it is known to be unset."""

    def __init__(self, args: Sequence[Arg], var: Callable[[str], str | None], defined: Callable[[str], Tri]) -> None:
        self.toks = list(args)
        self.var, self.defined = var, defined
        self.pos, self.depth = 0, 0

    def value(self) -> Tri:
        try:
            got = self._or()
        except (IndexError, ValueError, RecursionError):
            return None
        return got if self.pos == len(self.toks) else None

    def _peek(self) -> str | None:
        if self.pos >= len(self.toks):
            return None
        t = self.toks[self.pos]
        return None if t.quoted else t.text.upper()

    def _or(self) -> Tri:
        left = self._and()
        while self._peek() == "OR":
            self.pos += 1
            right = self._and()
            left = True if (left or right) else (False if left is False and right is False else None)
        return left

    def _and(self) -> Tri:
        left = self._not()
        while self._peek() == "AND":
            self.pos += 1
            right = self._not()
            left = False if (left is False or right is False) else (True if left and right else None)
        return left

    def _not(self) -> Tri:
        if self._peek() == "NOT":
            self.pos += 1
            v = self._not()
            return None if v is None else not v
        return self._binary()

    def _binary(self) -> Tri:
        head = self._peek()
        if head == "(":
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise ValueError("nested too deeply")
            self.pos += 1
            v = self._or()
            if self._peek() != ")":
                raise ValueError("unbalanced")
            self.pos += 1
            self.depth -= 1
            return v
        if head in _UNARY:
            self.pos += 1
            operand = self.toks[self.pos]
            self.pos += 1
            return self.defined(operand.text) if head == "DEFINED" else None
        left = self.toks[self.pos]
        self.pos += 1
        op = self._peek()
        if op in _BINARY:
            self.pos += 1
            right = self.toks[self.pos]
            self.pos += 1
            return self._compare(left, op, right)
        return self._single(left)

    def _operand(self, arg: Arg) -> str | None:
        if arg.quoted or not _VARNAME.match(arg.text):
            return None if UNKNOWN in arg.text else arg.text
        try:
            got = self.var(arg.text)
        except KeyError:
            return arg.text  # not a variable: the word itself
        return None if got is None or UNKNOWN in got else got

    def _single(self, arg: Arg) -> Tri:
        constant = truth(arg.text)
        if arg.quoted or constant is not None or not _VARNAME.match(arg.text):
            return constant if UNKNOWN not in arg.text else None
        try:
            got = self.var(arg.text)
        except KeyError:
            return False  # a variable known to be unset
        if got is None or UNKNOWN in got:
            return None
        return truth(got) is not False  # a variable's value: false only when it is a false constant

    def _compare(self, left: Arg, op: str, right: Arg) -> Tri:
        if op == "IN_LIST":
            item, lst = self._operand(left), self._listvar(right.text)
            return None if item is None or lst is None else item in split(lst)
        a, b = self._operand(left), self._operand(right)
        if a is None or b is None or op in ("MATCHES", "IS_NEWER_THAN"):
            return None  # MATCHES: a project's regex is not run here
        if op.startswith("VERSION_"):
            va, vb = version(a), version(b)
            if va is None or vb is None:
                return None
            width = max(len(va), len(vb))
            va, vb = va + (0,) * (width - len(va)), vb + (0,) * (width - len(vb))
            return _order(op[8:], va, vb)
        if op.startswith("STR") or op == "PATH_EQUAL":
            return _order(op[3:] if op.startswith("STR") else "EQUAL", a, b) if op != "STREQUAL" else a == b
        try:
            return _order(op, float(a), float(b))
        except ValueError:
            return None

    def _listvar(self, name: str) -> str | None:
        try:
            return self.var(name)
        except KeyError:
            return ""


def _order(op: str, a: Any, b: Any) -> bool:
    """a OP b for two values of one kind (strings, numbers, version tuples)."""
    if op == "EQUAL":
        return bool(a == b)
    if op == "LESS":
        return bool(a < b)
    if op == "GREATER":
        return bool(a > b)
    return bool(a <= b) if op == "LESS_EQUAL" else bool(a >= b)


def strip_genex(item: str) -> tuple[str | None, bool]:
    """`$<COND:value>` -> (value, True); `$<BUILD_INTERFACE:x>` -> (x, False); `$<INSTALL_INTERFACE:x>` and
    expressions without a value -> (None, True). Anything else comes back as it is."""
    conditional = False
    for _ in range(MAX_EXPANSIONS):
        if not item.startswith("$<"):
            return item, conditional
        depth, colon = 0, -1
        for k in range(len(item)):
            if item.startswith("$<", k):
                depth += 1
            elif item[k] == ">":
                depth -= 1
            elif item[k] == ":" and depth == 1:
                colon = k
                break
        if colon < 0:
            return None, True
        head, item = item[2:colon], item[colon + 1 :]
        item = item[:-1] if item.endswith(">") else item
        if head == "INSTALL_INTERFACE":
            return None, True
        conditional = conditional or head != "BUILD_INTERFACE"
    return None, True


def flags_of(values: Mapping[str, str], *names: str) -> list[str]:
    """The flags of some `*_FLAGS` variables, split on spaces and `;`."""
    return [f for n in names for f in re.split(r"[\s;]+", values.get(n, "")) if f]
