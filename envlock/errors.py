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
A SolveError may carry `detail`: the full per-attempt record, printed under --verbose and in --json.
"""

from __future__ import annotations

from typing import ClassVar


class EnvlockError(Exception):
    """An error with a one-line message and a one-line hint for the user."""

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or "run the command again with --help for the options"

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

    def __init__(self, message: str, *, hint: str | None = None, detail: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint=hint)
        self.detail = detail  # every attempt in full (--verbose, --json); the message is the short form


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
