"""Create's side of the PyPI part: every locked wheel fetched once into envlock's cache (envlock.net; sha256
checked before anything is installed), then installed into the prefix by `uv pip install --no-deps --target`
(no resolution: the locked list is complete; envlock.pypi.uv runs it).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from envlock import beneath, net
from envlock.errors import ChannelError, EnvCreateError, EnvlockError
from envlock.fs import entry_lock, new_file_mode, replace
from envlock.mirrors import PYPI
from envlock.gate import component, sha256_hex, under, wheel_file
from envlock.names import file_url_path
from envlock.models import PypiPackage
from envlock.net import scrub
from envlock.pypi import uv
from envlock.pypi.part import index_root, python_platform
from envlock.untrusted import DOC_CAP, read_capped


def wheel_cache(cache: Path) -> Path:
    return cache / "wheels"


def cached_wheel(cache: Path, pkg: PypiPackage) -> Path:
    """`<cache>/wheels/<sha[:2]>/<sha256>/<wheel file name>`, through envlock/gate.py (a lock's URL or sha256 never
    leads elsewhere). Content-addressed: a file is only ever renamed here after its sha256 matched."""
    sha = sha256_hex(pkg.sha256, f"the sha256 of {pkg.name}")
    return under(wheel_cache(cache), PurePosixPath(sha[:2], sha, wheel_file(pkg)), "the wheel cache entry")


def fetch_wheels(packages: Sequence[PypiPackage], cache: Path, *, offline: bool, mirrors: Mapping[str, str] = {},
                 jobs: int = 4, progress: Any = None) -> tuple[list[Path], int]:
    """Every locked wheel in envlock's cache, sha256-verified; (paths, how many were downloaded)."""
    paths = [cached_wheel(cache, p) for p in packages]
    missing = [p for p, path in zip(packages, paths) if not path.is_file()]
    if missing and offline:
        names = ", ".join(p.filename for p in missing[:3]) + (" …" if len(missing) > 3 else "")
        raise EnvCreateError(f"{len(missing)} wheel(s) are not in envlock's cache and --offline is set: {names}",
                             hint="run once without --offline to fill the cache")
    if missing:
        session = net.session(pool=max(16, jobs))
        sizes: Mapping[str, int] = {}
        if progress is not None and getattr(progress, "wants_sizes", False) and PYPI not in mirrors:
            # the byte bar's total (and ETA); a pypi= mirror is asked later
            sizes = net.content_lengths([_mirrored(p, mirrors, session) for p in missing], session)
            if sizes:
                progress.expect("wheels", sum(sizes.values()))
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                for fut in [pool.submit(_fetch_one, p, cache, mirrors, session, progress,
                                        sizes.get(_mirrored(p, mirrors, session), 0) if sizes else 0)
                            for p in missing]:
                    fut.result()
        finally:
            session.close()
    return paths, len(missing)


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
    import requests  # noqa: PLC0415 - the session's own exceptions

    try:
        resp = session.get(page, timeout=net.timeout_of(), headers={"Accept": "text/html"})
    except requests.RequestException as exc:
        raise ChannelError(f"cannot read the pypi mirror page {scrub(page)} ({net.reason(exc)})",
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
               sized: int = 0) -> None:
    final = cached_wheel(cache, pkg)
    with entry_lock(wheel_cache(cache), final.parent.name):  # once per cache, even when processes share it
        if not final.is_file():
            _fetch_locked(pkg, final, mirrors, session, progress, sized)
        elif progress is not None and sized:
            progress.expect("wheels", -sized)  # another process fetched it: not downloaded here


