"""Settings and where they come from: the mirrors in force (envlock's directories: envlock.seams.dirs).

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

The project's file comes with the project (a pull request can add one): resolve, lock and update never solve
from a mirror only it names (the mirror would decide the hashes the lock records): the user's own setting for that
key is used (their envlock.toml, ENVLOCK_MIRRORS, --mirror), and without one the solve is refused, naming the
mirror and how to confirm it (`mirrors_in_force`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock.seams.dirs import Location, cache_location, envs_location, user_config_dir
from envlock.errors import SpecError
from envlock.seams.mirror_urls import MirrorMap, parse_entry
from envlock.names import remember_secrets, strip_credentials

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

    def shown(self) -> Entry:
        """As `envlock config` prints it: credentials in a key or URL marked (`***@`, `/t/***/`), never shown."""
        return Entry(strip_credentials(self.key, marked=True), strip_credentials(self.url, marked=True), self.origin,
                     tuple((strip_credentials(u, marked=True), o) for u, o in self.shadows))


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
                                "shadows": [{"url": u, "from": o} for u, o in e.shadows]}
                        for e in (entry.shown() for entry in self.entries)},
            "precedence": list(self.sources),
            "files": [{"scope": s, "path": str(p), "present": ok} for s, p, ok in self.files],
            "cache_dir": {"path": str(self.cache_dir.path), "from": self.cache_dir.origin},
            "envs_dir": {"path": str(self.envs_dir.path), "from": self.envs_dir.origin},
        }


# --------------------------------------------------------------------------- mirrors


def mirrors_in_force(cli: Sequence[str] = (), project_dir: Path = Path("."), *, solving: bool = False) -> MirrorMap:
    """The mirrors a command uses (command line entries are `strict`: see envlock.seams.mirror_urls.MirrorMap).

    `solving` (resolve, lock, update): a mirror that only the project's envlock.toml names is not solved from: where
    the user's own envlock.toml names that key, its URL is used; where nothing of the user's does, the key is left
    out and kept as `unconfirmed` (refused where a channel in play would read it:
    envlock.seams.mirror_urls.refuse_unconfirmed). ENVLOCK_MIRRORS and --mirror replace the project's entry anyway.
    A fetch (create, mirror, pack, export) uses the project's mirror: the lock's hashes check every byte it serves."""
    config = load(cli, project_dir)
    if not solving:
        return config.mirrors
    kept, unconfirmed, origins = dict(config.mirrors), {}, dict(config.mirrors.origins)
    for e in config.entries:
        if not e.origin.startswith("project "):
            continue
        users = next(((url, origin) for url, origin in e.shadows if origin.startswith("user ")), None)
        if users is not None:
            kept[e.key], origins[e.key] = users  # the user's own setting, whatever the project's file says
        else:
            del kept[e.key]
            unconfirmed[e.key] = f"{strip_credentials(e.url, marked=True)} ({e.origin.split(' ', 1)[1]})"
    return MirrorMap(kept, strict=config.mirrors.strict, unconfirmed=unconfirmed, origins=origins)


def load(cli: Sequence[str] = (), project_dir: Path = Path(".")) -> Config:
    """Read every source, lowest first, and merge them."""
    project_file = project_dir / CONFIG_NAME
    user_file = user_config_dir() / CONFIG_NAME
    layers: list[tuple[str, list[tuple[str, str]]]] = []
    files = []
    for scope, path in (("user", user_file), ("project", project_file)):
        try:
            present = path.is_file()
        except OSError as exc:  # a folder on the way this user may not enter (EACCES): say so, no traceback
            fix = "fix the permissions on its folder" + (", or set ENVLOCK_CONFIG_DIR" if scope == "user" else "")
            raise SpecError(f"cannot read {path}: {exc.strerror or exc}", hint=fix) from None
        files.append((scope, path.absolute(), present))
        if present:
            layers.append((f"{scope} {path.absolute()}", _read_file(path)))
    env_text = os.environ.get(ENV_MIRRORS, "")
    if env_text.strip():
        layers.append((ENV_MIRRORS, [parse_entry(t, source=ENV_MIRRORS) for t in split_entries(env_text)]))
    cli_pairs = [parse_entry(t) for t in cli]
    remember_secrets(*(f"{k} {u}" for _, pairs in layers for k, u in pairs), *(f"{k} {u}" for k, u in cli_pairs))
    if cli_pairs:
        layers.append(("--mirror", cli_pairs))
    merged: dict[str, Entry] = {}
    for origin, pairs in layers:
        for key, url in pairs:
            old = merged.get(key)
            shadows = ((old.url, old.origin), *old.shadows) if old and old.origin != origin else ()
            merged[key] = Entry(key, url, origin, shadows)
    entries = tuple(merged[k] for k in sorted(merged))
    mirrors = MirrorMap({e.key: e.url for e in entries}, strict={k for k, _ in cli_pairs},
                        origins={e.key: e.origin for e in entries})
    return Config(mirrors, entries, tuple(files), cache_location(), envs_location())


def split_entries(text: str) -> list[str]:
    """`a=u1,b=u2` or `a=u1 b=u2` (the Dockerfile build argument's form) -> entries."""
    return [t for t in re.split(r"[,\s]+", text.strip()) if t]


def _read_file(path: Path) -> list[tuple[str, str]]:
    """The `[mirrors]` table of one envlock.toml, values resolved against the file's directory."""
    from envlock.formats.untrusted import SPEC_CAP, load_toml, read_capped

    try:
        text = read_capped(path, SPEC_CAP, SpecError)
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read {path}: {exc}", hint="fix or remove that config file") from None
    doc = load_toml(text, path, SpecError, hint="fix or remove that config file")
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


def remember_configured_secrets(args: Sequence[str] = ()) -> None:
    """Every secret the user's configuration holds, read as text (parsed or not: a file that does not parse may
    still be quoted by an error): the user's and the project's envlock.toml (--project-dir in `args`, else the
    current folder) and pip's config files. Never raises: the error reporter calls it on its way out."""
    from envlock.seams.pypi.pipconf import pip_config_files

    project = Path(".")
    for i, a in enumerate(args):
        if a == "--project-dir" and i + 1 < len(args):
            project = Path(args[i + 1])
        elif a.startswith("--project-dir="):
            project = Path(a.split("=", 1)[1])
    try:
        paths = [user_config_dir() / CONFIG_NAME, project / CONFIG_NAME, *pip_config_files()]
    except Exception:  # noqa: BLE001 - best effort: a broken setting is the error being reported
        paths = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                remember_secrets(fh.read(1 << 20).decode("utf-8", "replace"))
        except (OSError, ValueError):
            continue
