"""The one way from an untrusted string to a path under a root.

Every file name that comes from a lock (a package URL's last segment, a record's name, version and build, an
env name, a sha256), a pack archive (a member, a manifest entry), a mirror or a cache entry becomes a path only
here. The rule, whoever calls:

1. percent-decoded once (a URL's `%2F` is a `/`, and refused; `%252F` decodes to the text `%2F`, a plain name);
2. one path component: not empty, not `.` or `..`, no `/`, `\\`, NUL or other control character, no drive
   letter (`C:`), at most 255 bytes;
3. of the expected shape: a conda archive is `<name>-<version>-<build>.conda|.tar.bz2` with exactly the lock
   record's name, version and build; a wheel's name follows the wheel spec and its project name and version
   are the lock entry's; a sha256 is 64 hex digits;
4. joined to its root, the path still lies under the root once every symlink is resolved (`under`).

A refusal is one UnsafeNameError (an EnvlockError: `error:` + `hint:`, exit 1) naming the string with its
control characters escaped; nothing else is raised for any input (tests/security/test_gate.py).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path, PurePosixPath
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote

from envlock.errors import UnsafeNameError

if TYPE_CHECKING:  # pragma: no cover
    from envlock.models import LockedPackage, PypiPackage

HINT = ("a lock, archive, mirror or cache entry names a file outside where it belongs; do not use it, and "
        "re-create it from a source you trust (`envlock lock`, `envlock pack`)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}\Z")
# conda: a name may hold dashes, a version and a build may not (conda's own file name rule).
_CONDA_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*\Z")
_CONDA_PART = re.compile(r"[A-Za-z0-9_.+!]+\Z")
CONDA_SUFFIXES = (".conda", ".tar.bz2")
# The wheel spec: {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl
_WHEEL = re.compile(r"(?P<name>[A-Za-z0-9_.]+)-(?P<version>[A-Za-z0-9_.!+]+)(-\d[A-Za-z0-9_]*)?"
                    r"-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl\Z")


def shown(raw: object) -> str:
    """A refused string as the error shows it: quoted, control characters escaped, long ones cut."""
    text = repr(str(raw))
    return text if len(text) <= 120 else text[:117] + "…'"


def _refuse(raw: object, what: str, why: str, hint: str | None = None) -> UnsafeNameError:
    return UnsafeNameError(f"refusing {what} {shown(raw)}: {why}", hint=hint or HINT)


def component(raw: str, what: str = "the file name", *, decode: bool = True, hint: str | None = None) -> str:
    """`raw` (percent-decoded once unless `decode` is False) as one safe path component; else UnsafeNameError."""
    if not isinstance(raw, str):
        raise _refuse(raw, what, "it is not text", hint)
    try:
        name = unquote(raw, errors="strict") if decode and "%" in raw else raw
    except UnicodeDecodeError:
        raise _refuse(raw, what, "its percent-escapes are not UTF-8", hint) from None
    why = _why_not_component(name)
    if why:
        raise _refuse(raw, what, why, hint)
    return name


def _why_not_component(name: str) -> str | None:
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return "it names a directory, not a file in it"
    if "/" in name or "\\" in name:
        return "it holds a path separator"
    if _CONTROL.search(name):
        return "it holds a control character"
    if _DRIVE.match(name):
        return "it starts with a drive letter"
    try:
        if len(os.fsencode(name)) > 255:
            return "it is longer than a file name can be"
    except UnicodeError:
        return "it is not a valid file name"
    return None


def relative(raw: str, what: str = "the path", *, decode: bool = True, hint: str | None = None) -> PurePosixPath:
    """A `/`-separated relative path from an untrusted string: every segment one safe component (each decoded once)."""
    if not isinstance(raw, str) or not raw:
        raise _refuse(raw, what, "it is empty" if raw == "" else "it is not text", hint)
    if raw.startswith("/"):
        raise _refuse(raw, what, "it is an absolute path", hint)
    parts = [component(seg, what, decode=decode, hint=hint) if seg else "" for seg in raw.split("/")]
    if "" in parts:
        raise _refuse(raw, what, "it has an empty segment", hint)
    return PurePosixPath(*parts)


def under(root: Path, rel: str | PurePosixPath, what: str = "the path", *, hint: str | None = None) -> Path:
    """`root / rel`, once `rel` is a safe relative path (see `relative`) that stays under `root` after symlinks.

    Every existing part of the joined path is resolved (os.path.realpath), so a symlink inside the root that
    points out of it is refused too. A path that does not exist yet is checked as far as it exists.
    """
    parts = rel if isinstance(rel, PurePosixPath) else relative(rel, what, decode=False, hint=hint)
    path = Path(root, *parts.parts)
    if _no_link_below(root, parts.parts):
        return path  # every existing part below the root is a plain directory or file: it stays under the root
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise _refuse(str(parts), what, f"it leads out of {root} (to {real})", hint)
    return path


def _no_link_below(root: Path, parts: tuple[str, ...]) -> bool:
    """Whether no existing component of `root/parts` below `root` is a symlink (one lstat each, from the top,
    stopping at the first that does not exist): then the path cannot leave the root, and realpath is not needed."""
    import stat  # noqa: PLC0415

    here = str(root)
    for part in parts:
        here = os.path.join(here, part)
        try:
            if stat.S_ISLNK(os.lstat(here).st_mode):
                return False
        except FileNotFoundError:
            return True
        except OSError:
            return False
    return True


def sha256_hex(raw: object, what: str = "the sha256") -> str:
    """A sha256 as 64 lower-case hex digits (a cache directory is named by it)."""
    if not isinstance(raw, str) or not _SHA256.match(raw):
        raise _refuse(raw, what, "it is not 64 hex digits")
    return raw.lower()


# --------------------------------------------------------------------------- package file names


@functools.lru_cache(maxsize=8192)  # a record is frozen: a warm create asks for each one several times
def conda_archive(pkg: LockedPackage) -> str:
    """The file name of a locked conda package: the URL's last segment, checked to be
    `<name>-<version>-<build>.conda|.tar.bz2` with exactly the record's name, version and build."""
    what = f"the package file name of {pkg.name}"
    raw = pkg.url.rsplit("/", 1)[-1].split("#", 1)[0]
    name = component(raw, what)
    suffix = next((s for s in CONDA_SUFFIXES if name.endswith(s)), None)
    if suffix is None:
        raise _refuse(raw, what, "it is not a .conda or .tar.bz2 file")
    if not (_CONDA_NAME.match(pkg.name) and _CONDA_PART.match(pkg.version) and _CONDA_PART.match(pkg.build)):
        raise _refuse(f"{pkg.name} {pkg.version} {pkg.build}", "the package record",
                      "its name, version or build holds a character a conda package name cannot")
    if name != f"{pkg.name}-{pkg.version}-{pkg.build}{suffix}":
        raise _refuse(raw, what, f"it is not {pkg.name}-{pkg.version}-{pkg.build}{suffix}, the package the lock names")
    return name


