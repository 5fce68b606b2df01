"""One conda archive, fetched (envlock.seams.net) or read where it lies (file://), and checked against the lock.

rattler 0.28 skips the hash for `file://` URLs and for cached md5-only records (DESIGN.md traps), so envlock
checks every archive's sha256 (md5 where a lock has no sha256) itself, before anything is extracted.
Also used by `envlock pack` and `envlock mirror` (envlock/usecases/channeldir.py).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from envlock.seams import net
from envlock.errors import EnvCreateError
from envlock.models import LockedPackage
from envlock.seams.gate import conda_archive, under
from envlock.names import file_url_path
from envlock.progress import NoProgress, Progress


def expected(pkg: LockedPackage) -> tuple[str, str]:
    """(algorithm, hex digest) the archive must have."""
    return ("sha256", pkg.sha256.lower()) if pkg.sha256 else ("md5", pkg.md5.lower())


def mirrored(url: str, mirrors: Mapping[str, str]) -> str:
    """Where to fetch a locked URL from (`--mirror conda-forge=URL`; `nvidia=` covers nvidia/label/…)."""
    from envlock.seams.mirror_urls import mirrored as _mirrored

    return _mirrored(url, mirrors)


def local_archive(pkg: LockedPackage, mirrors: Mapping[str, str]) -> Path:
    """Where a package fetched from a file:// URL is read: under the root of the file:// mirror the user named (the
    locked rest of the path checked by envlock/seams/gate.py), else the lock's own file:// URL, only inside a conda
    channel, a folder whose repodata.json lists the file (so a lock cannot make envlock read /etc/passwd)."""
    from envlock.seams.gate import relative, under
    from envlock.seams.mirror_urls import mirror_of

    hit = mirror_of(pkg.url, mirrors)
    if hit is not None and hit[1].startswith("file:"):
        return under(file_url_path(hit[1]), relative(pkg.url[len(hit[0]):], f"the path of {pkg.name} in the mirror"))
    path = file_url_path(pkg.url)
    if not _listed(path) or os.path.islink(path):
        raise EnvCreateError(
            f"refusing to read {path} (locked as {net.scrub(pkg.url)}): a file:// URL in a lock is read only inside "
            "a conda channel (a folder whose repodata.json lists the file) or a mirror you name",
            hint="pass --mirror CHANNEL=DIR for a local channel, or re-lock against a channel")
    return path


_LISTED: dict[str, frozenset[str]] = {}


def _listed(path: Path) -> bool:
    """Whether `path` is a package its folder's repodata.json lists (read once per folder and process)."""
    import stat

    from envlock.formats.untrusted import read_json

    folder = str(path.parent)
    if folder not in _LISTED:
        names: frozenset[str] = frozenset()
        try:
            repodata = os.path.join(folder, "repodata.json")
            if stat.S_ISREG(os.lstat(repodata).st_mode):  # the checked loader: capped, nesting bounded
                doc = read_json(Path(repodata))
                names = frozenset(str(k) for key in ("packages", "packages.conda") for k in (doc.get(key) or {}))
        except (OSError, ValueError, AttributeError, TypeError):
            pass
        _LISTED[folder] = names
    return path.name in _LISTED[folder]


def hash_file(path: Path, cancel: threading.Event | None = None) -> tuple[str, str, int]:
    """(sha256, md5, size) of a file; Cancelled when `cancel` is set meanwhile."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
    with path.open("rb") as fh:
        while chunk := fh.read(net.CHUNK):
            if cancel is not None and cancel.is_set():
                raise net.Cancelled
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return sha.hexdigest(), md5.hexdigest(), size


def _missing_file(archive: Path, pkg: LockedPackage) -> EnvCreateError:
    """A file:// package that is not there: a repodata-only channel (a harvested snapshot) said as such."""
    from envlock.seams.mirror_urls import channel_of, display, missing_file_hint

    hint = missing_file_hint(archive, pkg.url)
    if hint is not None:
        return EnvCreateError(f"package file {archive} is missing (locked as {pkg.url})", hint=hint)
    channel_dir = archive.parent.parent
    if (archive.parent / "repodata.json").is_file():
        return EnvCreateError(
            f"{channel_dir} has repodata but not the package file {pkg.filename}: it can be solved against, "
            "not installed from",
            hint=f"install from a channel that has the files: --mirror {display(channel_of(pkg.url))}=URL (a mirror "
                 "made by `envlock mirror` where the channel is reachable, or an `envlock pack` archive and "
                 "`envlock unpack`)")
    return EnvCreateError(f"package file {archive} is missing (locked as {pkg.url}), and {channel_dir} has no "
                          "repodata either", hint="the local channel moved or was cleaned: restore it, or re-lock")


