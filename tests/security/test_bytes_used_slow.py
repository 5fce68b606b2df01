"""The bytes envlock checked are the bytes it uses (issue 33.1), slow tier: the races with a real second user.

Root runs `envlock create` (and `envlock mirror`) through tests/paused_envlock.py, which stops it at a named point
(ENVLOCK_TEST_PAUSE_AT) until the test lets it go; meanwhile another member of the group cache (uid 65534,
tests/second_user.py, umask 002) makes its move at exactly that moment:

* swap after hash (`after-check`): the kept archive or a group-writable file:// mirror's file is replaced once
  envlock read it to check it (create offline and online, a fresh cache, `envlock mirror`);
* swap before link (`before-link`): an entry is planted at the shared `pkgs/<dist>`, root's private store is
  renamed away and replaced, or both, after create read every entry's info/index.json;
* wheel rewritten after hash (`before-wheel-links`, `before-uv`): the cached wheel becomes the member's inode
  holding the locked bytes (so a hash of it passes), then is rewritten in place, truncated and rewritten, or the
  folder uv reads from is replaced.

Each must end with the locked bytes in root's env (or mirror) and no inode of the member's in it. On e081238 every
test here failed (the old tree, /tmp/old-e081238, with this file and tests/paused_envlock.py copied in).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.channelbuilder import index_channel, write_package
from tests.paused_envlock import LAUNCHER, environ
from tests.second_user import GID, UID, open_dir, second_user
from tests.security.hostile import AnyPathServer, NVCC, locked, python311, tool, wheel_entry, write_lock
from tests.wheelindex import build_wheel

pytestmark = pytest.mark.slow

REAL = NVCC.format(v="12.1")
EVIL = REAL.replace("Cuda", "EVIL")


@pytest.fixture
def group() -> Iterator[dict[str, Any]]:
    """A base dir the second user can reach; a group cache (2775) and a group-writable channel in it; the real and
    the evil nvcc archive (one file name); a wheel server; the lock."""
    second_user()  # skips where there is no second user
    with open_dir("envlock-sec-race-") as base:
        cache = base / "cache"
        cache.mkdir()
        os.chown(cache, -1, GID)
        cache.chmod(0o2775)
        chan = base / "chan" / "conda-forge"
        specs = [tool(), python311()]
        archives = [write_package(s, chan / s.subdir) for s in specs]
        index_channel(chan, write_zst=False, write_shards=False)
        for p in [chan.parent, *chan.rglob("*"), chan]:
            os.chmod(p, 0o777 if p.is_dir() else 0o666)  # a mirror the group may write
        evil = write_package(tool(files={"bin/nvcc": EVIL}), base / "evil" / "linux-64")
        os.chmod(evil, 0o644)
        wheel = build_wheel("ninja", "1.11.1", files={"ninja/__init__.py": "REAL = True\n"})
        bad = build_wheel("ninja", "1.11.1", files={"ninja/__init__.py": "EVIL = True\n"})
        with AnyPathServer({wheel.filename: wheel.data}) as server:
            lock = write_lock(base / "lock" / "conda-lock.yml", [locked(s, a) for s, a in zip(specs, archives)],
                              [wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{wheel.filename}",
                                           wheel.data)])
            (base / "pauses").mkdir()
            os.chmod(base / "pauses", 0o777)
            yield {"base": base, "cache": cache, "chan": chan, "lock": lock, "dist": tool().dist_name,
                   "archive": archives[0], "evil": evil, "wheel": wheel, "bad": bad,
                   "store": cache / "pkgs" / ".envlock-trust" / "0", "pkgs": cache / "pkgs"}


def _env(g: dict[str, Any], points: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ENVLOCK_MIRRORS",)}
    env.update({"ENVLOCK_CACHE_DIR": str(g["cache"]), "NO_COLOR": "1", "ENVLOCK_HTTP_RETRIES": "0"})
    if points:
        env["ENVLOCK_TEST_PAUSE_AT"] = f"{g['base'] / 'pauses'}:{points}"
    return environ(env)


def _mirror(g: dict[str, Any]) -> list[str]:
    return ["--mirror", f"conda-forge={g['chan'].as_uri()}"]


def _root(g: dict[str, Any], args: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*LAUNCHER, *args], env=_env(g), capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: os.umask(0o002), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _as_other(script: str, **values: object) -> str:
    """The second user runs `script` (values bound as globals); its output (a refused step says so)."""
    as_other, env = second_user()
    head = "".join(f"{k} = {v!r}\n" for k, v in values.items())
    done = subprocess.run([*as_other, "-c", head + script], env=env, capture_output=True, text=True, cwd="/",
                          preexec_fn=lambda: os.umask(0o002), timeout=120, check=False)
    return done.stdout + done.stderr


def _raced(g: dict[str, Any], args: list[str], moves: dict[str, str], **values: object) -> subprocess.CompletedProcess[str]:
    """Root's `envlock ARGS` stopped at each point of `moves` (in order) while the second user runs its script."""
    pauses = g["base"] / "pauses"
    proc = subprocess.Popen([*LAUNCHER, *args], env=_env(g, ",".join(moves)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.umask(0o002))
    said = []
    try:
        for point, script in moves.items():
            deadline = time.monotonic() + 180
            while not (pauses / f"{point}.reached").exists():
                assert proc.poll() is None, f"envlock ended before {point}: {proc.communicate()}"
                assert time.monotonic() < deadline, f"never reached {point}"
                time.sleep(0.02)
            said.append(_as_other(script, **values))
            (pauses / f"{point}.go").touch()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(args, proc.returncode, out, err + "\n".join(said))


def _values(g: dict[str, Any]) -> dict[str, object]:
    return {"pkgs": str(g["pkgs"]), "store": str(g["store"]), "dist": g["dist"], "cache": str(g["cache"]),
            "evil": str(g["evil"]), "source": str(g["archive"]), "kept": str(g["pkgs"] / g["archive"].name),
            "BAD": g["bad"].data, "GOOD": g["wheel"].data, "wheel": g["wheel"].filename}


def _clean(prefix: Path) -> None:
    """The locked nvcc, and no inode of the second user's in the env."""
    out = subprocess.run([str(prefix / "bin" / "nvcc")], capture_output=True, text=True, check=False).stdout
    assert out == "Cuda compilation tools, release 12.1, V12.1.1\n", out
    theirs = [p for p in prefix.rglob("*") if not p.is_symlink() and p.stat().st_uid == UID]
    assert not theirs, theirs


# --------------------------------------------------------------------------- swap after hash

SWAP_FILE = """
import os, shutil
os.rename(target, target + ".moved")
shutil.copyfile(evil, target)
"""


@pytest.mark.parametrize("variant", ["kept archive, offline", "kept archive, online", "mirror file, fresh cache"])
def test_an_archive_swapped_after_its_check_is_never_used(group: dict[str, Any], variant: str) -> None:
    g = group
    args = ["create", "--lock", str(g["lock"]), *_mirror(g)]
    if variant.startswith("kept"):
        _root(g, [*args, "-p", str(g["base"] / "env1")])
        subprocess.run(["rm", "-rf", str(g["store"])], check=True)  # root's entries go: the kept archive is used
        target = str(g["pkgs"] / g["archive"].name)
        extra = ["--offline"] if "offline" in variant else []
    else:
        target, extra = str(g["archive"]), []
    prefix = g["base"] / "env2"
    done = _raced(g, [*args, "-p", str(prefix), *extra], {"after-check": SWAP_FILE}, **_values(g), target=target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "refused" not in done.stderr and "Error" not in done.stderr.split("envlock-test")[-1], done.stderr
    _clean(prefix)


def test_envlock_mirror_keeps_the_checked_bytes_when_the_source_is_swapped(group: dict[str, Any]) -> None:
    g = group
    out = g["base"] / "mirror-out"
    want = hashlib.sha256(g["archive"].read_bytes()).hexdigest()
    done = _raced(g, ["mirror", "--lock", str(g["lock"]), *_mirror(g), str(out)], {"after-check": SWAP_FILE},
                  **_values(g), target=str(g["archive"]))
    assert done.returncode == 0, done.stdout + done.stderr
    landed = list(out.rglob(g["archive"].name))
    assert landed and all(hashlib.sha256(p.read_bytes()).hexdigest() == want for p in landed)


# --------------------------------------------------------------------------- swap before link

PLANT_SHARED = """
import os
from rattler.package_streaming import extract
if os.path.lexists(f"{pkgs}/{dist}"):
    os.rename(f"{pkgs}/{dist}", f"{pkgs}/{dist}.moved")
extract(evil, f"{pkgs}/{dist}")
if not os.path.exists(f"{pkgs}/{dist}.lock"):
    import hashlib, struct
    open(f"{pkgs}/{dist}.lock", "wb").write(struct.pack(">Q", 1) + hashlib.sha256(open(source, "rb").read()).digest())
"""
REPLACE_STORE = """
import os, hashlib, struct
from rattler.package_streaming import extract
os.rename(store, store + ".moved")
os.makedirs(f"{store}/entries", mode=0o777)
extract(evil, f"{store}/entries/{dist}")
open(f"{store}/entries/{dist}.lock", "wb").write(struct.pack(">Q", 1) + hashlib.sha256(open(source, "rb").read()).digest())
"""


@pytest.mark.parametrize("move", ["plant at the shared entry", "replace root's store", "both"])
def test_an_entry_swapped_before_the_link_is_never_linked(group: dict[str, Any], move: str) -> None:
    g = group
    args = ["create", "--lock", str(g["lock"]), *_mirror(g)]
    _root(g, [*args, "-p", str(g["base"] / "env1")])
    script = {"plant at the shared entry": PLANT_SHARED, "replace root's store": REPLACE_STORE,
              "both": PLANT_SHARED + REPLACE_STORE}[move]
    prefix = g["base"] / "env2"
    done = _raced(g, [*args, "-p", str(prefix)], {"before-link": script}, **_values(g))
    assert done.returncode == 0, done.stdout + done.stderr
    _clean(prefix)
    _clean(g["base"] / "env1")


# --------------------------------------------------------------------------- wheel rewritten after hash

THEIR_WHEEL = """
import glob, os
for w in glob.glob(f"{cache}/wheels/*/*/{wheel}"):
    d = os.path.dirname(w)
    os.rename(d, d + ".moved"); os.mkdir(d); open(w, "wb").write(GOOD)
"""
REWRITE = """
import glob
for w in glob.glob(f"{cache}/wheels/*/*/{wheel}"):
    with open(w, "r+b") as fh:
        fh.write(BAD[:len(GOOD)])
"""
TRUNCATE = """
import glob
for w in glob.glob(f"{cache}/wheels/*/*/{wheel}"):
    with open(w, "wb") as fh:
        fh.write(BAD)
"""
SWAP_FOLDER = """
import glob, os
for d in glob.glob(f"{cache}/wheels/.envlock-install-*") + glob.glob(f"{cache}/wheels/.envlock-trust/*/install-*"):
    os.rename(d, d + ".moved"); os.mkdir(d, 0o755); open(f"{d}/{wheel}", "wb").write(BAD)
"""


@pytest.mark.parametrize("after", ["rewritten in place", "truncated and rewritten", "uv's folder replaced"])
def test_a_wheel_rewritten_after_its_check_is_never_installed(group: dict[str, Any], after: str) -> None:
    g = group
    args = ["create", "--lock", str(g["lock"]), *_mirror(g)]
    _root(g, [*args, "-p", str(g["base"] / "env1")])
    moves = {"before-wheel-links": THEIR_WHEEL,
             "before-uv": {"rewritten in place": REWRITE, "truncated and rewritten": TRUNCATE,
                           "uv's folder replaced": SWAP_FOLDER}[after]}
    prefix = g["base"] / "env2"
    done = _raced(g, [*args, "-p", str(prefix)], moves, **_values(g))
    site = prefix / "lib" / "python3.11" / "site-packages" / "ninja" / "__init__.py"
    if done.returncode != 0:  # refused (named) is safe too; but nothing of theirs installed
        assert "error:" in done.stderr and not prefix.exists(), done.stderr
        return
    assert site.read_text() == "REAL = True\n", done.stderr
    _clean(prefix)


def test_the_pause_points_exist(group: dict[str, Any]) -> None:
    """Control: each point is reached (a race test whose point is gone would test nothing)."""
    g = group
    args = ["create", "--lock", str(g["lock"]), *_mirror(g), "-p", str(g["base"] / "env0")]
    done = _raced(g, args, {"after-check": "", "before-link": "", "before-wheel-links": "", "before-uv": ""})
    assert done.returncode == 0, done.stderr
    assert all((g["base"] / "pauses" / f"{p}.reached").exists()
               for p in ("after-check", "before-link", "before-wheel-links", "before-uv"))
