"""One hostile lock through every command that writes files (issue 22, Build 3): `create`, `unpack`, `mirror` and
`pack`. The lock's packages hold a symlink chain out of the prefix toward a stand-in /etc/profile.d and a stand-in
$HOME (both beside the prefix, in dirs the test owns); the full variant also holds a wheel URL that climbs out of
the wheel cache and a conda URL with `/../` segments. Before and after each command, everything under the test's
dir but the command's own roots (the prefix, the cache, the mirror or pack dir) is snapshotted, and the real
/etc/profile.d too: nothing may change.

On main before the fix (b459711): create and unpack wrote envlock's activation hook into the stand-in
profile.d (and the deactivation hook into the stand-in $HOME) through the chain, and exited 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channelbuilder import PackageSpec, index_channel, write_package
from tests.security.hostile import (
    Outside, assert_refused, cli_env, craft_archive, envlock, locked, python311, tool, wheel_entry, write_lock,
)

PAYLOAD = b"#!/bin/sh\necho pwned\n"


def _chain_package() -> PackageSpec:
    """etc/conda/activate.d -> … -> <prefix>/../../standin/profile.d, etc/conda/deactivate.d -> … -> ../../home/.bashrc.d"""
    links = {
        "x/y/z/s": "../../..",  # the prefix root, as text and for real
        "x/y/z/t": "s/../../standin/profile.d",  # "x/y/standin/profile.d" as text; <prefix>/../../standin for real
        "x/y/z/u": "s/../../home/.bashrc.d",
        "etc/conda/activate.d": "../../x/y/z/t",
        "etc/conda/deactivate.d": "../../x/y/z/u",
    }
    return PackageSpec("evil-links", "1.0", subdir="linux-64", symlinks=links,
                       files={"bin/ls": "#!/bin/sh\necho pwned\n"}, executables={"bin/ls"})


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    """The channel, the stand-ins and the roots each command may write."""
    (tmp_path / "standin" / "profile.d").mkdir(parents=True)
    (tmp_path / "standin" / "profile.d" / "00-site.sh").write_text("export SITE=1\n")
    (tmp_path / "home" / ".bashrc.d").mkdir(parents=True)
    chan = tmp_path / "chan" / "conda-forge"
    for spec in (tool(), python311(), _chain_package()):
        write_package(spec, chan / spec.subdir)
    index_channel(chan, write_zst=False, write_shards=False)
    return {"base": tmp_path, "chan": chan, "prefix": tmp_path / "envs" / "env", "cache": tmp_path / "cache",
            "dir": tmp_path / "out"}


def _lock(world: dict[str, Path], full: bool) -> Path:
    chan = world["chan"]
    pkgs = [locked(s, chan / s.subdir / s.filename) for s in (tool(), python311(), _chain_package())]
    wheels = []
    if full:
        evil = PackageSpec("evil", "1", build="0", subdir="linux-64", files={"bin/evil": "x"})
        archive = write_package(evil, world["base"] / "elsewhere" / "linux-64")
        pkgs.append(locked(evil, archive, "https://conda.anaconda.org/conda-forge/../../../../outside/linux-64/"
                                          + archive.name))
        wheels.append(wheel_entry("ninja", "1.11.1", "http://127.0.0.1:9/simple/ninja/" + "%2F".join(
            [".."] * 4 + ["standin", "profile.d", "zz.sh"]), PAYLOAD))
    return write_lock(world["base"] / "project" / "locks" / "hostile" / "conda-lock.yml", pkgs, wheels)


def _run(command: str, world: dict[str, Path], lock: Path, env: dict[str, str]):
    mirror = f"conda-forge={world['chan'].as_uri()}"
    if command == "create":
        return envlock("create", "--lock", str(lock), "-p", str(world["prefix"]), "--mirror", mirror, env=env)
    if command == "mirror":
        return envlock("mirror", "--lock", str(lock), str(world["dir"]), "--mirror", mirror, env=env)
    if command == "pack":
        world["dir"].mkdir(exist_ok=True)
        return envlock("pack", "--lock", str(lock), "-o", str(world["dir"] / "env.tar"), "--mirror", mirror, env=env)
    chan = world["chan"]
    members = {f"channels/conda-forge/{s.subdir}/{s.filename}": (chan / s.subdir / s.filename).read_bytes()
               for s in (tool(), python311(), _chain_package())}
    members.update({f"channels/conda-forge/linux-64/{n}": (chan / "linux-64" / n).read_bytes()
                    for n in ("repodata.json",)})
    tar = craft_archive(world["base"] / "craft", lock.read_text(), members, {"pypi": None})
    return envlock("unpack", str(tar), "-p", str(world["prefix"]), env=env)


@pytest.mark.parametrize("command", ["create", "unpack", "mirror", "pack"])
@pytest.mark.parametrize("full", [False, True], ids=["chain only", "every attack"])
def test_a_hostile_lock_changes_nothing_outside_the_commands_roots(command: str, full: bool,
                                                                  world: dict[str, Path]) -> None:
    if command == "unpack" and full:
        pytest.skip("an archive holds the lock's packages: the conda URL out of the channel cannot be in it "
                    "(tests/security/test_paths.py covers the wheel URL through unpack)")
    lock = _lock(world, full)
    (world["base"] / "craft").mkdir()
    env = cli_env(world["base"])
    outside = Outside(world["base"], world["prefix"], world["cache"], world["dir"], world["base"] / "craft")
    done = _run(command, world, lock, env)
    if command in ("create", "unpack") or full:
        assert_refused(done)
        assert not world["prefix"].exists()
    else:  # mirror and pack copy archives as they are: the links inside stay inside the archive
        assert done.returncode == 0, done.stdout + done.stderr
    assert outside.changed() == {}
    assert sorted(p.name for p in (world["base"] / "standin" / "profile.d").iterdir()) == ["00-site.sh"]
    assert list((world["base"] / "home" / ".bashrc.d").iterdir()) == []
