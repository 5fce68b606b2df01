"""Channel URLs: what a channel name stands for, where it is read from, and which URLs may reach rattler.

No rattler here: the checks run before anything is fetched (and in tests of their own).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envlock.errors import SpecError
from envlock.seams.mirror_urls import CANONICAL_BASE
from envlock.names import strip_credentials


def canonical_channel_url(channel: str) -> str:
    """The URL a channel name stands for (what the lock records), credentials removed."""
    if "://" in channel:
        return strip_credentials(channel).rstrip("/") + "/"  # one URL (it may hold a space: not scrub's text rule)
    return CANONICAL_BASE + channel.strip("/") + "/"


def fetch_url(channel: str, mirrors: Mapping[str, str]) -> str:
    """The URL a channel is read from (the longest mirror key wins: nvidia= covers nvidia/label/…)."""
    from envlock.seams.mirror_urls import channel_fetch_url

    return channel_fetch_url(channel, mirrors)


def check_channel_security(url: str, *, allow_insecure: bool, what: str = "channel") -> None:
    """http:// is allowed only for 127.0.0.1/localhost unless --allow-insecure (`what`: "channel", "package index")."""
    if not url.startswith("http://") or allow_insecure:
        return
    host = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1].split(":")[0]
    if host not in ("127.0.0.1", "localhost", "[::1]", "::1"):
        raise SpecError(
            f"{what} {strip_credentials(url)} uses plain http",
            hint="use https, or pass --allow-insecure if you trust the network path",
        )


def check_fetch_urls(package_urls: Iterable[str], wheel_urls: Iterable[str], mirrors: Mapping[str, str], *,
                     allow_insecure: bool) -> None:
    """create, pack and mirror refuse plain http off loopback as resolve does (unless --allow-insecure), for every
    URL they would fetch from: each package's (after its mirror), each wheel's, each mirror's; before any request."""
    from envlock.seams.mirror_urls import mirrored

    urls = {mirrored(u, mirrors) for u in package_urls} | {mirrored(u, mirrors) for u in wheel_urls} | set(mirrors.values())
    for url in sorted(urls):
        check_channel_security(url, allow_insecure=allow_insecure)


def check_channel_url(url: str) -> None:
    """Only http(s):// URLs with a host and file:// URLs reach rattler (which panics on e.g. `s3:///0`).

    create installs from those schemes only, so a lock made from any other could not be installed.
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        parts, host = None, None
    scheme = parts.scheme.lower() if parts else ""
    if scheme == "file" or (scheme in ("http", "https") and host):
        return
    raise SpecError(
        f"channel URL {strip_credentials(url)!r} is not an http(s):// URL with a host or a file:// URL",
        hint="pass a channel name (conda-forge) or a URL like https://host/conda-forge",
    )
