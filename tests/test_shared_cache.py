"""One package cache shared by many `envlock create` processes at once (a cluster's shared filesystem).

Before the per-entry file lock, 8 concurrent creates against one cache fetched every package 8 times and half of
them failed (one process replaced a cache entry another was linking from); benchmarks/bench_nodes.py has the
figures. Here 6 real processes start together against the HTTP server on 127.0.0.1: all must succeed, every
package must be requested exactly once, and every env must be complete.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from envlock.formats import read_lock
from tests.channelbuilder import ChannelServer
from tests.output import logical_lines
from tests.second_user import GID, open_dir, second_user
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


def test_a_cache_shared_by_a_group_serves_a_second_user_and_a_private_one_is_refused_in_one_line(
        project: Path, test_channel_url: str) -> None:  # noqa: F811
    """Two users on one cluster cache. Shared as docs/scale.md says (a setgid group folder, umask 002): the second
    user's create installs from the first user's entries (they were 0700 before: mkdtemp's mode). Not shared (the
    first user's umask 022): one error naming the folder and the fix, before anything is fetched (it was an
    internal error from the file lock, then rattler's 'failed to acquire global cache lock')."""
    as_other, env = second_user()
    env = {k: v for k, v in env.items() if k not in ("ENVLOCK_MIRRORS", "ENVLOCK_CACHE_DIR")}
    with open_dir("envlock-two-users-") as base:
        lock = base / "locks" / "conda-lock.yml"
        lock.parent.mkdir(mode=0o755)
        lock.write_text(lock_of(project).read_text())
        (base / "users").mkdir()
        (base / "users").chmod(0o1777)
        for shared, umask in ((True, 0o002), (False, 0o022)):
            cache = base / f"cache-{'group' if shared else 'private'}"
            cache.mkdir()
            os.chown(cache, -1, GID)
            cache.chmod(0o2775 if shared else 0o1777)  # not shared: open to all, but filled with umask 022
            first = {**env, "ENVLOCK_CACHE_DIR": str(cache), "ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}"}
            create = ["-m", "envlock", "create", "--lock", str(lock), "--platform", "linux-64", "--frozen", "-q", "-p"]
            done = subprocess.run([sys.executable, *create, str(base / f"root-{cache.name}")], env=first,
                                  capture_output=True, text=True, preexec_fn=lambda u=umask: os.umask(u))
            assert done.returncode == 0, done.stderr
            # no mirror: every package is in the cache; the second user's own config folder
            second = {**env, "ENVLOCK_CACHE_DIR": str(cache), "HOME": str(base / "users"),
                      "ENVLOCK_CONFIG_DIR": str(base / "users" / "config")}
            prefix = base / "users" / f"env-{cache.name}"
            done = subprocess.run([*as_other, *create, str(prefix)], env=second, capture_output=True, text=True,
                                  cwd="/", preexec_fn=lambda u=umask: os.umask(u))
            if shared:
                assert done.returncode == 0, done.stderr
                # every package, from the first user's entries (copied: the kernel's protected_hardlinks refuses a
                # hard link to another user's 0644 file, and rattler then copies)
                metas = {p.name for p in (prefix / "conda-meta").glob("*.json")}
                assert metas and metas == {p.name for p in (base / f"root-{cache.name}" / "conda-meta").glob("*.json")}
                assert (prefix / "bin" / "nvcc").is_file() and (prefix / "etc/conda/activate.d/envlock-cuda.sh").is_file()
            else:
                assert done.returncode == 1 and not prefix.exists(), done.stderr
                error, hint = logical_lines(done.stderr.strip())
                assert error == f"error: envlock's cache dir {cache} is shared, and {cache}/file-locks in it is not " \
                                "writable by you"
                assert hint.startswith("hint: set ENVLOCK_CACHE_DIR to a cache of your own") and "g+s" in hint


def test_share_with_group_opens_own_private_files_only_in_a_group_writable_cache(tmp_path: Path) -> None:
    """What rattler and uv leave 0600 (their temp files) gets the umask's mode, but only in a group-shared cache."""
    from envlock.seams.fs import share_with_group

    cache = tmp_path / "cache"
    shard = cache / "repodata" / "shards-v1" / "abc.msgpack"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(b"x")
    shard.chmod(0o600)
    shard.parent.chmod(0o700)
    outside = tmp_path / "outside"
    outside.write_bytes(b"y")
    outside.chmod(0o600)
    (cache / "repodata" / "link").symlink_to(outside)
    old = os.umask(0o002)
    try:
        cache.chmod(0o755)  # private: nothing is walked or changed
        share_with_group(cache, cache / "repodata", cache / "uv")
        assert shard.stat().st_mode & 0o777 == 0o600 and shard.parent.stat().st_mode & 0o777 == 0o700
        cache.chmod(0o2775)  # shared with a group, as docs/scale.md sets it up
        share_with_group(cache, cache / "repodata", cache / "uv")  # uv/ absent: nothing to do there
    finally:
        os.umask(old)
    assert shard.stat().st_mode & 0o777 == 0o664 and shard.parent.stat().st_mode & 0o777 == 0o775
    assert outside.stat().st_mode & 0o777 == 0o600  # a link is not followed out of the cache
