"""Where envlock keeps things: its cache, config and envs directories, one resolver for all three.

Each is $ENVLOCK_<KIND>_DIR when set, else the platform's user directory (platformdirs, imported only here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from envlock.errors import SpecError


@dataclass(frozen=True)
class Location:
    """A directory setting (cache, envs) and where it comes from."""

    path: Path
    origin: str


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


def named_env(name: str, recorded: bool = False) -> Path:
    """`<envs dir>/NAME` of an environment name, checked by the one name rule (envlock/envname.py): every
    `-n NAME` (exit 2 when refused) and a lock's `recorded` name (exit 1) become a prefix only here."""
    from envlock.envname import arg_name, validate_name

    check, what = (validate_name, "environment name the lock records") if recorded else (arg_name, "name (-n)")
    return (envs_dir() / check(name, what, hint="-n takes a name (letters, digits, '.', '_', '+', '-'); "
                                                       "use -p PREFIX for a path")).absolute()


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
        theirs = _not_writable(path)
    except OSError as exc:
        raise SpecError(
            f"envlock's cache dir {path} cannot be used: {exc.strerror or exc}",
            hint=f"set ENVLOCK_CACHE_DIR to a directory you can write ({where}); the project is not the problem",
        ) from None
    if theirs is not None:  # a cache another user filled: rattler, uv and envlock write into each of these
        raise SpecError(
            f"envlock's cache dir {path} is shared, and {theirs} in it is not writable by you",
            hint=f"set ENVLOCK_CACHE_DIR to a cache of your own ({where}), or share it as a group: "
                 f"`chmod -R g+rwX {path}`, `chmod g+s` on its folders, and umask 002 for every user of it",
        )
    return path


def _not_writable(cache: Path) -> Path | None:
    """The first folder of `cache` (or the package cache's lock file) that this user cannot write, if any."""
    for child in sorted(cache.iterdir()):
        if child.is_dir() and not os.access(child, os.W_OK | os.X_OK):
            return child
    rattler_lock = cache / "pkgs" / ".cache.lock"
    return rattler_lock if rattler_lock.exists() and not os.access(rattler_lock, os.W_OK) else None


def private_cache(cache: Path) -> Path:
    """This user's own corner of envlock's cache (`private-<uid>`, mode 0700), for what records a URL's
    credentials: rattler's repodata cache keeps each channel URL whole, uv's cache each index URL. A group-shared
    cache must not hand them to the group (docs/security.md). SpecError when it is not this user's and private.
    """
    path = cache / f"private-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
        if os.name == "posix" and (st.st_uid != os.geteuid() or st.st_mode & 0o077 or not path.is_dir()):
            raise SpecError(f"{path} is not a private directory of this user (mode {st.st_mode & 0o7777:o})",
                            hint="remove it; envlock makes it again with mode 0700")
    except OSError as exc:
        raise SpecError(f"cannot make {path}: {exc.strerror or exc}", hint="check ENVLOCK_CACHE_DIR") from None
    return path

