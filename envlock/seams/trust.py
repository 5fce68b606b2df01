"""What this user verified in a cache that others may write (a group-shared ENVLOCK_CACHE_DIR), checked when used.

A package cache entry (an extracted conda package) or a cached wheel is verified against the lock's sha256 when
it is fetched. From then on it is trusted only while nobody else could have changed it:

* **sealed**: right after it is verified, and before it is moved into the cache, every file and directory of it
  loses its group and other write bits (envlock.seams.trust.seal). In a group cache (setgid, umask 002) the other
  members can then read it but not write a byte of it, add, remove or rename anything inside it;
* **remembered**: this user records the entry's identity (device, inode, owner) in its own store,
  `<cache>/.envlock-trust/<uid>/` (0700, owned by the user: no other user can write a record);
* **checked on use**: an entry is used as is only when it is still the sealed one this user remembered:
  the same inode, owned by this user, still without group/other write. One lstat per entry (not per file),
  so a warm create pays almost nothing (benchmarks/README.md).

The one thing another member can still do, rename the entry away and put their own in its place (the cache
directory itself is group-writable), changes the inode and the owner: the entry is then extracted again from
its archive (kept in the cache, checked against the lock's sha256 again), or fetched again, and the user is told.
An entry another user extracted is never trusted: this user extracts its own from the verified archive.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path
from typing import Any, Literal

Verdict = Literal["trusted", "changed", "unknown"]
_WRITE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _uid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1


def seal(root: Path) -> None:
    """Take the group and other write bits off `root` and everything under it (symlinks are left alone)."""
    if os.name != "posix":  # pragma: no cover - Windows has no mode bits to seal
        return
    for top, dirs, files in os.walk(root):
        for path in [top, *(os.path.join(top, f) for f in files), *(os.path.join(top, d) for d in dirs)]:
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & _WRITE_BY_OTHERS:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~_WRITE_BY_OTHERS)


def _identity(path: Path) -> dict[str, int] | None:
    """(device, inode, owner) of a sealed file or directory of this user's; None for anything else."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode) or st.st_mode & _WRITE_BY_OTHERS or (os.name == "posix" and st.st_uid != _uid()):
        return None
    return {"dev": st.st_dev, "ino": st.st_ino, "uid": st.st_uid}


class Store:
    """This user's records of what it verified in one cache directory."""

    def __init__(self, cache: Path) -> None:
        self.dir = cache / ".envlock-trust" / str(_uid())
        self._mine: bool | None = None  # the store's directory checked once per process

    def _ready(self) -> Path:
        """The store's directory: made 0700; anything else in its place (another user's, a link) is moved aside."""
        try:
            st = os.lstat(self.dir)
            mine = stat.S_ISDIR(st.st_mode) and (os.name != "posix" or (st.st_uid == _uid() and not st.st_mode & 0o077))
            if not mine:
                os.rename(self.dir, self.dir.with_name(f".stale-{self.dir.name}-{secrets.token_hex(4)}"))
                raise FileNotFoundError
        except FileNotFoundError:
            self.dir.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(self.dir, 0o700)
            except FileExistsError:  # another process of this user made it meanwhile
                pass
            os.chmod(self.dir, 0o700)
        return self.dir

    def _record(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def remember(self, key: str, path: Path, digest: str, extra: dict[str, Any] | None = None) -> None:
        """Record that `path` (sealed by this user) holds what `digest` names (and `extra`: what the caller wants
        back from `check` without reading the entry again)."""
        ident = _identity(path)
        if ident is None:
            return  # not sealed by this user (e.g. a filesystem without modes): it will be verified again
        folder = self._ready()
        tmp = folder / f".{key}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({**ident, "digest": digest, "extra": extra or {}}, fh, sort_keys=True)
        os.replace(tmp, folder / f"{key}.json")
        self._mine = True

    def check(self, key: str, path: Path, digest: str) -> Verdict:
        """"trusted": `path` is the sealed entry this user verified as `digest`; "changed": it was, and is no
        longer (replaced, unsealed, or another digest); "unknown": this user never verified it."""
        return self.lookup(key, path, digest)[0]

    def lookup(self, key: str, path: Path, digest: str) -> tuple[Verdict, dict[str, Any]]:
        """check(), and the `extra` remembered with a trusted entry ({} otherwise)."""
        try:
            if self._mine is None:
                self._mine = self._store_is_mine()
            if not self._mine:
                return "unknown", {}
            with open(os.path.join(self.dir, key + ".json"), encoding="utf-8") as fh:
                rec = json.load(fh)
        except (OSError, ValueError):
            return "unknown", {}
        ident = _identity(path)
        same = isinstance(rec, dict) and ident is not None and rec.get("digest") == digest and all(
            rec.get(k) == v for k, v in ident.items())
        extra = rec.get("extra") if same else None
        return ("trusted", extra if isinstance(extra, dict) else {}) if same else ("changed", {})

    def forget(self, key: str) -> None:
        try:
            self._record(key).unlink()
        except OSError:
            pass

    def _store_is_mine(self) -> bool:
        st = os.lstat(self.dir)
        return stat.S_ISDIR(st.st_mode) and (os.name != "posix" or (st.st_uid == _uid() and not st.st_mode & 0o077))


def swap_in(staging: Path, target: Path) -> None:
    """`staging` becomes `target` (a cache entry); what was there (another user's, a damaged one) is renamed aside
    first, so readers see the old or the new, and removed where this user may (or by a later run's clean-up)."""
    if os.path.lexists(target):
        old = target.with_name(f".envlock-old-{target.name}-{secrets.token_hex(4)}")
        os.rename(target, old)
        shutil.rmtree(old, ignore_errors=True)
    os.rename(staging, target)


def notify(message: str) -> None:
    """A line on stderr that names a cache entry someone changed (the command goes on: it is replaced)."""
    sys.stderr.write(f"envlock: {message}\n")
    sys.stderr.flush()
