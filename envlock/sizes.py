"""How many bytes a create is about to download: the total of its byte bar, so the bar has an ETA.

Locks record no sizes (conda-lock v1 has none for conda packages), so the terminal renderer asks the
server: one HEAD per file, in parallel, a short timeout each. Only when a person watches (envlock.progress);
a file whose size does not come back adds its Content-Length when its download starts.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping, Sequence
from typing import Any


def content_lengths(urls: Sequence[str], session: Any, *, jobs: int = 16, timeout: float = 5.0) -> Mapping[str, int]:
    """url -> Content-Length for the http(s) URLs that answer a HEAD with one (others are left out)."""

    def head(url: str) -> tuple[str, int | None]:
        try:
            resp = session.head(url, allow_redirects=True, timeout=timeout)
            length = int(resp.headers.get("Content-Length", "")) if resp.status_code == 200 else None
        except Exception:  # noqa: BLE001 - only a progress bar's total depends on it
            length = None
        return url, length

    wanted = [u for u in dict.fromkeys(urls) if u.startswith(("http://", "https://"))]
    if not wanted:
        return {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(wanted)))) as pool:
        return {u: n for u, n in pool.map(head, wanted) if n is not None}
