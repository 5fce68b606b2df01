"""Cache entries are checked when used, not only when fetched (issue 22, Why 5).

In the README's group cache (setgid 2775, umask 002) another member of the group (uid 65534, through
tests/second_user.py) goes at root's cached `bin/nvcc` and cached wheel: writes into them, renames the entry
away and puts their own in its place, replaces the kept archive too. Root's next create must install the
locked bytes (or refuse), name what changed, and never run the other user's nvcc.

Issue 33.1 moved root's extracted entries into its private store (`pkgs/.envlock-trust/<uid>/`, 0700): the
attacks on an entry now go at that store (refused, or renamed away and replaced: seen and named) and at the shared
`pkgs/<dist>` (planted there: never read).

On main before the fix (b459711): the cached files were group-writable; root's next create printed "every hash
verified" and its env held the other user's nvcc and wheel. `envlock mirror` hard-linked the cache's wheels, so
editing a mirror file edited the cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.channelbuilder import index_channel, write_package
from tests.output import flat
from tests.second_user import GID, open_dir, second_user
from tests.security.hostile import AnyPathServer, assert_refused, locked, python311, tool, wheel_entry, write_lock
from tests.wheelindex import build_wheel

EVIL = "#!/bin/sh\necho EVIL-NVCC\n"
REAL = "release 12.1"

# What the other user does, as a python script run as uid 65534 (each step may fail: sealed files and root's 0700
# store refuse). `store`: root's private store (envlock/seams/trust.py), where its extracted entries live; `pkgs`:
# the shared package cache (kept archives; entries there are an older envlock's, or planted).
_PLANT = """
import os, json
os.makedirs(f"{store}/entries/{dist}/bin", exist_ok=True)
open(f"{store}/entries/{dist}/bin/nvcc", "w").write(EVIL)
os.chmod(f"{store}/entries/{dist}/bin/nvcc", 0o755)
"""
ATTACKS = {
    "write into the cached nvcc": """
open(f"{store}/entries/{dist}/bin/nvcc", "w").write(EVIL)
""",
    "replace the cached nvcc in its folder": """
import os
os.rename(f"{store}/entries/{dist}/bin/nvcc", f"{store}/entries/{dist}/bin/.nvcc.old")
open(f"{store}/entries/{dist}/bin/nvcc", "w").write(EVIL)
""",
    "plant an entry in the shared cache": """
import os
os.makedirs(f"{pkgs}/{dist}/bin", exist_ok=True)
open(f"{pkgs}/{dist}/bin/nvcc", "w").write(EVIL)
os.chmod(f"{pkgs}/{dist}/bin/nvcc", 0o775)
""",
    "replace the entry": """
import os
os.rename(store, store + ".moved")
""" + _PLANT,
    "replace the entry and its archive": """
import os
os.rename(store, store + ".moved")
""" + _PLANT + """
for ext in (".tar.bz2", ".conda"):
    if os.path.exists(f"{pkgs}/{dist}{ext}"):
        os.rename(f"{pkgs}/{dist}{ext}", f"{pkgs}/{dist}{ext}.moved")
        open(f"{pkgs}/{dist}{ext}", "wb").write(b"not the archive")
""",
    "write into the cached wheel": """
import glob
for w in glob.glob(f"{cache}/wheels/*/*/*.whl"):
    open(w, "wb").write(EVILWHEEL)
""",
    "replace the cached wheel": """
import glob, os
for w in glob.glob(f"{cache}/wheels/*/*/*.whl"):
    d = os.path.dirname(w)
    os.rename(d, d + ".moved"); os.mkdir(d); open(w, "wb").write(EVILWHEEL)
