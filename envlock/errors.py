"""Every error envlock reports to a user.

The tree (other modules define no error classes of their own)::

    EnvlockError                 exit 1   message + hint, printed as `error:` / `hint:` by cli.py
    ├── UsageError               exit 2   the command line itself is malformed (unknown option, missing value)
    ├── SpecError                exit 1   bad command-line input or environment spec
    ├── AnchorError              exit 1   torch version unknown / CPU build / no CUDA on the platform
    ├── PlanError                exit 1   the rules cannot build a plan (e.g. --cuda 12.7)
    ├── ChannelError             exit 4   a channel or index cannot be reached or read
    ├── SolveError               exit 3   no candidate CUDA minor solved (lists every attempt)
    ├── LockfileError            exit 1   missing, corrupt or stale lock
    │   └── NewerFormatError     exit 1   a lock, spec or env record written by a newer envlock (upgrade envlock)
    ├── EnvCreateError           exit 1   installing a lock into a prefix failed
    ├── ArchiveError             exit 1   a pack archive is damaged, incomplete or not envlock's
    ├── UnsafeNameError          exit 1   a name from a lock, archive, mirror or cache would not stay under its root
    └── Interrupted              exit 130 Ctrl-C

Exit code 2 is for usage errors: the argument parser's (mapped by cli.py) and UsageError.
An error may carry `detail`: the full record (a solve's every attempt, every channel a fetch tried),
printed under --verbose and in --json.

A hint is text, or text and `Retry` values: a command that gets past the error, as data. cli.py renders a
Retry as the user's own command line changed (envlock/messages.py), so what the hint says runs as written;
`err.hint` is the same hint rendered without a command line (the API's and the tests' view).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Union


@dataclass(frozen=True, slots=True)
class Retry:
    """A command that gets past an error: the command the user ran with these changes.

    `set`: options given these values (replacing the user's; added where absent; an option set several times
    is repeatable and gets each value); `drop`: options removed (`--with=cufile`: only that value of it);
    `flags`: flags added; `args`: the positional arguments, replacing the user's (None: keep them);
    `command`: the command this is (`resolve`, `export dockerfile`) when it may differ from the one run:
    then it is that command with these options, carrying over the options both take (--project-dir, …).
    """

    set: tuple[tuple[str, str], ...] = ()
    drop: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    args: tuple[str, ...] | None = None
    command: str | None = None

    def words(self) -> list[str]:
        """The command as shell words without the user's command line (what `err.hint` shows)."""
        head = ["envlock", *(self.command.split() if self.command else ["…"])]
        words = [*head, *(quote_word(w) for w in (*(self.args or ()), *(w for p in self.set for w in p), *self.flags))]
        return words + ([f"(without {', '.join(self.drop)})"] if self.drop else [])


def again(*words: str, drop: Sequence[str] = (), args: Sequence[str] | None = None, command: str | None = None) -> Retry:
    """`again("--torch", "2.3.0+cu121", "--toolchain-only", drop=["--cuda"])`: an option followed by a value
    that is not an option is set to it; an option alone is a flag."""
    pairs: list[tuple[str, str]] = []
    flags: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if i + 1 < len(words) and not words[i + 1].startswith("-"):
            pairs.append((word, words[i + 1]))
            i += 2
        else:
            flags.append(word)
            i += 1
    return Retry(tuple(pairs), tuple(drop), tuple(flags), None if args is None else tuple(args), command)


HintPart = Union[str, Retry]


def either(retries: Iterable[Retry], sep: str = " or ") -> tuple[HintPart, ...]:
    """Commands as alternatives: `a` or `b` or `c`."""
    out: list[HintPart] = []
    for r in retries:
        out += [sep, r] if out else [r]
    return tuple(out)


def quote_word(word: str) -> str:
    """A word as a POSIX shell reads it back (shlex.quote, without importing shlex on the start-up path)."""
    if word and all(c.isascii() and (c.isalnum() or c in "@%+=:,./-_") for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def plain_hint(parts: Sequence[HintPart]) -> str:
    """A hint's text without a command line: each Retry as its own words, in backticks."""
    return "".join(p if isinstance(p, str) else "`" + " ".join(p.words()) + "`" for p in parts)


class EnvlockError(Exception):
    """An error with a one-line message and a one-line hint for the user."""

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | Sequence[HintPart] | None = None,
                 detail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        parts = (hint,) if isinstance(hint, str) else tuple(hint or ())
        self.hint_parts: tuple[HintPart, ...] = parts or ("run the command again with --help for the options",)
        self.detail = tuple(detail)  # the full record (--verbose, --json); the message is the short form

    @property
    def hint(self) -> str:
        """The hint as text (each Retry as its own words; cli.py renders them from the user's command line)."""
        return plain_hint(self.hint_parts)

    @hint.setter
    def hint(self, text: str) -> None:
        self.hint_parts = (text,)

    def __str__(self) -> str:
        return self.message


class UsageError(EnvlockError):
    """The command line is malformed: an unknown option, a missing value, an invalid choice."""

    exit_code: ClassVar[int] = 2


class SpecError(EnvlockError):
    """Bad command-line input or environment spec."""


class AnchorError(EnvlockError):
    """No CUDA anchor could be found for the requested torch."""


class PlanError(EnvlockError):
    """The rules cannot produce a plan for the anchor and options."""


class ChannelError(EnvlockError):
    """A channel or package index cannot be reached or read."""

    exit_code: ClassVar[int] = 4


class SolveError(EnvlockError):
    """No candidate of the plan could be solved."""

    exit_code: ClassVar[int] = 3


class LockfileError(EnvlockError):
    """A lock or spec file is missing, corrupt, stale or from a newer envlock."""


class NewerFormatError(LockfileError):
    """A lock, spec or env record (conda-meta/envlock) records a format version newer than this envlock reads."""


class EnvCreateError(EnvlockError):
    """Installing a lock into a prefix failed."""


class ArchiveError(EnvlockError):
    """A pack archive (envlock pack/unpack) is damaged, incomplete or not envlock's."""


class UnsafeNameError(EnvlockError):
    """A name from a lock, archive, mirror or cache entry that would not stay under its root (envlock/gate.py)."""


class Interrupted(EnvlockError):
    """The user pressed Ctrl-C."""

    exit_code: ClassVar[int] = 130
