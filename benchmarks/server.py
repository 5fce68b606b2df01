"""A static conda-channel server on 127.0.0.1 that counts the bytes it sends per request.

One directory is served under two prefixes, so one generated channel gives both layouts:

    /sharded/<path>   everything (repodata.json, .zst, repodata_shards.msgpack.zst, shards/)
    /plain/<path>     the same minus the CEP-16 files (404), like a channel indexed without shards

Files are streamed (a 250 MB repodata.json is never read into memory), with an ETag so a warm client
revalidates with a 304 and `Cache-Control: max-age=0` so it always asks (the conservative warm case).

    python benchmarks/server.py ROOT        # serve ROOT until Ctrl-C, print the base URL
"""

from __future__ import annotations

import fnmatch
import http.server
import os
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

PREFIXES = ("sharded", "plain")


@dataclass(frozen=True)
class Request:
    """One answered request."""

    method: str
    path: str
    status: int
    bytes_sent: int


def _is_shard_path(rel: str) -> bool:
    return rel.endswith("repodata_shards.msgpack.zst") or "/shards/" in rel


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as a CDN does

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: the request log is `CountingServer.requests`."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._serve(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def _resolve(self, url_path: str) -> Path | None:
        parts = unquote(url_path.split("?", 1)[0]).lstrip("/").split("/", 1)
        if len(parts) != 2 or parts[0] not in PREFIXES or ".." in parts[1].split("/"):
            return None
        if parts[0] == "plain" and _is_shard_path(parts[1]):
            return None
        path = self.server.root / parts[1]
        return path if path.is_file() else None

    def _empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.server.owner._record(Request(self.command, self.path, status, 0))

    def _serve(self, *, head: bool) -> None:
        path = self._resolve(self.path)
        if path is None:
            self._empty(404)
            return
        st = path.stat()
        etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        if self.headers.get("If-None-Match") == etag:
            self._empty(304, {"ETag": etag, "Cache-Control": "public, max-age=0"})
            return
        self.send_response(200)
        ctype = "application/json" if path.suffix == ".json" else "application/octet-stream"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(st.st_size))
        self.send_header("ETag", etag)
        self.send_header("Cache-Control", "public, max-age=0")
        self.end_headers()
        sent = 0
        if not head:
            with path.open("rb") as fh:
                try:
                    self.wfile.flush()  # headers out before the zero-copy body
                    sent = self.connection.sendfile(fh)
                except (AttributeError, OSError):
                    fh.seek(0)
                    shutil.copyfileobj(fh, self.wfile, 1 << 20)
                    sent = st.st_size
        self.server.owner._record(Request(self.command, self.path, 200, sent))


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    root: Path
    owner: CountingServer


class CountingServer:
    """Serve `root` on 127.0.0.1 (port 0) in a daemon thread; a context manager.

    `.channel_url("conda-forge", sharded=True)` is what to pass to `--mirror`; `.requests` the log;
    `.mark()` + `.since(mark)` the requests of one measured run.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> CountingServer:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.root = self.root
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="bench-channel-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> CountingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("server is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def channel_url(self, name: str = "conda-forge", *, sharded: bool = True) -> str:
        return f"{self.url}/{'sharded' if sharded else 'plain'}/{name.strip('/')}"

    def _record(self, req: Request) -> None:
        with self._lock:
            self.requests.append(req)

    def mark(self) -> int:
        """A position in the log (pass to `since`)."""
        with self._lock:
            return len(self.requests)

    def since(self, mark: int) -> list[Request]:
        with self._lock:
            return list(self.requests[mark:])


def summarize(reqs: list[Request], pattern: str = "*") -> dict[str, int]:
    """requests / bytes / 200s / 304s / 404s of the requests whose path matches `pattern`."""
    sel = [r for r in reqs if fnmatch.fnmatchcase(r.path, pattern)]
    return {
        "requests": len(sel),
        "bytes": sum(r.bytes_sent for r in sel),
        "ok": sum(r.status == 200 for r in sel),
        "not_modified": sum(r.status == 304 for r in sel),
        "not_found": sum(r.status == 404 for r in sel),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python benchmarks/server.py ROOT", file=sys.stderr)
        return 2
    with CountingServer(Path(argv[0])) as srv:
        print(f"{srv.url}/sharded/conda-forge  (and {srv.url}/plain/conda-forge); Ctrl-C to stop", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
