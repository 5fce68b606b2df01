"""A run's work folder in a group-shared cache (issue 33.8's known gap): another member of the group renames it and
puts a folder of theirs under its name while the run uses it.

A rename inside a group-writable directory without the sticky bit (docs/scale.md's setgid 2775 cache) needs no
right on the folder renamed, so a private 0700 folder protects its contents, not its name. `unpack` extracts the
archive into `cache/unpack/unpack-*`, checks every member against the manifest, and then reads the lock and the
channels from there; on e081238 it read them again by name, so the other user's lock and packages were installed
by root. Now the folder is reached through the descriptor that made it (envlock.seams.fs.pinned_work_dir).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.channelbuilder import index_channel, write_package
from tests.paused_envlock import LAUNCHER, environ
from tests.second_user import GID, open_dir, second_user
from tests.security.hostile import locked, python311, tool, write_lock

EVIL = "#!/bin/sh\necho EVIL-NVCC\n"

# The other user: find root's work folder, rename it away, put theirs (the evil archive's members) in its place.
SWAP = """
import os, shutil
(work,) = [n for n in os.listdir(unpack) if n.startswith("unpack-")]
os.rename(os.path.join(unpack, work), os.path.join(unpack, ".moved-" + work))
shutil.copytree(evil, os.path.join(unpack, work))
for top, dirs, files in os.walk(os.path.join(unpack, work)):
    for p in [top, *(os.path.join(top, f) for f in files)]:
        os.chmod(p, 0o777 if os.path.isdir(p) else 0o666)
print("swapped", work)
"""


def _root(args: list[str], cache: Path, **pauses: str) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVLOCK_MIRRORS"}
    env.update({"ENVLOCK_CACHE_DIR": str(cache), "NO_COLOR": "1", "ENVLOCK_HTTP_RETRIES": "0"})
    if pauses:
        return subprocess.Popen([*LAUNCHER, *args], env=environ(env, **pauses), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.umask(0o002))
    return subprocess.run([sys.executable, "-m", "envlock", *args], env=env, capture_output=True, text=True,
                          timeout=300, preexec_fn=lambda: os.umask(0o002))


def _pack(base: Path, name: str, nvcc: str | None, cache: Path) -> Path:
    """An archive of a lock of `tool()` (its nvcc replaced by `nvcc`) and python, packed from a channel of its own."""
    chan = base / f"chan-{name}" / "conda-forge"
    specs = [tool(files={"bin/nvcc": nvcc}) if nvcc else tool(), python311()]
    archives = [write_package(s, chan / s.subdir) for s in specs]
    index_channel(chan, write_zst=False, write_shards=False)
    lock = write_lock(base / f"lock-{name}" / "conda-lock.yml", [locked(s, a) for s, a in zip(specs, archives)])
    out = base / f"{name}.tar"
    done = _root(["pack", "--lock", str(lock), "-o", str(out), "--mirror", f"conda-forge={chan.as_uri()}"], cache)
    assert isinstance(done, subprocess.CompletedProcess) and done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("when", ["after the members were checked"])
def test_unpack_reads_its_own_work_folder_whatever_another_user_renames(when: str) -> None:
    as_other, other_env = second_user()
    with open_dir("envlock-sec-work-") as base:
        cache = base / "cache"
        (cache / "unpack").mkdir(parents=True)
        for d in (cache, cache / "unpack"):  # a group cache: setgid, group-writable, no sticky bit
            os.chown(d, -1, GID)
            d.chmod(0o2775)
        good = _pack(base, "good", None, base / "pack-cache")
        evil_tar = _pack(base, "evil", EVIL, base / "pack-cache")
        evil = base / "evil-tree"  # what the other user puts in the folder's place: the evil archive's members
        with tarfile.open(evil_tar) as tf:
            tf.extractall(evil, filter="data")
        for top, _dirs, files in os.walk(evil):
            for p in [top, *(os.path.join(top, f) for f in files)]:
                os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
        release = base / "release"
        prefix = base / "env"
        proc = _root(["unpack", str(good), "-p", str(prefix)], cache,
                     PAUSE_AFTER_EXTRACT=f"until={release}")
        assert isinstance(proc, subprocess.Popen)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            assert "pausing after extracting" in line, line + proc.stderr.read()
            swap = subprocess.run([*as_other, "-c", f"unpack = {str(cache / 'unpack')!r}\nevil = {str(evil)!r}\n" + SWAP],
                                  env=other_env, capture_output=True, text=True, cwd="/",
                                  preexec_fn=lambda: os.umask(0o002))
            assert swap.returncode == 0 and "swapped" in swap.stdout, swap.stderr  # the attack itself works here
        finally:
            release.touch()
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
        nvcc = subprocess.run([str(prefix / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
        assert "release 12.1" in nvcc.stdout and "EVIL" not in nvcc.stdout + nvcc.stderr
        with tarfile.open(good) as tf:  # the lock kept with the env is the archive's, not the other user's
            want = {m.name: tf.extractfile(m).read() for m in tf if m.name.endswith("conda-lock.yml")}  # type: ignore[union-attr]
        assert want and all((prefix / "share" / "envlock" / n).read_bytes() == b for n, b in want.items())
        # and the path it was reached by (/proc/self/fd/N/…) is written nowhere in the env
        pinned = re.compile(rb"/proc/self/fd/\d+/(locks|channels|pypi|environments)/")  # unpack's folder's members
        assert not [p for p in prefix.rglob("*") if p.is_file() and not p.is_symlink() and pinned.search(p.read_bytes())]
