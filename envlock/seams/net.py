"""The network seam: every HTTP request envlock makes itself, and the settings of rattler's client.

* One timeout and one retry setting for everything: ``ENVLOCK_HTTP_TIMEOUT`` (seconds, default 60: per
  connect and per read here; the whole request in rattler's client) and ``ENVLOCK_HTTP_RETRIES``
  (default 3: extra attempts after a connection error, a timeout or a 5xx). `settings()` reads them.
* `session()`: a requests Session whose adapter carries urllib3's Retry (status and connection retries
  with backoff); urllib3 2 enforces Content-Length, so a body cut short raises instead of passing.
* `get()`: one GET with envlock's redirect rule (same scheme or up to https, a login kept on its own host
  only, a bounded number); no answer at all is one `NoAnswer` (its reason scrubbed). The index client
  (pypi/index.py), the mirror's page reader (pypi/wheels.py) and the metadata reader (pypi/requires.py) use it.
* `download()`: a body cut off mid-way starts the file again from its first byte (Retry ends at the headers).
* `parallel()`: a thread pool sharing one session; Ctrl-C -> Interrupted.
* `scrub()`: envlock.names.scrub, the one credential scrubber, re-exported for the seams (URLs in messages, logs).
* `with_ca_fallback()`: rattler's client where the system has no CA certificates (certifi's bundle).

``requests`` is imported by the functions that use the network only: importing this module stays cheap.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urljoin, urlsplit, urlunsplit

from envlock.errors import ChannelError, Interrupted, UsageError
from envlock.models import record
from envlock.names import scrub as scrub  # the one scrubber lives in envlock.names; the seams call it here

if TYPE_CHECKING:
    import requests

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RETRIES = 3
BACKOFF_S = 0.25  # urllib3's backoff factor: 0, 0.5, 1, 2 … seconds between attempts
RETRY_STATUSES = frozenset({500, 502, 503, 504})
CHUNK = 1 << 20


@record
class HttpSettings:
    """How envlock talks HTTP (see the module docstring)."""

    timeout: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    backoff: float = BACKOFF_S


def settings() -> HttpSettings:
    """The settings in force: ENVLOCK_HTTP_TIMEOUT and ENVLOCK_HTTP_RETRIES, else the defaults (a value of
    the wrong form is a usage error: envlock/environ.py)."""
    from envlock.environ import BadSetting, number

    try:
        return HttpSettings(timeout=number("ENVLOCK_HTTP_TIMEOUT"), retries=int(number("ENVLOCK_HTTP_RETRIES")))
    except BadSetting as bad:
        raise UsageError(bad.message, hint=bad.hint) from None


def session(http: HttpSettings | None = None, *, pool: int = 16) -> requests.Session:
    """A requests Session retrying connection errors, timeouts before the headers and 5xx (GET/HEAD)."""
    import requests  # noqa: PLC0415 - lazy: `envlock --help`, `check` and a table-hit resolve never pay for it
    from requests.adapters import HTTPAdapter  # noqa: PLC0415

    http = http or settings()
    retry = _retry_class()(total=http.retries, connect=http.retries, read=http.retries, status=http.retries, redirect=False,
                  other=0, backoff_factor=http.backoff, status_forcelist=sorted(RETRY_STATUSES),
                  allowed_methods=frozenset({"GET", "HEAD"}), raise_on_status=False, raise_on_redirect=False,
                  respect_retry_after_header=False)
    adapter = HTTPAdapter(max_retries=retry, pool_connections=pool, pool_maxsize=pool)
    s = requests.Session()
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.auth = _url_login  # a URL's login as Basic auth in UTF-8 (requests' own took latin-1 and crashed on '€')
    return s


_RETRY: list[type] = []


def _retry_class() -> type:
    """urllib3's Retry that gives up at once on a name that does not resolve (NameResolutionError): the resolver
    has answered, and asking it again only made the user wait (7-10 s where the resolver times out)."""
    if not _RETRY:
        from urllib3.exceptions import MaxRetryError, NameResolutionError  # noqa: PLC0415
        from urllib3.util.retry import Retry  # noqa: PLC0415

        class NoRetryOnName(Retry):
            def increment(self, method: Any = None, url: Any = None, response: Any = None, error: Any = None,
                          _pool: Any = None, _stacktrace: Any = None) -> Any:
                if isinstance(error, NameResolutionError):
                    raise MaxRetryError(_pool, url, error) from error
                return super().increment(method, url, response, error, _pool, _stacktrace)

        _RETRY.append(NoRetryOnName)
    return _RETRY[0]


def _url_login(r: Any) -> Any:
    """requests' auth hook: the Basic `Authorization` of the request URL's `user:password@` (percent-decoded), its
    bytes UTF-8 as rattler and uv send them (requests encodes latin-1: a password holding '€' raised
    UnicodeEncodeError, an internal error); none on the URL: the user's ~/.netrc, as requests would read it
    (its own netrc lookup is skipped once a session has an auth hook). A redirect keeps a login only as
    carry_credentials allows."""
    import base64  # noqa: PLC0415

    from requests.utils import get_netrc_auth  # noqa: PLC0415

    from envlock.names import split_userinfo  # noqa: PLC0415

    _plain, user, password = split_userinfo(r.url)
    if user is None and password is None:
        user, password = get_netrc_auth(r.url) or (None, None)
    if user is not None or password is not None:
        raw = f"{user or ''}:{password or ''}".encode("utf-8", "surrogateescape")
        r.headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")
    return r


def timeout_of(http: HttpSettings | None = None) -> float | None:
    """requests' timeout (connect and each read); 0 means none."""
    value = (http or settings()).timeout
    return value or None


