"""Hints whose commands run as written: a hint's `Retry` values (envlock/errors.py) become the user's own
command line changed as the Retry says.

The options it sets replace theirs, the ones it drops go, every other word stays (a --mirror, a --project-dir,
--dry-run), credentials stripped, each word quoted for a POSIX shell. No click: cli.py hands in the command
line, parsed with the command's own options (`CommandLine`). How the lines then fit: envlock/wrapping.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from envlock.errors import HintPart, Retry, Setting, quote_word
from envlock.models import record
from envlock.names import strip_credentials

#: Options carried over from the command run into another command a hint names, when both take them.
CARRIED = ("--project-dir", "--mirror", "--offline", "--allow-insecure")


@record
class Option:
    """One option of a command: its canonical (long) name and whether it takes a value."""

    name: str
    takes_value: bool


class CommandLine:
    """A command line split by the command's own options: ("resolve",), [(option or None, words)], rest.
    (A plain class: a failing `check` renders its hint with it, and its start-up makes no dataclass.)"""

    __slots__ = ("command", "items", "rest")

    def __init__(self, command: tuple[str, ...], items: list[tuple[str | None, list[str]]] | None = None,
                 rest: list[str] | None = None) -> None:
        self.command = command
        self.items: list[tuple[str | None, list[str]]] = [] if items is None else items
        self.rest: list[str] = [] if rest is None else rest  # after `--` (envlock run's command)

    def __repr__(self) -> str:
        return f"CommandLine(command={self.command!r}, items={self.items!r}, rest={self.rest!r})"


def parse(argv: Sequence[str], command: tuple[str, ...], options: Mapping[str, Option]) -> CommandLine:
    """`argv` (after the command words) as a CommandLine; `options` maps every spelling to its Option."""
    words = list(argv)
    for part in command:  # the command's own words first (`export dockerfile`)
        if part in words:
            words.remove(part)
    line = CommandLine(command)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            line.rest = words[i + 1:]
            break
        spelled, eq, _ = word.partition("=") if word.startswith("--") else (word, "", "")
        opt = options.get(spelled) if word.startswith("-") and word != "-" else None
        if opt is None:
            line.items.append((None, [word]))
        elif eq or not opt.takes_value:
            line.items.append((opt.name, [word]))
        else:
            line.items.append((opt.name, words[i:i + 2]))
            i += 1
        i += 1
    return line


def _scrubbed(word: str) -> str:
    """A word without credentials: a URL, or NAME=URL (a --mirror value)."""
    if "://" not in word:
        return word
    key, eq, value = word.partition("=")
    if eq and "://" in value and "://" not in key:
        return f"{key}={strip_credentials(value)}"
    return strip_credentials(word)


def retry_words(line: CommandLine, retry: Retry, target: Mapping[str, Option] | None = None) -> list[str]:
    """The words of the command `retry` stands for, made from the user's command line `line`.

    `target`: the options of `retry.command` when it is another command than the one run (for CARRIED).
    """
    if retry.command and tuple(retry.command.split()) != line.command:
        carried = [words for name, words in line.items
                   if name in CARRIED and name not in dict(retry.set) and name not in retry.drop
                   and (target is None or any(o.name == name for o in target.values()))]
        words = [*retry.command.split(), *(retry.args or ()), *(w for pair in retry.set for w in pair),
                 *retry.flags, *(w for ws in carried for w in ws)]
        return ["envlock", *words]
    wanted: dict[str, list[str]] = {}
    for name, value in retry.set:  # an option set several times is repeatable: every value is placed
        wanted.setdefault(name, []).append(value)
    out: list[str] = list(line.command)
    placed: set[str] = set()
    args_at = None
    for name, words in line.items:
        if name is None:
            if retry.args is None:
                out.extend(words)
            elif args_at is None:
                args_at = len(out)
            continue
        value = words[-1].partition("=")[2] if len(words) == 1 and words[0].startswith("--") else words[-1]
        if name in retry.drop or f"{name}={value}" in retry.drop or (name in wanted and name in placed):
            continue
        if name in wanted:
            out.extend(w for v in wanted[name] for w in (name, v))
            placed.add(name)
            continue
        out.extend(words)
    if retry.args is not None:
        out[args_at if args_at is not None else len(line.command):0] = list(retry.args)
    out += [w for name, value in retry.set if name not in placed for w in (name, value)]
    present = {name for name, _ in line.items}
    out += [f for f in retry.flags if f not in present]
    if line.rest:
        out += ["--", *line.rest]
    return ["envlock", *out]


def hint_text(parts: Sequence[HintPart], words_of: Callable[[Retry], list[str]] | None = None,
              spec: str | None = None) -> str:
    """A hint's text: each Retry as a command in backticks (`words_of` gives its words; else its own), each
    Setting as its option. With `spec` (the request was read from that spec): both as its keys where they are."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        if isinstance(part, Setting):
            out.append(part.said(spec))
            continue
        edit = part.in_spec(spec) if spec is not None else None
        if edit is not None:
            out.append(edit)
            continue
        words = words_of(part) if words_of else part.words()
        if words and words[0] == "…":  # options only (they are not the command's: see cli._retry_renderer)
            out.append(" ".join(quote_word(_scrubbed(w)) for w in words[1:]))
            continue
        out.append("`" + " ".join(w if i == 0 else quote_word(_scrubbed(w)) for i, w in enumerate(words)) + "`")
    return "".join(out)
