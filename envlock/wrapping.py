"""Lines that fit: `error:`/`hint:`/`warning:` (any `label: text`), summaries and commands folded to the
width of the terminal (80 columns on a pipe or in a CI log).

Text is folded at spaces, continuation lines indented under the text; a command in backticks (or a shell word
in single quotes) is never broken between its words unless it alone is wider than a line, and then each break
ends in ` \\` so the lines paste into a shell as one command; only a word wider than a line (a path, a URL) is
cut, after a '/'. Imports nothing of envlock (every floor may print through it).
"""

from __future__ import annotations

import os
from typing import Any, TextIO

WIDTH = 80



def columns(stream: TextIO | Any = None) -> int:
    """The width to fold to: a terminal's own (at least 40); else $COLUMNS when it is a number; else 80
    (a pipe, a CI log)."""
    try:
        if stream is not None and stream.isatty():
            return max(40, os.get_terminal_size(stream.fileno()).columns)
    except (AttributeError, OSError, ValueError):
        pass
    value = os.environ.get("COLUMNS", "")
    return max(40, int(value)) if value.isdigit() else WIDTH


def _atoms(text: str) -> list[str]:
    """Words split at spaces, except spaces inside backticks (a command) or inside a shell word in single
    quotes ('/a path/x'): those stay one atom with their punctuation; an unpaired backtick or quote leaves
    the rest as it is."""
    atoms: list[str] = []
    word: list[str] = []
    quote = ""
    for ch in text:
        if quote and ch == quote:
            quote = ""
        elif not quote and ((ch == "`" and text.count("`") % 2 == 0) or (ch == "'" and (not word or word[-1] in "=(\""))):
            quote = ch
        if ch == " " and not quote:
            if word:
                atoms.append("".join(word))
                word = []
            continue
        word.append(ch)
    if word:
        atoms.append("".join(word))
    return atoms


def _split_long(word: str, room: int) -> list[str]:
    """A word wider than a line: a command at its spaces outside single quotes (each piece but the last ending in
    ' \\'), a path, URL or list after a '/' or a ',', else anywhere."""
    words = _shell_words(word) if "`" in word or "'" in word else [word]
    if len(words) > 1:
        pieces: list[str] = []
        line = ""
        for w in words:
            if len(w) + 4 > room:  # one word wider than a line: it cannot be kept whole, so it is cut
                if line:
                    pieces.append(line + " \\")
                cut = _cut(w, room - 2)  # its last piece may still get the ' \\' of a break
                pieces += cut[:-1]
                line = cut[-1]
            elif line and len(line) + 1 + len(w) + 2 > room:
                pieces.append(line + " \\")
                line = "  " + w
            else:
                line = f"{line} {w}" if line else w
        return [*pieces, line]
    return _cut(word, room)


def _shell_words(text: str) -> list[str]:
    """`text` split at its spaces outside single quotes (a quoted path with a space stays one word)."""
    out, word, quoted = [], "", False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        if ch == " " and not quoted:
            out.append(word)
            word = ""
        else:
            word += ch
    return [*out, word]


def _cut(word: str, room: int) -> list[str]:
    """One word wider than a line, cut after the last '/' or ',' that fits (never inside a name, so a reader can
    join the pieces back: one ending in '/' at a line's end continues on the next), even where that leaves a short
    line; anywhere only where a name alone is wider than a line."""
    out = []
    while len(word) > room:
        cut = max(word.rfind(sep, 1, room) for sep in "/,")
        cut = cut + 1 if cut > 0 else room
        out.append(word[:cut])
        word = word[cut:]
    return [*out, word]


def lines_of(text: str, first: str, rest: str, width: int = WIDTH) -> list[str]:
    """`text` folded to `width` after `first` (the first line's lead) and `rest` (the others')."""
    out: list[str] = []
    line = ""
    lead = first
    for atom in _atoms(text):
        room = max(20, width - len(lead if not out and not line else rest))
        pieces = _split_long(atom, max(20, width - len(rest))) if len(atom) > room else [atom]
        for n, piece in enumerate(pieces):
            room = max(20, width - len(first if not out else rest))
            if line and (n or len(pieces) > 1 or len(line) + 1 + len(piece) > room):
                out.append(line)
                line = piece
            else:
                line = f"{line} {piece}" if line else piece
    out.append(line)
    return [(first if i == 0 else rest) + ln for i, ln in enumerate(out)]


def wrap(label: str, text: str, width: int = WIDTH) -> list[str]:
    """`label: text` folded to `width`; continuation lines indented under the text."""
    head = f"{label}: "
    return lines_of(text, head, " " * len(head), width)


def fold(text: str, width: int = WIDTH, indent: str = "  ") -> list[str]:
    """A line of plain output (a summary, a doctor finding) folded to `width` at spaces, never mid-word
    unless one word alone is wider; continuation lines start with its own indentation plus `indent`."""
    if len(text) <= width:
        return [text]
    lead = text[: len(text) - len(text.lstrip(" "))]
    return lines_of(text.strip(" "), lead, lead + indent, width)


def fold_command(lead: str, command: str, width: int = WIDTH) -> list[str]:
    """`lead` + a shell command, folded so the lines still paste into a shell as one command: broken at
    spaces outside quotes, each break ending in ` \\`, continuation lines indented."""
    if len(lead) + len(command) <= width:
        return [lead + command]
    words = _atoms(command)
    out: list[str] = []
    line = lead.rstrip() if len(lead) + len(words[0]) > width else lead + words.pop(0)
    for w in words:
        if len(w) + 4 + 2 > width:  # a path wider than a line: cut after a '/' that fits, as every printed path is
            pieces = _cut(w, width - 4 - 2)
            out.append(line + " \\")
            out += ["    " + p for p in pieces[:-1]]
            line = "    " + pieces[-1]
        elif len(line) + 1 + len(w) + 2 > width:
            out.append(line + " \\")
            line = "    " + w
        else:
            line = f"{line} {w}"
    return [*out, line]


def say(label: str, text: str, stream: Any = None) -> None:
    """`label: text` on `stream` (stderr), folded to its width: the one way a warning is printed."""
    import sys

    out = stream or sys.stderr
    out.write("".join(f"{ln}\n" for ln in wrap(label, text, columns(out))))
