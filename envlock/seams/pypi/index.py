"""Read torch's CUDA pins from the package index the user's pip is configured with (PEP 691 + PEP 658).

Only the wheel's metadata is fetched (``<wheel-url>.metadata``), never the wheel. The index URL is
the user's (PIP_INDEX_URL, then pip's config files, then pip's own default), so no index host is
named here. HTTP goes through envlock.seams.net (``requests`` is imported only when the index is asked).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envlock.seams import net
from envlock.errors import AnchorError, ChannelError, Setting, again
from envlock.seams.pypi.pins import parse_cuda_pins, requires_dist_of
from envlock.seams.pypi.pipconf import configured_index_url
from envlock.seams.pypi.simple import IndexFile, python_of, wheel_rank, parse_simple_page, redact
from envlock.formats.untrusted import read_json

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
JSON_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)
_MAX_REDIRECTS = net.MAX_REDIRECTS
_URL_HINT = "check the index URL in PIP_INDEX_URL / pip.conf"
_MAX_METADATA_TRIES = 4  # wheels of one version whose .metadata we try before giving up


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """How to reach the index; None fields follow the user's pip configuration / envlock defaults."""

    index_url: str | None = None  # None: PIP_INDEX_URL, pip config files, pip's default
    # ENVLOCK_HTTP_TIMEOUT / ENVLOCK_HTTP_RETRIES (envlock.seams.net), like every other request of envlock
    timeout: float = field(default_factory=lambda: net.settings().timeout)  # seconds, per connect and per read
    retries: int = field(default_factory=lambda: net.settings().retries)  # extra attempts on 5xx / connection errors
    backoff: float = net.BACKOFF_S  # urllib3's backoff factor
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


# --------------------------------------------------------------------------- cache


def cache_root(settings: IndexSettings) -> Path:
    """Where index answers are cached."""
    if settings.cache_dir is not None:
        return settings.cache_dir / "pypi"
    from envlock.seams.dirs import cache_dir  # noqa: PLC0415

    return cache_dir() / "pypi"


def _cache_file(version: str, settings: IndexSettings) -> Path:
    # The wheel metadata of one public version is the same file on every index, so the key is the version.
    return cache_root(settings) / f"torch-{Version(version)}.json"


def _read_cache(version: str, settings: IndexSettings) -> dict[str, Any] | None:
    """The cached answer for version, or None (a corrupt entry counts as absent)."""
    path = _cache_file(version, settings)
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("version") != version:
        return None
    return data


def _write_cache(version: str, settings: IndexSettings, data: dict[str, Any]) -> None:
    """Write one answer atomically; a cache that cannot be written only costs a later refetch."""
    from envlock.errors import UnsafeNameError  # noqa: PLC0415
    from envlock.seams.fs import write_json_atomic  # noqa: PLC0415

    path = _cache_file(version, settings)
    try:
        write_json_atomic(path, {"format": CACHE_FORMAT, **data}, indent=1, root=cache_root(settings).parent)
    except (OSError, UnsafeNameError) as exc:
        log.warning("cannot write the index cache %s: %s", path, exc)


# --------------------------------------------------------------------------- HTTP


