"""rattler's HTTP client without a system CA bundle (a chroot, a slim image, SSL_CERT_* pointing nowhere).

py-rattler 0.28 builds its reqwest client from the system's CA certificates and fails when there are none,
even for file:// channels: `Client()` raises "ValueError: builder error", and `install()` without a
client panics in a tokio worker ("rust future panicked: unknown error", after a Rust backtrace on stderr).
envlock then points rattler at certifi's bundle, the one envlock's own downloads (requests) use anyway,
and says so once; without that either, one error line and a hint.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

from envlock.errors import ChannelError

T = TypeVar("T")
_warned = False


def rattler_client(make: Callable[[], T]) -> T:
    """`make()` (a rattler Client), retried with certifi's CA bundle when the system's cannot be loaded."""
    global _warned
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
    if not _warned:
        _warned = True
        where = f"SSL_CERT_FILE={was} has none" if was else "the system has none"
        sys.stderr.write(f"warning: no CA certificates could be loaded ({where}); rattler uses certifi's bundle, "
                         "as envlock's own downloads do\n")
    return client


def _certifi_bundle() -> str | None:
    try:
        import certifi
    except ImportError:
        return None
    path = certifi.where()
    return path if os.path.isfile(path) else None
