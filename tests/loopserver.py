"""The one HTTP server class the tests' loopback servers use (127.0.0.1 only).

A client that hangs up mid-answer — uv done with a page, a killed envlock, a test that stopped reading — is no
error of the server. socketserver prints such a handler's traceback to stderr from the handler's own thread,
which may run on after its test ended: pytest then captured it into the *next* test's stderr on that worker
(CI, 2026-12-08: test_check's test_missing_lock_is_named failed on a BrokenPipeError traceback of the fake torch
index of an earlier test). Any other handler error is still printed.
"""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    # uv opens many connections at once; the default backlog of 5 drops SYNs (and uv's retries time out).
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipe, ConnectionReset, ConnectionAborted
            return
        super().handle_error(request, client_address)
