"""pip's configuration, read as `pip install` reads it: which index (and extra indexes) the user's pip uses.

PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, then pip's config files in pip's order ([install] over [global]),
then pip's own default index, asked of pip itself: no index host is named in envlock.
"""

from __future__ import annotations

import configparser
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from envlock.errors import AnchorError
from envlock.names import remember_secrets


def pip_config_files(environ: Mapping[str, str] | None = None) -> list[Path]:
    """pip's config files in the order pip loads them (a later file overrides an earlier one)."""
    env = os.environ if environ is None else environ
    env_file = env.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []  # pip's documented way to switch every config file off
    xdg_dirs = env.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs.split(os.pathsep) if d]
    files.append(Path("/etc/pip.conf"))
    # pip skips the user files when PIP_CONFIG_FILE names an existing file.
    if not (env_file and Path(env_file).exists()):
        home = Path(env.get("HOME") or Path.home())
        files.append(home / ".pip" / "pip.conf")
        files.append(Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf")
    files.append(Path(env.get("VIRTUAL_ENV") or sys.prefix) / "pip.conf")
    if env_file:
        files.append(Path(env_file))
    return files


def _read_pip_config(path: Path) -> dict[str, str]:
    """ "section.key" -> value of one pip config file (keys normalised as pip does)."""
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError) as exc:
        raise AnchorError(
            f"cannot read pip configuration file {path}: {exc}",
            hint="fix or remove that file, or set PIP_INDEX_URL",
        ) from None
    return {
        f"{section}.{key.replace('_', '-')}": value
        for section in parser.sections()
        for key, value in parser.items(section)
    }


def _merged_pip_config(env: Mapping[str, str]) -> dict[str, tuple[str, Path]]:
    """"section.key" -> (value, file) over every pip config file (a later file wins)."""
    merged: dict[str, tuple[str, Path]] = {}
    for path in pip_config_files(env):
        if path.is_file():
            merged.update({k: (v, path) for k, v in _read_pip_config(path).items()})
    return merged


def _pip_setting(env: Mapping[str, str], key: str) -> tuple[str, str] | None:
    """(value, where) of one pip option: PIP_<KEY>, else [install], else [global] of the config files."""
    var = "PIP_" + key.upper().replace("-", "_")
    if env.get(var, "").strip():
        remember_secrets(env[var])  # a credential in it is a secret every output hides from now on
        return env[var].strip(), var
    merged = _merged_pip_config(env)
    remember_secrets(*(v for v, _ in merged.values()))
    # pip applies every [global] value first and every [install] value after it.
    for section in ("install", "global"):
        hit = merged.get(f"{section}.{key}")
        if hit and hit[0].strip():
            return hit[0].strip(), f"pip config {hit[1]} [{section}] {key}"
    return None


def configured_index_url(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(index URL, where it came from) exactly as `pip install` would pick it."""
    env = os.environ if environ is None else environ
    found = _pip_setting(env, "index-url")
    return found if found is not None else (_pip_default_index(), "pip's default index")


def configured_extra_index_urls(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, ...], str]:
    """(extra index URLs, where they came from) as `pip install` reads them (whitespace-separated)."""
    env = os.environ if environ is None else environ
    found = _pip_setting(env, "extra-index-url")
    if found is None:
        return (), "none"
    return tuple(found[0].split()), found[1]


def _pip_default_index() -> str:
    """The index pip uses when nothing is configured, asked of pip itself (never hard-coded)."""
    try:
        from pip._internal.models.index import PyPI  # noqa: PLC0415 - pip's internals, guarded

        url = str(PyPI.simple_url)
    except Exception:  # noqa: BLE001 - any failure means we cannot know pip's default
        url = ""
    if not url.startswith(("http://", "https://")):
        raise AnchorError(
            "cannot tell which package index pip uses (pip's default index is unavailable here)",
            hint="set PIP_INDEX_URL (or index-url in pip.conf) to your package index",
        )
    return url