def reason(exc: BaseException) -> str:
    """A short reason for a network error (requests' messages nest three exceptions deep)."""
    text = str(exc)
    for needle, why in (("Name or service not known", HOST_NOT_FOUND), ("NameResolution", HOST_NOT_FOUND),
                        ("Temporary failure in name resolution", HOST_NOT_FOUND),
                        ("Connection refused", "connection refused"), ("timed out", "timed out"),
                        ("Connection reset", "connection reset"), ("RemoteDisconnected", "connection closed"),
                        ("IncompleteRead", "connection closed mid-download")):
        if needle in text:
            return why
    return type(exc).__name__


HOST_NOT_FOUND = "host not found"


def host_of(url: str) -> str:
    """The host (and port) of `url`, without a login: what a network error names."""
    return urlsplit(url).netloc.rsplit("@", 1)[-1] or url


def said(why: str, host: str, http: HttpSettings | None = None) -> str:
    """A reason of reason() as words that name the host and the setting that decides (never urllib3's text)."""
    if why == HOST_NOT_FOUND:
        return f"the name {host} does not resolve (no network or no DNS here; not retried)"
    if why == "connection refused":
        return f"{host} refused the connection"
    if why == "timed out":
        return f"{host} did not answer within ENVLOCK_HTTP_TIMEOUT ({(http or settings()).timeout:g} s)"
    if why in ("connection reset", "connection closed", "connection closed mid-download"):
        return f"{host}: {why}"
    return f"{host}: {why}"


def unresolvable(url: str) -> str | None:
    """The host of an http(s) `url` when its name does not resolve here (None: it does, or a proxy resolves it, or
    it is no http(s) URL). rattler's client retries a failed lookup like any connect error (7-10 s, measured):
    asked once before it, a failed lookup is said at once."""
    import socket  # noqa: PLC0415

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if any(os.environ.get(v) for k in (parts.scheme, "all") for v in (f"{k}_proxy", f"{k.upper()}_PROXY")):
        return None  # the proxy looks the name up, not this machine (urllib.request's getproxies: a slow import)
    try:
        socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                           type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno in (socket.EAI_NONAME, socket.EAI_AGAIN, getattr(socket, "EAI_NODATA", socket.EAI_NONAME),
                         socket.EAI_FAIL):
            return host_of(url)
    except (OSError, UnicodeError):
        return None  # rattler says what else is wrong
    return None


MAX_REDIRECTS = 5
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class NoAnswer(Exception):
    """A GET got no HTTP answer: `reason` (short, see reason()), `detail` (the exception, credentials scrubbed),
    `transient` (a connection error or a timeout, after urllib3's retries; else a malformed request or reply)."""

    def __init__(self, reason: str, detail: str, transient: bool) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.transient = reason, detail, transient


def get(s: requests.Session, url: str, *, headers: dict[str, str] | None = None, http: HttpSettings | None = None,
        redirects: int = MAX_REDIRECTS, hint: str = "check the URL",
        stream: bool = False) -> tuple[requests.Response, str]:
    """(the answer, its URL) of a GET through `s`, redirects followed here (see redirect_target) up to
    `redirects` times: too many, or a refused one, is a ChannelError with `hint`; no answer: NoAnswer.
    `stream`: the body is not read yet (body() reads it; close() drops it)."""
    import requests  # noqa: PLC0415

    for _ in range(redirects + 1):
        try:
            resp = s.get(url, headers=headers or {}, timeout=timeout_of(http), allow_redirects=False, stream=stream)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise NoAnswer(reason(exc), scrub(f"{type(exc).__name__}: {exc}", secrets=[url]), True) from None
        except requests.RequestException as exc:
            raise NoAnswer(reason(exc), scrub(f"{type(exc).__name__}: {exc}", secrets=[url]), False) from None
        if resp.status_code not in _REDIRECT_STATUSES:
            return resp, url
        resp.close()
        url = redirect_target(url, resp.headers.get("Location", ""), hint=hint)
    raise ChannelError(f"too many redirects from {scrub(url, marked=True)}", hint=hint)


