"""A project's sources as {relative path: text}, from a folder, an sdist (.tar.gz, .tar.bz2, .tar.xz, .tgz,
.zip) or a wheel, read without extracting anything and without running any of it.

An archive is untrusted: a member is read only when its name is a plain relative path (no `..`, no absolute
path, no drive, no NUL: `member_path`), it is a regular file (links are skipped), it is a C/C++/CUDA
source or header or a .py file, and it fits the caps (MAX_FILE bytes each, MAX_TOTAL together, MAX_MEMBERS
members looked at); reading stops at the cap, so a member that lies about its size costs no more. A single
top-level folder (`name-1.0/`) is taken off. A folder is walked without following links out of it.
"""

from __future__ import annotations

import os
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from envlock.errors import SpecError

SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu")
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc", ".tcc", ".ipp", ".def")
BUILD_FILES = ("cmakelists.txt", ".cmake", "meson.build", "meson.options", "meson_options.txt", "pyproject.toml")
WANTED = SOURCE_SUFFIXES + HEADER_SUFFIXES + (".py",) + BUILD_FILES
MAX_FILE = 4 << 20
MAX_TOTAL = 512 << 20
MAX_MEMBERS = 200_000
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip", ".whl")
_SKIP_DIRS = {".git", "__pycache__", ".tox", ".venv", "node_modules", ".eggs"}


@dataclass(frozen=True)
class SourceFiles:
    """The readable files of a project (paths relative to its root, '/'-separated) and what was left out."""

    origin: str  # what was read: the path as given
    files: dict[str, str]
    skipped: tuple[str, ...] = ()  # 'path (why)' for members refused or over a cap

    def sources(self) -> list[str]:
        return sorted(p for p in self.files if p.endswith(SOURCE_SUFFIXES))


def member_path(name: str) -> str | None:
    """A member name as a safe relative POSIX path, or None (absolute, `..`, a drive, NUL, empty)."""
    if not name or "\x00" in name or "\\" in name:
        return None
    p = PurePosixPath(name)
    if p.is_absolute() or any(part in ("..", "") for part in p.parts) or (p.parts and ":" in p.parts[0]):
        return None
    parts = [x for x in p.parts if x != "."]
    return "/".join(parts) or None


def read_sources(path: Path, keep: Callable[[str], bool] | None = None) -> SourceFiles:
    """The project at `path` (a folder or an archive); SpecError when it is neither or cannot be read.
    `keep`: only the paths it accepts are read (an archive's paths without their top folder)."""
    name = path.name.lower()
    archive = not path.is_dir()
    wanted = _wanted if keep is None else (lambda rel: _wanted(rel) and keep(rel.split("/", 1)[-1] if archive else rel))
    try:
        if path.is_dir():
            got = list(_walk(path, wanted))
            return SourceFiles(str(path), {k: v for k, v, _ in got if v is not None},
                               tuple(f"{k} ({why})" for k, v, why in got if v is None))  # fmt: skip
        if name.endswith(".whl"):  # installed layout: the package folder is part of the path
            files, skipped = _read(_zip_members(path), wanted)
            return SourceFiles(str(path), files, tuple(skipped))
        if name.endswith(".zip"):
            return _strip_top(str(path), _read(_zip_members(path), wanted))
        if name.endswith(ARCHIVES):
            return _strip_top(str(path), _read(_tar_members(path), wanted))
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise SpecError(f"cannot read {path}: {exc}",
                        hint="give a source folder, an sdist (.tar.gz, .zip) or a wheel that carries sources") from None  # fmt: skip
    raise SpecError(f"{path} is not a folder, an sdist or a wheel",
                    hint="give a source folder, an sdist (.tar.gz, .zip), a wheel, or an installed package's name")  # fmt: skip


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _wanted(rel: str) -> bool:
    return rel.lower().endswith(WANTED)


def _walk(root: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, str | None, str]]:
    """(path, text, '') for each file read; (path, None, why) for one left out (over MAX_FILE, or MAX_TOTAL reached)."""
    count = total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for f in sorted(filenames):
            count += 1
            if count > MAX_MEMBERS:
                return
            full = Path(dirpath) / f
            rel = full.relative_to(root).as_posix()
            if not wanted(rel) or full.is_symlink() or not full.is_file():
                continue
            if total > MAX_TOTAL:
                yield rel, None, f"over {_size(MAX_TOTAL)} read in all"
                continue
            with open(full, "rb") as fh:
                data = fh.read(MAX_FILE + 1)
            if len(data) > MAX_FILE:
                yield rel, None, f"over {_size(MAX_FILE)}"
                continue
            total += len(data)
            yield rel, data.decode("utf-8", "replace"), ""


def _tar_members(path: Path) -> Iterator[tuple[str, object]]:
    with tarfile.open(path, "r:*") as tf:
        for count, m in enumerate(tf):
            if count >= MAX_MEMBERS:
                return
            if not m.isfile():
                yield m.name, None
                continue
            yield m.name, (lambda m=m: tf.extractfile(m))


def _zip_members(path: Path) -> Iterator[tuple[str, object]]:
    with zipfile.ZipFile(path) as zf:
        for count, info in enumerate(zf.infolist()):
            if count >= MAX_MEMBERS:
                return
            if info.is_dir() or (info.external_attr >> 16) & 0o170000 == 0o120000:  # a folder, a symlink
                yield info.filename, None
                continue
            yield info.filename, (lambda info=info: zf.open(info))


def _read(members: Iterator[tuple[str, object]], wanted: Callable[[str], bool]) -> tuple[dict[str, str], list[str]]:
    files: dict[str, str] = {}
    skipped: list[str] = []
    total = 0
    for raw, opener in members:
        rel = member_path(raw)
        if rel is None:
            skipped.append(f"{raw!r} (not a plain relative path)")
            continue
        if opener is None or not wanted(rel):
            continue
        if total > MAX_TOTAL:
            skipped.append(f"{rel} (over {_size(MAX_TOTAL)} read in all)")
            continue
        fh = opener()  # type: ignore[operator]  # opener is not None here (skipped above)
        if fh is None:
            continue
        with fh:
            data = fh.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            skipped.append(f"{rel} (over {_size(MAX_FILE)})")
            continue
        total += len(data)
        files[rel] = data.decode("utf-8", "replace")
    return files, skipped


def _strip_top(origin: str, got: tuple[dict[str, str], list[str]]) -> SourceFiles:
    files, skipped = got
    tops = {p.split("/", 1)[0] for p in files}
    if len(tops) == 1 and all("/" in p for p in files):
        top = next(iter(tops)) + "/"
        files = {p[len(top) :]: t for p, t in files.items()}
    return SourceFiles(origin, files, tuple(skipped))
