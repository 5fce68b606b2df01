"""Create's side of the PyPI part: every locked wheel fetched once into envlock's cache (envlock.seams.net; sha256
checked before anything is installed), then installed into the prefix by `uv pip install --no-deps --target`
(no resolution: the locked list is complete; envlock.seams.pypi.uv runs it).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from envlock.seams import beneath, net, proc
from envlock.errors import ChannelError, EnvCreateError, EnvlockError
from envlock.seams.filelocks import entry_lock
from envlock.seams.fs import new_dir_mode, new_file_mode, remove_dead, work_dir
from envlock.seams.mirror_urls import PYPI
from envlock.seams.gate import component, sha256_hex, under, wheel_file
from envlock.names import file_url_path
from envlock.models import PypiPackage
from envlock.seams.net import scrub
from envlock.seams.pypi import uv
from envlock.seams.pypi.part import index_root, python_platform
from envlock.seams.conda.fetch import copy_hashed
from envlock.formats.untrusted import DOC_CAP, read_capped
from envlock.seams.trust import Store, notify, swap_in

#: The work folders this process is downloading wheels into (fetch_wheels removes them when it is interrupted).
_IN_FLIGHT: set[Path] = set()


def wheel_cache(cache: Path) -> Path:
    return cache / "wheels"


def cached_wheel(cache: Path, pkg: PypiPackage) -> Path:
    """`<cache>/wheels/<sha[:2]>/<sha256>/<wheel file name>`, through envlock/seams/gate.py (a lock's URL or sha256 never
    leads elsewhere). Content-addressed: a file is only ever renamed here after its sha256 matched."""
    sha = sha256_hex(pkg.sha256, f"the sha256 of {pkg.name}")
    return under(wheel_cache(cache), PurePosixPath(sha[:2], sha, wheel_file(pkg)), "the wheel cache entry")


def fetch_wheels(packages: Sequence[PypiPackage], cache: Path, *, offline: bool, mirrors: Mapping[str, str] = {},
                 jobs: int = 4, progress: Any = None) -> tuple[list[Path], int]:
    """Every locked wheel in envlock's cache, sha256-verified; (paths, how many were downloaded).

    A cached wheel is used as it is only while it is the sealed file this user verified (envlock/seams/trust.py);
    any other (another user's, or one replaced since) is checked again: copied while hashed, and kept as this
    user's when it matches the lock, else fetched again.
    """
    paths = [cached_wheel(cache, p) for p in packages]
    remove_dead(wheel_cache(cache), ".envlock-*")  # what killed runs left (downloads, install links)
    trust = _store(cache)
    trust.revisit()
    todo = [p for p, path in zip(packages, paths) if trust.check(path.parent.name, path, p.sha256.lower()) != "trusted"]
    missing = [p for p, path in zip(packages, paths) if p in todo and not path.is_file()]
    if missing and offline:
        names = ", ".join(p.filename for p in missing[:3]) + (" …" if len(missing) > 3 else "")
        raise EnvCreateError(f"{len(missing)} wheel(s) are not in envlock's cache and --offline is set: {names}",
                             hint="run once without --offline to fill the cache")
    if todo:
        session = net.session(pool=max(16, jobs))
        sizes: Mapping[str, int] = {}
        if progress is not None and getattr(progress, "wants_sizes", False) and PYPI not in mirrors and missing:
            # the byte bar's total (and ETA); a pypi= mirror is asked later
            sizes = net.content_lengths([_mirrored(p, mirrors, session) for p in missing], session)
            if sizes:
                progress.expect("wheels", sum(sizes.values()))
        cancel = threading.Event()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
        try:
            futures = [pool.submit(_fetch_one, p, cache, mirrors, session, progress,
                                   sizes.get(_mirrored(p, mirrors, session), 0) if sizes else 0, offline, cancel)
                       for p in todo]
            for fut in futures:
                fut.result()
        except BaseException:
            # Ctrl-C or a failed wheel: the other downloads stop, and the folders of those still waiting on a server
            # go now (a worker blocked in a request would hold Ctrl-C up for as long as the server stalls)
            cancel.set()
            pool.shutdown(wait=False, cancel_futures=True)
            for work in list(_IN_FLIGHT):
                shutil.rmtree(work, ignore_errors=True)
            raise
        else:
            pool.shutdown(wait=True)
        finally:
            session.close()
    return paths, len(missing)


_STORES: dict[Path, Store] = {}


def store(cache: Path) -> Store:
    """This user's trust store of the wheel cache (one per process and cache)."""
    return _store(cache)


def _store(cache: Path) -> Store:
    root = wheel_cache(cache)
    if root not in _STORES:
        _STORES[root] = Store(root, strict=True)  # a wheel's size and ctime too: one file, checked whole
    return _STORES[root]


def _mirrored(pkg: PypiPackage, mirrors: Mapping[str, str], session: Any) -> str:
    """Where to fetch a locked wheel: a mirror of its index by URL prefix, else `pypi=` by name, else itself."""
    for src, dst in mirrors.items():
        root = index_root(src)
        if "://" in src and pkg.url.startswith(root):
            return index_root(dst) + pkg.url[len(root):]
    if PYPI in mirrors:
        return find_on_index(mirrors[PYPI], pkg, session)
    return pkg.url


def find_on_index(index: str, pkg: PypiPackage, session: Any) -> str:
    """The URL of the locked file on a PEP 503 simple index (its project page), by file name.

    Any static or real index works (envlock mirror's, devpi, a proxy): the file is then sha256-checked
    against the lock like any other download.
    """
    from urllib.parse import urljoin

    page = index.rstrip("/") + f"/{component(pkg.name, 'the project name', decode=False)}/"
    text = _read_page(page, pkg, session)
    want = wheel_file(pkg)
    for href in _hrefs(text):
        url = urljoin(page, href)
        if unquote(url.split("#", 1)[0].rsplit("/", 1)[-1]) == want:
            return url.split("#", 1)[0]
    raise ChannelError(f"{pkg.filename} is not on the pypi mirror ({scrub(page)} does not list it)",
                       hint="fill the mirror with `envlock mirror` for this lock, or fix the pypi= mirror URL")


def _read_page(page: str, pkg: PypiPackage, session: Any) -> str:
    if page.startswith("file:"):
        path = file_url_path(page) / "index.html"
        try:
            return read_capped(path, DOC_CAP, ChannelError)
        except (OSError, UnicodeDecodeError):
            raise ChannelError(f"{pkg.name} is not on the pypi mirror ({path} is missing)",
                               hint="fill the mirror with `envlock mirror` for this lock, or fix the pypi= mirror URL") from None
    try:
        resp, page = net.get(session, page, headers={"Accept": "text/html"}, hint="check the pypi= mirror URL")
    except net.NoAnswer as exc:
        raise ChannelError(f"cannot read the pypi mirror page {scrub(page)} ({exc.reason})",
                           hint="check the pypi= mirror URL and the network") from None
    if resp.status_code != 200:
        raise ChannelError(f"{pkg.name} is not on the pypi mirror (HTTP {resp.status_code} from {scrub(page)})",
                           hint="fill the mirror with `envlock mirror` for this lock, or fix the pypi= mirror URL")
    return resp.text


def _hrefs(html: str) -> list[str]:
    from html.parser import HTMLParser

    found: list[str] = []

    class _Anchors(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                found.extend(v for k, v in attrs if k == "href" and v)

    _Anchors().feed(html)
    return found


def fetch_one(pkg: PypiPackage, cache: Path, session: Any) -> Path:
    """One wheel from its own URL into envlock's cache (sha256-checked); its path there."""
    _fetch_one(pkg, cache, {}, session)
    return cached_wheel(cache, pkg)


def _fetch_one(pkg: PypiPackage, cache: Path, mirrors: Mapping[str, str], session: Any, progress: Any = None,
               sized: int = 0, offline: bool = False, cancel: threading.Event | None = None) -> None:
    final = cached_wheel(cache, pkg)
    sha = final.parent.name
    with entry_lock(wheel_cache(cache), sha):  # once per cache, even when processes share it
        verdict = _store(cache).check(sha, final, sha)
        if verdict == "trusted":
            if progress is not None and sized:
                progress.expect("wheels", -sized)  # another process fetched it: not downloaded here
            return
        if verdict == "changed":
            notify(f"the cached wheel {final.name} is not the one you verified (replaced or made writable since); "
                   "it is checked again")
        _fetch_locked(pkg, final, mirrors, session, progress, sized, offline, cache, cancel)


def _fetch_locked(pkg: PypiPackage, final: Path, mirrors: Mapping[str, str], session: Any, progress: Any,
                  sized: int, offline: bool, cache: Path, cancel: threading.Event | None = None) -> None:
    """The wheel into a new folder of this user's, checked against the lock, sealed and swapped in as `final`'s."""
    with beneath.directory(cache, beneath.relative_to(cache, final.parent.parent), inside_links=True):
        pass  # wheels/<sha[:2]>/, where the entry is renamed to (never through a link out of the cache)
    with work_dir(wheel_cache(cache), ".envlock-fetch-", root=cache) as work:
        _IN_FLIGHT.add(work)
        try:
            _fetch_checked(pkg, final, work, mirrors, session, progress, sized, offline, cache, cancel)
        finally:
            _IN_FLIGHT.discard(work)


def _fetch_checked(pkg: PypiPackage, final: Path, work: Path, mirrors: Mapping[str, str], session: Any, progress: Any,
                   sized: int, offline: bool, cache: Path, cancel: threading.Event | None) -> None:
    """_fetch_locked's work in its folder `work`."""
    sha = final.parent.name
    tmp = work / final.name
    got = None
    if os.path.isfile(final) and not os.path.islink(final):  # there, but not ours or not as verified
        got = copy_hashed(final, tmp)[0]  # the bytes hashed are the bytes kept
        if got != sha:
            notify(f"the cached wheel {final.name} does not match the lock; "
                   + ("it cannot be fetched again with --offline" if offline else "fetching it again"))
    if got != sha:
        if offline:
            raise EnvCreateError(f"{final.name} in envlock's cache does not match the lock, and --offline is set",
                                 hint="run once without --offline (it fetches and checks it again)")
        tmp.unlink(missing_ok=True)
        got = _fetch_to(_mirrored(pkg, mirrors, session), tmp, pkg, session, progress, sized, mirrors, cancel)
    if got != sha:
        raise EnvCreateError(
            f"{pkg.filename} does not match the sha256 the lock records (got {got[:16]}…, want {sha[:16]}…)",
            hint="the index served a different file than the one locked, so nothing was installed; "
                 "check the index or proxy, or re-lock (`envlock lock --refresh`) if it really changed",
        )
    os.chmod(tmp, new_file_mode() & ~0o022)  # readable by the other users of a cache, writable by none
    os.chmod(work, new_dir_mode() & ~0o022)
    swap_in(work, final.parent)
    _store(cache).remember(sha, final, sha)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(net.CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _local_indexes(mirrors: Mapping[str, str]) -> list[str]:
    """The file:// indexes and mirrors the user names (pip's index-url / extra-index-url, --mirror values)."""
    from envlock.seams.pypi.pipconf import configured_extra_index_urls, configured_index_url

    try:
        urls = [configured_index_url()[0], *configured_extra_index_urls()[0]]
    except EnvlockError:
        urls = []
    return [u for u in dict.fromkeys([*mirrors.values(), *urls]) if u.startswith("file:")]


def local_wheel(url: str, pkg: PypiPackage, mirrors: Mapping[str, str]) -> Path:
    """The path of a file:// wheel URL, when it lies under a file:// index or mirror the user names, or when such
    an index's own page of the project links that very file (a static index may keep its files beside its pages,
    `../../files/…`); a lock (or a mirror's page) cannot make envlock read any other file. Resolve checks every
    file:// URL it locks with this same rule, so it never writes one that create refuses."""
    path = os.path.realpath(file_url_path(url))
    indexes = _local_indexes(mirrors)
    roots = [os.path.realpath(file_url_path(index_root(u))) for u in indexes]
    if any(path.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        return Path(path)
    for index in indexes:
        try:
            linked = find_on_index(index, pkg, None)
        except EnvlockError:
            continue
        if linked.startswith("file:") and os.path.realpath(file_url_path(linked)) == path:
            return Path(path)
    raise EnvCreateError(
        f"refusing to read {path} for {pkg.filename}: a file:// URL is read only inside a package index or mirror "
        "you name (pip's index-url / extra-index-url, or --mirror pypi=DIR), or where such an index's page links it",
        hint="name the folder as an index or mirror, or re-lock against a network index")


def _fetch_to(url: str, dest: Path, pkg: PypiPackage, session: Any, progress: Any, sized: int,
              mirrors: Mapping[str, str] = {}, cancel: threading.Event | None = None) -> str:
    """The file's bytes into `dest`, and their sha256: copied from a file:// URL (under an index or mirror the user
    names) and hashed as copied, else downloaded (envlock.seams.net.download: a body cut off mid-way starts the file
    again, so no byte is written twice)."""
    if url.startswith("file:"):
        source = local_wheel(url, pkg, mirrors)
        try:
            got = copy_hashed(source, dest, cancel)[0]
        except OSError as exc:
            raise EnvCreateError(f"cannot read {pkg.filename}: {exc.strerror or exc}",
                                 hint="the lock records a machine-local file:// URL; re-lock against a network index") from None
        if progress is not None:
            progress.transfer("wheels", dest.stat().st_size)
        return got
    net.download(session, url, dest, what=f"{pkg.filename} (the PyPI part)", cancel=cancel,
                 hint="check the index (or --mirror), or re-lock if the file is gone",
                 unreachable="fetch the PyPI part's wheels from a mirror: --mirror pypi=URL (a simple index, e.g. one "
                             "`envlock mirror` made); or check the network and proxy settings",
                 on_length=None if sized or progress is None else (lambda n: progress.expect("wheels", n)),
                 on_bytes=None if progress is None else (lambda n: progress.transfer("wheels", n)))
    return _digest(dest)


def site_packages(platform: str, python: str) -> str:
    """The prefix-relative site-packages of a conda python."""
    return "Lib/site-packages" if platform == "win-64" else f"lib/python{python}/site-packages"


def install_wheels(prefix: Path, wheels: Sequence[Path], *, platform: str, python: str, glibc: str,
                   cache: Path, final: Path | None = None) -> None:
    """Install verified wheels into the prefix's site-packages (no resolution, no interpreter of the env run).

    uv's `--target` with the env's python version and platform: the prefix's python is never asked (a
    python that execs another one would send the files to that one's site-packages). Scripts land in
    `<target>/bin` and move to `<prefix>/bin` with the env's python as their interpreter.
    """
    if not wheels:
        return
    rel = site_packages(platform, python)
    with beneath.directory(prefix, rel):  # made without following a symlink out of the prefix
        pass
    target = under(prefix, rel, "the environment's site-packages")
    # --no-cache: uv's cache lies in envlock's, which other users may write; the verified wheels are all it needs
    args = ["pip", "install", "--no-config", "--no-deps", "--offline", "--no-index", "--no-cache", "--quiet",
            "--target", str(target), "--python", sys.executable, "--python-version", python,
            "--python-platform", python_platform(platform, glibc), *map(str, wheels)]

    def failed(why: proc.Failure) -> EnvlockError:
        return EnvCreateError("installing the PyPI part timed out" if why.kind == "timeout" else
                              f"installing the PyPI part failed: {why}", hint="run `envlock create` again")

    done = uv.run(args, cache=cache, what="installing the PyPI part", failed=failed)
    if done.returncode != 0:
        detail = " ".join(ln.strip() for ln in done.stderr.splitlines() if ln.strip())[:400]
        raise EnvCreateError(f"installing the PyPI part into {prefix} failed: {detail or 'uv failed'}",
                             hint="run `envlock create` again; the environment was rolled back")
    (target / ".lock").unlink(missing_ok=True)  # uv's own lock file of the target dir
    if platform != "win-64":
        _move_scripts(prefix, target, python, final or prefix)


def _move_scripts(prefix: Path, target: Path, python: str, final: Path) -> None:
    """`<site-packages>/bin/*` -> `<prefix>/bin/*` (shebang: the env's python), RECORD paths updated."""
    scripts = target / "bin"
    if not scripts.is_dir():
        return
    interpreter = str(final / "bin" / f"python{python}")  # the env's path once in place (an update builds beside)
    moved = set()
    for src in sorted(scripts.iterdir()):
        data = _with_shebang(src.read_bytes(), interpreter)
        # bin/<name> replaced, never written through a symlink (in bin/ or as bin/ itself) out of the prefix
        beneath.write_bytes(prefix, f"bin/{component(src.name, 'the script name', decode=False)}", data, mode=0o755)
        src.unlink()
        moved.add(f"bin/{src.name}")
    scripts.rmdir()
    up = "../" * len(Path(site_packages("linux-64", python)).parts)
    for record in target.glob("*.dist-info/RECORD"):
        lines = record.read_text(encoding="utf-8").splitlines()
        fixed = [up + ln if ln.split(",", 1)[0] in moved else ln for ln in lines]
        if fixed != lines:  # a new file, renamed into place (an update's clone shares the old env's inodes)
            beneath.write_bytes(prefix, record.relative_to(prefix).as_posix(), ("\n".join(fixed) + "\n").encode())


def _with_shebang(data: bytes, interpreter: str) -> bytes:
    """A script's interpreter line(s) made the env's python: `#!...python...`, and also pip's sh trampoline that uv
    writes itself when the python it ran with has a long path (envlock's own, in a deep venv: the script would
    run envlock's interpreter instead of the env's)."""
    head, _, rest = data.partition(b"\n")
    if head.startswith(b"#!") and b"python" in head:
        return _shebang(interpreter) + rest
    if head == b"#!/bin/sh" and rest.startswith(b"'''exec' "):
        _, _, after = rest.partition(b"\n")
        closing, _, body = after.partition(b"\n")
        if closing == b"' '''":
            return _shebang(interpreter) + body
    return data


def _shebang(interpreter: str) -> bytes:
    """`#!<python>`, or pip's sh trampoline where a kernel would not take the path (spaces, > 127 bytes)."""
    if " " not in interpreter and len(interpreter) < 120:
        return f"#!{interpreter}\n".encode()
    return f"#!/bin/sh\n'''exec' \"{interpreter}\" \"$0\" \"$@\"\n' '''\n".encode()


