"""The bytes envlock checked are the bytes it uses (issue 33.1), fast tier: the attack runs at the exact moment
between the check and the use, through a hook on envlock's own seams (in-process, deterministic).

The attacker here is this test writing files (and, for "another user's inode", giving them to uid 65534 with
chown, as root can): tests/security/test_bytes_used_slow.py runs the same races with a real second user.

* an archive (the kept one, a file:// mirror's) replaced right after envlock read it to check it;
* a package cache entry planted, or this user's store replaced, right before rattler links;
* a cached wheel replaced by another user's inode holding the same bytes, which is rewritten after the check;
* a file inside an extracted entry replaced (same size and mtime) or rewritten in place (mtime put back).

On e081238 every one of them ended with the other bytes in the env (checked: PYTHONPATH=/tmp/old-e081238, the
old tree, with this file copied in; see /work/team/reports/cachetrust.md).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.channelbuilder import write_package
from tests.output import flat
from tests.security.hostile import AnyPathServer, NVCC, locked, python311, tool, wheel_entry, write_lock
from tests.wheelindex import build_wheel

REAL = NVCC.format(v="12.1")
EVIL = REAL.replace("Cuda", "EVIL")  # the same size
OTHER = 65534


def _create(lock: Path, prefix: Path, cache: Path, chan: Path, **kw: Any) -> Any:
    from envlock.usecases.create import CreateRequest, create_env

    return create_env(CreateRequest(lock, prefix, "linux-64", cache_dir=cache,
                                    mirrors={"conda-forge": chan.as_uri()}, **kw))


def _nvcc(prefix: Path) -> str:
    return subprocess.run([str(prefix / "bin" / "nvcc")], capture_output=True, text=True, check=False).stdout


def _foreign(root: Path) -> list[str]:
    """Files under `root` whose inode another user owns."""
    me = os.geteuid()
    return [str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_uid != me]


@pytest.fixture
def chan(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A channel with the real nvcc package and, elsewhere, an evil build under the same file name; the lock."""
    good = tmp_path / "chan" / "conda-forge"
    archive = write_package(tool(), good / "linux-64")
    evil = write_package(tool(files={"bin/nvcc": EVIL}), tmp_path / "evil" / "linux-64")
    assert evil.name == archive.name and evil.read_bytes() != archive.read_bytes()
    lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [locked(tool(), archive)])
    yield {"chan": good, "archive": archive, "evil": evil, "lock": lock, "cache": tmp_path / "cache" / "pkgs",
           "dist": tool().dist_name}


def _after_read(monkeypatch: pytest.MonkeyPatch, path: Path, act: Callable[[], None]) -> list[bool]:
    """`act()` once, right after envlock first reads `path` to check it: a hash of the path (e081238) or the copy
    hashed as it is copied (now): whichever envlock has."""
    from envlock.seams.conda import cache as pkgcache
    from envlock.seams.conda import fetch

    fired: list[bool] = []
    for module in (fetch, pkgcache):
        for name in ("hash_file", "copy_hashed"):
            real = getattr(module, name, None)
            if real is None:
                continue

            def wrapped(src: Path, *a: Any, _real: Any = real, **kw: Any) -> Any:
                out = _real(src, *a, **kw)
                if Path(src) == path and not fired:
                    fired.append(True)
                    act()
                return out

            monkeypatch.setattr(module, name, wrapped)
    return fired


