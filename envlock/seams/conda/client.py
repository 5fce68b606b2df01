"""rattler's HTTP client, built from envlock.seams.net's settings (one timeout, one retry count, the CA bundle).

py-rattler's default client neither retries (one 503 fails the resolve) nor times out (a stalled server
hangs it); this one has RetryMiddleware(ENVLOCK_HTTP_RETRIES) with rattler's exponential backoff, the
timeout ENVLOCK_HTTP_TIMEOUT (for reqwest, the whole request), and keyring/auth-file credentials
(AuthenticationMiddleware). Where the system has no CA certificates, certifi's (envlock.seams.net).
"""

from __future__ import annotations

from typing import Any

from envlock.seams import net


def http_client(http: net.HttpSettings | None = None) -> Any:
    """A rattler Client with envlock's retry and timeout settings."""
    from rattler.networking import AuthenticationMiddleware, Client, RetryMiddleware

    http = http or net.settings()
    middlewares: list[Any] = [AuthenticationMiddleware()]
    if http.retries:
        middlewares.insert(0, RetryMiddleware(int(http.retries)))
    timeout = max(1, round(http.timeout)) if http.timeout else None
    return net.with_ca_fallback(lambda: Client(middlewares, timeout=timeout))
