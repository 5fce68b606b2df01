"""The smaller breaks of issue 22 that are part A's: plain http off loopback in create/pack/mirror, a lock's file://
URL read outside any channel (and its sha256 printed), what killed runs left, a disk full while extracting called
"not a valid conda package", a same-size corrupted mirror file kept, a toolchain-only archive unpacked over a
full env leaving the old PyPI part, and a sparse pack member writing far more than the archive holds.

On main before the fix (b459711) each test below failed: create/pack/mirror fetched over plain http from a
non-loopback host; `file:///etc/passwd` made the error print its sha256; pkgs/.envlock-fetch-* and
cache/unpack/unpack-* stayed forever; ENOSPC while extracting said "re-lock"; re-running mirror kept the damaged
file; bin/torchrun and site-packages/<pkg> stayed; the sparse member wrote 64 MB before its hash was checked.
"""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from tests.channelbuilder import PackageSpec, index_channel, write_package
from tests.paused_envlock import LAUNCHER
from tests.reliability.test_security import _non_loopback_ip
from tests.security.hostile import (
    AnyPathServer, assert_refused, built, cli_env, craft_archive, envlock, locked, python311, tool, wheel_entry, write_lock,
)
from tests.wheelindex import build_wheel

MB = 1 << 20


# --------------------------------------------------------------------------- plain http off loopback