def test_the_kept_archive_swapped_after_its_check_is_never_extracted(chan: dict[str, Any], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock.formats import read_lock
    from envlock.seams.conda import cache as pkgcache

    cache = chan["cache"]
    _create(chan["lock"], tmp_path / "env1", cache, chan["chan"])
    pkg = read_lock(chan["lock"]).packages_for("linux-64")[0]
    pkgcache.forget(cache, pkg)  # the entry goes: the next create extracts the kept archive again
    kept = cache / pkg.filename
    fired = _after_read(monkeypatch, kept, lambda: shutil.copyfile(chan["evil"], kept))
    _create(chan["lock"], tmp_path / "env2", cache, chan["chan"], offline=True)
    assert fired, "the hook never ran: envlock no longer reads the kept archive"
    assert _nvcc(tmp_path / "env2") == "Cuda compilation tools, release 12.1, V12.1.1\n"


@pytest.mark.parametrize("offline_after", [False, True], ids=["then-online", "then-offline"])
def test_a_mirror_file_swapped_after_its_check_is_never_what_is_kept_or_extracted(
        chan: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_after: bool) -> None:
    cache, source = chan["cache"], chan["archive"]
    fired = _after_read(monkeypatch, source, lambda: shutil.copyfile(chan["evil"], source))
    _create(chan["lock"], tmp_path / "env1", cache, chan["chan"])
    assert fired
    assert "EVIL" not in _nvcc(tmp_path / "env1")
    assert (cache / source.name).read_bytes() != chan["evil"].read_bytes()  # what was kept: the checked bytes
    monkeypatch.undo()
    _create(chan["lock"], tmp_path / "env2", cache, chan["chan"], offline=offline_after)
    assert "EVIL" not in _nvcc(tmp_path / "env2") and "release 12.1" in _nvcc(tmp_path / "env2")


def test_envlock_mirror_keeps_the_checked_bytes_of_a_file_mirror(chan: dict[str, Any], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """channeldir (`envlock mirror`, `pack`): a file:// source swapped after its check is not what lands."""
    import hashlib

    from envlock.formats import read_lock
    from envlock.usecases.channeldir import store_packages

    source = chan["archive"]
    want = hashlib.sha256(source.read_bytes()).hexdigest()
    fired = _after_read(monkeypatch, source, lambda: shutil.copyfile(chan["evil"], source))
    packages = read_lock(chan["lock"]).packages_for("linux-64")
    out = tmp_path / "mirror"
    out.mkdir()
    store_packages(out, packages, mirrors={"conda-forge": chan["chan"].as_uri()}, jobs=1)
    assert fired
    landed = [p for p in out.rglob(source.name)]
    assert landed and all(hashlib.sha256(p.read_bytes()).hexdigest() == want for p in landed)


def _before_link(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> list[bool]:
    """`act()` right before rattler links (after create read every entry's info/index.json)."""
    from envlock.seams.conda import install

    real, fired = install.link, []

    def link(*a: Any, **kw: Any) -> None:
        if not fired:
            fired.append(True)
            act()
        real(*a, **kw)

    monkeypatch.setattr(install, "link", link)
    return fired


def _evil_entry(src_archive: Path, dest: Path, owner: int) -> None:
    """An extracted entry of the evil package at `dest`, every inode owned by `owner`."""
    from rattler.package_streaming import extract

    if os.path.lexists(dest):
        os.rename(dest, dest.with_name(dest.name + ".moved"))
    extract(src_archive, dest)
    for p in [dest, *dest.rglob("*")]:
        os.lchown(p, owner, owner)


@pytest.mark.parametrize("owner", [OTHER, 0], ids=["another-users-inodes", "roots-inodes"])
@pytest.mark.parametrize("where", ["the shared entry", "the private store"])
def test_an_entry_swapped_before_the_link_is_never_linked(chan: dict[str, Any], tmp_path: Path, owner: int,
                                                          where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the planted files to another user")
    cache = chan["cache"]
    _create(chan["lock"], tmp_path / "env1", cache, chan["chan"])

    def swap() -> None:
        if where == "the shared entry":  # where e081238 kept (and rattler read) the entry
            _evil_entry(chan["evil"], cache / chan["dist"], owner)
            (cache / f"{chan['dist']}.lock").write_bytes((cache / f"{chan['dist']}.lock").read_bytes()
                                                        if (cache / f"{chan['dist']}.lock").exists() else b"")
        else:  # this user's store renamed away, another put in its place
            store = cache / ".envlock-trust" / str(os.geteuid())
            os.rename(store, store.with_name(store.name + ".moved"))
            shutil.copytree(store.with_name(store.name + ".moved"), store, symlinks=True)
            for entry in [p for p in store.rglob(chan["dist"]) if p.is_dir()]:
                _evil_entry(chan["evil"], entry, owner)

    fired = _before_link(monkeypatch, swap)
    _create(chan["lock"], tmp_path / "env2", cache, chan["chan"])
    assert fired
    assert "EVIL" not in _nvcc(tmp_path / "env2") and "release 12.1" in _nvcc(tmp_path / "env2")
    assert not _foreign(tmp_path / "env2")


def _sealed_nvcc(cache: Path, lock: Path) -> Path:
    from envlock.formats import read_lock
    from envlock.seams.conda import cache as pkgcache

    hit = pkgcache.cached(cache, read_lock(lock).packages_for("linux-64")[0])
    assert hit is not None and hit.path is not None
    return hit.path / "bin" / "nvcc"


def _replace_same_size_and_mtime(nvcc: Path) -> None:
    st = os.lstat(nvcc)
    parent = nvcc.parent
    os.chmod(parent, 0o755)
    tmp = parent / ".nvcc.new"
    tmp.write_text(EVIL)
    os.chmod(tmp, stat.S_IMODE(st.st_mode))
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, nvcc)
    os.chmod(parent, stat.S_IMODE(os.lstat(parent).st_mode) & ~0o022)


def _rewrite_in_place(nvcc: Path) -> None:
    st = os.lstat(nvcc)
    with open(nvcc, "r+") as fh:  # root writes a sealed file all the same
        fh.write(EVIL)
    os.utime(nvcc, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.lstat(nvcc).st_mtime_ns == st.st_mtime_ns and os.lstat(nvcc).st_size == st.st_size


@pytest.mark.parametrize("env1", ["kept", "removed"])
@pytest.mark.parametrize("change", [_replace_same_size_and_mtime, _rewrite_in_place], ids=["new-inode", "same-inode"])
def test_a_file_changed_inside_an_extracted_entry_is_seen_at_use(chan: dict[str, Any], tmp_path: Path,
                                                                 change: Callable[[Path], None], env1: str,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    """Same size, same mtime: a new inode, or the same inode with new bytes (the env linked from it kept, or
    removed: the link count moved back). The next create links the locked bytes, and says the entry changed."""
    cache = chan["cache"]
    _create(chan["lock"], tmp_path / "env1", cache, chan["chan"])
    if env1 == "removed":
        shutil.rmtree(tmp_path / "env1")  # its links go: every file's ctime moved, for a reason
        _create(chan["lock"], tmp_path / "env0", cache, chan["chan"])  # not a change: used as it is
        assert "not the one you verified" not in flat(capfd.readouterr().err)
    nvcc = _sealed_nvcc(cache, chan["lock"])
    change(nvcc)
    capfd.readouterr()
    _create(chan["lock"], tmp_path / "env2", cache, chan["chan"])
    assert "EVIL" not in _nvcc(tmp_path / "env2") and "release 12.1" in _nvcc(tmp_path / "env2")
    assert chan["dist"] in capfd.readouterr().err


@pytest.fixture
def wheel_lock(tmp_path: Path) -> Iterator[dict[str, Any]]:
    chan = tmp_path / "chan" / "conda-forge"
    specs = [tool(), python311()]
    archives = [write_package(s, chan / s.subdir) for s in specs]
    wheel = build_wheel("ninja", "1.11.1", files={"ninja/__init__.py": "REAL = True\n"})
    evil = build_wheel("ninja", "1.11.1", files={"ninja/__init__.py": "EVIL = True\n"})
    with AnyPathServer({wheel.filename: wheel.data}) as server:
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [locked(s, a) for s, a in zip(specs, archives)],
                          [wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{wheel.filename}", wheel.data)])
        yield {"chan": chan, "lock": lock, "cache": tmp_path / "cache", "wheel": wheel, "evil": evil}


@pytest.mark.parametrize("rewrite", [False, True], ids=["same-bytes", "rewritten-after-the-check"])
def test_a_cached_wheel_another_user_owns_is_never_linked_for_uv(wheel_lock: dict[str, Any], tmp_path: Path,
                                                                 rewrite: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """After fetch_wheels checked the cache, the wheel at its cache path becomes another user's inode holding the
    locked bytes (so a hash of it passes); with `rewrite`, that user rewrites it once envlock checked it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give the wheel to another user")
    from envlock.seams.pypi import wheels

    try:  # where private_links lives now; e081238 had it in wheels
        from envlock.seams.pypi import uvlinks as links
    except ImportError:
        links = wheels  # type: ignore[assignment]
    cache = wheel_lock["cache"]
    mirrors = {"conda-forge": wheel_lock["chan"].as_uri()}
    from envlock.usecases.create import CreateRequest, create_env

    def create(prefix: Path) -> None:
        create_env(CreateRequest(wheel_lock["lock"], prefix, "linux-64", cache_dir=cache / "pkgs", mirrors=mirrors))

    create(tmp_path / "env1")
    cached = next((cache / "wheels").glob(f"*/*/{wheel_lock['wheel'].filename}"))
    real_links, real_install, seen = links.private_links, wheels.install_wheels, []

    def swapping_links(paths: Any, c: Path) -> Any:
        tmp = cached.with_name(".swap")
        shutil.copyfile(cached, tmp)
        os.chown(tmp, OTHER, OTHER)
        os.chmod(tmp, 0o666)
        os.chmod(cached.parent, 0o777)
        os.replace(tmp, cached)
        return real_links(paths, c)

    def watching_install(prefix: Path, given: Any, **kw: Any) -> None:
        seen.extend((p, os.stat(p).st_uid) for p in given)
        if rewrite:
            with open(cached, "r+b") as fh:  # the other user's inode, rewritten in place
                fh.write(wheel_lock["evil"].data)
                fh.truncate()
        real_install(prefix, given, **kw)

    monkeypatch.setattr(links, "private_links", swapping_links)
    monkeypatch.setattr(wheels, "install_wheels", watching_install)
    create(tmp_path / "env2")
    assert seen and all(uid == os.geteuid() for _p, uid in seen), seen
    site = tmp_path / "env2" / "lib" / "python3.11" / "site-packages" / "ninja" / "__init__.py"
    assert site.read_text() == "REAL = True\n"


def test_envlock_mirror_copies_the_checked_wheel_not_what_is_swapped_into_the_cache(
        wheel_lock: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mirror`/`pack` (channeldir.store_wheels): the cached wheel replaced right after fetch_wheels checked it is
    never what lands in the mirror (e081238 copied the cache path again)."""
    import hashlib

    from envlock.formats import read_lock
    from envlock.seams.pypi import wheels
    from envlock.usecases.channeldir import store_wheels

    cache = wheel_lock["cache"]
    real = wheels.fetch_wheels

    def swapping(*a: Any, **kw: Any) -> Any:
        out = real(*a, **kw)
        for path in out[0]:
            os.chmod(path.parent, 0o755)
            path.unlink()
            path.write_bytes(wheel_lock["evil"].data)
        return out

    monkeypatch.setattr(wheels, "fetch_wheels", swapping)
    out = tmp_path / "mirror"
    out.mkdir()
    wanted = read_lock(wheel_lock["lock"]).pypi_for("linux-64")
    try:
        store_wheels(out, wanted, {}, mirrors={}, cache=cache)
    except Exception as exc:  # refused, named: safe too
        assert "changed in envlock's cache" in str(exc)
    landed = list(out.rglob(wheel_lock["wheel"].filename))
    good = hashlib.sha256(wheel_lock["wheel"].data).hexdigest()
    assert all(hashlib.sha256(p.read_bytes()).hexdigest() == good for p in landed), landed
