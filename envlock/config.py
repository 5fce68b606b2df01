"""Settings and where they come from: the mirrors in force, envlock's directories (cache, config, envs), the host.

Mirrors, highest first: `--mirror NAME=URL` on the command line > `ENVLOCK_MIRRORS` (`name=url,…`; commas
or whitespace separate entries) > the project's `envlock.toml` (in `--project-dir`, default the current
directory) > the user's `envlock.toml` (`$ENVLOCK_CONFIG_DIR`, else the platform's user config dir, e.g.
~/.config/envlock/). A higher source replaces a lower one's entry for the same key; keys of lower sources
that it does not name stay. One file format for both places:

    [mirrors]
    conda-forge = "https://mirror.example.org/conda-forge"
    pypi = "https://mirror.example.org/pypi/simple"

Why envlock.toml and not `[tool.envlock]` in pyproject.toml: the same file serves the user-level config
(no pyproject.toml there), an envlock project is often not a Python package (a training repo with
environments/ and locks/ only), and mirrors are a site's setting, not the package's build metadata.
Relative paths in a file are relative to that file's directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock.errors import SpecError
from envlock.mirrors import MirrorMap, parse_entry

CONFIG_NAME = "envlock.toml"
ENV_MIRRORS = "ENVLOCK_MIRRORS"
_KNOWN_TABLES = ("mirrors",)


@dataclass(frozen=True)
class Entry:
    """One mirror in force, where it comes from, and the lower-precedence values it hides."""

    key: str
    url: str
    origin: str
    shadows: tuple[tuple[str, str], ...] = ()  # (url, origin)


@dataclass(frozen=True)
class Location:
    """A directory setting (cache, envs) and where it comes from."""

    path: Path
    origin: str


@dataclass(frozen=True)
class Config:
    """Everything `envlock config` shows; `mirrors` is what commands use."""

    mirrors: MirrorMap
    entries: tuple[Entry, ...]
    files: tuple[tuple[str, Path, bool], ...]  # (scope, path, present)
    cache_dir: Location
    envs_dir: Location
    sources: tuple[str, ...] = field(default=("--mirror", ENV_MIRRORS, "project", "user"))

    def to_json(self) -> dict[str, Any]:
        return {
            "mirrors": {e.key: {"url": e.url, "from": e.origin,
                                "shadows": [{"url": u, "from": o} for u, o in e.shadows]} for e in self.entries},
            "precedence": list(self.sources),
            "files": [{"scope": s, "path": str(p), "present": ok} for s, p, ok in self.files],
            "cache_dir": {"path": str(self.cache_dir.path), "from": self.cache_dir.origin},
            "envs_dir": {"path": str(self.envs_dir.path), "from": self.envs_dir.origin},
        }


# --------------------------------------------------------------------------- directories

_DIRS = {  # kind -> (environment variable, platformdirs function, subpath)
    "cache": ("ENVLOCK_CACHE_DIR", "user_cache_dir", ""),
    "config": ("ENVLOCK_CONFIG_DIR", "user_config_dir", ""),
    "envs": ("ENVLOCK_ENVS_DIR", "user_data_dir", "envs"),
}


def location(kind: str) -> Location:
    """The one resolver of envlock's directories: $ENVLOCK_<KIND>_DIR, else the platform's user dir.

    cache: repodata, index metadata, the package and wheel caches, uv's cache, file locks; config: the
    user's envlock.toml; envs: where `-n NAME` environments live (<user data dir>/envlock/envs).
    """
    var, func, sub = _DIRS[kind]
    env = os.environ.get(var)
    if env:
        return Location(Path(env).expanduser() if kind != "cache" else Path(env), var)
    import platformdirs

    base = Path(getattr(platformdirs, func)("envlock"))
    return Location(base / sub if sub else base, "default")


def user_config_dir() -> Path:
    """$ENVLOCK_CONFIG_DIR, else the platform's user config dir for envlock."""
    return location("config").path


def cache_location() -> Location:
    """envlock's cache dir: $ENVLOCK_CACHE_DIR, else the platform's user cache dir."""
    return location("cache")


def cache_dir() -> Path:
    """envlock's cache dir (see cache_location)."""
    return location("cache").path


def package_cache_dir() -> Path:
    """<cache dir>/pkgs: the conda package cache (safe to share between processes and nodes)."""
    return cache_dir() / "pkgs"


def envs_location() -> Location:
    """Where `-n NAME` envs live: $ENVLOCK_ENVS_DIR, else <user data dir>/envlock/envs."""
    return location("envs")


def envs_dir() -> Path:
    """Where `-n NAME` envs live (see envs_location)."""
    return location("envs").path


