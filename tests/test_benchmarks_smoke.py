"""The benchmark kit keeps working: generator, shard format, counting server, and run.py in small mode.

No timing is asserted anywhere (machines differ); what is asserted is function: the generated channel
solves the 3-platform envlock request, rattler's Gateway really reads the shards we write (requests
counted on the server), the plain layout hides them, and generation is deterministic.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

from gen_channel import ChannelInfo, GenConfig, generate, older_versions  # noqa: E402
from measure import Launcher  # noqa: E402
from server import CountingServer, summarize  # noqa: E402

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def small_channel(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> ChannelInfo:
    """The small (CI) channel, generated once for this module."""
    return generate(tmp_path_factory.mktemp("bench-cache"), GenConfig.small(),
                    snapshot=shared_dir / "channels" / "conda-forge")


def _decode(path: Path) -> Any:
    import msgpack
    import zstandard

    raw = zstandard.ZstdDecompressor().decompress(path.read_bytes(), max_output_size=1 << 30)
    return msgpack.unpackb(raw)


def test_small_channel_holds_real_records_ported_toolchain_and_filler(small_channel: ChannelInfo, shared_dir: Path) -> None:
    doc = json.loads((small_channel.channel_dir / "linux-64" / "repodata.json").read_text())
    recs = {**doc["packages"], **doc["packages.conda"]}
    real = json.loads((shared_dir / "channels/conda-forge/linux-64/repodata.json").read_text())
    real_recs = {**real["packages"], **real["packages.conda"]}
    assert all(recs[fn] == rec for fn, rec in real_recs.items())  # the snapshot, embedded unchanged
    assert len(recs) >= 4000 and small_channel.records["linux-64"] == len(recs)
    aarch = json.loads((small_channel.channel_dir / "linux-aarch64" / "repodata.json").read_text())
    ported = [r for r in aarch["packages.conda"].values() if r["name"] == "cuda-nvcc" and r["version"] == "12.6.85"]
    assert ported and ported[0]["depends"] == ["cuda-nvcc_linux-aarch64 12.6.85.*", "gcc_linux-aarch64", "gxx_linux-aarch64"]
    assert any(p.startswith("win-64/cudnn-9.7.1.26-") for p in small_channel.patched)


def test_shards_match_the_format_rattler_index_writes(small_channel: ChannelInfo, tmp_path: Path) -> None:
    from rattler.index import index_fs

    sub = small_channel.channel_dir / "linux-64"
    index = _decode(sub / "repodata_shards.msgpack.zst")
    digest = index["shards"]["cuda-nvcc"]
    shard_file = sub / "shards" / f"{digest.hex()}.msgpack.zst"
    assert hashlib.sha256(shard_file.read_bytes()).digest() == digest  # named by the hash of the file
    shard = _decode(shard_file)
    # rattler.index on a real (tiny) package writes the same structure and field types.
    from tests.channelbuilder import PackageSpec, write_package

    chan = tmp_path / "chan"
    (chan / "noarch").mkdir(parents=True)
    write_package(PackageSpec("cuda-nvcc", "12.6.85", subdir="linux-64"), chan / "linux-64")
    asyncio.run(index_fs(chan, write_zst=True, write_shards=True, force=True))
    ref_index = _decode(chan / "linux-64" / "repodata_shards.msgpack.zst")
    ref = _decode(chan / "linux-64" / "shards" / f"{ref_index['shards']['cuda-nvcc'].hex()}.msgpack.zst")
    assert set(index) == set(ref_index) and set(index["info"]) == set(ref_index["info"])
    assert set(shard) == set(ref)
    ours = next(iter(shard["packages.conda"].values()))
    theirs = next(iter({**ref["packages"], **ref["packages.conda"]}.values()))
    assert type(ours["md5"]) is type(theirs["md5"]) is bytes and type(ours["sha256"]) is bytes


def test_gateway_reads_the_shards_over_http_and_plain_hides_them(small_channel: ChannelInfo, tmp_path: Path) -> None:
    import rattler
    from rattler import Channel, SourceConfig

    with CountingServer(small_channel.root) as srv:
        for sharded in (True, False):
            mark = srv.mark()
            gw = rattler.Gateway(cache_dir=tmp_path / f"cache-{sharded}", default_config=SourceConfig())
            res = asyncio.run(gw.query([Channel(srv.channel_url(sharded=sharded) + "/")], ["linux-64", "noarch"],
                                       ["cuda-nvcc ==12.6.85"], recursive=True))
            assert any(r.name.normalized == "cuda-nvcc" for recs in res for r in recs)
            reqs = srv.since(mark)
            shards = summarize(reqs, "*/shards/*")
            plain = summarize(reqs, "*/repodata.json*")
            if sharded:
                assert shards["ok"] > 5 and plain["requests"] == 0  # the names it touched, nothing else
            else:
                assert shards["requests"] == 0 and plain["ok"] >= 2
                assert summarize(reqs, "*/repodata_shards.msgpack.zst")["not_found"] == 2


def test_generation_is_deterministic(shared_dir: Path, tmp_path: Path) -> None:
    cfg = GenConfig(seed=7, linux64_records=3000, noarch_records=1300, other_records=1200, history=True, zstd_level=1)
    snap = shared_dir / "channels" / "conda-forge"
    a, b = (generate(tmp_path / d, cfg, snapshot=snap) for d in ("a", "b"))
    for sub in ("linux-64", "noarch", "win-64"):
        for name in ("repodata.json", "repodata_shards.msgpack.zst"):
            assert (a.channel_dir / sub / name).read_bytes() == (b.channel_dir / sub / name).read_bytes()
    other = generate(tmp_path / "c", GenConfig(**{**cfg.__dict__, "seed": 8}), snapshot=snap)
    assert (other.channel_dir / "linux-64/repodata.json").read_bytes() != (a.channel_dir / "linux-64/repodata.json").read_bytes()


def test_history_versions_sort_below_the_real_one() -> None:
    from rattler import Version

    olds = list(older_versions("3.11.2", 30))
    assert olds[:3] == ["3.11.1", "3.11.0", "3.10.9"] and len(olds) == 30
    assert all(Version(v) < Version("3.11.2") for v in olds)
    assert list(older_versions("0.0.1", 5)) == ["0.0.0"] and list(older_versions("2024a", 3)) == []


OWN_PEAK = "import sys; sys.stdout.write(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads VmHWM from /proc (Linux)")
def test_launcher_reports_each_command_s_own_peak_rss_not_the_harness_s() -> None:
    """A harness holding 300 MB: its own child reads >= 300 MB (Linux keeps the peak across fork + exec), a
    command started by the launcher reads its own VmHWM, and a bigger command reads its bigger peak."""
    held = bytearray(300 << 20)
    held[:: 4096] = b"\1" * len(held[:: 4096])  # touch every page
    direct = subprocess.Popen([sys.executable, "-c", "pass"])
    assert os.wait4(direct.pid, 0)[2].ru_maxrss / 1024 >= 300  # the trap the launcher exists for
    with Launcher() as launcher:
        wall, rss, rc, out, _, cpu = launcher.run([sys.executable, "-c", OWN_PEAK])
        assert rc == 0 and wall > 0 and cpu > 0
        assert abs(rss - int(out) / 1024) < 1.5 and rss < 60  # its own few MB, not the harness's 300
        grow = "b = bytearray(120 << 20); b[::4096] = b'\\1' * len(b[::4096])"
        _, big, rc, _, err, _ = launcher.run([sys.executable, "-c", grow])
        assert rc == 0, err
        assert 120 <= big < 250
        _, _, rc, out, _, _ = launcher.run([sys.executable, "-c", "import sys, os; print(os.getcwd(), sys.stdin.read())"],
                                        cwd=Path("/"), stdin="fed", env={"PATH": os.environ["PATH"]})
        assert rc == 0 and out.split() == ["/", "fed"]
        assert launcher.run(["/nonexistent/program"])[2] == 127
    del held


@pytest.mark.slow
def test_run_py_small_mode_prints_every_section(shared_dir: Path, tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(BENCH / "run.py"), "--small", "--runs", "1", "--cache-dir",
                           str(tmp_path / "cache"), "--json", str(out_json)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for section in ("[resolve --torch 2.7.1, 3 platforms (toolchain-only)]", "[start-up]", "[scaling (warm, sharded)]",
                    "[lifecycle]", "[create (warm package cache)]", "[full env: resolve --torch 2.7.1, linux-64",
                    "[snapshot: resolve --toolchain-only, linux-64"):
        assert section in proc.stdout
    rows = {r["label"]: r for r in json.loads(out_json.read_text())["rows"]}
    assert "FAILED" not in rows, [r["note"] for r in rows.values() if r["label"] == "FAILED"]
    for label in ("cold, sharded", "warm, sharded", "cold, plain", "warm, plain", "envlock --help", "warm",
                  "torch 2.7.1", "torch 2.11.0"):
        assert len(rows[label]["values"]) >= 1 and rows[label]["baseline"]
    own = rows["peak RSS of a bare `python -c pass`"]
    assert own["ok"] and own["median"] < 60  # the RSS column is each process's own
    realistic = next(r for r in rows.values() if r["label"].startswith("envlock create, realistic"))
    assert int(realistic["label"].split(" files")[0].rsplit(" ", 1)[1]) >= 3000
    assert 0 < rows["sharded cold bytes / plain cold bytes"]["median"] < 100
