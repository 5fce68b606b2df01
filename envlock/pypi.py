"""Read torch's CUDA pins from the package index the user's pip is configured with (PEP 691 + PEP 658).

Only the wheel's metadata is fetched (``<wheel-url>.metadata``), never the wheel. The index URL is
the user's (PIP_INDEX_URL, then pip's config files, then pip's own default), so no index host is
named here. ``requests`` and ``platformdirs`` are imported lazily: importing this module stays cheap.
"""

from __future__ import annotations

import configparser
import email.parser
import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envlock.errors import AnchorError, ChannelError
from envlock.tables import CudaPins, parse_cuda_pins  # noqa: F401 - the same parser as the torch table

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
JSON_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)
_RETRY_STATUSES = frozenset({500, 502, 503, 504})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 5
_MAX_METADATA_TRIES = 4  # wheels of one version whose .metadata we try before giving up
# The interpreter tags whose wheel we read first: the facts were collected from cp311/cp312 wheels.
_PYTHON_PREFERENCE = ("cp311", "cp312", "cp310", "cp313", "cp39", "cp38")
_LINUX_X86_64 = re.compile(r"^(manylinux\w*|linux)_x86_64$")


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """How to reach the index; None fields follow the user's pip configuration / envlock defaults."""

    index_url: str | None = None  # None: PIP_INDEX_URL, pip config files, pip's default
    timeout: float = 15.0  # seconds, per connect and per read
    retries: int = 3  # extra attempts on 5xx / connection errors
    backoff: float = 0.5  # seconds before the first retry, doubled each time
    cache_dir: Path | None = None  # None: $ENVLOCK_CACHE_DIR, else the platform's user cache dir


@dataclass(frozen=True, slots=True)
class TorchMetadata:
    """The CUDA answer for one torch version, as read from the index (or its cache)."""

    version: str
    cuda: str
    cudnn: str | None
    requirement: str
    wheel: str  # file name of the wheel whose metadata was read
    index: str  # index URL without credentials
    cached: bool = False


# --------------------------------------------------------------------------- URLs and pip config