def _fetch_locked(pkg: PypiPackage, final: Path, mirrors: Mapping[str, str], session: Any, progress: Any = None,
                  sized: int = 0) -> None:
    url = _mirrored(pkg, mirrors, session)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".download-", suffix=".part", dir=final.parent)
    tmp = Path(tmp_name)
    try:
        os.close(fd)
        _fetch_to(url, tmp, pkg, session, progress, sized)
        digest = hashlib.sha256()
        with tmp.open("rb") as fh:
            while chunk := fh.read(net.CHUNK):
                digest.update(chunk)
        if digest.hexdigest() != pkg.sha256.lower():
            raise EnvCreateError(
                f"{pkg.filename} does not match the sha256 the lock records (got {digest.hexdigest()[:16]}…, "
                f"want {pkg.sha256[:16]}…)",
                hint="the index served a different file than the one locked, so nothing was installed; "
                     "check the index or proxy, or re-lock (`envlock lock --refresh`) if it really changed",
            )
        os.chmod(tmp, new_file_mode())  # mkstemp's 0600 would hide the wheel from the other users of a cache
        replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def _fetch_to(url: str, dest: Path, pkg: PypiPackage, session: Any, progress: Any, sized: int) -> None:
    """The file's bytes into `dest`: copied from a file:// URL, else downloaded (envlock.net.download: a body cut
    off mid-way starts the file again, so no byte is written twice)."""
    if url.startswith("file:"):
        import shutil  # noqa: PLC0415

        try:
            shutil.copyfile(file_url_path(url), dest)
        except OSError as exc:
            raise EnvCreateError(f"cannot read {pkg.filename}: {exc.strerror or exc}",
                                 hint="the lock records a machine-local file:// URL; re-lock against a network index") from None
        if progress is not None:
            progress.transfer("wheels", dest.stat().st_size)
        return
    net.download(session, url, dest, what=pkg.filename,
                 hint="check the index (or --mirror), or re-lock if the file is gone",
                 on_length=None if sized or progress is None else (lambda n: progress.expect("wheels", n)),
                 on_bytes=None if progress is None else (lambda n: progress.transfer("wheels", n)))


def site_packages(platform: str, python: str) -> str:
    """The prefix-relative site-packages of a conda python."""
    return "Lib/site-packages" if platform == "win-64" else f"lib/python{python}/site-packages"


def install_wheels(prefix: Path, wheels: Sequence[Path], *, platform: str, python: str, glibc: str,
                   cache: Path) -> None:
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
    args = ["pip", "install", "--no-config", "--no-deps", "--offline", "--no-index", "--quiet",
            "--target", str(target), "--python", sys.executable, "--python-version", python,
            "--python-platform", python_platform(platform, glibc), *map(str, wheels)]

    def failed(why: str) -> EnvlockError:
        return EnvCreateError("installing the PyPI part timed out" if why.startswith("took") else
                              f"installing the PyPI part failed: {why}", hint="run `envlock create` again")

    done = uv.run(args, cache=cache, what="installing the PyPI part", failed=failed)
    if done.returncode != 0:
        detail = " ".join(ln.strip() for ln in done.stderr.splitlines() if ln.strip())[:400]
        raise EnvCreateError(f"installing the PyPI part into {prefix} failed: {detail or 'uv failed'}",
                             hint="run `envlock create` again; the environment was rolled back")
    (target / ".lock").unlink(missing_ok=True)  # uv's own lock file of the target dir
    if platform != "win-64":
        _move_scripts(prefix, target, python)


def _move_scripts(prefix: Path, target: Path, python: str) -> None:
    """`<site-packages>/bin/*` -> `<prefix>/bin/*` (shebang: the env's python), RECORD paths updated."""
    scripts = target / "bin"
    if not scripts.is_dir():
        return
    interpreter = str(prefix / "bin" / f"python{python}")
    moved = set()
    for src in sorted(scripts.iterdir()):
        data = src.read_bytes()
        if data.startswith(b"#!") and b"python" in data.split(b"\n", 1)[0]:
            data = _shebang(interpreter) + data.split(b"\n", 1)[1]
        # bin/<name> replaced, never written through a symlink (in bin/ or as bin/ itself) out of the prefix
        beneath.write_bytes(prefix, f"bin/{component(src.name, 'the script name', decode=False)}", data, mode=0o755)
        src.unlink()
        moved.add(f"bin/{src.name}")
    scripts.rmdir()
    up = "../" * len(Path(site_packages("linux-64", python)).parts)
    for record in target.glob("*.dist-info/RECORD"):
        lines = record.read_text(encoding="utf-8").splitlines()
        fixed = [up + ln if ln.split(",", 1)[0] in moved else ln for ln in lines]
        if fixed != lines:
            record.write_text("\n".join(fixed) + "\n", encoding="utf-8")


def _shebang(interpreter: str) -> bytes:
    """`#!<python>`, or pip's sh trampoline where a kernel would not take the path (spaces, > 127 bytes)."""
    if " " not in interpreter and len(interpreter) < 120:
        return f"#!{interpreter}\n".encode()
    return f"#!/bin/sh\n'''exec' \"{interpreter}\" \"$0\" \"$@\"\n' '''\n".encode()


