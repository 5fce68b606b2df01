"""What this user verified in a cache that others may write (a group-shared ENVLOCK_CACHE_DIR), checked when used.

A package cache entry (an extracted conda package) or a cached wheel is verified against the lock's sha256 from the
very bytes that are used: rattler's extractor hashes the archive as it reads it (envlock/seams/conda/cache.py), a
wheel is copied while hashed or linked from the one open file that was checked (envlock/seams/pypi/wheels.py).
From then on it is trusted only while nobody else could have changed it:

* **private**: this user's store, `<cache>/.envlock-trust/<uid>/` (0700, owned by the user), holds the records
  and, for conda packages, the extracted entries themselves (`entries/<dist>/`, rattler's cache dir for a link).
  The store is opened once per process and used through that open directory (`/proc/self/fd/N` on Linux), so a
  group member who renames it away and puts their own in its place (the cache dir is group-writable) changes
  nothing that envlock or rattler reads: an inode another user owns is never linked into a prefix;
* **sealed**: right after it is verified every file and directory of an entry loses its group and other write
  bits (seal): the prefix's hard links to it are not writable by the group either;
* **per file**: each file's identity (inode, size, mtime, ctime, link count) is recorded when it is sealed and
  compared before each use (one stat per file: `drifted`). A new inode, another size or mtime is a change. A ctime
  is the one thing nobody can set, but a hard link made or removed moves it too (every create links, every env
  removed unlinks), so each use records what it saw and when it linked (envlock/seams/conda/cache.py `refresh`:
  `<dist>.live.json`, one small write per entry used): at the next use a ctime that moved inside that window with
  one link more is that link, one that moved with the link count otherwise is an env made or removed, and one that
  moved while the link count stayed (an in-place write whose mtime was put back: only the owner or root can) is
  checked against the file's sha256.

Anything else (another user's, one replaced or changed since) is extracted again from its archive (kept in the
cache, checked against the lock's sha256 again as it is extracted), or fetched again, and the user is told.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Any, Literal

Verdict = Literal["trusted", "changed", "unknown"]
_WRITE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH
#: One file's identity: inode, size, mtime, ctime (ns), link count.
Row = list[int]


def _uid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1


def _row(st: os.stat_result) -> Row:
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink]


def seal(root: Path, linkable: frozenset[str] = frozenset()) -> dict[str, Row]:
    """Take the group and other write bits off `root` and everything under it (symlinks are left alone); the
    identity of every file and symlink under it, by its path relative to `root` (POSIX), and whether rattler
    hard-links it into a prefix (`linkable`: 1) or not (0)."""
    table: dict[str, Row] = {}
    for top, dirs, files in os.walk(root):
        rel_top = os.path.relpath(top, root)
        for name in [*files, *dirs, ""]:
            path = os.path.join(top, name) if name else top
            st = os.lstat(path)
            if os.name == "posix" and not stat.S_ISLNK(st.st_mode) and st.st_mode & _WRITE_BY_OTHERS:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~_WRITE_BY_OTHERS)
                st = os.lstat(path)
            if name and not stat.S_ISDIR(st.st_mode):
                rel = name if rel_top == "." else f"{rel_top}/{name}".replace(os.sep, "/")
                table[rel] = [*_row(st), int(rel in linkable)]
    return table


def sums(root: Path, table: dict[str, Row], known: dict[str, str]) -> dict[str, str]:
    """Each file's sha256 (`known`: from the verified archive's own paths.json) and each symlink's target, for the
    files whose ctime moved with nothing else to explain it (`unsure`)."""
    out: dict[str, str] = {}
    for rel in table:
        path = os.path.join(root, rel)
        out[rel] = "link:" + os.readlink(path) if os.path.islink(path) else known.get(rel) or file_sha256(path)
    return out


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def drifted(root: Path, table: dict[str, Row],
            live: dict[str, Any] | None = None) -> tuple[list[str], list[str], dict[str, list[int]]]:
    """(changed, unsure, seen) for the files of one entry, one stat each (relative to the entry's open directory):

    * changed: gone, another inode, size or mtime, no longer this user's or sealed;
    * unsure: the ctime moved and the link count is what it was after the last use (an in-place write whose mtime
      was put back, only the owner or root can): to be hashed;
    * otherwise as it was: the ctime unmoved, or moved by the last use's own link (inside its window, one link
      more), or moved with the link count (an env made or removed since).

    `live`: what the last use saw (`c`, `n`: ctime and link count per file, in the table's order) and its link
    window (`t`: [start, end, linked on this filesystem]); without it the table's own values. `seen`: the same, now,
    for the next use."""
    dfd = _dirfd(root)
    if dfd is None:
        return list(table), [], {}
    changed: list[str] = []
    unsure: list[str] = []
    seen_c: list[int] = []
    seen_n: list[int] = []
    me, posix, lstat = _uid(), os.name == "posix", os.lstat
    cs, ns, window = _live(live, len(table))
    start, end, on_fs = window if window is not None else (0, 0, 0)
    rows = table.items()
    refs = zip(cs, ns) if cs is not None and ns is not None else ((row[3], row[4]) for row in table.values())
    try:
        for (rel, row), (ctime, nlink) in zip(rows, refs):
            try:
                st = lstat(rel, dir_fd=dfd)
            except OSError:
                changed.append(rel)
                continue
            now = st.st_ctime_ns
            seen_c.append(now)
            seen_n.append(st.st_nlink)
            if st.st_ino != row[0] or st.st_size != row[1] or st.st_mtime_ns != row[2] or (posix and (
                    st.st_uid != me or (st.st_mode & _WRITE_BY_OTHERS and not stat.S_ISLNK(st.st_mode)))):
                changed.append(rel)
            elif now != ctime:
                linked = on_fs and (len(row) < 6 or row[5])
                if st.st_nlink == nlink + (1 if linked else 0) and not (linked and start <= now < end):
                    unsure.append(rel)
    finally:
        os.close(dfd)
    return changed, unsure, {"c": seen_c, "n": seen_n}


def _live(live: dict[str, Any] | None, count: int) -> tuple[list[int] | None, list[int] | None, list[int] | None]:
    """(ctimes, link counts, window) of a live record that fits a table of `count` files, else Nones."""
    if not isinstance(live, dict):
        return None, None, None
    cs, ns, window = live.get("c"), live.get("n"), live.get("t")
    if not (isinstance(cs, list) and isinstance(ns, list) and len(cs) == len(ns) == count):
        return None, None, None
    return cs, ns, window if isinstance(window, list) and len(window) == 3 else None


def _dirfd(root: Path) -> int | None:
    """`root` opened as a directory, so that each name under it is found from there and not from the path again;
    None where it cannot be (gone, or a link)."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def _identity(st: os.stat_result | None, strict: bool) -> dict[str, int] | None:
    """(device, inode, owner; with `strict`: size and ctime too) of a sealed file or directory of this user's; None
    for anything else."""
    if st is None or stat.S_ISLNK(st.st_mode) or st.st_mode & _WRITE_BY_OTHERS or (
            os.name == "posix" and st.st_uid != _uid()):
        return None
    ident = {"dev": st.st_dev, "ino": st.st_ino, "uid": st.st_uid}
    return {**ident, "size": st.st_size, "ctime": st.st_ctime_ns} if strict else ident


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _anchored(fd: int) -> Path | None:
    """The path that reaches the open directory `fd` whatever is renamed meanwhile (Linux's /proc/self/fd)."""
    path = Path(f"/proc/self/fd/{fd}")
    return path if os.path.isdir(path) else None


def for_child(path: Path) -> Path:
    """`path` as another process of this user's (uv) reaches it: /proc/self/ is that process's own."""
    text = str(path)
    return Path(f"/proc/{os.getpid()}/" + text[len("/proc/self/"):]) if text.startswith("/proc/self/") else path


class Store:
    """This user's records of what it verified in one cache directory (and, for conda packages, the entries).

    `strict`: a record also holds the file's size and ctime (a wheel: a single file, checked whole)."""

    def __init__(self, cache: Path, *, strict: bool = False) -> None:
        self.path = cache / ".envlock-trust" / str(_uid())
        self.strict = strict
        self._dir: Path | None = None  # the store, reached through its open directory once checked
        self._fd: int | None = None
        self._read: dict[str, dict[str, Any]] = {}  # the records this process read or wrote, by key

    @property
    def dir(self) -> Path:
        """The store, made 0700 where absent (anything else in its place, another user's or a link, is moved
        aside), reached through its open directory."""
        if self._dir is None:
            self._dir = self._open(create=True)
        return self._dir

    def revisit(self) -> None:
        """Open the store again at the next use if its path no longer leads to the directory held open (removed, or
        renamed away by another user and replaced: then moved aside and made again, and the user told)."""
        if self._fd is None:
            return
        held = os.fstat(self._fd)
        now = _lstat(self.path)
        if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            os.close(self._fd)
            self._fd, self._dir = None, None
            self._read.clear()

    def _open(self, *, create: bool) -> Path:
        for _ in range(5):
            if create:
                self._ready()
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                if not create:
                    raise
                continue
            if _mine(os.fstat(fd)):
                self._fd = fd
                return _anchored(fd) or self.path
            os.close(fd)  # swapped between the check and the open: moved aside, made again
        raise PermissionError(f"{self.path} keeps being replaced by another user")

    def _ready(self) -> None:
        try:
            if not _mine(os.lstat(self.path)):
                notify(f"{self.path} (your records of what you verified in this cache) was replaced by another "
                       "user's or made writable by others; it is moved aside, and what you use is checked again")
                os.rename(self.path, self.path.with_name(f".stale-{self.path.name}-{secrets.token_hex(4)}"))
                raise FileNotFoundError
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(self.path, 0o700)
            except FileExistsError:  # another process of this user made it meanwhile
                pass
            os.chmod(self.path, 0o700)

    def _existing(self) -> Path | None:
        """The store when it exists and is this user's (never made here: a lookup writes nothing)."""
        if self._dir is None:
            try:
                self._dir = self._open(create=False)
            except OSError:
                return None
        return self._dir

    def remember(self, key: str, path: Path, digest: str, extra: dict[str, Any] | None = None,
                 st: os.stat_result | None = None) -> None:
        """Record that `path` (sealed by this user; `st`: its stat, taken from the open file) holds what `digest`
        names (and `extra`: what the caller wants back from `lookup` without reading the entry again)."""
        ident = _identity(st if st is not None else _lstat(path), self.strict)
        if ident is None:
            return  # not sealed by this user (e.g. a filesystem without modes): it will be verified again
        rec = {**ident, "digest": digest, "extra": extra or {}}
        self.put(key, rec)
        self._read[key] = rec

    def check(self, key: str, path: Path, digest: str, st: os.stat_result | None = None) -> Verdict:
        """"trusted": `path` is the sealed entry this user verified as `digest`; "changed": it was, and is no
        longer (replaced, unsealed, or another digest); "unknown": this user never verified it."""
        return self.lookup(key, path, digest, st)[0]

    def lookup(self, key: str, path: Path, digest: str,
               st: os.stat_result | None = None) -> tuple[Verdict, dict[str, Any]]:
        """check(), and the `extra` remembered with a trusted entry ({} otherwise)."""
        folder = self._existing()
        if folder is None:
            return "unknown", {}
        try:
            with open(f"{folder}/{key}.json", encoding="utf-8") as fh:
                rec = json.loads(fh.read())
        except (OSError, ValueError):
            return "unknown", {}
        if isinstance(rec, dict):
            self._read[key] = rec
        ident = _identity(st if st is not None else _lstat(path), self.strict)
        same = isinstance(rec, dict) and ident is not None and rec.get("digest") == digest and all(
            rec.get(k) == v for k, v in ident.items())
        extra = rec.get("extra") if same else None
        return ("trusted", extra if isinstance(extra, dict) else {}) if same else ("changed", {})

    def put(self, name: str, data: Any) -> None:
        """A side record of this user's (`name`.json in the store)."""
        tmp = self.dir / f".{name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data, sort_keys=True))  # dumps: the C encoder (dump streams through Python's)
        os.replace(tmp, self.dir / f"{name}.json")

    def get(self, name: str) -> Any:
        """A record (`name`.json in the store): as this process last read or wrote it, else read."""
        if name in self._read:
            return self._read[name]
        try:
            with open(self.dir / f"{name}.json", encoding="utf-8") as fh:
                return json.loads(fh.read())
        except (OSError, ValueError):
            return None

    def live(self, key: str) -> Any:
        """What the last use saw of an entry (drifted's `seen`, the link window): `<key>.live.json`."""
        try:
            with open(self.dir / f"{key}.live.json", encoding="utf-8") as fh:
                return json.loads(fh.read())
        except (OSError, ValueError):
            return None

    def set_live(self, key: str, data: dict[str, Any]) -> None:
        """One entry's live record: its own small file, so a create reads and writes only the entries it uses."""
        self.put(f"{key}.live", data)

    def forget(self, key: str) -> None:
        self._read.pop(key, None)
        folder = self._existing()
        if folder is not None:
            for name in (f"{key}.json", f"{key}.sums.json", f"{key}.live.json"):
                try:
                    os.unlink(folder / name)
                except OSError:
                    pass


def _mine(st: os.stat_result) -> bool:
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
    """A notice on stderr that names a cache entry someone changed (the command goes on: it is replaced), escaped and
    folded to the width as every notice is (a cache under a long path printed one line of 300 columns)."""
    from envlock.seams.filelocks import say  # noqa: PLC0415

    say(f"envlock: {message}")
