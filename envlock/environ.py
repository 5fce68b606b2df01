"""The ENVLOCK_* variables a user sets: each one's form checked, so a bad value is a usage error, never a
silent default (`ENVLOCK_HTTP_TIMEOUT=abc` was taken as 60).

cli.run checks them all before a command starts (exit 2, like an invalid option value: a variable is an
option given by the environment); the modules that read one (net.py, pypi/uv.py) read it through `number()`
here. It imports nothing of envlock (it sits under net.py): a bad value is a `BadSetting`, which those callers
raise as envlock's UsageError (`usage()`). ENVLOCK_MIRRORS's entries are checked for their NAME=URL form here and parsed in
envlock/seams/config.py (a command that reads no mirror still refuses a malformed one), ENVLOCK_UID/GID are
build arguments of the exported Dockerfile (not read by envlock), and the variables envlock's activation
scripts set in an activated shell (ENVLOCK_PREFIX, ENVLOCK_OLD_*, …) are envlock's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping



class BadSetting(ValueError):
    """An ENVLOCK_* variable of the wrong form: `message` and `hint` for envlock's UsageError."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint

#: name -> (what it holds, default shown in the hint, integer?, the smallest allowed value)
NUMBERS: dict[str, tuple[str, str, bool, float]] = {
    "ENVLOCK_HTTP_TIMEOUT": ("seconds per HTTP request", "60", False, 1e-9),
    "ENVLOCK_HTTP_RETRIES": ("retries per HTTP request", "3", True, 0),
    "ENVLOCK_UV_TIMEOUT": ("seconds one uv run may take", "600", False, 1e-9),
}
DIRECTORIES = ("ENVLOCK_CACHE_DIR", "ENVLOCK_ENVS_DIR", "ENVLOCK_CONFIG_DIR")
#: The settings a user sets; an unknown ENVLOCK_* name a slip (up to three letters) from one of them is warned
#: about (a misspelt setting would be ignored), any other is another tool's (an activated env's ENVLOCK_PREFIX, the
#: exported Dockerfile's ENVLOCK_UID, a test suite's: five letters or more from every setting) and left alone.
SETTINGS = (*NUMBERS, *DIRECTORIES, "ENVLOCK_MIRRORS", "ENVLOCK_DEBUG")


def number(name: str, environ: Mapping[str, str] | None = None) -> float:
    """The variable's value, else its default; BadSetting for a value of the wrong form."""
    env = os.environ if environ is None else environ
    what, default, integer, least = NUMBERS[name]
    text = env.get(name, "").strip()
    if not text:
        return float(default)
    try:
        value = float(int(text)) if integer else float(text)
    except ValueError:
        value = None
    if value is None or not least <= value < float("inf"):  # NaN compares false too
        kind = "a whole number ≥ 0" if integer else "a number > 0"
        raise BadSetting(f"{name}={text!r} is not {kind} ({what})",
                         f"set it like {name}={default} (the default), or unset it: `unset {name}`")
    return value


def check(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every ENVLOCK_* setting's form (BadSetting naming the first bad one); the warnings to say: one per
    ENVLOCK_* name a slip from a setting (`ENVLOCK_HTTP_TIMOUT`: did you mean ENVLOCK_HTTP_TIMEOUT?)."""
    env = os.environ if environ is None else environ
    for name in NUMBERS:
        number(name, env)
    for entry in env.get("ENVLOCK_MIRRORS", "").replace(",", " ").split():
        key, eq, value = entry.partition("=")
        if not (eq and key.strip() and value.strip()):
            raise BadSetting(f"ENVLOCK_MIRRORS {entry!r} is not NAME=URL",
                             "entries like conda-forge=https://host/conda-forge (commas or spaces between them), "
                             "or `unset ENVLOCK_MIRRORS`")
    for name in DIRECTORIES:
        text = env.get(name, "")
        if text and not _directory_or_makeable(text):
            raise BadSetting(f"{name}={text!r} is not a directory (nor a path one can be made at)",
                             f"point it at a directory (made if missing), or unset it: `unset {name}`")
    unknown = [n for n in env if n.startswith("ENVLOCK_") and n not in SETTINGS]
    return [w for w in map(_misspelt, sorted(unknown)) if w]


def _directory_or_makeable(text: str) -> bool:
    """A directory, or a path whose nearest existing ancestor is one (`/dev/null` and `/dev/null/x` are neither)."""
    if "\0" in text:
        return False
    path = os.path.abspath(os.path.expanduser(text))
    while True:
        if os.path.lexists(path):
            return os.path.isdir(path)
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def _misspelt(name: str) -> str | None:
    """The warning for an ENVLOCK_* name a slip from a setting (None: not one)."""
    from envlock.names import slip_of

    near = slip_of(name, SETTINGS, edits=3)
    return f"{name} is not a setting envlock reads (it changes nothing): did you mean {near}?" if near else None