def body(resp: requests.Response) -> bytes:
    """The body of a streamed answer (get(stream=True)); the connection lost mid-body: NoAnswer."""
    import requests  # noqa: PLC0415

    try:
        return resp.content
    except requests.RequestException as exc:
        raise NoAnswer(reason(exc), scrub(f"{type(exc).__name__}: {exc}", secrets=[resp.url]), True) from None


def redirect_target(url: str, location: str, *, hint: str = "check the URL") -> str:
    """The next URL of a redirect: the same scheme, or http to https (anything else is a ChannelError with
    `hint`); a login on the URL follows to the same host and port only (carry_credentials)."""
    target = urljoin(url, location)
    old, new = urlsplit(url).scheme, urlsplit(target).scheme
    allowed = {"https"} if old == "https" else {"http", "https"}
    if new not in allowed:
        raise ChannelError(f"the index redirected {scrub(url, marked=True)} to a {new or 'schemeless'} URL; "
                           "envlock refuses that", hint=f"{hint} (redirects may keep the scheme or go to https)")
    return carry_credentials(url, target)


def carry_credentials(src: str, dst: str) -> str:
    """`dst` with `src`'s login where `dst` lost it on the same host and port (never to another host)."""
    s, d = urlsplit(src), urlsplit(dst)
    if "@" in s.netloc and "@" not in d.netloc and s.hostname == d.hostname and s.port == d.port:
        return urlunsplit((d.scheme, s.netloc, d.path, d.query, d.fragment))
    return dst


class Cancelled(Exception):
    """A worker saw the cancel flag (Ctrl-C in the main thread)."""


def download(s: requests.Session, url: str, dest: Path, *, what: str, hint: str,
             on_length: Callable[[int], None] | None = None, on_bytes: Callable[[int], None] | None = None,
             cancel: threading.Event | None = None, http: HttpSettings | None = None,
             unreachable: str | None = None) -> None:
    """GET `url` into `dest`; a body cut off mid-way starts the file again (bounded by the retry setting).

    `unreachable`: the hint when the host cannot be reached at all (the mirror key that routes around it).

    `on_length(n)` hears the Content-Length once; `on_bytes(n)` every chunk written (negative: the bytes of
    an attempt that is thrown away). A status other than 200 after urllib3's retries: ChannelError naming
    `what` with `hint`; connection failures: ChannelError with the reason and the number of attempts.
    """
    import requests  # noqa: PLC0415

    http = http or settings()
    host = urlsplit(url).netloc.rsplit("@", 1)[-1]
    last = ""
    attempts = 1 + http.retries
    for attempt in range(attempts):
        if attempt:
            time.sleep(http.backoff * 2**attempt)
        got = 0
        try:
            with s.get(url, stream=True, timeout=timeout_of(http)) as resp:
                if resp.status_code != 200:
                    raise ChannelError(f"cannot download {what}: HTTP {resp.status_code} from {host}", hint=hint)
                length = int(resp.headers.get("Content-Length") or -1)
                if on_length is not None and length > 0:
                    on_length(length)
                    on_length = None
                # a new attempt starts the file from its first byte; never through a link in its place
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
                with os.fdopen(os.open(dest, flags, 0o666), "wb") as fh:
                    for chunk in resp.iter_content(CHUNK):
                        if cancel is not None and cancel.is_set():
                            raise Cancelled
                        fh.write(chunk)
                        got += len(chunk)
                        if on_bytes is not None:
                            on_bytes(len(chunk))
                return
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            if got and on_bytes is not None:
                on_bytes(-got)
            last = reason(exc)
            if last == HOST_NOT_FOUND:  # the resolver answered: asking it again only makes the user wait
                attempts = attempt + 1
                break
    words = f": {said(last, host, http)}" if last == HOST_NOT_FOUND else f" from {host} ({last}, {attempts} attempts)"
    raise ChannelError(f"cannot download {what}{words}",
                       hint=unreachable or "check the network or proxy settings; --offline uses only the package cache")