def ensure_writable(path: Path) -> Path:
    """`path`, created if needed; SpecError naming it and ENVLOCK_CACHE_DIR when it cannot be used.

    envlock's cache dir must be usable before anything slow starts (repodata, uv, packages, file locks): one
    that could not be written failed late and was blamed on the project or on the PyPI requirements.
    """
    import tempfile

    value = os.environ.get("ENVLOCK_CACHE_DIR")
    where = f"it is {value}" if value else "unset, so it is the user cache dir"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise SpecError(
            f"envlock's cache dir {path} cannot be used: {exc.strerror or exc}",
            hint=f"set ENVLOCK_CACHE_DIR to a directory you can write ({where}); the project is not the problem",
        ) from None
    return path


# --------------------------------------------------------------------------- the host

#: The platforms envlock locks (a CUDA toolchain exists for them).
CUDA_PLATFORMS = ("linux-64", "linux-aarch64", "win-64")


def host_platform() -> str:
    """This machine's conda subdir (linux-64, linux-aarch64, win-64, osx-arm64 …), without importing rattler."""
    import platform as _platform
    import sys

    machine = _platform.machine().lower()
    if sys.platform.startswith("linux"):
        return {"x86_64": "linux-64", "amd64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64",
                "ppc64le": "linux-ppc64le"}.get(machine, f"linux-{machine}")
    if sys.platform == "win32":
        return "win-64"
    if sys.platform == "darwin":
        return "osx-arm64" if machine == "arm64" else "osx-64"
    return f"{sys.platform}-{machine}"


def default_platform() -> str:
    """The platform a lock is for when none is given (README: the host's if it has CUDA, else linux-64)."""
    host = host_platform()
    return host if host in CUDA_PLATFORMS else "linux-64"


# --------------------------------------------------------------------------- mirrors


def mirrors_in_force(cli: Sequence[str] = (), project_dir: Path = Path(".")) -> MirrorMap:
    """The mirrors a command uses (command line entries are `strict`: see envlock.mirrors.MirrorMap)."""
    return load(cli, project_dir).mirrors


def load(cli: Sequence[str] = (), project_dir: Path = Path(".")) -> Config:
    """Read every source, lowest first, and merge them."""
    project_file = project_dir / CONFIG_NAME
    user_file = user_config_dir() / CONFIG_NAME
    layers: list[tuple[str, list[tuple[str, str]]]] = []
    files = []
    for scope, path in (("user", user_file), ("project", project_file)):
        present = path.is_file()
        files.append((scope, path.absolute(), present))
        if present:
            layers.append((f"{scope} {path.absolute()}", _read_file(path)))
    env_text = os.environ.get(ENV_MIRRORS, "")
    if env_text.strip():
        layers.append((ENV_MIRRORS, [parse_entry(t, source=ENV_MIRRORS) for t in split_entries(env_text)]))
    cli_pairs = [parse_entry(t) for t in cli]
    if cli_pairs:
        layers.append(("--mirror", cli_pairs))
    merged: dict[str, Entry] = {}
    for origin, pairs in layers:
        for key, url in pairs:
            old = merged.get(key)
            shadows = ((old.url, old.origin), *old.shadows) if old and old.origin != origin else ()
            merged[key] = Entry(key, url, origin, shadows)
    entries = tuple(merged[k] for k in sorted(merged))
    mirrors = MirrorMap({e.key: e.url for e in entries}, strict={k for k, _ in cli_pairs})
    return Config(mirrors, entries, tuple(files), cache_location(), envs_location())


def split_entries(text: str) -> list[str]:
    """`a=u1,b=u2` or `a=u1 b=u2` (the Dockerfile build argument's form) -> entries."""
    return [t for t in re.split(r"[,\s]+", text.strip()) if t]


def _read_file(path: Path) -> list[tuple[str, str]]:
    """The `[mirrors]` table of one envlock.toml, values resolved against the file's directory."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read {path}: {exc}", hint="fix or remove that config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}", hint="fix or remove that config file") from None
    unknown = sorted(set(doc) - set(_KNOWN_TABLES))
    if unknown:
        raise SpecError(f"{path}: unknown setting {unknown[0]!r}",
                        hint=f"envlock.toml knows these tables: {', '.join(f'[{t}]' for t in _KNOWN_TABLES)}")
    table = doc.get("mirrors", {})
    if not isinstance(table, dict):
        raise SpecError(f"{path}: `mirrors` must be a table of NAME = \"URL\"", hint='e.g. [mirrors]\nconda-forge = "https://…"')
    out = []
    for key, value in table.items():
        if not isinstance(value, str):
            raise SpecError(f"{path}: mirror {key!r} must be a string URL or path",
                            hint='e.g. conda-forge = "https://mirror.example.org/conda-forge"')
        out.append(parse_entry(f"{key}={value}", base=path.parent.absolute(), source=str(path)))
    return out