class _Client:
    """The index's GETs through envlock.seams.net (its Retry, timeout, redirect rule and scrubbing), with the index's
    login on its own host and the index's own messages."""

    def __init__(self, settings: IndexSettings, index_url: str, origin: str = "settings") -> None:
        self._http = net.HttpSettings(timeout=settings.timeout, retries=max(0, settings.retries),
                                      backoff=settings.backoff)
        self._session = net.session(self._http)  # urllib3 Retry: 5xx, resets, timeouts (a name that does not resolve: none)
        self._index = index_url
        self._origin = origin  # the setting that named the index (PIP_INDEX_URL, a pip config file, pip's default)

    def close(self) -> None:
        self._session.close()

    def get(self, url: str, accept: str | None = None) -> requests.Response | None:
        """The response for url, None on 404/410; ChannelError on anything else that is not 200."""
        url = net.carry_credentials(self._index, url)  # file links on the index's own host need its login
        attempts = 1 + self._http.retries
        try:
            resp, url = net.get(self._session, url, headers={"Accept": accept} if accept else {}, http=self._http,
                                redirects=_MAX_REDIRECTS, hint=_URL_HINT)
        except net.NoAnswer as exc:
            if not exc.transient:
                raise ChannelError(f"cannot fetch {redact(url)}: {exc.detail}", hint=_URL_HINT) from None
            log.debug("GET %s: %s", redact(url), exc.detail)  # urllib3's own words: --verbose only
            host = net.host_of(url)
            if exc.reason == net.HOST_NOT_FOUND:
                attempts = 1  # not retried: see net.session
            why = net.said(exc.reason, host, self._http)
        else:
            if resp.status_code not in net.RETRY_STATUSES:
                return self._final(resp, url)
            why = f"HTTP {resp.status_code} from {net.host_of(url)}"
        log.debug("GET %s: %s after %d attempts", redact(url), why, attempts)
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        raise ChannelError(
            f"cannot reach the package index {redact(self._index)} (from {self._origin}): {why}{tries}",
            hint=("check the network or proxy (HTTPS_PROXY), or point PIP_INDEX_URL at an index you can reach; or ",
                  Setting("--cuda", "X.Y", "the CUDA torch was built for")),
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
                hint=("try again later, or ", Setting("--cuda", "X.Y"), " / use a version envlock's table knows"),
            )
        return resp


# --------------------------------------------------------------------------- the lookup


def torch_cuda_from_index(
    version: str, settings: IndexSettings | None = None, *, offline: bool | str = False,
    allow_insecure: bool = False,
) -> TorchMetadata:
    """CUDA/cuDNN of torch `version`'s default Linux x86_64 wheel, from the cache or the user's index. `offline`:
    the cache only (a string: the option that says so, `--offline` or `--dry-run`, as the error names it)."""
    settings = settings or IndexSettings()
    public = str(Version(version))
    cached = _read_cache(public, settings)
    if cached is not None:
        return _answer(public, cached, cached=True)
    if offline:
        flag = offline if isinstance(offline, str) else "--offline"
        why = "asks no package index" if flag == "--dry-run" else "forbids asking the package index"
        raise AnchorError(
            f"torch {public} is not in envlock's table and {flag} {why}",
            hint=("run it once without ", flag, f" (it asks the index and caches torch {public}'s CUDA): ",
                  again(drop=(flag,)), ", or ", Setting("--cuda", "X.Y", "the CUDA torch was built for")),
        )
    index, origin = (settings.index_url, "settings") if settings.index_url else configured_index_url()
    if not index.startswith(("http://", "https://")):
        raise ChannelError(
            f"the package index {redact(index)} (from {origin}) is not an http(s) URL",
            hint=("envlock reads torch metadata over http(s) only; ", Setting("--cuda", "X.Y")),
        )
    from envlock.seams.conda.channels import check_channel_security

    check_channel_security(index, allow_insecure=allow_insecure, what="package index")  # plain http off loopback
    log.debug("asking %s (from %s) for torch %s", redact(index), origin, public)
    data = _fetch(public, settings, index, origin)
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


def _fetch(version: str, settings: IndexSettings, index: str, origin: str = "settings") -> dict[str, Any]:
    """Simple page -> best wheels -> their .metadata -> CUDA pins, as a cacheable dict."""
    client = _Client(settings, index, origin)
    try:
        wheels = _wheels_of(client, index, Version(version))
        for f in wheels[:_MAX_METADATA_TRIES]:
            text = _metadata_of(client, f)
            if text is None:
                continue
            pins = parse_cuda_pins(requires_dist_of(text), python_of(f.filename))
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


def _wheels_of(client: _Client, index: str, version: Version) -> list[IndexFile]:
    """Linux x86_64 wheels of exactly version on the index, best first."""
    page_url = index.rstrip("/") + "/torch/"
    resp = client.get(page_url, accept=JSON_ACCEPT)
    files = (
        []
        if resp is None
        else parse_simple_page(resp.content, resp.headers.get("Content-Type", ""), page_url)
    )
    ranked = [(r, f) for f in files if (r := wheel_rank(f, version)) is not None]
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


def _file_version(f: IndexFile) -> Version | None:
    try:
        return parse_wheel_filename(f.filename)[1]
    except (InvalidWheelFilename, InvalidVersion):
        return None


def _metadata_of(client: _Client, f: IndexFile) -> str | None:
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
