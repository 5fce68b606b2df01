"""What each locked wheel requires of the others: the version specifiers of its Requires-Dist, with markers
evaluated for the lock's platform (as conda-lock evaluates them), so the lock's pip `dependencies` are real
requirements (`markupsafe: '>=2.0'`, '' for any version), never '*' (which py-rattler cannot read).

uv's pylock.toml names no dependencies, and its `# via` annotations name the edges but no versions, so the
specifiers come from each wheel's core metadata: envlock's cache (keyed by the wheel's sha256), else the
wheel in envlock's wheel cache, else the index's PEP 658 `<wheel>.metadata` file, else the wheel's own
METADATA member (read in place, through HTTP range requests, or from the whole wheel downloaded into the
wheel cache where the server serves no ranges). Metadata that is not the locked wheel's (another name or
version) is never taken. It only says what the lock records as requirements: what installs is checked
against the wheels' sha256 as ever.
"""

from __future__ import annotations

import email.parser
import io
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from envlock.errors import ChannelError
from envlock.models import PypiPackage
from envlock.names import file_url_path

_MAX_METADATA = 4 * 1024 * 1024  # a core metadata file is kilobytes; refuse a zip member claiming more
#: conda subdir -> the PEP 508 environment markers of a CPython there (python's own keys added per lock).
_PLATFORM_MARKERS: dict[str, dict[str, str]] = {
    "linux-64": {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"},
    "linux-aarch64": {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
                      "platform_machine": "aarch64"},
    "linux-ppc64le": {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
                      "platform_machine": "ppc64le"},
    "win-64": {"os_name": "nt", "sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64"},
}


def marker_environment(platform: str, python: str) -> dict[str, str]:
    """The PEP 508 marker values of CPython `python` (X.Y or X.Y.Z) on a conda platform."""
    full = python if python.count(".") >= 2 else f"{python}.0"
    major_minor = ".".join(full.split(".")[:2])
    return {**_PLATFORM_MARKERS.get(platform, _PLATFORM_MARKERS["linux-64"]), "platform_release": "",
            "platform_version": "", "python_version": major_minor, "python_full_version": full,
            "implementation_name": "cpython", "implementation_version": full,
            "platform_python_implementation": "CPython"}


# --------------------------------------------------------------------------- pure: metadata -> specifiers


def requires_dist(metadata: str) -> list[str]:
    """The Requires-Dist lines of a core metadata file (its headers; the long description is not read)."""
    msg = email.parser.HeaderParser().parsestr(metadata)
    return [str(v) for v in (msg.get_all("Requires-Dist") or [])]


def _canon(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def with_specifiers(packages: Sequence[PypiPackage], metadata: Mapping[str, str], roots: Iterable[str],
                    platform: str, python: str) -> tuple[PypiPackage, ...]:
    """`packages` with `requires` filled: for each dependency edge, the specifiers of the Requires-Dist lines
    that name it and apply on `platform` (markers evaluated; `extra == …` with the extras asked of the
    package by the roots or by other packages' applying lines). PURE."""
    from packaging.requirements import InvalidRequirement, Requirement

    env = marker_environment(platform, python)
    parsed: dict[str, list[Requirement]] = {}
    for pkg in packages:
        reqs = []
        for line in requires_dist(metadata.get(pkg.name, "")):
            try:
                reqs.append(Requirement(line))
            except InvalidRequirement:
                continue  # a line no installer could read names no locked edge either
        parsed[pkg.name] = reqs
    extras: dict[str, set[str]] = {p.name: set() for p in packages}
    for root in roots:
        try:
            req = Requirement(root)
        except InvalidRequirement:
            continue
        extras.setdefault(_canon(req.name), set()).update(req.extras)

    def applies(req: Requirement, owner: str) -> bool:
        if req.marker is None:
            return True
        return any(req.marker.evaluate({**env, "extra": extra}) for extra in sorted(extras.get(owner, set()) | {""}))

    changed = True
    while changed:  # extras turn on lines that ask for more extras: until nothing new is asked
        changed = False
        for owner, reqs in parsed.items():
            for req in reqs:
                target = _canon(req.name)
                if target in extras and not set(req.extras) <= extras[target] and applies(req, owner):
                    extras[target] |= set(req.extras)
                    changed = True
    return tuple(_fill(pkg, parsed[pkg.name], applies) for pkg in packages)


def _fill(pkg: PypiPackage, reqs: list[Any], applies: Any) -> PypiPackage:
    from envlock.models import replace

    from packaging.specifiers import SpecifierSet

    out = []
    for dep in pkg.dependencies:
        specs = [str(r.specifier) for r in reqs if _canon(r.name) == dep and str(r.specifier) and applies(r, pkg.name)]
        out.append((dep, str(SpecifierSet(",".join(specs))) if specs else ""))
    return replace(pkg, requires=tuple(out))


# --------------------------------------------------------------------------- the metadata of each wheel


def metadata_of(packages: Sequence[PypiPackage], fetch_urls: Mapping[str, str], cache: Path, *,
                offline: bool, logins: Sequence[str] = ()) -> dict[str, str]:
    """name -> core metadata text of each locked wheel (see the module's docstring for where it comes from).

    `fetch_urls`: name -> where uv found the wheel (a mirror's URL, say); `logins`: index URLs whose
    credentials a same-host metadata URL needs.
    """
    out: dict[str, str] = {}
    missing = []
    for pkg in packages:
        text = _cached(pkg, cache)
        if text is None:
            missing.append(pkg)
        else:
            out[pkg.name] = text
    if not missing:
        return out
    remote = [p for p in missing if not fetch_urls.get(p.name, p.url).startswith("file:")]
    if offline and remote:
        names = ", ".join(p.filename for p in remote[:3]) + (" …" if len(remote) > 3 else "")
        raise ChannelError(f"the metadata of {len(remote)} wheel(s) is not in envlock's cache and --offline is set: "
                           f"{names}", hint="run once without --offline to fill the cache")
    from envlock.seams import net

    def one(pkg: PypiPackage, cancel: Any, session: Any) -> tuple[str, str]:
        url = fetch_urls.get(pkg.name, pkg.url)
        return pkg.name, _fetch(pkg, url, cache, session, logins)

    for name, text in net.parallel(missing, one, jobs=8):
        out[name] = text
    return out


def _cache_file(cache: Path, sha256: str) -> Path:
    """`<cache>/pypi-metadata/<sha[:2]>/<sha256>.metadata`, through envlock/seams/gate.py (an index's sha256 is
    not trusted to be one)."""
    from pathlib import PurePosixPath

    from envlock.seams.gate import sha256_hex, under

    sha = sha256_hex(sha256, "a wheel's sha256")
    return under(cache / "pypi-metadata", PurePosixPath(sha[:2], f"{sha}.metadata"), "the metadata cache entry")


def _cached(pkg: PypiPackage, cache: Path) -> str | None:
    """The wheel's metadata from envlock's metadata cache, else from the (sha256-checked) wheel cache."""
    try:
        text = _cache_file(cache, pkg.sha256).read_text(encoding="utf-8")
        if _is_of(text, pkg):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    from envlock.seams.pypi.wheels import cached_wheel

    wheel = cached_wheel(cache, pkg)
    if wheel.is_file():
        text = _from_wheel(wheel, pkg)
        _remember(cache, pkg, text)
        return text
    return None


def _is_of(text: str, pkg: PypiPackage) -> bool:
    """Whether a core metadata file is the locked wheel's (its Name and Version)."""
    from packaging.version import InvalidVersion, Version

    msg = email.parser.HeaderParser().parsestr(text)
    try:
        return _canon(str(msg.get("Name", ""))) == pkg.name and Version(str(msg.get("Version", ""))) == Version(pkg.version)
    except InvalidVersion:
        return False


def _headers(text: str) -> str:
    """The header block of a core metadata file (the long description can be megabytes of README)."""
    head, sep, _ = text.replace("\r\n", "\n").partition("\n\n")
    return head + "\n\n" if sep else text


def _remember(cache: Path, pkg: PypiPackage, text: str) -> None:
    from envlock.errors import UnsafeNameError
    from envlock.seams.fs import write_atomic

    try:
        write_atomic(_cache_file(cache, pkg.sha256), text, skip_unchanged=False, root=cache)
    except (OSError, UnsafeNameError):
        pass  # a cache that cannot be written (or holds a link out of it) only costs a fetch next time


def _member(zf: zipfile.ZipFile, pkg: PypiPackage) -> str:
    """The top-level *.dist-info/METADATA of an open wheel, which must be the locked wheel's."""
    members = [i for i in zf.infolist() if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")]
    if len(members) != 1 or members[0].file_size > _MAX_METADATA:
        raise ValueError("no single *.dist-info/METADATA")
    text = _headers(zf.read(members[0]).decode("utf-8", "replace"))
    if not _is_of(text, pkg):
        raise ChannelError(f"{pkg.filename}'s metadata names another package or version",
                           hint="the index served a wrong wheel; check the index, then lock again")
    return text


def _from_wheel(path: Path, pkg: PypiPackage) -> str:
    """The METADATA of a wheel file (its top-level *.dist-info/)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return _member(zf, pkg)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ChannelError(f"cannot read the metadata of {pkg.filename}: {exc}",
                           hint="the index served a broken wheel; check the index, then lock again") from None


def _fetch(pkg: PypiPackage, url: str, cache: Path, session: Any, logins: Sequence[str]) -> str:
    """PEP 658 `<url>.metadata`, else the METADATA member of the wheel itself: a local wheel read in place, a
    remote one through HTTP range requests (the zip's directory and that one member, as pip and uv read it:
    a few hundred KB of a CUDA wheel of hundreds of MB), else downloaded whole into the wheel cache."""
    if url.startswith("file:"):
        text = _read_local(url + ".metadata")
        if text is None or not _is_of(text, pkg):
            text = _from_wheel(file_url_path(url), pkg)
    else:
        full = _login(url, logins)
        text = _get(full + ".metadata", session)
        if text is None or not _is_of(text, pkg):
            text = _ranged(full, pkg, session)
        if text is None:  # the server does not serve ranges
            from envlock.models import replace

            from envlock.seams.pypi.wheels import fetch_one

            text = _from_wheel(fetch_one(replace(pkg, url=full), cache, session), pkg)  # sha256-checked
    text = _headers(text)
    _remember(cache, pkg, text)
    return text


class _Ranges(io.RawIOBase):
    """A remote file read through HTTP range requests, in blocks (zipfile seeks to its end, then its directory)."""

    BLOCK = 256 * 1024
    LIMIT = 64  # blocks: 16 MiB at most, then the wheel is downloaded whole

    def __init__(self, session: Any, url: str) -> None:
        self.session, self.url, self.pos, self.blocks = session, url, 0, {}
        self.size, self.tail = 0, None
        tail = self._get(f"bytes=-{self.BLOCK}")
        total = tail.headers.get("Content-Range", "").rpartition("/")[2]
        if not total.isdigit():
            raise OSError("no Content-Range")
        self.size = int(total)
        start = self.size - len(tail.content)
        if start % self.BLOCK == 0:
            self.blocks[start // self.BLOCK] = tail.content
        else:  # the tail is no whole block: keep it as the bytes it is
            self.tail: tuple[int, bytes] | None = (start, tail.content)

    def _get(self, spec: str) -> Any:
        from envlock.seams import net

        if len(self.blocks) >= self.LIMIT:
            raise OSError("too many range requests")
        try:
            resp, _ = net.get(self.session, self.url, headers={"Range": spec}, stream=True)
            if resp.status_code != 206:
                resp.close()  # the whole file would follow: not read here (downloaded once, into the wheel cache)
                raise OSError(f"HTTP {resp.status_code} to a range request")
            net.body(resp)  # read here: a connection lost mid-body is a NoAnswer, not requests' exception
        except net.NoAnswer as exc:
            raise OSError(exc.reason) from None
        return resp

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def _block(self, i: int) -> bytes:
        if i not in self.blocks:
            start = i * self.BLOCK
            tail = self.tail
            if tail is not None and tail[0] <= start and start + self.BLOCK >= self.size:
                self.blocks[i] = tail[1][start - tail[0]:]
            else:
                end = min(start + self.BLOCK, self.size) - 1
                self.blocks[i] = self._get(f"bytes={start}-{end}").content
        return self.blocks[i]

    def readinto(self, buffer: Any) -> int:
        out = b""
        while len(out) < len(buffer) and self.pos < self.size:
            block = self._block(self.pos // self.BLOCK)
            chunk = block[self.pos % self.BLOCK:][: len(buffer) - len(out)]
            if not chunk:
                break
            out += chunk
            self.pos += len(chunk)
        buffer[: len(out)] = out
        return len(out)


def _ranged(url: str, pkg: PypiPackage, session: Any) -> str | None:
    """The wheel's METADATA through range requests, or None where the server does not serve them."""
    try:
        remote = _Ranges(session, url)
        with zipfile.ZipFile(remote) as zf:
            return _member(zf, pkg)
    except (OSError, ValueError, zipfile.BadZipFile):  # net's NoAnswer arrives as an OSError (_Ranges._get)
        return None


def _read_local(url: str) -> str | None:
    try:
        return file_url_path(url).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _get(url: str, session: Any) -> str | None:
    from envlock.seams import net

    try:
        resp, _ = net.get(session, url)
    except net.NoAnswer:
        return None  # the wheel itself is tried next, with download's own errors
    return resp.text if resp.status_code == 200 else None


def _login(url: str, logins: Sequence[str]) -> str:
    """`url` with the credentials of the index on its host, where it has none (never to another host)."""
    d = urlsplit(url)
    if "@" in d.netloc:
        return url
    for index in logins:
        s = urlsplit(index)
        if "@" in s.netloc and s.hostname == d.hostname and s.port == d.port:
            return urlunsplit((d.scheme, s.netloc, d.path, d.query, d.fragment))
    return url
