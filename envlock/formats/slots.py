"""The slots of a generated file another program parses: every value that comes from a name, a path or a lock
goes in through one of these, which quotes it for that program or refuses it. Pure; nothing is pasted raw.

  line         one line of text (a comment, an @EXPLICIT or requirements header value): printable, no line break
  shell_word   one word of a POSIX sh command line: a printable line, single-quoted where it needs quoting
  docker_word  one word of a Dockerfile instruction (a COPY path): only characters no Dockerfile, shell or
               variable expansion reads as syntax (letters, digits, `. _ + - / @ = , : ~`)
  explicit_url one package line of an @EXPLICIT file: a printable URL without whitespace or `#` (conda splits
               the line at its first `#` for the md5)
  digest       a hash: hex digits of its length
  requirement  a pinned requirement's name and version in a pip requirements file: PEP 508 name, version chars

A refusal is one UnsafeNameError (`error:` + `hint:`, exit 1) naming the value escaped; the property test in
tests/security/test_hostile_names.py parses each generated file back with its consumer's own parser.
"""

from __future__ import annotations

import re
import shlex

from envlock.errors import UnsafeNameError

HINT = ("a name, path or lock value holds characters the generated file cannot carry as plain data; rename it "
        "(names: letters, digits, '.', '_', '+', '-'), or re-create the lock with `envlock lock`")
_DOCKER_WORD = re.compile(r"[A-Za-z0-9._+\-/@=,:~]+")
_URL_BAD = re.compile(r"[\s#]")
_HEX = re.compile(r"[0-9a-fA-F]+")
_PROJECT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")  # PEP 508's name
_VERSION = re.compile(r"[A-Za-z0-9.!+_-]+")  # PEP 440's characters, local labels included


def _refuse(value: object, what: str, why: str) -> UnsafeNameError:
    text = repr(value) if isinstance(value, str) else repr(str(value))
    text = text if len(text) <= 100 else text[:97] + "…'"
    return UnsafeNameError(f"refusing {what} {text} in a generated file: {why}", hint=HINT)


def line(value: str, what: str) -> str:
    """`value` for one line of a line-based file: printable (no line break, control, format or surrogate
    character: Python's and conda's line splitting both see one line)."""
    if not isinstance(value, str):
        raise _refuse(value, what, "it is not text")
    if not value.isprintable():
        raise _refuse(value, what, "it holds a line break or control character")
    return value


def shell_word(value: str, what: str) -> str:
    """`value` as one word of a POSIX sh command line (single-quoted where needed; nothing inside expands)."""
    return shlex.quote(line(value, what))


def docker_word(value: str, what: str) -> str:
    """`value` as one word of a Dockerfile instruction (COPY's source, a path in a LABEL): refused unless every
    character is one Docker, its variable expansion and the shell read as data."""
    if not isinstance(value, str) or not _DOCKER_WORD.fullmatch(value):
        raise _refuse(value, what, "a Dockerfile would read a character of it as syntax (only letters, digits "
                      "and . _ + - / @ = , : ~ are taken)")
    return value


def explicit_url(url: str, what: str = "the package URL") -> str:
    """A URL for an @EXPLICIT package line: one printable line, no whitespace, no `#` before the md5."""
    if _URL_BAD.search(line(url, what)):
        raise _refuse(url, what, "it holds whitespace or a '#' (an @EXPLICIT line is URL#md5)")
    return url


def digest(value: str, size: int, what: str) -> str:
    """A hash of `size` hex digits."""
    if not isinstance(value, str) or len(value) != size or not _HEX.fullmatch(value):
        raise _refuse(value, what, f"it is not {size} hex digits")
    return value


def requirement(name: str, version: str) -> str:
    """`name==version` for a pip requirements line: a PEP 508 name and a version of PEP 440's characters (nothing
    pip would read as an option, a marker, a URL or a second requirement)."""
    if not isinstance(name, str) or not _PROJECT.fullmatch(name):
        raise _refuse(name, "the PyPI package name", "it is not a PEP 508 project name")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise _refuse(version, f"the version of {name}", "it holds a character no version has")
    return f"{name}=={version}"