@pytest.mark.parametrize("command", ["create", "pack", "mirror"])
@pytest.mark.parametrize("where", ["package URL", "wheel URL", "mirror"])
def test_create_pack_and_mirror_refuse_plain_http_off_loopback(command: str, where: str, tmp_path: Path) -> None:
    ip = _non_loopback_ip()
    spec, py = tool(), python311()
    chan = tmp_path / "chan"
    wheel = build_wheel("ninja", "1.11.1")
    with AnyPathServer({spec.filename: write_package(spec, chan / "linux-64").read_bytes(), wheel.filename: wheel.data},
                       host=ip) as server:
        local = (chan / "linux-64").as_uri()
        pkg_url = f"{server.url}/conda-forge/linux-64/{spec.filename}" if where == "package URL" else \
            f"https://conda.anaconda.org/conda-forge/linux-64/{spec.filename}"
        pkgs = [locked(spec, chan / "linux-64" / spec.filename, pkg_url), built(py, chan, url=f"{local}/{py.filename}")]
        wheels = [wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{wheel.filename}", wheel.data)] \
            if where == "wheel URL" else []
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", pkgs, wheels)
        mirror = {"mirror": ["--mirror", f"conda-forge={server.url}/conda-forge"], "package URL": [],
                  "wheel URL": ["--mirror", f"conda-forge={chan.as_uri()}"]}[where]
        args = {"create": ["-p", str(tmp_path / "env")], "pack": ["-o", str(tmp_path / "x.tar")],
                "mirror": [str(tmp_path / "m")]}[command]
        env = cli_env(tmp_path)
        done = envlock(command, "--lock", str(lock), *args, *mirror, env=env)
        assert_refused(done, "plain http")
        assert "--allow-insecure" in done.stderr and server.paths == []  # refused before any request
        assert not (tmp_path / "env").exists() and not (tmp_path / "x.tar").exists()
        if command == "create":  # and the way out works
            done = envlock(command, "--lock", str(lock), *args, *mirror, "--allow-insecure", env=env)
            assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("where", ["PIP_INDEX_URL", "pip.conf extra-index-url", "--mirror pypi=", "torch metadata"])
def test_resolve_refuses_a_plain_http_package_index_off_loopback(where: str, tmp_path: Path,
                                                                  test_channel_url: str) -> None:
    """docs/security.md: the package indexes the user names are refused over plain http off loopback as channels are
    (issue 33.8). resolve checked its channels only: uv and the torch metadata lookup asked an http index."""
    ip = _non_loopback_ip()
    with AnyPathServer({}, host=ip) as server:
        index = f"{server.url}/simple/"
        env = cli_env(tmp_path, PIP_CONFIG_FILE=os.devnull)
        torch = ["--torch", "2.16.0" if where == "torch metadata" else "2.3.0"]  # 2.16.0: not in envlock's table
        if where in ("PIP_INDEX_URL", "torch metadata"):
            env["PIP_INDEX_URL"] = index
        if where == "pip.conf extra-index-url":
            (tmp_path / "pip.conf").write_text(f"[global]\nextra-index-url = {index}\n")
            env["PIP_CONFIG_FILE"] = str(tmp_path / "pip.conf")
        mirror = ["--mirror", f"pypi={index}"] if where == "--mirror pypi=" else []
        args = ["resolve", *torch, "--platform", "linux-64", "--mirror", f"conda-forge={test_channel_url}", *mirror,
                "--project-dir", str(tmp_path / "p")]
        done = envlock(*args, env=env)
        error = assert_refused(done, "plain http", "package index")
        assert "--allow-insecure" in done.stderr, error
        assert server.paths == [] and not (tmp_path / "p" / "locks").exists()  # refused before any request


# --------------------------------------------------------------------------- file:// URLs in a lock


def test_a_lock_cannot_make_envlock_read_or_hash_a_file_outside_any_channel(tmp_path: Path) -> None:
    secret = Path("/etc/passwd")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest() if secret.is_file() else "x" * 64
    spec = tool()
    stray = write_package(spec, tmp_path / "not-a-channel" / "linux-64")  # a real archive, in no channel
    base = {"md5": "0" * 32, "sha256": "0" * 64}
    cases = {
        "/etc/passwd as a package": locked(spec, stray, "file:///etc/passwd", **base),
        "/etc/passwd with dots": locked(spec, stray, "file:///etc/../etc/passwd", **base),
        "an archive in no channel": locked(spec, stray, stray.as_uri()),
    }
    for what, pkg in cases.items():
        lock = write_lock(tmp_path / "lock" / what / "conda-lock.yml", [pkg], index=False)
        for command, args in (("create", ["-p", str(tmp_path / "env")]), ("pack", ["-o", str(tmp_path / "x.tar")])):
            done = envlock(command, "--lock", str(lock), *args, env=cli_env(tmp_path))
            assert_refused(done)
            assert digest not in done.stdout + done.stderr, (what, command)
        assert not (tmp_path / "env").exists()
    link = tmp_path / "chan" / "linux-64"
    write_package(spec, link)
    index_channel(link.parent, write_zst=False, write_shards=False)  # a real channel listing the name...
    (link / spec.filename).unlink()
    (link / spec.filename).symlink_to("/etc/passwd")  # ...whose file became a link to /etc/passwd
    pkg = locked(spec, stray, (link / spec.filename).as_uri(), **base)
    done = envlock("create", "--lock", str(write_lock(tmp_path / "l2" / "conda-lock.yml", [pkg], index=False)),
                   "-p", str(tmp_path / "env"), env=cli_env(tmp_path))
    assert_refused(done)
    assert digest not in done.stdout + done.stderr


def test_a_wheel_file_url_is_read_only_inside_an_index_or_mirror_the_user_names(tmp_path: Path) -> None:
    chan = tmp_path / "chan"
    py = built(python311(), chan, url=(chan / "linux-64").as_uri() + "/" + python311().filename)
    wheel = build_wheel("ninja", "1.11.1")
    outside = tmp_path / "elsewhere" / wheel.filename
    outside.parent.mkdir()
    outside.write_bytes(wheel.data)
    lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [py],
                      [wheel_entry("ninja", "1.11.1", outside.as_uri(), wheel.data)])
    env = cli_env(tmp_path, PIP_INDEX_URL=(tmp_path / "index" / "simple").as_uri())
    done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"), env=env)
    assert_refused(done, "ninja")
    assert not (tmp_path / "env").exists()
    # the same file under the index the user's pip configuration names is read
    env["PIP_INDEX_URL"] = (tmp_path / "elsewhere" / "simple").as_uri()
    done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"), env=env)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------- what killed runs leave