def get_text(url: str, *, what: str, hint: str) -> str:
    """The body of one small http(s) document (a mirror's wheels.json), as text; ChannelError otherwise."""
    import requests  # noqa: PLC0415

    with session() as s:
        try:
            resp = s.get(url, timeout=timeout_of())
        except requests.RequestException as exc:
            raise ChannelError(f"cannot read {what}: {said(reason(exc), host_of(url))}", hint=hint) from None
        if resp.status_code != 200:
            raise ChannelError(f"cannot read {what} (HTTP {resp.status_code})", hint=hint)
        return resp.text


def content_lengths(urls: Sequence[str], s: requests.Session, *, jobs: int = 16,
                    timeout: float = 5.0) -> dict[str, int]:
    """url -> Content-Length for the http(s) URLs that answer a HEAD with one (others are left out).

    Only the byte bar's total (and ETA) depends on it: no retries, a short timeout, failures ignored.
    """

    def head(url: str) -> tuple[str, int | None]:
        try:
            resp = s.head(url, allow_redirects=True, timeout=timeout)
            length = int(resp.headers.get("Content-Length", "")) if resp.status_code == 200 else None
        except Exception:  # noqa: BLE001 - a missing size only costs the bar its total
            length = None
        return url, length

    import concurrent.futures  # noqa: PLC0415 - lazy: importing envlock.seams.net stays cheap (lockfile imports it)

    wanted = [u for u in dict.fromkeys(urls) if u.startswith(("http://", "https://"))]
    if not wanted:
        return {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(wanted)))) as pool:
        return {u: n for u, n in pool.map(head, wanted) if n is not None}


def parallel(items: Sequence[Any], worker: Callable[[Any, threading.Event, Any], T], *, jobs: int,
             on_done: Callable[[T], None] = lambda _: None) -> list[T]:
    """`worker(item, cancel, session)` for every item on a thread pool sharing one session.

    Results in completion order; the first failure raises and stops the rest; Ctrl-C -> Interrupted.
    """
    import concurrent.futures  # noqa: PLC0415

    cancel = threading.Event()
    shared = session(pool=max(16, jobs))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="envlock-fetch")
    futures = [pool.submit(worker, item, cancel, shared) for item in items]
    out: list[T] = []
    try:
        pending = set(futures)
        while pending:
            # A timeout keeps the main thread responsive to Ctrl-C.
            done, pending = concurrent.futures.wait(pending, timeout=0.2,
                                                    return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in done:
                result = fut.result()  # the first failure raises; `finally` stops the rest
                on_done(result)
                out.append(result)
    except KeyboardInterrupt:
        raise Interrupted("interrupted while downloading; nothing was installed",
                          hint="run the command again; verified packages stay in the package cache") from None
    finally:
        cancel.set()
        # Do not wait for a worker stuck in a slow read: the process is about to report and exit.
        pool.shutdown(wait=False, cancel_futures=True)
        shared.close()
    return out


# --------------------------------------------------------------------------- credentials

# --------------------------------------------------------------------------- TLS

_ca_warned: list[bool] = []


def with_ca_fallback(make: Callable[[], T]) -> T:
    """`make()` (rattler's client), retried with certifi's CA bundle when the system's cannot be loaded.

    py-rattler 0.28 builds its reqwest client from the system's CA certificates and fails when there are
    none (a chroot, a slim image, SSL_CERT_FILE pointing nowhere), even for file:// channels: `Client()`
    raises "ValueError: builder error" and `install()` without a client panics. certifi's bundle is the
    one requests uses for envlock's own downloads; one warning says so, else one error and a hint.
    """
    try:
        return make()
    except ValueError as exc:
        if "builder error" not in str(exc):
            raise
    bundle = _certifi_bundle()
    hint = ("install the system's CA certificates (e.g. apt-get install ca-certificates) or set SSL_CERT_FILE to a "
            "PEM bundle; rattler needs them even for file:// channels")
    if bundle is None or os.environ.get("SSL_CERT_FILE") == bundle:
        raise ChannelError("no CA certificates could be loaded for rattler's HTTP client", hint=hint) from None
    was = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = bundle
    try:
        client = make()
    except ValueError:
        raise ChannelError(f"no CA certificates could be loaded for rattler's HTTP client (not even {bundle})",
                           hint=hint) from None
    if not _ca_warned:
        _ca_warned.append(True)
        where = f"SSL_CERT_FILE={was} has none" if was else "the system has none"
        from envlock.wrapping import say

        say("warning", f"no CA certificates could be loaded ({where}); rattler uses certifi's bundle, as envlock's "
                       "own downloads do")
    return client


def _certifi_bundle() -> str | None:
    try:
        import certifi  # noqa: PLC0415
    except ImportError:
        return None
    path = certifi.where()
    return path if os.path.isfile(path) else None
