"""The #includes of one C/C++/CUDA file, with the conditions that guard them (pure: text in, tuples out).

Comments and line continuations are removed first. `#if`/`#ifdef`/`#ifndef`/`#elif`/`#else`/`#endif` are
followed with three-valued logic over the macros a Linux CUDA build is known to have or lack
(`KNOWN`), the build's own `-D`/`define_macros`, and what the file itself `#define`s or `#undef`s above
the line:

  * a branch known false (`#if 0`, `#ifdef __HIP_PLATFORM_AMD__`, `#ifdef _WIN32`, the `#else` of a true
    `#if`, ...) is skipped: its includes are not needed on Linux with CUDA;
  * a branch the scanner cannot decide (a project macro, `#if CUDA_VERSION >= 12000`, ...) counts, and its
    includes are marked conditional: a header there may or may not be needed.
`#include MACRO` (computed) cannot be followed and is reported as such.

Each include says why (`because`): for one skipped by the build's own macros, what decided it ("WITH_NVTX
is not defined"); for one the scanner cannot decide, which macro it does not know; for one the build's
macros select, which macro did ("WITH_NVTX is defined (setup.py:12)"). A macro the build's own switches
leave undefined (`undefined(name)`, given by the caller) is 0 in `#if`, not unknown.
A header wholly wrapped in an include guard (its first directive `#ifndef X` or `#if !defined(X)`, the next
`#define X`, its matching `#endif` the last directive) is read as on its first inclusion: X is not defined
there, so its contents count (unless the build itself defines X).
An expression nested deeper than MAX_DEPTH, or longer than MAX_TOKENS, is undecidable (never a RecursionError).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: Macros a Linux x86-64/aarch64 CUDA build is known to have (True: defined, value unknown; an int: its
#: value) or lack (False).
KNOWN: dict[str, bool | int] = {
    "__linux__": True, "__linux": True, "linux": True, "__unix__": True, "__GNUC__": True, "__cplusplus": True,
    "__CUDACC__": True, "__NVCC__": True, "__CUDA__": True, "WITH_CUDA": 1,
    "_WIN32": False, "_WIN64": False, "WIN32": False, "_MSC_VER": False, "__APPLE__": False, "__MACH__": False,
    "__ANDROID__": False, "__FreeBSD__": False, "__OpenBSD__": False, "__NetBSD__": False, "__MINGW32__": False,
    "__clang__": False, "__HIP_PLATFORM_AMD__": False, "__HIP_PLATFORM_HCC__": False, "__HIPCC__": False,
    "__HIP__": False, "USE_ROCM": False, "__HIP_DEVICE_COMPILE__": False, "WITH_HIP": False,
    "__SYCL_DEVICE_ONLY__": False, "SYCL_LANGUAGE_VERSION": False, "__INTEL_LLVM_COMPILER": False,
    "BUILD_FOR_WINDOWS": False,
}  # fmt: skip
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_GUARD_IF = re.compile(r"^!\s*defined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|\s([A-Za-z_]\w*))$")
_INCLUDE = re.compile(r'^\s*([<"])([^>"]+)[>"]')
_COMMENTS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_TOKEN = re.compile(r"\s*(defined|\d+[uUlL]*|[A-Za-z_]\w*|&&|\|\||==|!=|>=|<=|[()!<>])")
MAX_DEPTH = 64  # nested `(`/`!` levels an #if expression may have before it is called undecidable
MAX_TOKENS = 4096
Macros = Mapping[str, "bool | int | None"]


class _TooDeep(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Include:
    """One #include line that the build may see."""

    name: str  # as written between <> or ""
    quoted: bool  # "name" (searched next to the file first) rather than <name>
    line: int
    conditional: bool  # under a condition the scanner could not decide
    because: str = ""  # why it is needed, skipped or undecided ("WITH_NVTX is not defined"); "" when plain


def strip_comments(text: str) -> str:
    """The text without comments and line continuations (string literals kept, line numbers kept)."""
    text = text.replace("\\\r\n", " \r").replace("\\\n", " \n")  # a newline per continuation, kept for numbering

    def keep(m: re.Match[str]) -> str:
        s = m.group(0)
        if s.startswith(("//", "/*")):
            return "\n" * s.count("\n") if s.startswith("/*") else ""
        return s

    return _COMMENTS.sub(keep, text)


def evaluate(expr: str, defined: Macros) -> bool | None:
    """An #if expression: True, False or None (cannot tell). Unknown macros are None, not 0."""
    tokens = _tokens(expr)
    if tokens is None or len(tokens) > MAX_TOKENS:
        return None
    try:
        value, rest = _or(tokens, defined, 0)
    except (IndexError, ValueError, _TooDeep):
        return None
    return _truth(value) if not rest else None


