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

A hint is text, or text and `Retry` / `Setting` values: a command that gets past the error, or one input of
the request to set, as data. cli.py renders a Retry as the user's own command line changed
(envlock/messages.py), so what the hint says runs as written; `err.hint` is the same hint rendered without a
command line (the API's and the tests' view). An error also carries what it is about: `platform`, `package`,
`cause` (a kind, e.g. `no-build`), `asked` (the user's own words for the package: a `--with` extra's name where
the channel's is another) and `spec` (the spec the request was read from: `lock`, `update` and `check` read
environments/NAME.yml, not a command line, so their hints name the spec's keys, `cuda: X.Y`, where resolve's
name the option, `--cuda X.Y`). Callers read these fields; nothing rewrites a message or a hint as text.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, TypeVar, Union

_E = TypeVar("_E", bound="EnvlockError")

#: resolve's options that are keys of a spec's `envlock:` block (how a hint says them for `lock`/`update`).
SPEC_KEYS = {"--torch": "torch", "--cuda": "cuda", "--torch-source": "torch_source", "--python": "python",
             "--toolchain-only": "toolchain_only", "--glibc": "glibc", "--with": "with", "--pip": "- pip:"}


class _Value:
    """A frozen value of `_FIELDS` (what @dataclass(frozen=True, slots=True) made, written out: errors.py imports
    every command's start-up, and dataclasses compiles each method it makes; envlock.models.record cannot be
    used here, a floor below it)."""

    __slots__: tuple[str, ...] = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__ or not isinstance(other, _Value):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._FIELDS)})"

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> list[Any]:
        return list(self._values())

    def __setstate__(self, state: list[Any]) -> None:
        for name, value in zip(self._FIELDS, state):
            object.__setattr__(self, name, value)


class Retry(_Value):
    """A command that gets past an error: the command the user ran with these changes.

    `set`: options given these values (replacing the user's; added where absent; an option set several times
    is repeatable and gets each value); `drop`: options removed (`--with=cufile`: only that value of it);
    `flags`: flags added; `args`: the positional arguments, replacing the user's (None: keep them);
    `command`: the command this is (`resolve`, `export dockerfile`) when it may differ from the one run:
    then it is that command with these options, carrying over the options both take (--project-dir, …).
    """

    __slots__ = _FIELDS = ("set", "drop", "flags", "args", "command")
    set: tuple[tuple[str, str], ...]
    drop: tuple[str, ...]
    flags: tuple[str, ...]
    args: tuple[str, ...] | None
    command: str | None

    def __init__(self, set: tuple[tuple[str, str], ...] = (), drop: tuple[str, ...] = (),  # noqa: A002 - the field's name
                 flags: tuple[str, ...] = (), args: tuple[str, ...] | None = None, command: str | None = None) -> None:
        for name, value in zip(self._FIELDS, (set, drop, flags, args, command)):
            object.__setattr__(self, name, value)

    def words(self) -> list[str]:
        """The command as shell words without the user's command line (what `err.hint` shows)."""
        head = ["envlock", *(self.command.split() if self.command else ["…"])]
        words = [*head, *(quote_word(w) for w in (*(self.args or ()), *(w for p in self.set for w in p), *self.flags))]
        return words + ([f"(without {', '.join(self.drop)})"] if self.drop else [])

    def in_spec(self, spec: str) -> str | None:
        """The change as an edit of spec `spec`'s envlock block (None: it is not one, e.g. another command)."""
        names = [o.partition("=")[0] for o in (*(o for o, _ in self.set), *self.flags, *self.drop)]
        if self.command or self.args is not None or not names or any(n not in SPEC_KEYS for n in names):
            return None
        sets = [f"`{SPEC_KEYS[o]}: {v}`" for o, v in self.set] + [f"`{SPEC_KEYS[f]}: true`" for f in self.flags]
        drops = [f"the `{SPEC_KEYS[d]}` list" if d == "--pip" else f"`{SPEC_KEYS[d]}`" for d in self.drop]
        said = (f"set {_and(sets)}" if sets else "") + (" and " if sets and drops else "")
        return said + (f"remove {_and(drops)}" if drops else "") + f" in environments/{spec}.yml's envlock block"


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class Setting(_Value):
    """One input of the request as a hint part, its value a placeholder (`X.Y`): resolve's option on a command
    line (`pass ... as --cuda X.Y`), the key of the spec's envlock block where a spec was read (`set ... as
    cuda: X.Y in environments/NAME.yml's envlock block`). `what`: what the value is, said before it."""

    __slots__ = _FIELDS = ("option", "value", "what")
    option: str  # one of SPEC_KEYS
    value: str
    what: str

    def __init__(self, option: str, value: str, what: str = "") -> None:
        for name, field_value in zip(self._FIELDS, (option, value, what)):
            object.__setattr__(self, name, field_value)

    def said(self, spec: str | None) -> str:
        what = f"{self.what} as " if self.what else ""
        if spec is None:
            return f"pass {what}{self.option} {self.value}"
        return f"set {what}`{SPEC_KEYS[self.option]}: {self.value}` in environments/{spec}.yml's envlock block"


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