def test_what_a_killed_create_and_a_killed_unpack_left_is_removed_by_the_next_run(tmp_path: Path) -> None:
    spec = tool(files={"lib/big.bin": os.urandom(2 * MB)})
    chan = tmp_path / "chan" / "conda-forge"
    archive = write_package(spec, chan / "linux-64")
    index_channel(chan, write_zst=False, write_shards=False)
    lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [locked(spec, archive)])
    env = cli_env(tmp_path)
    cache = tmp_path / "cache"
    # a create killed while it downloads (the server sends the headers, then sits on the body)
    with AnyPathServer({spec.filename: archive.read_bytes()}, stall=30) as server:
        proc = subprocess.Popen([*LAUNCHER, "create", "--lock", str(lock), "-p", str(tmp_path / "env"),
                                 "--mirror", f"conda-forge={server.url}/conda-forge"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not server.paths and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    left = list((cache / "pkgs").glob(".envlock-fetch-*"))
    assert left, "the killed create left no work folder (the test did not kill it mid-download)"
    # an unpack killed while it extracts: its work folder under cache/unpack/
    (cache / "unpack" / "unpack-killed").mkdir(parents=True)
    (cache / "unpack" / "unpack-killed" / "half.tar.bz2").write_bytes(b"x" * 1000)
    live = cache / "unpack" / "unpack-live"  # a run still at work holds its folder: it is never removed
    live.mkdir()
    import fcntl

    held = os.open(live, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        old = time.time() - 3600
        for p in [*left, cache / "unpack" / "unpack-killed", live]:
            os.utime(p, (old, old))
        done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"),
                       "--mirror", f"conda-forge={chan.as_uri()}", env=env)
        assert done.returncode == 0, done.stderr
        assert not list((cache / "pkgs").glob(".envlock-fetch-*"))
        pack = envlock("pack", "--lock", str(lock), "-o", str(tmp_path / "p.tar"), "--mirror",
                       f"conda-forge={chan.as_uri()}", env=env)
        assert pack.returncode == 0, pack.stderr
        done = envlock("unpack", str(tmp_path / "p.tar"), "-p", str(tmp_path / "env2"), env=env)
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in (cache / "unpack").iterdir()) == ["unpack-live"]
    finally:
        os.close(held)


# --------------------------------------------------------------------------- disk full while extracting


def test_a_disk_full_while_extracting_says_so_not_re_lock(tmp_path: Path) -> None:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root and a tmpfs mount to fill a disk")
    try:
        spec = tool(files={"lib/big.bin": b"\0" * (8 * MB)})  # a small archive, too big once unpacked
        chan = tmp_path / "chan" / "conda-forge"
        archive = write_package(spec, chan / "linux-64")
        index_channel(chan, write_zst=False, write_shards=False)
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [locked(spec, archive)])
        env = {**cli_env(tmp_path), "ENVLOCK_CACHE_DIR": str(mnt / "cache")}
        done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"), "--mirror",
                       f"conda-forge={chan.as_uri()}", env=env)
        error = assert_refused(done)
        assert "re-lock" not in done.stderr and "not a valid conda package" not in done.stderr, done.stderr
        assert "space" in error + done.stderr and not (tmp_path / "env").exists()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# --------------------------------------------------------------------------- mirror repairs