def _tokens(expr: str) -> list[str] | None:
    out, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            return None  # arithmetic, casts, function-like macros: not decided here
        out.append(m.group(1))
        pos = m.end()
    return out


def _truth(v: object) -> bool | None:
    return None if v is None else bool(v)


def _or(t: list[str], d: Macros, depth: int) -> tuple[object, list[str]]:
    left, t = _and(t, d, depth)
    while t and t[0] == "||":
        right, t = _and(t[1:], d, depth)
        a, b = _truth(left), _truth(right)
        left = True if (a or b) else (False if a is False and b is False else None)
    return left, t


def _and(t: list[str], d: Macros, depth: int) -> tuple[object, list[str]]:
    left, t = _cmp(t, d, depth)
    while t and t[0] == "&&":
        right, t = _cmp(t[1:], d, depth)
        a, b = _truth(left), _truth(right)
        left = False if (a is False or b is False) else (True if a and b else None)
    return left, t


def _cmp(t: list[str], d: Macros, depth: int) -> tuple[object, list[str]]:
    left, t = _unary(t, d, depth)
    while t and t[0] in ("==", "!=", ">=", "<=", ">", "<"):
        op = t[0]
        right, t = _unary(t[1:], d, depth)
        if not isinstance(left, int) or not isinstance(right, int) or isinstance(left, bool) or isinstance(right, bool):
            left = None
            continue
        left = {"==": left == right, "!=": left != right, ">=": left >= right, "<=": left <= right,
                ">": left > right, "<": left < right}[op]  # fmt: skip
    return left, t


def _unary(t: list[str], d: Macros, depth: int) -> tuple[object, list[str]]:
    if depth > MAX_DEPTH:
        raise _TooDeep
    head = t[0]
    if head == "!":
        v, rest = _unary(t[1:], d, depth + 1)
        return (None if _truth(v) is None else not _truth(v)), rest
    if head == "(":
        v, rest = _or(t[1:], d, depth + 1)
        if not rest or rest[0] != ")":
            raise ValueError("unbalanced")
        return v, rest[1:]
    if head == "defined":
        if t[1] == "(":
            name, rest = t[2], t[4:] if t[3] == ")" else None
            if rest is None:
                raise ValueError("defined(")
        else:
            name, rest = t[1], t[2:]
        return _is_defined(d.get(name)), rest
    if head[0].isdigit():
        return int(head.rstrip("uUlL")), t[1:]
    v = d.get(head)
    if v is False:
        return 0, t[1:]  # an undefined macro is 0 in #if
    return (v if isinstance(v, int) and not isinstance(v, bool) else None), t[1:]  # value known, or not


def _is_defined(v: bool | int | None) -> bool | None:
    return None if v is None else v is not False


class _Known(dict):  # type: ignore[type-arg]  # name -> True / int / False / None, and what the caller rules out
    """The macros a file is read with: `.get` answers False for a name `undefined(name)` rules out."""

    def __init__(self, base: Macros, undefined: Callable[[str], bool] | None) -> None:
        super().__init__(base)
        self.undefined = undefined

    def get(self, name: str, default: object = None) -> object:  # type: ignore[override]  # a macro's state, as dict.get gives it
        if name in self:
            return self[name]
        return False if self.undefined is not None and self.undefined(name) else default


def _names(expr: str) -> list[str]:
    return list(dict.fromkeys(t for t in (_tokens(expr) or ()) if t != "defined" and (t[0].isalpha() or t[0] == "_")))


def _ours(expr: str) -> bool:
    """Whether a condition names a macro other than the platform's (KNOWN): the build's or the project's."""
    return any(n not in KNOWN for n in _names(expr))


def _why(expr: str, d: Macros, notes: Mapping[str, str], value: bool | None) -> str:
    """What decided (or left undecided) the condition `expr` for the build."""
    parts = []
    for name in _names(expr)[:3]:
        v = d.get(name)
        note = f" ({notes[name]})" if name in notes else (
            " (neither the build nor the sources define it)" if v is False and name not in KNOWN else "")
        if value is None and v is None:
            parts.append(f"{name} is not known before the build{note}")
        elif value is not None and v is not None:
            state = "not defined" if v is False else ("defined" if v is True or v == 1 else f"{v}")
            parts.append(f"{name} is {state}{note}")
    return "; ".join(parts)


def includes(text: str, macros: Macros | None = None, undefined: Callable[[str], bool] | None = None,
             notes: Mapping[str, str] | None = None) -> tuple[list[Include], list[int]]:  # fmt: skip
    """(the includes a Linux CUDA build may see, line numbers of computed `#include MACRO`s)."""
    got, computed, _ = read(text, macros, undefined, notes)
    return got, computed


