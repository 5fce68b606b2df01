"""The meson language, parsed (pure: text in, tuples out; nothing is run). meson.py evaluates the tuples.

Statements: ('expr', e, line), ('set', name, '=' | '+=', e, line), ('if', [(cond, body), ...], else, line),
('foreach', names, e, body, line). Expressions: ('str' | 'fstr' | 'const', value), ('var', name),
('list' | 'dict', items), ('call', name, (positional, keywords), line), ('method', obj, name, args, line),
('index', e, i), ('op', op, a, b), ('not', e), ('neg', e), ('?', cond, a, b).
Untrusted input, bounded: one pass of the lexer; statements and expressions nest at most MAX_DEPTH deep
(deeper is a parse error, which the reader reports and stops at).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 48
_TOKEN = re.compile(r"""(?P<ws>[ \t\r]+)|(?P<nl>\n)|(?P<comment>\#[^\n]*)|(?P<str>f?'''.*?'''|f?'(?:\\.|[^'\\\n])*')
    |(?P<num>0x[0-9a-fA-F]+|\d+)|(?P<id>[A-Za-z_]\w*)|(?P<op>==|!=|<=|>=|\+=|[-+*/%()\[\]{},:.=<>?])""", re.X | re.S)
BLOCK_END = {"if": ("elif", "else", "endif"), "foreach": ("endforeach",)}


def tokens(text: str) -> list[tuple[str, str, int]]:
    out, line, pos = [], 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            pos += 1
            continue
        kind = m.lastgroup or ""
        if kind == "nl":
            out.append(("nl", "\n", line))
        elif kind not in ("ws", "comment"):
            out.append((kind, m.group(0), line))
        line += m.group(0).count("\n")
        pos = m.end()
    out.append(("nl", "\n", line))
    return out


class Parser:
    """Statements as tuples: ('expr', e, line) ('set', name, op, e, line) ('if', [(cond, body)], else)
    ('foreach', names, e, body); expressions as tuples too."""

    def __init__(self, toks: list[tuple[str, str, int]]) -> None:
        self.t, self.i, self.depth = toks, 0, 0

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        return self.t[min(self.i + k, len(self.t) - 1)]

    def take(self, text: str | None = None) -> tuple[str, str, int]:
        tok = self.peek()
        if text is not None and tok[1] != text:
            raise ValueError(f"expected {text} at line {tok[2]}")
        self.i += 1
        return tok

    def block(self, ends: tuple[str, ...]) -> list[Any]:
        out: list[Any] = []
        while self.i < len(self.t) - 1:
            kind, text, _ = self.peek()
            if kind == "nl":
                self.i += 1
            elif kind == "id" and text in ends:
                return out
            else:
                out.append(self.statement())
        return out

    def statement(self) -> Any:
        kind, text, line = self.peek()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError("nested too deeply")
        try:
            if kind == "id" and text == "if":
                parts, orelse = [], []
                self.take()
                while True:
                    cond = self.expr()
                    body = self.block(BLOCK_END["if"])
                    parts.append((cond, body))
                    word = self.take()[1]
                    if word == "elif":
                        continue
                    if word == "else":
                        orelse = self.block(("endif",))
                        self.take()
                    return ("if", parts, orelse, line)
            if kind == "id" and text == "foreach":
                self.take()
                names = [self.take()[1]]
                while self.peek()[1] == ",":
                    self.take()
                    names.append(self.take()[1])
                self.take(":")
                iterable = self.expr()
                body = self.block(("endforeach",))
                self.take()
                return ("foreach", names, iterable, body, line)
            if kind == "id" and self.peek(1)[1] in ("=", "+="):
                self.take()
                op = self.take()[1]
                return ("set", text, op, self.expr(), line)
            return ("expr", self.expr(), line)
        finally:
            self.depth -= 1

    def expr(self) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError("nested too deeply")
        try:
            cond = self.binary(0)
            if self.peek()[1] == "?":
                self.take()
                a = self.expr()
                self.take(":")
                return ("?", cond, a, self.expr())
            return cond
        finally:
            self.depth -= 1

    _LEVELS = (("or",), ("and",), ("==", "!=", "<", ">", "<=", ">=", "in", "not"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Any:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[1] in self._LEVELS[level]:
            op = self.take()[1]
            if op == "not":
                self.take("in")
                op = "not in"
            left = ("op", op, left, self.binary(level + 1))
        return left

    def unary(self) -> Any:
        if self.peek()[1] in ("not", "-"):
            op = self.take()[1]
            return ("not" if op == "not" else "neg", self.unary())
        return self.postfix(self.atom())

    def postfix(self, e: Any) -> Any:
        while True:
            p = self.peek()[1]
            if p == ".":
                self.take()
                name, line = self.take()[1:]
                args = self.call_args() if self.peek()[1] == "(" else ([], {})
                e = ("method", e, name, args, line)
            elif p == "[":
                self.take()
                idx = self.expr()
                self.take("]")
                e = ("index", e, idx)
            else:
                return e

    def call_args(self) -> tuple[list[Any], dict[str, Any]]:
        self.take("(")
        pos: list[Any] = []
        kw: dict[str, Any] = {}
        while self.peek()[1] != ")" and self.i < len(self.t) - 1:
            if self.peek()[0] == "nl" or self.peek()[1] == ",":
                self.take()
                continue
            if self.peek()[0] == "id" and self.peek(1)[1] == ":":
                name = self.take()[1]
                self.take(":")
                kw[name] = self.expr()
            else:
                pos.append(self.expr())
        self.take(")")
        return pos, kw

    def atom(self) -> Any:
        kind, text, line = self.take()
        while kind == "nl":
            kind, text, line = self.take()
        if kind == "str":
            s = text[1:] if text.startswith("f") else text
            body = s[3:-3] if s.startswith("'''") else re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s[1:-1])
            return ("fstr" if text.startswith("f") else "str", body)
        if kind == "num":
            return ("const", int(text, 0))
        if kind == "id":
            if text in ("true", "false"):
                return ("const", text == "true")
            if self.peek()[1] == "(":
                return ("call", text, self.call_args(), line)
            return ("var", text)
        if text in ("(", "[", "{"):
            close = {"(": ")", "[": "]", "{": "}"}[text]
            items: list[Any] = []
            while self.peek()[1] != close and self.i < len(self.t) - 1:
                if self.peek()[0] == "nl" or self.peek()[1] in (",", ":"):
                    self.take()
                    continue
                items.append(self.expr())
            self.take(close)
            return items[0] if text == "(" and items else ("list" if text == "[" else "dict", items)
        raise ValueError(f"unexpected {text!r} at line {line}")


def option_defaults(files: Mapping[str, str]) -> dict[str, Any]:
    """meson.options / meson_options.txt: option('name', type: …, value: default) -> defaults."""
    text = files.get("meson.options") or files.get("meson_options.txt") or ""
    out: dict[str, Any] = {}
    try:
        stmts = Parser(tokens(text)).block(())
    except (ValueError, IndexError, RecursionError):
        return out
    for st in stmts:
        if st[0] == "expr" and st[1][0] == "call" and st[1][1] == "option":
            pos, kw = st[1][2]
            if pos and pos[0][0] == "str" and "value" in kw and kw["value"][0] in ("str", "const"):
                out[pos[0][1]] = kw["value"][1]
    return out