@pytest.mark.parametrize("what", ["conda archive", "wheel"])
def test_re_running_mirror_repairs_a_damaged_file_of_the_same_size(what: str, tmp_path: Path) -> None:
    chan = tmp_path / "chan"
    spec, py = tool(), python311()
    pkgs = [built(s, chan, url=(chan / "linux-64").as_uri() + "/" + s.filename) for s in (spec, py)]
    wheel = build_wheel("ninja", "1.11.1")
    env = cli_env(tmp_path)
    with AnyPathServer({wheel.filename: wheel.data}) as server:
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", pkgs,
                          [wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{wheel.filename}", wheel.data)])
        assert envlock("mirror", "--lock", str(lock), str(tmp_path / "m"), env=env).returncode == 0
        damaged = next((tmp_path / "m").rglob(spec.filename if what == "conda archive" else wheel.filename))
        good = damaged.read_bytes()
        data = bytearray(good)
        data[len(data) // 2] ^= 0xFF  # one byte flipped: same size, same name
        damaged.write_bytes(bytes(data))
        again = envlock("mirror", "--lock", str(lock), str(tmp_path / "m"), env=env)
    assert again.returncode == 0, again.stderr
    assert damaged.read_bytes() == good


# --------------------------------------------------------------------------- unpack over a full env


def test_a_toolchain_only_archive_unpacked_over_a_full_env_leaves_no_old_pypi_part(tmp_path: Path) -> None:
    chan = tmp_path / "chan"
    spec, py = tool(), python311()
    pkgs = [built(s, chan, url=(chan / "linux-64").as_uri() + "/" + s.filename) for s in (spec, py)]
    torch = build_wheel("torch", "2.7.0", files={"torch/__init__.py": "OLD = True\n"},
                        entry_points={"torchrun": "torch:main"})
    env = cli_env(tmp_path)
    prefix = tmp_path / "env"
    with AnyPathServer({torch.filename: torch.data}) as server:
        full = write_lock(tmp_path / "full" / "conda-lock.yml", pkgs,
                          [wheel_entry("torch", "2.7.0", f"{server.url}/simple/torch/{torch.filename}", torch.data)])
        assert envlock("create", "--lock", str(full), "-p", str(prefix), env=env).returncode == 0
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert (prefix / "bin" / "torchrun").is_file() and (site / "torch" / "__init__.py").is_file()
    toolchain = write_lock(tmp_path / "tc" / "locks" / "hostile" / "conda-lock.yml", [pkgs[0]])
    done = envlock("pack", "--lock", str(toolchain), "-o", str(tmp_path / "tc.tar"), env=env)
    assert done.returncode == 0, done.stderr
    done = envlock("unpack", str(tmp_path / "tc.tar"), "-p", str(prefix), env=env)
    assert done.returncode == 0, done.stderr
    assert not (prefix / "bin" / "torchrun").exists() and not (site / "torch").exists()
    assert not list(site.glob("torch-*.dist-info")) if site.exists() else True
    assert (prefix / "bin" / "nvcc").is_file()


# --------------------------------------------------------------------------- pack member sizes


def _sparse_member(name: str, realsize: int) -> tuple[tarfile.TarInfo, bytes]:
    """A GNU sparse 1.0 member (PAX): a few bytes stored, `realsize` bytes of it when extracted."""
    data = b"tail"
    sparse_map = f"1\n{realsize - len(data)}\n{len(data)}\n".encode().ljust(512, b"\0")
    info = tarfile.TarInfo(name)
    info.size = len(sparse_map) + len(data)
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": name,
                        "GNU.sparse.realsize": str(realsize)}
    return info, sparse_map + data


@pytest.mark.parametrize("how", ["sparse", "larger than recorded", "larger than the archive"])
def test_pack_members_are_checked_against_the_manifest_before_extraction(how: str, tmp_path: Path) -> None:
    spec = tool()
    archive = write_package(spec, tmp_path / "b" / "linux-64")
    lock = write_lock(tmp_path / "lk" / "conda-lock.yml", [locked(spec, archive)])
    member = f"channels/conda-forge/linux-64/{spec.filename}"
    tar = craft_archive(tmp_path, lock.read_text(), {member: archive.read_bytes()}, {"pypi": None})
    real = 64 * MB
    big = hashlib.sha256(b"\0" * (real - 4) + b"tail").hexdigest()
    # the attacker's own archive: the manifest records what the sparse member expands to
    with tarfile.open(tar) as tf:
        names = tf.getnames()
        manifest = tf.extractfile(names[0]).read()  # type: ignore[union-attr]
    import json

    doc = json.loads(manifest)
    doc["members"]["channels/conda-forge/linux-64/blob.bin"] = big
    if how == "larger than recorded":
        doc["sizes"] = {"channels/conda-forge/linux-64/blob.bin": 10}
    out = tmp_path / "evil.tar"
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tf:
        data = (json.dumps(doc) + "\n").encode()
        info = tarfile.TarInfo(names[0])
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        if how == "sparse":
            info, payload = _sparse_member("channels/conda-forge/linux-64/blob.bin", real)
        else:  # a header that claims more than the file holds: the reader fails part way, after writing it
            info = tarfile.TarInfo("channels/conda-forge/linux-64/blob.bin")
            payload = b"\0" * (2 * MB)
            info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
        with tarfile.open(tar) as src:
            for m in src.getmembers()[1:]:
                tf.addfile(m, src.extractfile(m))
    if how == "larger than the archive":
        raw = bytearray(out.read_bytes())  # patch the size field of blob.bin's header: 64 MB, octal
        at = raw.find(b"channels/conda-forge/linux-64/blob.bin\0")
        raw[at + 124:at + 136] = f"{real:011o}\0".encode()
        chk = sum(raw[at:at + 148]) + 8 * 32 + sum(raw[at + 156:at + 512])
        raw[at + 148:at + 156] = f"{chk:06o}\0 ".encode()
        out.write_bytes(bytes(raw))
    env = cli_env(tmp_path)
    started = time.monotonic()
    done = envlock("unpack", str(out), "-p", str(tmp_path / "env"), env=env)
    assert_refused(done, "blob.bin")
    assert "claims" in done.stdout + done.stderr, done.stderr
    assert not (tmp_path / "env").exists() and not list((tmp_path / "cache" / "unpack").glob("unpack-*/**/blob.bin"))
    assert time.monotonic() - started < 60