def _guard(lines: list[str], macros: Macros) -> tuple[int, str] | None:
    """(the line of the opening directive, the macro) of an include guard wrapping the whole file, if any."""
    found = [(n, m.group(1), m.group(2).strip()) for n, line in enumerate(lines, 1)
             if (m := _DIRECTIVE.match(line))]  # fmt: skip
    found = [d for d in found if not (d[1] == "pragma" and d[2] == "once")]  # `#pragma once` beside a guard
    if len(found) < 3 or found[-1][1] != "endif" or found[1][1] != "define":
        return None
    (line, word, rest), name = found[0], ""
    if word == "ifndef":
        name = rest.split()[0] if rest.split() else ""
    elif word == "if" and (m := _GUARD_IF.match(rest)):
        name = m.group(1) or m.group(2)
    if not name or (found[1][2].split() or [""])[0] != name or macros.get(name) is not None:
        return None  # not a guard, or one the build itself defines (or rules out)
    depth = 0
    for _, w, _ in found[:-1]:  # the opening #if must stay open until the last #endif
        depth += 1 if w in ("if", "ifdef", "ifndef") else -1 if w == "endif" else 0
        if depth == 0 or (depth == 1 and w in ("elif", "else")):
            return None  # closed early, or a branch for the second inclusion
    return line, name


def read(text: str, macros: Macros | None = None, undefined: Callable[[str], bool] | None = None,
         notes: Mapping[str, str] | None = None) -> tuple[list[Include], list[int], list[Include]]:  # fmt: skip
    """`includes`, and the includes the build's macros skip (each with the macro that decided it)."""
    defined = _Known({**KNOWN, **(macros or {})}, undefined)
    notes = notes or {}
    # one frame per open #if: [this branch's value, whether an earlier branch was taken (True/None/False), why]
    stack: list[list[object]] = []
    out: list[Include] = []
    skipped: list[Include] = []
    computed: list[int] = []
    lines = strip_comments(text).splitlines()
    guard = _guard(lines, macros or {})
    for number, line in enumerate(lines, 1):
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        word, rest = m.group(1), m.group(2).strip()
        if guard is not None and number == guard[0]:
            stack.append([True, True, "", False])  # first inclusion: the guard macro is not defined yet
        elif word in ("if", "ifdef", "ifndef"):
            if word == "if":
                value = evaluate(rest, defined)
                expr = rest
            else:
                name = rest.split()[0] if rest.split() else ""
                known = _is_defined(defined.get(name))  # type: ignore[arg-type]  # get returns a macro state
                value = known if word == "ifdef" or known is None else not known
                expr = name
            stack.append([value, value, _why(expr, defined, notes, value), _ours(expr)])
        elif word == "elif" and stack:
            frame = stack[-1]
            taken = frame[1]
            value = False if taken is True else evaluate(rest, defined)
            if taken is None and value is not False:
                value = None
            frame[0] = value
            frame[1] = True if taken is True or value is True else (None if taken is None or value is None else False)
            if taken is not True:
                frame[2], frame[3] = _why(rest, defined, notes, value), _ours(rest)
        elif word == "else" and stack:
            frame = stack[-1]
            frame[0] = None if frame[1] is None else not frame[1]
        elif word == "endif" and stack:
            stack.pop()
        elif word in ("include", "include_next") and any(f[0] is False for f in stack):
            inc = _INCLUDE.match(rest)
            first = next(f for f in stack if f[0] is False)
            if inc is not None and first[2] and first[3]:  # decided by the build's macros, not the platform's
                skipped.append(Include(inc.group(2).strip(), inc.group(1) == '"', number, False, str(first[2])))
        elif any(f[0] is False for f in stack):
            continue  # inside a branch a Linux CUDA build skips
        elif word == "define" and rest:
            defined[re.split(r"[\s(]", rest, maxsplit=1)[0]] = True
        elif word == "undef" and rest:
            defined[rest.split()[0]] = False
        elif word == "include" or word == "include_next":
            inc = _INCLUDE.match(rest)
            if inc is None:
                computed.append(number)
                continue
            unsure = [str(f[2]) for f in stack if f[0] is None]
            sure = [str(f[2]) for f in stack if f[0] is True and f[2] and any(n in str(f[2]) for n in notes)]
            because = "; ".join(dict.fromkeys(unsure or sure))
            out.append(Include(inc.group(2).strip(), inc.group(1) == '"', number, bool(unsure), because))
    return out, computed, skipped
