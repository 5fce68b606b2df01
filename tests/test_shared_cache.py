"""One package cache shared by many `envlock create` processes at once (a cluster's shared filesystem).

Before the per-entry file lock, 8 concurrent creates against one cache fetched every package 8 times and half of
them failed (one process replaced a cache entry another was linking from); benchmarks/bench_nodes.py has the
figures. Here 6 real processes start together against the HTTP server on 127.0.0.1: all must succeed, every
package must be requested exactly once, and every env must be complete.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

from envlock.formats import read_lock
from tests.channelbuilder import ChannelServer
from tests.test_create import ENVLOCK, lock_of, project  # noqa: F401 - session fixture

N = 6


def test_concurrent_creates_share_one_cache_and_fetch_each_package_once(project: Path, tmp_path: Path,  # noqa: F811
                                                                        channel_root: Path) -> None:
    server = ChannelServer(channel_root).start()
    try:
        env = {k: v for k, v in os.environ.items() if k != "ENVLOCK_MIRRORS"}
        env.update({"ENVLOCK_CACHE_DIR": str(tmp_path / "shared-cache"),
                    "ENVLOCK_MIRRORS": f"conda-forge={server.channel_url('conda-forge')}"})
        procs = [subprocess.Popen([*ENVLOCK, "create", "--lock", str(lock_of(project)), "-p", str(tmp_path / f"node{i}"),
                                   "--platform", "linux-64", "--frozen", "-q"], env=env, stderr=subprocess.PIPE, text=True)
                 for i in range(N)]
        errors = [p.communicate(timeout=300)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * N, errors
        server.settle()
        fetched = Counter(r.path for r in server.requests if r.path.endswith((".tar.bz2", ".conda")))
    finally:
        server.stop()
    packages = read_lock(lock_of(project)).packages_for("linux-64")
    assert len(fetched) == len(packages) and set(fetched.values()) == {1}
    wanted = {p.filename.removesuffix(".tar.bz2").removesuffix(".conda") for p in packages}
    for i in range(N):
        assert {p.stem for p in (tmp_path / f"node{i}" / "conda-meta").glob("*.json")} == wanted
        assert (tmp_path / f"node{i}" / "bin" / "nvcc").is_file()