def conda_dist(pkg: LockedPackage) -> str:
    """`<name>-<version>-<build>` of a locked conda package (its package cache entry), checked as above."""
    name = conda_archive(pkg)
    return next(name[: -len(s)] for s in CONDA_SUFFIXES if name.endswith(s))


def canonical_project(name: str) -> str:
    """PEP 503's normal form of a project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_file(pkg: PypiPackage) -> str:
    """The file name of a locked wheel (its URL's last segment, percent-decoded once), checked against the
    wheel spec, with the lock entry's project name and version."""
    what = f"the wheel file name of {pkg.name}"
    raw = pkg.url.rsplit("/", 1)[-1].split("#", 1)[0].split("?", 1)[0]
    name = component(raw, what)
    m = _WHEEL.match(name)
    if m is None:
        raise _refuse(raw, what, "it is not a wheel file name (name-version-python-abi-platform.whl)")
    if canonical_project(m["name"]) != canonical_project(pkg.name) or not _same_version(m["version"], pkg.version):
        raise _refuse(raw, what, f"it is not a wheel of {pkg.name} {pkg.version}, the package the lock names")
    return name


def _same_version(a: str, b: str) -> bool:
    if a == b:
        return True
    from packaging.version import InvalidVersion, Version  # noqa: PLC0415 - only for an unusual spelling

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


def check_entries(packages: Iterable[LockedPackage], wheels: Iterable[PypiPackage] = ()) -> None:
    """Every file name a lock's entries become, checked at once: before anything is fetched or written."""
    for p in packages:
        conda_dist(p)
    for w in wheels:
        sha256_hex(w.sha256, f"the sha256 of {w.name}")
        wheel_file(w)
