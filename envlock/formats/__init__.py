"""One reader and one writer per lock format, and ONE lock reader for every consumer (check, diff, create).

    model.py         LockFile (what every reader returns), envlock's custom-metadata keys
    condalock.py     conda-lock v1 conda-lock.yml: render; read v1 (v2 too for diff)
    head.py          what `check` reads of it: the header, and the package section without YAML
    explicit.py      @EXPLICIT conda-<platform>.lock: render, read
    requirements.py  requirements-<platform>.txt (pip --require-hashes): render
    pixi.py          pixi.lock v4-v6: read (diff)
    spec.py          environments/<name>.yml: the spec (a conda environment.yml + an `envlock:` block)

`read_lock` tells the formats apart in one place. Pure apart from reading the file it is given.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from envlock.errors import EnvlockError, HintPart, LockfileError, again
from envlock.formats.condalock import load_yaml, render_conda_lock, render_package_section
from envlock.formats.condalock import parse as _parse_conda_lock
from envlock.formats.explicit import header_value, is_explicit, parse_explicit, render_explicit
from envlock.formats.head import LockHead, parse_head
from envlock.formats.model import LOCK_FORMAT, META_PREFIX, LockFile, custom_value, dependency_order
from envlock.formats.requirements import render_requirements
from envlock.formats.untrusted import LOCK_CAP, read_capped

__all__ = [
    "LOCK_FORMAT", "META_PREFIX", "LockFile", "LockHead", "custom_value", "dependency_order", "header_value",
    "parse_lock", "read_head", "read_lock", "read_text", "read_to_install", "render_conda_lock", "render_explicit",
    "render_package_section", "render_requirements",
]  # fmt: skip

LOCK_NAME = "conda-lock.yml"
def make_hint(how: str = "make one with", lock: str | None = None) -> tuple[HintPart, ...]:
    """`make one with envlock resolve --torch T`: a torch envlock's table has (read when a hint is said, not on
    import), as a command of its own that keeps the command line's --project-dir and mirrors (errors.Retry);
    `lock`: the lock it re-creates (--lock NAME)."""
    from envlock.core.tables import torch_for_hint

    torch, why = torch_for_hint()
    named = ("--lock", lock) if lock else ()
    return (f"{how} ", again("--torch", torch, *named, command="resolve"),
            f" ({why}; --torch installed asks the torch you have)")


def read_text(path: Path, *, missing: str, missing_hint: str | Callable[[], Sequence[HintPart]],
              error: type[EnvlockError] = LockfileError, cap: int = LOCK_CAP) -> str:
    """A text file's content, or one EnvlockError (missing: LockfileError, its hint `missing_hint` (called only
    then, where it is a function); unreadable or over `cap` bytes: `error`)."""
    try:
        return read_capped(path, cap, error)
    except FileNotFoundError:
        hint = missing_hint if isinstance(missing_hint, str) else missing_hint()
        raise LockfileError(f"{missing} at {path}", hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {path}: {exc}", hint="check the path and its permissions") from None


def parse_lock(text: str, path: Path | None = None, *, compare: bool = False) -> LockFile:
    """Lock text in whichever format it is: @EXPLICIT, else conda-lock (pixi.lock too with `compare`).

    Without `compare` (create, check, export, pack): a conda-lock v1 or @EXPLICIT file whose every entry
    can be installed. With it (diff): conda-lock v1/v2, @EXPLICIT or pixi.lock v4-v6; entries need a name.
    """
    if is_explicit(text):
        return parse_explicit(text, path)
    doc = load_yaml(text, path, compare=compare)
    if compare:
        from envlock.formats.pixi import is_pixi, parse_pixi

        if is_pixi(doc):
            return parse_pixi(doc, path)
    return _parse_conda_lock(doc, path, compare=compare)


def read_lock(path: str | os.PathLike[str], *, compare: bool = False) -> LockFile:
    """Read a lock file (see parse_lock); a directory means its conda-lock.yml."""
    p = Path(path)
    if compare and p.is_dir():
        p = p / LOCK_NAME
    make = "pass two lock files (conda-lock.yml, .lock or pixi.lock)" if compare else make_hint
    text = read_text(p, missing="no lock", missing_hint=make)
    return parse_lock(text, p, compare=compare)


def read_to_install(path: str | os.PathLike[str]) -> LockFile:
    """read_lock for `create`: a conda-lock.yml whose package section is envlock's own text is read by its layout
    (formats/head.py, as `check` reads it: no YAML, each value checked to be what envlock writes), its packages
    without dependency lists (an install links each archive's own info/index.json); any other lock as read_lock
    reads it. The same packages, URLs and hashes either way (tests/test_lock_head.py)."""
    p = Path(path)
    text = read_text(p, missing="no lock", missing_hint=make_hint)
    if is_explicit(text):
        return parse_explicit(text, p)
    return parse_head(text, p).packages_read()


def read_head(path: Path) -> LockHead:
    """The metadata part of a conda-lock.yml, for `envlock check` (the packages are not parsed)."""
    return parse_head(read_text(path, missing="no lock", missing_hint="run `envlock lock` to make it"), path)
