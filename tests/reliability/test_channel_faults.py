"""`envlock resolve` against a 127.0.0.1 channel server that misbehaves (docs/reliability.md, table 1).

Each case injects faults into a real ChannelServer serving real indexed repodata (sharded, or plain
repodata.json/.zst), runs the real resolve with an empty cache, and checks the outcome, what the
server saw (retries are bounded and counted), the previous lock (untouched on error), the project
(no temp files) and the cache (not poisoned: the next clean run succeeds from it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.channelbuilder import ChannelServer
from tests.reliability.conftest import LOCK, resolve_json, snapshot

SHARD_INDEX = "*/linux-64/repodata_shards.msgpack.zst"
SHARDS = "*/linux-64/shards/*"
ZST = "*/linux-64/repodata.json.zst"
JSON = "*/linux-64/repodata.json"


@dataclass(frozen=True)
class Case:
    """One fault and the behaviour it must produce."""

    id: str
    faults: tuple[tuple[str, str, int | None], ...]
    expect: int  # exit code: 0 = the resolve succeeded (after retries), 4 = ChannelError
    says: str = ""  # a substring of the error message
    counts: tuple[tuple[str, int, int, int], ...] = ()  # (path pattern, status, at least, at most requests)
    plain: bool = False  # serve the channel without shards
    env: dict[str, str] = field(default_factory=dict)
    max_s: float = 20.0
    slow: bool = False  # retries exhausted with real backoff (seconds): the slow tier


CASES = [
    Case("503 twice, then served", ((SHARD_INDEX, "status:503", 2),), 0, counts=((SHARD_INDEX, 503, 2, 2),)),
    Case("500 on every try", ((SHARD_INDEX, "status:500", None),), 4, "500", counts=((SHARD_INDEX, 500, 4, 4),)),
    Case("503 on a shard, then served", ((SHARDS, "status:503", 3),), 0, counts=((SHARDS, 503, 3, 3),)),
    Case("404 on the shard index: falls back to repodata.json.zst", ((SHARD_INDEX, "status:404", None),), 0,
         counts=((SHARD_INDEX, 404, 1, 1), (ZST, 200, 1, 2))),
    Case("404 on a shard", ((SHARDS, "status:404", None),), 4, "404", counts=((SHARDS, 404, 1, 30),)),
    Case("reset once, then served", ((SHARD_INDEX, "reset", 1),), 0),
    Case("reset on every try", ((SHARD_INDEX, "reset", None),), 4, "connection closed", slow=True),
    Case("stall past the timeout once, then served", ((SHARD_INDEX, "stall:3", 1),), 0,
         env={"ENVLOCK_HTTP_TIMEOUT": "1"}),
    Case("stall past the timeout, no retries left", ((SHARD_INDEX, "stall:4", None),), 4, "timed out",
         env={"ENVLOCK_HTTP_TIMEOUT": "1", "ENVLOCK_HTTP_RETRIES": "0"}, max_s=3.5),
    Case("closed mid-body once, then served", ((SHARDS, "close-mid-body", 1),), 0, counts=((SHARDS, 200, 10, 60),)),
    Case("closed mid-body on every try", ((SHARD_INDEX, "close-mid-body", None),), 4, "end of file",
         counts=((SHARD_INDEX, 200, 3, 3),)),
    Case("closed mid-body, no retries: fetched once", ((SHARD_INDEX, "close-mid-body", None),), 4, "end of file",
         counts=((SHARD_INDEX, 200, 1, 1),), env={"ENVLOCK_HTTP_RETRIES": "0"}),
    Case("corrupt shard index", ((SHARD_INDEX, "corrupt", None),), 4, "invalid or truncated"),
    Case("corrupt shard", ((SHARDS, "corrupt", 1),), 4, "invalid or truncated"),
    Case("plain: repodata.json.zst truncated once", ((ZST, "truncate", 1),), 0, plain=True),
    Case("plain: repodata.json.zst corrupt", ((ZST, "corrupt", None),), 4, "", plain=True),
    Case("plain: repodata.json corrupt (no .zst)", ((ZST, "status:404", None), (JSON, "corrupt", None)), 4, "",
         plain=True),
    Case("plain: repodata.json truncated twice, then served (no .zst)",
         ((ZST, "status:404", None), (JSON, "truncate", 2)), 0, plain=True, counts=((JSON, 200, 3, 3),)),
    Case("plain: repodata.json truncated every time (no .zst)",
         ((ZST, "status:404", None), (JSON, "truncate", None)), 4, "end of file", plain=True,
         counts=((JSON, 200, 4, 4),), slow=True),
    Case("plain: 404 for every repodata of linux-64", ((ZST, "status:404", None), (JSON, "status:404", None)), 3,
         "there is no package 'cuda-nvcc' in conda-forge for linux-64", plain=True),
]


def _tmp_files(project: Path) -> list[str]:
    return [p for p in snapshot(project) if p.rsplit("/", 1)[-1].startswith(".") and p.endswith(".tmp")]


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CASES]
)
def test_resolve_under_fault(case: Case, project: Path, small_root: Path, plain_root: Path, make_channel_server,
                             capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    server: ChannelServer = make_channel_server(plain_root if case.plain else small_root)
    for pattern, action, times in case.faults:
        server.add_fault(pattern, action, times)
    before = snapshot(project)
    started = time.monotonic()
    code, doc = resolve_json(project, capsys, "--mirror", f"conda-forge={server.channel_url()}")
    elapsed = time.monotonic() - started
    assert code == case.expect, doc
    assert elapsed < case.max_s
    for pattern, status, lo, hi in case.counts:
        assert lo <= server.count(pattern, status=status) <= hi, server.log()
    assert _tmp_files(project) == []
    if case.expect:
        assert case.says in doc["error"] and doc["hint"], doc
        assert "Traceback" not in doc["error"]
        assert snapshot(project) == before  # the previous lock and spec are untouched
    else:
        lock = (project / LOCK).read_text()
        assert "previous lock" not in lock and "https://conda.anaconda.org/conda-forge/" in lock
    # Nothing partial was cached: the same cache, the faults gone, resolves and writes the lock.
    server.clear_faults()
    monkeypatch.delenv("ENVLOCK_HTTP_TIMEOUT", raising=False)
    code, doc = resolve_json(project, capsys, "--mirror", f"conda-forge={server.channel_url()}")
    assert code == 0, doc
    assert "previous lock" not in (project / LOCK).read_text()


@pytest.mark.slow
def test_connection_refused_is_retried_with_backoff_then_one_error(project: Path, small_root: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    server = ChannelServer(small_root).start()
    url = server.channel_url()
    server.stop()  # nothing listens on that port any more
    before = snapshot(project)

    def refused(retries: str) -> float:
        monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", retries)
        started = time.monotonic()
        code, doc = resolve_json(project, capsys, "--mirror", f"conda-forge={url}")
        elapsed = time.monotonic() - started
        assert code == 4 and "cannot fetch conda-forge for linux-64" in doc["error"] and doc["hint"]
        assert "127.0.0.1" in doc["error"] + str(doc.get("detail", ""))  # the mirror tried: in the detail (-v, --json)
        assert snapshot(project) == before
        return elapsed

    once = min(refused("0") for _ in range(3))  # no retry: refused at once
    retried = refused("3")
    print(f"refused: {once:.3f} s without retries, {retried:.3f} s with 3")
    # rattler's backoff has full jitter (a random share of 1, 2, 4 s), so its sum has no fixed floor: the
    # retried run must take visibly longer than the plain refusal, and stay bounded.
    assert once + 0.05 < retried < 30


def test_redirect_to_another_host_is_followed_and_the_lock_keeps_canonical_urls(
    project: Path, small_root: Path, make_channel_server, capsys: pytest.CaptureFixture[str]
) -> None:
    other = make_channel_server(small_root)
    origin = make_channel_server(small_root)
    # "localhost" is another host name than "127.0.0.1" (another origin), on another port.
    origin.add_fault("*/linux-64/*", f"redirect:http://localhost:{other.port}")
    code, doc = resolve_json(project, capsys, "--mirror", f"conda-forge={origin.channel_url()}")
    assert code == 0, doc
    assert origin.count("*/linux-64/*", status=302) > 0 and other.count("*/linux-64/*", status=200) > 0
    text = (project / LOCK).read_text()
    assert "localhost" not in text and "127.0.0.1" not in text
    assert "https://conda.anaconda.org/conda-forge/linux-64/" in text


def test_redirect_loop_is_one_error(project: Path, small_root: Path, make_channel_server,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    server = make_channel_server(small_root)
    server.add_fault(SHARD_INDEX, f"redirect:{server.url}")  # to itself, for ever
    before = snapshot(project)
    code, doc = resolve_json(project, capsys, "--mirror", f"conda-forge={server.channel_url()}")
    assert code == 4 and doc["hint"], doc
    assert server.count(SHARD_INDEX, status=302) <= 20  # the client stops following
    assert snapshot(project) == before