HintPart = Union[str, Retry, Setting]


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


def plain_hint(parts: Sequence[HintPart], spec: str | None = None) -> str:
    """A hint's text without a command line: each Retry as its own words, in backticks (with `spec`: as an
    edit of that spec where it is one), each Setting as the option (with `spec`: as the spec's key)."""
    out = []
    for p in parts:
        if isinstance(p, Setting):
            out.append(p.said(spec))
        elif isinstance(p, Retry):
            edit = p.in_spec(spec) if spec is not None else None
            out.append(edit or "`" + " ".join(p.words()) + "`")
        else:
            out.append(p)
    return "".join(out)


class EnvlockError(Exception):
    """An error with a one-line message and a one-line hint for the user."""

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | Sequence[HintPart] | None = None, detail: Sequence[str] = (),
                 platform: str | None = None, package: str | None = None, cause: str | None = None,
                 asked: str | None = None, spec: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        parts = (hint,) if isinstance(hint, str) else tuple(hint or ())
        self.hint_parts: tuple[HintPart, ...] = parts or ("run the command again with --help for the options",)
        self.detail = tuple(detail)  # the full record (--verbose, --json); the message is the short form
        self.platform = platform  # the platform it is about (None: not one)
        self.package = package  # the package it is about, as the channel or index names it
        self.cause = cause  # what kind of cause (`no-build`, `conflict`, `cutoff`, `python`, ...; None: not said)
        self.asked = asked  # the user's own words for the package (a `--with` extra's name), where they differ
        self.spec = spec  # the spec the request was read from (its hint names the spec's keys); None: a command line

    def from_spec(self: _E, name: str) -> _E:
        """This error, raised for a request read from spec `name` (`lock`, `update`, `check`): its hint's
        Settings and Retries are said as that spec's keys."""
        self.spec = name
        return self

    def saying(self: _E, message: str | None = None, *, hint: str | Sequence[HintPart] | None = None) -> _E:
        """A copy of this error with another message (a caller adds what it was doing) or another hint (what the
        caller's rollback says): class, the rest and the data kept."""
        new = copy.copy(self)
        if message is not None:
            new.message, new.args = message, (message,)
        if hint is not None:
            new.hint_parts = (hint,) if isinstance(hint, str) else tuple(hint)
        return new

    @property
    def hint(self) -> str:
        """The hint as text (each Retry as its own words; cli.py renders them from the user's command line)."""
        return plain_hint(self.hint_parts, self.spec)

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
    """No candidate of the plan could be solved. `failures`: the record each failing platform's words are made
    from (envlock.core.solve_explain.Failure), so that a solve of several platforms says them without the platform."""

    exit_code: ClassVar[int] = 3

    def __init__(self, message: str, *, failures: Sequence[Any] = (), **data: Any) -> None:
        super().__init__(message, **data)
        self.failures = tuple(failures)


class LockfileError(EnvlockError):
    """A lock or spec file is missing, corrupt, stale or from a newer envlock."""


class NewerFormatError(LockfileError):
    """A lock, spec or env record (conda-meta/envlock) records a format version newer than this envlock reads."""


class EnvCreateError(EnvlockError):
    """Installing a lock into a prefix failed."""


class ArchiveError(EnvlockError):
    """A pack archive (envlock pack/unpack) is damaged, incomplete or not envlock's."""


class UnsafeNameError(EnvlockError):
    """A name from a lock, archive, mirror or cache entry that would not stay under its root (envlock/seams/gate.py)."""


class Interrupted(EnvlockError):
    """The user pressed Ctrl-C."""

    exit_code: ClassVar[int] = 130