def redact(url: str) -> str:
    """The URL without user/password, safe for messages and logs."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, "***@" + host, parts.path, parts.query, parts.fragment))


def _scrub(text: str, url: str) -> str:
    """Remove the credentials of url from any text (exception messages can echo them)."""
    parts = urlsplit(url)
    for secret in (parts.password, parts.username):
        if secret:
            text = text.replace(secret, "***")
    return text


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
        return env[var].strip(), var
    merged = _merged_pip_config(env)
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


def requires_dist_of(metadata: str) -> list[str]:
    """The Requires-Dist lines of a core metadata file."""
    msg = email.parser.HeaderParser().parsestr(metadata)
    return [str(v) for v in (msg.get_all("Requires-Dist") or [])]


# --------------------------------------------------------------------------- cache


def cache_root(settings: IndexSettings) -> Path:
    """Where index answers are cached."""
    if settings.cache_dir is not None:
        return settings.cache_dir / "pypi"
    if os.environ.get("ENVLOCK_CACHE_DIR"):
        return Path(os.environ["ENVLOCK_CACHE_DIR"]) / "pypi"
    import platformdirs  # noqa: PLC0415 - lazy: keeps the import of this module cheap

    return Path(platformdirs.user_cache_dir("envlock")) / "pypi"


def _cache_file(version: str, settings: IndexSettings) -> Path:
    # The wheel metadata of one public version is the same file on every index, so the key is the version.
    return cache_root(settings) / f"torch-{Version(version)}.json"


def _read_cache(version: str, settings: IndexSettings) -> dict[str, Any] | None:
    """The cached answer for version, or None (a corrupt entry counts as absent)."""
    path = _cache_file(version, settings)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("version") != version:
        return None
    return data


def _write_cache(version: str, settings: IndexSettings, data: dict[str, Any]) -> None:
    """Write one answer atomically; a cache that cannot be written only costs a later refetch."""
    path = _cache_file(version, settings)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"format": CACHE_FORMAT, **data}, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot write the index cache %s: %s", path, exc)


# --------------------------------------------------------------------------- HTTP


class _Client:
    """GETs with timeouts, bounded retries, same-scheme redirects and credentials kept out of messages."""

    def __init__(self, settings: IndexSettings, index_url: str) -> None:
        import requests  # noqa: PLC0415 - lazy: `envlock --help` must not pay for it

        self._requests = requests
        self._session: requests.Session = requests.Session()
        self._settings = settings
        self._index = index_url

    def close(self) -> None:
        self._session.close()

    def get(self, url: str, accept: str | None = None) -> requests.Response | None:
        """The response for url, None on 404/410; ChannelError on anything else that is not 200."""
        headers = {"Accept": accept} if accept else {}
        url = _carry_credentials(self._index, url)  # file links on the index's own host need its login
        for _ in range(_MAX_REDIRECTS + 1):
            resp = self._get_retrying(url, headers)
            if resp.status_code not in _REDIRECT_STATUSES:
                return self._final(resp, url)
            url = self._redirect_target(url, resp.headers.get("Location", ""))
        raise ChannelError(
            f"too many redirects from {redact(url)}",
            hint="check the index URL in PIP_INDEX_URL / pip.conf",
        )

    def _final(self, resp: requests.Response, url: str) -> requests.Response | None:
        if resp.status_code in (404, 410):
            return None
        if resp.status_code in (401, 403):
            raise ChannelError(
                f"the index refused access to {redact(url)} (HTTP {resp.status_code})",
                hint="check the credentials of the index in PIP_INDEX_URL / pip.conf",
            )
        if resp.status_code != 200:
            raise ChannelError(
                f"the index answered HTTP {resp.status_code} for {redact(url)}",
                hint="try again later, or pass --cuda X.Y / use a version envlock's table knows",
            )
        return resp

    def _redirect_target(self, url: str, location: str) -> str:
        """The next URL of a redirect, refusing a change to another (or weaker) scheme."""
        target = urljoin(url, location)
        old, new = urlsplit(url).scheme, urlsplit(target).scheme
        allowed = {"https"} if old == "https" else {"http", "https"}
        if new not in allowed:
            raise ChannelError(
                f"the index redirected {redact(url)} to a {new or 'schemeless'} URL; envlock refuses that",
                hint="check the index URL in PIP_INDEX_URL / pip.conf (redirects may keep the scheme or go to https)",
            )
        return _carry_credentials(url, target)

    def _get_retrying(self, url: str, headers: dict[str, str]) -> requests.Response:
        """One GET, retried on 5xx and connection errors with exponential backoff."""
        exc_types = (
            self._requests.ConnectionError,
            self._requests.Timeout,
            self._requests.exceptions.ChunkedEncodingError,
        )
        attempts = 1 + max(0, self._settings.retries)
        why = ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(self._settings.backoff * 2 ** (attempt - 1))
            try:
                resp = self._session.get(
                    url, headers=headers, timeout=self._settings.timeout, allow_redirects=False
                )
            except exc_types as exc:
                why = _scrub(f"{type(exc).__name__}: {exc}", url)
                log.debug("GET %s failed (%s), attempt %d/%d", redact(url), why, attempt + 1, attempts)
                continue
            except self._requests.RequestException as exc:
                raise ChannelError(
                    f"cannot fetch {redact(url)}: {_scrub(type(exc).__name__ + ': ' + str(exc), url)}",
                    hint="check the index URL in PIP_INDEX_URL / pip.conf",
                ) from None
            if resp.status_code not in _RETRY_STATUSES:
                return resp
            why = f"HTTP {resp.status_code}"
            log.debug("GET %s: %s, attempt %d/%d", redact(url), why, attempt + 1, attempts)
        raise ChannelError(
            f"cannot reach the index at {redact(self._index)} ({why} for {redact(url)}, {attempts} attempts)",
            hint="check your network/proxy, or pass --cuda X.Y (or --offline with a warm cache)",
        )


def _carry_credentials(src: str, dst: str) -> str:
    """Keep the index credentials on a same-host redirect that dropped them (never to another host)."""
    s, d = urlsplit(src), urlsplit(dst)
    if "@" in s.netloc and "@" not in d.netloc and s.hostname == d.hostname and s.port == d.port:
        return urlunsplit((d.scheme, s.netloc, d.path, d.query, d.fragment))
    return dst


# --------------------------------------------------------------------------- simple page


@dataclass(frozen=True, slots=True)
class _File:
    filename: str
    url: str  # absolute, without fragment
    metadata: Any  # PEP 714 "core-metadata" value: True / {"sha256": ...} / None when not advertised


class _AnchorParser(HTMLParser):
    """The <a> elements of a PEP 503 HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []
        self._current: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._current = dict(attrs)
            self._current["#text"] = ""
            self.links.append(self._current)

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._current["#text"] = (self._current.get("#text") or "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._current = None


def _html_metadata(value: str | None) -> Any:
    """data-core-metadata="sha256=..." / "true" -> the PEP 691 shape."""
    if value is None:
        return None
    if "=" in value:
        algo, digest = value.split("=", 1)
        return {algo: digest}
    return True


def parse_simple_page(body: bytes, content_type: str, page_url: str) -> list[_File]:
    """The files of a PEP 691 JSON or PEP 503 HTML project page."""
    files: list[_File] = []
    if "json" in content_type:
        try:
            entries = json.loads(body)["files"]
        except (ValueError, KeyError, TypeError):
            raise ChannelError(
                f"the index page {redact(page_url)} is not a valid PEP 691 JSON page",
                hint="check the index URL in PIP_INDEX_URL / pip.conf",
            ) from None
        for e in entries:
            meta = e.get("core-metadata", e.get("dist-info-metadata"))
            url = urljoin(page_url, e["url"]).split("#", 1)[0]
            files.append(_File(e["filename"], url, meta if meta else None))
        return files
    if "html" in content_type:
        parser = _AnchorParser()
        parser.feed(body.decode("utf-8", "replace"))
        for a in parser.links:
            href = a.get("href")
            if not href:
                continue
            url = urljoin(page_url, href).split("#", 1)[0]
            name = (a.get("#text") or "").strip() or url.rsplit("/", 1)[-1]
            meta = _html_metadata(a.get("data-core-metadata") or a.get("data-dist-info-metadata"))
            files.append(_File(name, url, meta))
        return files
    raise ChannelError(
        f"the index answered {content_type or 'no content type'} for {redact(page_url)}, not a simple page",
        hint="check the index URL in PIP_INDEX_URL / pip.conf",
    )


def _wheel_rank(f: _File, version: Version) -> tuple[int, int] | None:
    """Sort key of a Linux x86_64 wheel of exactly version (smaller is better), or None."""
    try:
        name, ver, build, tags = parse_wheel_filename(f.filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    if name != "torch" or ver != version or ver.local is not None:
        return None
    linux = [t for t in tags if _LINUX_X86_64.match(t.platform) and not t.abi.endswith("t")]
    if not linux:
        return None
    pref = min(
        (_PYTHON_PREFERENCE.index(t.interpreter) for t in linux if t.interpreter in _PYTHON_PREFERENCE),
        default=len(_PYTHON_PREFERENCE),
    )
    return pref, -(build[0] if build else 0)  # the newest re-upload (build tag) first


def _python_of(filename: str) -> str:
    """'cp311' of a wheel name -> '3.11' (for marker evaluation)."""
    m = re.search(r"-cp(\d)(\d+)-", filename)
    return f"{m.group(1)}.{m.group(2)}" if m else "3.11"


# --------------------------------------------------------------------------- the lookup


def torch_cuda_from_index(
    version: str, settings: IndexSettings | None = None, *, offline: bool = False
) -> TorchMetadata:
    """CUDA/cuDNN of torch `version`'s default Linux x86_64 wheel, from the cache or the user's index."""
    settings = settings or IndexSettings()
    public = str(Version(version))
    cached = _read_cache(public, settings)
    if cached is not None:
        return _answer(public, cached, cached=True)
    if offline:
        raise AnchorError(
            f"torch {public} is not in envlock's table and --offline forbids asking the package index",
            hint=f"run once without --offline to cache torch {public}'s metadata, or pass --cuda X.Y",
        )
    index, origin = (settings.index_url, "settings") if settings.index_url else configured_index_url()
    if not index.startswith(("http://", "https://")):
        raise ChannelError(
            f"the package index {redact(index)} (from {origin}) is not an http(s) URL",
            hint="envlock reads torch metadata over http(s) only; pass --cuda X.Y",
        )
    log.debug("asking %s (from %s) for torch %s", redact(index), origin, public)
    data = _fetch(public, settings, index)
    _write_cache(public, settings, data)
    return _answer(public, data, cached=False)


def _answer(version: str, data: dict[str, Any], *, cached: bool) -> TorchMetadata:
    """The cached/fetched dict as an answer; a wheel without CUDA pins is a CPU build: an error."""
    if not data.get("cuda"):
        raise AnchorError(
            f"torch {version}'s Linux x86_64 wheel ({data.get('wheel')}) on {data.get('index')} "
            "depends on no CUDA runtime: it is a CPU build or bundles its CUDA",
            hint="pass the CUDA your torch build uses as --cuda X.Y, or use --torch installed",
        )
    return TorchMetadata(
        version=version,
        cuda=data["cuda"],
        cudnn=data.get("cudnn"),
        requirement=data["requirement"],
        wheel=data["wheel"],
        index=data["index"],
        cached=cached,
    )


def _fetch(version: str, settings: IndexSettings, index: str) -> dict[str, Any]:
    """Simple page -> best wheels -> their .metadata -> CUDA pins, as a cacheable dict."""
    client = _Client(settings, index)
    try:
        wheels = _wheels_of(client, index, Version(version))
        for f in wheels[:_MAX_METADATA_TRIES]:
            text = _metadata_of(client, f)
            if text is None:
                continue
            pins = parse_cuda_pins(requires_dist_of(text), _python_of(f.filename))
            return {
                "version": version,
                "cuda": pins.cuda,
                "cudnn": pins.cudnn,
                "requirement": pins.requirement,
                "wheel": f.filename,
                "index": redact(index),
            }
    finally:
        client.close()
    raise AnchorError(
        f"the index {redact(index)} serves no metadata (PEP 658 .metadata) for torch {version}'s "
        f"Linux x86_64 wheels (tried {', '.join(f.filename for f in wheels[:_MAX_METADATA_TRIES])})",
        hint="envlock never downloads the whole wheel: pass --cuda X.Y, or --torch installed",
    )


def _wheels_of(client: _Client, index: str, version: Version) -> list[_File]:
    """Linux x86_64 wheels of exactly version on the index, best first."""
    page_url = index.rstrip("/") + "/torch/"
    resp = client.get(page_url, accept=JSON_ACCEPT)
    files = (
        []
        if resp is None
        else parse_simple_page(resp.content, resp.headers.get("Content-Type", ""), page_url)
    )
    ranked = [(r, f) for f in files if (r := _wheel_rank(f, version)) is not None]
    if ranked:
        return [f for _, f in sorted(ranked, key=lambda rf: (rf[0], rf[1].filename))]
    if any(_file_version(f) == version for f in files):
        raise AnchorError(
            f"torch {version} on the index {redact(index)} has no Linux x86_64 wheel to read its CUDA from",
            hint="pass the CUDA your torch build uses as --cuda X.Y",
        )
    raise AnchorError(
        f"torch {version} exists neither in envlock's table nor on the index {redact(index)}",
        hint="check the version (`pip index versions torch` lists them), or pass --cuda X.Y",
    )


def _file_version(f: _File) -> Version | None:
    try:
        return parse_wheel_filename(f.filename)[1]
    except (InvalidWheelFilename, InvalidVersion):
        return None


def _metadata_of(client: _Client, f: _File) -> str | None:
    """The wheel's core metadata via <url>.metadata (tried even when not advertised), or None."""
    resp = client.get(f.url + ".metadata")
    if resp is None:
        log.debug("no .metadata for %s (advertised: %s)", f.filename, bool(f.metadata))
        return None
    body = resp.content
    expected = f.metadata.get("sha256") if isinstance(f.metadata, dict) else None
    if expected and hashlib.sha256(body).hexdigest() != expected:
        raise ChannelError(
            f"the metadata of {f.filename} does not match the sha256 the index advertises",
            hint="the index or a proxy served a corrupt file; try again later",
        )
    return body.decode("utf-8", "replace")