def fetch_archive(pkg: LockedPackage, mirrors: Mapping[str, str], work: Path, cancel: threading.Event,
                  session: Any, progress: Progress | None = None, sized: bool = False) -> tuple[Path, str, str, int]:
    """`pkg`'s archive checked against the lock: (path, sha256, md5, size).

    http(s) archives are downloaded into `work` (`sized`: the byte bar's total already holds this file); a
    file:// one is copied into `work` and hashed as it is copied, from the one file opened (a mirror file another
    user replaces after the check is never what is used). The caller uses the copy in `work`, a folder of its own
    that no other user can write (the package cache: this user's private store).
    """
    progress = progress or NoProgress()
    url = mirrored(pkg.url, mirrors)
    scheme = urlsplit(url).scheme
    if scheme == "file":
        source = local_archive(pkg, mirrors)
        if not source.is_file():
            raise _missing_file(source, pkg)
        archive = under(work, conda_archive(pkg), "the package file")
        sha256, md5, size = copy_hashed(source, archive, cancel)
        _check(pkg, url, sha256, md5, archive)
        return archive, sha256, md5, size
    elif scheme in ("http", "https"):
        from envlock.seams.mirror_urls import channel_of, display

        channel = display(channel_of(pkg.url))
        key = channel if "://" in channel else channel.split("/", 1)[0]  # nvidia covers nvidia/label/…
        archive = under(work, conda_archive(pkg), "the package file")
        net.download(session, url, archive, what=f"{pkg.filename} ({channel})", cancel=cancel,
                     unreachable=f"fetch {channel}'s packages from a mirror: --mirror {key}=URL (or ENVLOCK_MIRRORS / "
                                 "envlock.toml: `envlock config`); or check the network and proxy settings",
                     hint=f"is {net.scrub(url)} still published? re-lock with `envlock lock` if it moved",
                     on_length=None if sized else (lambda n: progress.expect("fetch", n)),
                     on_bytes=lambda n: progress.transfer("fetch", n))
    else:
        raise EnvCreateError(f"cannot fetch {net.scrub(pkg.url)}: unsupported URL scheme {scheme!r}",
                             hint="envlock installs from http(s):// and file:// URLs")
    sha256, md5, size = hash_file(archive, cancel)
    _check(pkg, url, sha256, md5, archive)
    return archive, sha256, md5, size


def _check(pkg: LockedPackage, url: str, sha256: str, md5: str, archive: Path) -> None:
    """The lock's hash, or the archive (this run's copy in its work folder) removed and an EnvCreateError."""
    algo, want = expected(pkg)
    got = sha256 if algo == "sha256" else md5
    if got != want:
        archive.unlink(missing_ok=True)
        raise EnvCreateError(
            f"{algo} mismatch for {pkg.filename}: the lock says {want}, the archive from {net.scrub(url)} has {got}",
            hint="the package is not the one that was locked, so nothing was installed; check the mirror or "
                 "proxy, or re-lock (`envlock lock`) if the channel really changed",
        )


def copy_hashed(src: Path, dest: Path, cancel: threading.Event | None = None) -> tuple[str, str, int]:
    """Copy `src` to a new file `dest` (never through a link in either place): (sha256, md5, size) of the very
    bytes written, read once from the one file opened."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
    nofollow = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    inp = os.open(src, os.O_RDONLY | nofollow)
    try:
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow, 0o600)
        with os.fdopen(inp, "rb", closefd=False) as fin, os.fdopen(out, "wb") as fout:
            while chunk := fin.read(net.CHUNK):
                if cancel is not None and cancel.is_set():
                    raise net.Cancelled
                sha.update(chunk)
                md5.update(chunk)
                size += len(chunk)
                fout.write(chunk)
    finally:
        os.close(inp)
    return sha.hexdigest(), md5.hexdigest(), size
