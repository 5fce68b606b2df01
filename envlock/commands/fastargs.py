"""A command's options declared once, read two ways: by typer (help, usage errors, every unusual command
line) and, for the commands users wait on (`resolve`, `check`, `create`), by a small parser that needs no typer.

A command function declares its parameters with `opt(...)` / `arg(...)`, which take what `typer.Option` /
`typer.Argument` take; `typer_command(func)` gives typer the same function with typer's objects as
defaults. `parse(func, words)` reads a plain command line (long options, `--opt=value`, the declared short
flags, repeated list options, positional NAMEs) into the keyword arguments typer would pass, or returns
None for anything else (help, a missing or unknown option, an option given twice, a value that starts
with `-`, `--`): typer then handles that line as before, errors and all. typer and its click cost ~30 ms
of every start-up here (benchmarks/README.md); a `resolve`, `check` or `create` command line never needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


class Param:
    """One declared parameter: typer.Option (`positional` False) or typer.Argument's arguments."""

    __slots__ = ("default", "flags", "kwargs", "positional")

    def __init__(self, default: Any, flags: tuple[str, ...], kwargs: dict[str, Any], positional: bool) -> None:
        self.default, self.flags, self.kwargs, self.positional = default, flags, kwargs, positional

    def to_typer(self) -> Any:
        import typer

        make = typer.Argument if self.positional else typer.Option
        return make(self.default, *self.flags, **self.kwargs)


def opt(default: Any, *flags: str, **kwargs: Any) -> Any:
    """`typer.Option(default, *flags, **kwargs)`, declared without importing typer."""
    return Param(default, flags, kwargs, positional=False)


def arg(default: Any, **kwargs: Any) -> Any:
    """`typer.Argument(default, **kwargs)`, declared without importing typer."""
    return Param(default, (), kwargs, positional=True)


def _params(func: Callable[..., Any]) -> list[tuple[str, Param, str]]:
    """(name, declaration, annotation text) of each parameter, in order."""
    code = func.__code__
    names = code.co_varnames[: code.co_argcount]
    defaults = func.__defaults__ or ()
    out = []
    for name, default in zip(names[len(names) - len(defaults):], defaults):
        if not isinstance(default, Param):
            raise TypeError(f"{func.__name__}: parameter {name} is not declared with opt()/arg()")
        out.append((name, default, str(func.__annotations__.get(name, "str"))))
    return out


def typer_command(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` with typer's Option/Argument objects as its defaults (what `app.command()` reads)."""
    import types

    typed = types.FunctionType(func.__code__, func.__globals__, func.__name__,
                               tuple(p.to_typer() for _, p, _ in _params(func)), func.__closure__)
    typed.__annotations__ = dict(func.__annotations__)
    typed.__doc__, typed.__module__, typed.__qualname__ = func.__doc__, func.__module__, func.__qualname__
    return typed


def _kind(annotation: str) -> str:
    """flag, list or value, from the annotation text (`from __future__ import annotations` keeps it a string)."""
    text = annotation.replace(" ", "")
    if text == "bool":
        return "flag"
    if text.startswith(("list[", "Optional[list[", "List[", "Optional[List[")):
        return "list"
    return "value"


def _convert(annotation: str, value: str) -> Any:
    return Path(value) if annotation.replace(" ", "").removeprefix("Optional[").rstrip("]") == "Path" else value


def parse(func: Callable[..., Any], words: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments typer would call `func` with for `words` (the words after the command name),
    or None when the line is not a plain one (typer must read it)."""
    params = _params(func)
    by_flag: dict[str, tuple[str, Param, str]] = {}
    for entry in params:
        for flag in entry[1].flags:
            by_flag[flag] = entry
    values: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        flag, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
        entry = by_flag.get(flag)
        if entry is None:  # --help, --, an unknown option, a cluster of short flags: typer's to say
            return None
        name, param, annotation = entry
        kind = _kind(annotation)
        if kind == "flag":
            if eq or name in values:
                return None
            values[name] = True
            continue
        if not eq:
            if i >= len(words) or words[i].startswith("-"):
                return None  # missing, or a value that looks like an option (click's rules apply)
            value = words[i]
            i += 1
        if kind == "list":
            values.setdefault(name, []).append(_convert(annotation, value))
        elif name in values:
            return None  # given twice
        else:
            values[name] = _convert(annotation, value)
    out: dict[str, Any] = {}
    arguments = [entry for entry in params if entry[1].positional]
    if positional and (len(arguments) != 1 or (_kind(arguments[0][2]) != "list" and len(positional) > 1)):
        return None  # more words than the command takes: typer's usage error
    for name, param, annotation in params:
        if param.positional:
            if not positional:
                if param.default is ...:
                    return None  # a required argument is missing: typer's usage error
                out[name] = param.default
            elif _kind(annotation) == "list":
                out[name] = [_convert(annotation, w) for w in positional]
            else:
                out[name] = _convert(annotation, positional[0])
        elif name in values:
            out[name] = values[name]
        elif param.default is ...:
            return None  # a required option is missing: typer's usage error
        elif _kind(annotation) == "list":
            out[name] = list(param.default) if param.default is not None else None
        else:
            out[name] = param.default
    return out
