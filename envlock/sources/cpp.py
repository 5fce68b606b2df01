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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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
_INCLUDE = re.compile(r'^\s*([<"])([^>"]+)[>"]')
_COMMENTS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_TOKEN = re.compile(r"\s*(defined|\d+[uUlL]*|[A-Za-z_]\w*|&&|\|\||==|!=|>=|<=|[()!<>])")


@dataclass(frozen=True, slots=True)
class Include:
    """One #include line that the build may see."""

    name: str  # as written between <> or ""
    quoted: bool  # "name" (searched next to the file first) rather than <name>
    line: int
    conditional: bool  # under a condition the scanner could not decide


def strip_comments(text: str) -> str:
    """The text without comments and line continuations (string literals kept, line numbers kept)."""
    text = text.replace("\\\r\n", " \r").replace("\\\n", " \n")  # a newline per continuation, kept for numbering

    def keep(m: re.Match[str]) -> str:
        s = m.group(0)
        if s.startswith(("//", "/*")):
            return "\n" * s.count("\n") if s.startswith("/*") else ""
        return s

    return _COMMENTS.sub(keep, text)


def evaluate(expr: str, defined: Mapping[str, bool | int | None]) -> bool | None:
    """An #if expression: True, False or None (cannot tell). Unknown macros are None, not 0."""
    tokens = _tokens(expr)
    if tokens is None:
        return None
    try:
        value, rest = _or(tokens, defined)
    except (IndexError, ValueError):
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


def _or(t: list[str], d: Mapping[str, bool | int | None]) -> tuple[object, list[str]]:
    left, t = _and(t, d)
    while t and t[0] == "||":
        right, t = _and(t[1:], d)
        a, b = _truth(left), _truth(right)
        left = True if (a or b) else (False if a is False and b is False else None)
    return left, t


def _and(t: list[str], d: Mapping[str, bool | int | None]) -> tuple[object, list[str]]:
    left, t = _cmp(t, d)
    while t and t[0] == "&&":
        right, t = _cmp(t[1:], d)
        a, b = _truth(left), _truth(right)
        left = False if (a is False or b is False) else (True if a and b else None)
    return left, t


def _cmp(t: list[str], d: Mapping[str, bool | int | None]) -> tuple[object, list[str]]:
    left, t = _unary(t, d)
    while t and t[0] in ("==", "!=", ">=", "<=", ">", "<"):
        op = t[0]
        right, t = _unary(t[1:], d)
        if not isinstance(left, int) or not isinstance(right, int) or isinstance(left, bool) or isinstance(right, bool):
            left = None
            continue
        left = {"==": left == right, "!=": left != right, ">=": left >= right, "<=": left <= right,
                ">": left > right, "<": left < right}[op]  # fmt: skip
    return left, t


def _unary(t: list[str], d: Mapping[str, bool | int | None]) -> tuple[object, list[str]]:
    head = t[0]
    if head == "!":
        v, rest = _unary(t[1:], d)
        return (None if _truth(v) is None else not _truth(v)), rest
    if head == "(":
        v, rest = _or(t[1:], d)
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


def includes(text: str, macros: Mapping[str, bool | int | None] | None = None) -> tuple[list[Include], list[int]]:
    """(the includes a Linux CUDA build may see, line numbers of computed `#include MACRO`s)."""
    defined: dict[str, bool | int | None] = {**KNOWN, **(macros or {})}
    # one frame per open #if: [this branch's value, whether an earlier branch was taken (True/None/False)]
    stack: list[list[bool | None]] = []
    out: list[Include] = []
    computed: list[int] = []
    for number, line in enumerate(strip_comments(text).splitlines(), 1):
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        word, rest = m.group(1), m.group(2).strip()
        if word in ("if", "ifdef", "ifndef"):
            if word == "if":
                value = evaluate(rest, defined)
            else:
                name = rest.split()[0] if rest.split() else ""
                known = _is_defined(defined.get(name))
                value = known if word == "ifdef" or known is None else not known
            stack.append([value, value])
        elif word == "elif" and stack:
            frame = stack[-1]
            taken = frame[1]
            value = False if taken is True else evaluate(rest, defined)
            if taken is None and value is not False:
                value = None
            frame[0] = value
            frame[1] = True if taken is True or value is True else (None if taken is None or value is None else False)
        elif word == "else" and stack:
            frame = stack[-1]
            frame[0] = None if frame[1] is None else not frame[1]
        elif word == "endif" and stack:
            stack.pop()
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
            out.append(Include(inc.group(2).strip(), inc.group(1) == '"', number, any(f[0] is None for f in stack)))
    return out, computed
