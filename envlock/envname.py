"""The one rule for a lock or environment name, and the one function that checks it.

A name becomes `environments/NAME.yml`, `locks/NAME/`, `<envs dir>/NAME` and text inside generated files (a
Dockerfile's labels, an @EXPLICIT file's header, a devcontainer's name), so it is one path component made of
characters that no file format, shell or Dockerfile interprets: letters, digits, `.`, `_`, `+` and `-`, a
letter or digit first, at most 100 characters. Every command that takes or reads a name (a NAME argument,
`-n NAME`, `--lock NAME`, a folder under `locks/`, a spec's `name:`, a lock's recorded `env_name`, a pack
archive's) checks it here; a refusal is one SpecError naming it escaped (tests/security/test_hostile_names.py).
"""

from __future__ import annotations

import re

from envlock.errors import EnvlockError, SpecError, UsageError

MAX = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
HINT = "use letters, digits, '.', '_', '+' and '-', a letter or digit first (e.g. torch2.3.0-cu121)"


def problem(name: object) -> str | None:
    """Why `name` is not a lock or environment name (None: it is one)."""
    if not isinstance(name, str):
        return "it is not text"
    if not name:
        return "it is empty"
    if len(name) > MAX:
        return f"it is longer than {MAX} characters"
    if not _NAME.fullmatch(name):  # fullmatch: `$` would let a trailing newline through
        return "it holds a character other than letters, digits, '.', '_', '+' and '-'" if name[0].isalnum() \
            and name[0].isascii() else "it does not start with a letter or digit"
    return None


def shown(name: object) -> str:
    """A refused name as a message shows it: quoted, every control character escaped, a long one cut."""
    text = repr(name) if isinstance(name, str) else repr(str(name))
    return text if len(text) <= 80 else text[:77] + "…'"


def validate_name(name: object, what: str = "lock name", hint: str | None = None, *,
                  error: type[EnvlockError] = SpecError) -> str:
    """`name` when it is a valid lock or environment name, else `error` naming it (escaped) and why.

    `what`: where it came from ("lock name", "environment name", "lock folder name", ...); `error`: SpecError
    (exit 1) for a name read from a file, UsageError (exit 2, see `arg_name`) for one on the command line."""
    why = problem(name)
    if why is not None:
        raise error(f"invalid {what} {shown(name)}: {why} (it names environments/NAME.yml, locks/NAME/ "
                        "and <envs dir>/NAME)", hint=hint or HINT)
    assert isinstance(name, str)
    return name


def arg_name(name: object, what: str = "lock name", hint: str | None = None) -> str:
    """A name given on the command line (a NAME argument, `-n`, `--lock NAME`): another is a value not of its
    option's form, exit 2 (docs/reference.md)."""
    return validate_name(name, what, hint, error=UsageError)