""",
}


def _as_other(script: str, **values: object) -> subprocess.CompletedProcess[str]:
    as_other, env = second_user()
    head = "".join(f"{k} = {v!r}\n" for k, v in values.items())
    body = "\n".join(f"try:\n    exec({step!r})\nexcept OSError as e:\n    print('refused:', e)"
                     for step in [script])
    return subprocess.run([*as_other, "-c", head + body], env=env, capture_output=True, text=True, cwd="/",
                          preexec_fn=lambda: os.umask(0o002))


def _root(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ENVLOCK_MIRRORS",)}
    env.update({"ENVLOCK_CACHE_DIR": str(cache), "NO_COLOR": "1", "ENVLOCK_HTTP_RETRIES": "0"})
    return subprocess.run([sys.executable, "-m", "envlock", *args], env=env, capture_output=True, text=True,
                          timeout=300, preexec_fn=lambda: os.umask(0o002))


@pytest.fixture
def group(tmp_path: Path):
    """A base dir the second user can reach, a group cache in it, the channel, a wheel server and the lock."""
    second_user()  # skips where there is no second user
    with open_dir("envlock-sec-cache-") as base:
        cache = base / "cache"
        cache.mkdir()
        os.chown(cache, -1, GID)
        cache.chmod(0o2775)
        chan = base / "chan" / "conda-forge"
        specs = [tool(), python311()]
        for s in specs:
            write_package(s, chan / s.subdir)
        index_channel(chan, write_zst=False, write_shards=False)
        wheel = build_wheel("ninja", "1.11.1", files={"ninja/__init__.py": "REAL = True\n"})
        evil = build_wheel("ninja", "1.11.1", files={"ninja/__init__.py": "EVIL = True\n"})
        with AnyPathServer({wheel.filename: wheel.data}) as server:
            lock = write_lock(base / "lock" / "conda-lock.yml",
                              [locked(s, chan / s.subdir / s.filename) for s in specs],
                              [wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{wheel.filename}", wheel.data)])
            yield {"base": base, "cache": cache, "chan": chan, "lock": lock, "dist": tool().dist_name,
                   "evilwheel": evil.data}


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_another_users_change_to_a_cache_entry_never_reaches_roots_env(attack: str, offline: bool, group) -> None:
    cache, lock = group["cache"], group["lock"]
    mirror = ["--mirror", f"conda-forge={group['chan'].as_uri()}"]
    first = _root(["create", "--lock", str(lock), "-p", str(group["base"] / "env1"), *mirror], cache)
    assert first.returncode == 0, first.stderr
    _as_other(ATTACKS[attack], pkgs=str(cache / "pkgs"), store=str(cache / "pkgs" / ".envlock-trust" / "0"),
              dist=group["dist"], cache=str(cache), EVIL=EVIL, EVILWHEEL=group["evilwheel"])
    prefix = group["base"] / "env2"
    done = _root(["create", "--lock", str(lock), "-p", str(prefix), *(["--offline"] if offline else mirror)], cache)
    if offline and attack in ("replace the entry and its archive", "replace the cached wheel"):
        # nothing left to check it against without a network: refused, named
        assert_refused(done, group["dist"] if "entry" in attack else ".whl")
        assert not prefix.exists()
        return
    assert done.returncode == 0, done.stdout + done.stderr
    nvcc = subprocess.run([str(prefix / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
    assert REAL in nvcc.stdout and "EVIL" not in nvcc.stdout
    site = prefix / "lib" / "python3.11" / "site-packages" / "ninja" / "__init__.py"
    assert site.read_text() == "REAL = True\n"
    if attack in ("replace the entry", "replace the entry and its archive"):
        # what a group member can still do (the cache dir is theirs to write): seen, and named
        said = flat(done.stderr)  # the notice is folded to 80 columns: a long cache path is cut after a '/'
        assert f"{cache}/pkgs/.envlock-trust/0 (your records" in said and "replaced by another user" in said, said
    if attack == "replace the cached wheel":
        assert ".whl" in done.stderr and "not the one you verified" in flat(done.stderr), done.stderr
    # root's first env was not changed through the cache either
    assert "EVIL" not in (group["base"] / "env1" / "bin" / "nvcc").read_text()


def test_a_mirror_copies_wheels_so_editing_it_never_edits_the_cache(tmp_path: Path) -> None:
    chan = tmp_path / "chan"
    spec = python311()
    archive = write_package(spec, chan / "linux-64")
    wheel = build_wheel("ninja", "1.11.1")
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    with AnyPathServer({wheel.filename: wheel.data}) as server:
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [locked(spec, archive, (chan / "linux-64").as_uri()
                                                                        + "/" + archive.name)],
                          [wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{wheel.filename}", wheel.data)])
        done = subprocess.run([sys.executable, "-m", "envlock", "mirror", "--lock", str(lock), str(tmp_path / "m")],
                              env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    mirrored = tmp_path / "m" / "pypi" / "files" / wheel.filename
    cached = next((tmp_path / "cache" / "wheels").glob(f"*/*/{wheel.filename}"))
    assert mirrored.stat().st_ino != cached.stat().st_ino and mirrored.stat().st_nlink == 1
    with zipfile.ZipFile(mirrored, "a") as zf:
        zf.writestr("ninja/extra.py", "x = 1\n")
    assert cached.read_bytes() == wheel.data
