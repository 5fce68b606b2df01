"""Symlinks that leave the prefix (issue 22, Why 1): chains whose every link points "inside" textually but that
resolve outward, links already in the prefix, and envlock's own writes (activation hooks, conda-meta/envlock,
the PyPI part's scripts) through a link planted in the prefix. A stand-in for /etc/profile.d lies beside the
prefix; nothing outside the prefix may change (and the real /etc/profile.d neither: tests run as root here).

On main before the fix (b459711): the chain packages passed pkgcheck, `envlock create` exited 0 and wrote
envlock's activation hook through the chain into the stand-in profile.d; a conda-meta or etc/conda link
planted in an existing env was written through by the next create.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channelbuilder import PackageSpec
from tests.security.hostile import Outside, assert_refused, built, cli_env, envlock, tool, write_lock


def _chain(depth: int, style: str, target_ups: int) -> dict[str, str]:
    """The issue's chain: `<d1>/…/<dN>/s -> ../…` (to the prefix root), `<…>/t -> s/../../standin/profile.d`,
    `etc/conda/activate.d -> ../../<…>/t`. `style` spells the links differently (./ segments, doubled slashes,
    a second hop)."""
    dirs = "/".join(f"d{i}" for i in range(depth))
    s = "/".join([".."] * depth)
    t = "s/" + "/".join([".."] * target_ups) + "/standin/profile.d"
    act = f"../../{dirs}/t"
    if style == "dot-segments":
        s, t, act = "./" + s.replace("/", "/./"), "./" + t, "./" + act
    elif style == "double-slash":
        s, t, act = s.replace("/", "//"), t.replace("/", "//"), act.replace("/", "//")
    links = {f"{dirs}/s": s, f"{dirs}/t": t, "etc/conda/activate.d": act}
    if style == "extra-hop":  # activate.d -> u -> t: one more link in the chain
        links["etc/conda/activate.d"] = "u"
        links["etc/conda/u"] = act
    return links


def _prefix(tmp_path: Path) -> Path:
    return tmp_path / "envs" / "env"  # the chain climbs from the prefix root to tmp_path/standin


@pytest.mark.parametrize("depth,style", [(7, "plain"), (2, "plain"), (4, "dot-segments"), (3, "double-slash"),
                                         (5, "extra-hop")])
def test_a_symlink_chain_out_of_the_prefix_refuses_the_package(depth: int, style: str, tmp_path: Path) -> None:
    chan = tmp_path / "chan"
    standin = tmp_path / "standin" / "profile.d"
    standin.mkdir(parents=True)
    evil = PackageSpec("evil-links", "1.0", subdir="linux-64", symlinks=_chain(depth, style, 2),
                       files={"bin/ls": "#!/bin/sh\necho pwned\n"}, executables={"bin/ls"})
    pkgs = [built(tool(), chan, url=(chan / "linux-64").as_uri() + "/" + tool().filename),
            built(evil, chan, url=(chan / "linux-64").as_uri() + "/" + evil.filename)]
    lock = write_lock(tmp_path / "lock" / "conda-lock.yml", pkgs)
    env = cli_env(tmp_path)
    prefix = _prefix(tmp_path)
    outside = Outside(tmp_path, tmp_path / "cache", prefix)
    done = envlock("create", "--lock", str(lock), "-p", str(prefix), env=env)
    print(assert_refused(done, "evil-links"))
    assert list(standin.iterdir()) == []
    assert outside.changed() == {} and not prefix.exists()


@pytest.mark.parametrize("link", ["lib/up/../standin/profile.d", "lib/up/./../standin//profile.d"])
def test_a_link_already_in_the_prefix_is_part_of_the_chain(link: str, tmp_path: Path) -> None:
    """An env holds `lib/up -> ..` (inside); the next lock adds `x -> lib/up/../standin/profile.d` and (in a package
    that depends on it) a file `x/zz.sh`: inside as text, outside through the link that is already there."""
    chan = tmp_path / "chan"
    (tmp_path / "envs" / "standin" / "profile.d").mkdir(parents=True)
    first = PackageSpec("links-a", "1.0", subdir="linux-64", symlinks={"lib/up": ".."}, files={"lib/a.txt": "a"})
    second = PackageSpec("links-b", "1.0", subdir="linux-64", symlinks={"x": link})
    third = PackageSpec("files-c", "1.0", subdir="linux-64", depends=["links-b"], files={"x/zz.sh": "echo pwned\n"})
    url = (chan / "linux-64").as_uri()
    base = [built(tool(), chan, url=f"{url}/{tool().filename}"), built(first, chan, url=f"{url}/{first.filename}")]
    lock1 = write_lock(tmp_path / "l1" / "conda-lock.yml", base)
    lock2 = write_lock(tmp_path / "l2" / "conda-lock.yml", [*base, built(second, chan, url=f"{url}/{second.filename}"),
                                                            built(third, chan, url=f"{url}/{third.filename}")])
    env = cli_env(tmp_path)
    prefix = _prefix(tmp_path)
    assert envlock("create", "--lock", str(lock1), "-p", str(prefix), env=env).returncode == 0
    outside = Outside(tmp_path, tmp_path / "cache", prefix)
    done = envlock("create", "--lock", str(lock2), "-p", str(prefix), env=env)
    assert_refused(done, "links-b")
    assert outside.changed() == {} and list((tmp_path / "envs" / "standin" / "profile.d").iterdir()) == []


@pytest.mark.parametrize("planted", ["etc/conda", "etc/conda/activate.d", "etc", "conda-meta"])
def test_envlock_never_writes_through_a_link_planted_in_the_prefix(planted: str, tmp_path: Path) -> None:
    """An existing env whose etc/conda (or conda-meta) became a link out of it: the next create's own writes (the
    activation hooks, conda-meta/envlock) must not follow it."""
    chan = tmp_path / "chan"
    url = (chan / "linux-64").as_uri()
    one, two = tool("12.1"), tool("12.2")
    lock1 = write_lock(tmp_path / "l1" / "conda-lock.yml", [built(one, chan, url=f"{url}/{one.filename}")])
    lock2 = write_lock(tmp_path / "l2" / "conda-lock.yml", [built(two, chan, url=f"{url}/{two.filename}")])
    env = cli_env(tmp_path)
    prefix = _prefix(tmp_path)
    assert envlock("create", "--lock", str(lock1), "-p", str(prefix), env=env).returncode == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    link = prefix / planted
    moved = tmp_path / "moved"
    link.rename(moved)
    import shutil

    shutil.copytree(moved, victim / "copy", symlinks=True)  # the victim dir looks like what was there
    link.symlink_to(victim / "copy")
    outside = Outside(tmp_path, tmp_path / "cache", prefix)
    done = envlock("create", "--lock", str(lock2), "-p", str(prefix), env=env)
    print(assert_refused(done))
    assert outside.changed() == {}
