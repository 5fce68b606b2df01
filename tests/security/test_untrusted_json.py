"""JSON that a lock or an index points envlock at goes through the one checked loader (docs/security.md, Limits:
"Every YAML, JSON and TOML document read from untrusted input goes through one checked loader"; promise 5: never
an `internal error`). Issue 33.8: two readers did not, and a hostile document ended the command in
`internal error: RecursionError` (or KeyError, AttributeError):

* the `repodata.json` beside a lock's `file://` package URL (the folder a lock names, anyone's), read to decide
  whether the URL lies inside a conda channel;
* a package index's PEP 691 JSON page, read for the torch metadata lookup.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.channelbuilder import write_package
from tests.loopserver import LoopbackServer
from tests.security.hostile import assert_refused, cli_env, envlock, locked, tool, write_lock

DEEP = "[" * 200_000 + "]" * 200_000
HOSTILE = {
    "nested 200,000 deep": '{"packages": ' + DEEP + "}",
    "files not a list": '{"files": 5}',
    "an entry not an object": '{"files": [1]}',
    "an entry without url": '{"files": [{"filename": "torch-2.16.0-cp311-cp311-manylinux_2_28_x86_64.whl"}]}',
}


@pytest.mark.parametrize("case", ["nested 200,000 deep", "packages not a mapping", "over the cap"])
def test_a_hostile_repodata_beside_a_file_url_is_not_a_channel(case: str, tmp_path: Path) -> None:
    spec = tool()
    folder = tmp_path / "elsewhere" / "linux-64"
    archive = write_package(spec, folder)
    text = {"nested 200,000 deep": '{"packages": ' + DEEP + "}", "packages not a mapping": '{"packages": 7}',
            "over the cap": '{"packages": {}, "x": "' + "x" * (65 << 20) + '"}'}[case]
    (folder / "repodata.json").write_text(text)
    lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [locked(spec, archive, archive.as_uri())], index=False)
    done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"), env=cli_env(tmp_path))
    assert_refused(done, "refusing to read")
    assert not (tmp_path / "env").exists()


@contextmanager
def _json_index(body: str) -> Iterator[str]:
    """A package index on 127.0.0.1 that answers every page with `body` as PEP 691 JSON."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = LoopbackServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_index_page_is_one_error(case: str, tmp_path: Path) -> None:
    body = HOSTILE[case].replace('"packages"', '"files"')
    with _json_index(body) as index:
        env = cli_env(tmp_path, PIP_INDEX_URL=index, PIP_CONFIG_FILE="/dev/null")
        done = envlock("resolve", "--torch", "2.16.0", "--platform", "linux-64", "--project-dir", str(tmp_path / "p"), env=env)
    assert_refused(done, "not a valid PEP 691 JSON page")
