"""Reading envlock's output as a user's terminal shows it: `error:`/`hint:`/`warning:` lines are folded to the
width (envlock/wrapping.py), so a test joins each line's continuation lines back before it looks at words."""

from __future__ import annotations

import os
import re

_LABEL = re.compile(r"^(error|hint|warning|note|why|envlock: warning): ")


def logical_lines(text: str) -> list[str]:
    """The lines of `text` with every indented continuation joined to the line it continues (a command's
    ` \\` line breaks too), so `error: …` and `hint: …` are one line each again."""
    out: list[str] = []
    previous = ""
    for line in text.splitlines():
        if out and line.startswith(" ") and _LABEL.match(out[-1]):
            joined = out[-1].removesuffix(" \\")
            # a word wider than a line (a path, a URL) stands alone on its lines, cut after a '/': joined back
            # without a space (a quoted path may hold a space: a line that ends inside its quotes is a cut too)
            cut = previous.endswith("/") and (" " not in previous or _open_quote(joined))
            out[-1] = joined + ("" if cut else " ") + line.strip()
        else:
            out.append(line)
        previous = _LABEL.sub("", line).strip()
    return out


def _open_quote(text: str) -> bool:
    """Whether `text` ends inside a single-quoted shell word: a quote that opened a word (after a space, `=` or `(`;
    an apostrophe, torch's, opens none) and is not closed (`'"'"'`, a quote inside a quoted word, aside)."""
    return re.search(r"(?:^|[\s=(])'[^']*$", text.replace("'\"'\"'", "")) is not None


def unfolded(text: str) -> str:
    """`text` with the folding undone (see logical_lines)."""
    return "\n".join(logical_lines(text)) + ("\n" if text.endswith("\n") else "")


def error_and_hint(text: str) -> tuple[str, str]:
    """The `error:` and the `hint:` line's text (without their labels), unfolded."""
    lines = logical_lines(text)
    error = next(ln for ln in lines if ln.startswith("error: "))
    hint = next(ln for ln in lines if ln.startswith("hint: "))
    return error.removeprefix("error: "), hint.removeprefix("hint: ")


def hint_commands(hint: str) -> list[list[str]]:
    """The commands a hint names (each `envlock …` in backticks), as argument lists without `envlock`."""
    import shlex

    return [shlex.split(cmd)[1:] for cmd in re.findall(r"`(envlock [^`]*)`", hint)]


def flat(text: str) -> str:
    """All of `text` on one line, single-spaced, a word cut after a '/' at a line's end joined back (a path wider
    than the terminal is cut there: envlock/wrapping.py)."""
    out = ""
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if out.endswith("/") and line.startswith(" "):
            out += words[0]
            words = words[1:]
        out = " ".join(([out] if out else []) + words)
    return out


def drain(fd: int) -> bytes:
    """Everything a pty's child wrote until it closed the terminal (EIO or EOF ends the read)."""
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out
