"""Names from a lock or an archive that would become paths outside their root (issue 22, Why 2, 3 and 4), end to
end through the real CLI: each attack in several spellings; each must be refused with one error line, before
anything is written, and nothing outside the command's own roots may change.

On main before the gate (envlock/seams/gate.py, b459711): the `..%2F` wheel URL wrote the payload through the wheel
cache, for create and unpack; the `/../` conda URL made mirror and pack write beside DIR, and a lock's env name
made pack write beside its staging dir; `...tar.bz2` made create rmtree the cache root (`.tar.bz2`, `..conda`:
the pkgs/ dir); a manifest's `../` channel dir made unpack install from outside the archive, and its wrong types
ended in `internal error`. Variants that the old code happened to refuse are kept: they are the same class.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channelbuilder import PackageSpec, index_channel, write_package
from tests.security.hostile import (
    AnyPathServer, Outside, assert_refused, built, cli_env, craft_archive, envlock, locked, python311, tool, wheel_entry,
    write_lock,
)
from tests.wheelindex import build_wheel

PAYLOAD = b"#!/bin/sh\necho pwned\n"


def _ups(frm: Path, to: Path) -> int:
    """How many `..` lead from `frm` up to `to`."""
    return len(frm.relative_to(to).parts)


# --------------------------------------------------------------------------- Why 2: a wheel URL's file name


def _wheel_attack(spelling: str, ups: int) -> str:
    """The last URL segment that, decoded, climbs `ups` levels and names standin/zz.sh."""
    sep = {"%2F": "%2F", "%2f": "%2f", "mixed": "%2F", "backslash": "%5C"}[spelling]
    parts = [".."] * ups + ["standin", "zz.sh"]
    if spelling == "mixed":
        parts[0] = "%2E%2E"
    return sep.join(parts)


@pytest.mark.parametrize("spelling", ["%2F", "%2f", "mixed", "backslash"])
def test_a_wheel_url_cannot_write_outside_the_wheel_cache(spelling: str, tmp_path: Path) -> None:
    chan = tmp_path / "chan"
    py = built(python311(), chan, url=(chan / "linux-64").as_uri() + "/" + python311().filename)
    (tmp_path / "standin").mkdir()
    env = cli_env(tmp_path)
    # <cache>/wheels/<sha[:2]>/<sha>/<name>: four levels up is tmp_path, where standin/ lies.
    last = _wheel_attack(spelling, 4)
    with AnyPathServer({last: PAYLOAD, "zz.sh": PAYLOAD}) as server:
        w = wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{last}", PAYLOAD)
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [py], [w])
        outside = Outside(tmp_path, tmp_path / "cache", tmp_path / "env")
        done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"), "--json", env=env)
    assert_refused(done, "ninja")
    assert not (tmp_path / "standin" / "zz.sh").exists()
    assert outside.changed() == {}
    assert not (tmp_path / "env").exists()


def test_unpack_of_a_crafted_archive_cannot_write_outside_the_wheel_cache(tmp_path: Path) -> None:
    """The archive's own simple index points at a file name that climbs out of the wheel cache."""
    chan = tmp_path / "chanbuild"
    spec = python311()
    archive = write_package(spec, chan / "linux-64")
    py = locked(spec, archive)
    last = _wheel_attack("%2F", 4)
    w = wheel_entry("ninja", "1.11.1", f"http://127.0.0.1:9/simple/ninja/{last}", PAYLOAD)
    lock = write_lock(tmp_path / "lk" / "conda-lock.yml", [py], [w])
    href = f"../../files/a/b/c/d/{last}"
    members = {f"channels/conda-forge/linux-64/{archive.name}": archive.read_bytes(),
               "pypi/simple/ninja/index.html": f'<a href="{href}#sha256={w.sha256}">x</a>'.encode(),
               "pypi/files/a/b/c/d/keep": b"", "pypi/files/standin/zz.sh": PAYLOAD}
    tar = craft_archive(tmp_path, lock.read_text(), members)
    (tmp_path / "standin").mkdir()
    env = cli_env(tmp_path)
    outside = Outside(tmp_path, tmp_path / "cache", tmp_path / "env")
    done = envlock("unpack", str(tar), "-p", str(tmp_path / "env"), "--json", env=env)
    assert_refused(done, "ninja")
    assert outside.changed() == {}
    assert not (tmp_path / "standin" / "zz.sh").exists() and not (tmp_path / "env").exists()


# --------------------------------------------------------------------------- Why 3: mirror and pack beside DIR


SPELLINGS = {
    "/../": lambda n: "/".join(["a"] + [".."] * n + ["outside"]),
    "%2E%2E": lambda n: "/".join(["a"] + ["%2E%2E"] * n + ["outside"]),
    "%2F": lambda n: "a/" + "%2F".join([".."] * n + ["outside"]),
    "backslash": lambda n: "a/" + "\\".join([".."] * n + ["outside"]),
}


@pytest.mark.parametrize("command", ["mirror", "pack"])
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_mirror_and_pack_keep_a_channel_path_inside_dir(command: str, spelling: str, tmp_path: Path) -> None:
    work = tmp_path / "w" / "x"
    work.mkdir(parents=True)
    spec = PackageSpec("evil", "1", build="0", subdir="linux-64", files={"bin/evil": "x"})
    archive = write_package(spec, tmp_path / "build" / "linux-64")
    env = cli_env(tmp_path)
    with AnyPathServer({archive.name: archive.read_bytes()}) as server:
        host = f"127.0.0.1_{server.port}"
        # DIR/<host>/a/<ups × ..>/outside (mirror) or <staging>/channels/<host>/a/... (pack) -> tmp_path/outside
        root = work / "mirror" if command == "mirror" else work / ".staging" / "channels"
        ups = _ups(root / host / "a", tmp_path)
        url = f"{server.url}/{SPELLINGS[spelling](ups)}/linux-64/{archive.name}"
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [locked(spec, archive, url)])
        outside = Outside(tmp_path, tmp_path / "cache", work)
        if command == "mirror":
            done = envlock("mirror", "--lock", str(lock), str(work / "mirror"), "--json", env=env)
        else:
            done = envlock("pack", "--lock", str(lock), "-o", str(work / "out.tar"), "--json", env=env)
    assert_refused(done)
    assert outside.changed() == {}
    assert not (tmp_path / "outside").exists()
    assert not (work / "out.tar").exists()


@pytest.mark.parametrize("name", ["../../../outside", "..", "a/../../..", "x\\..\\..", "%2E%2E%2F%2E%2E"])
def test_pack_keeps_the_locks_env_name_inside_the_archive(name: str, tmp_path: Path) -> None:
    """The lock's env name becomes locks/<name>/ in the staging dir and in the archive."""
    chan = tmp_path / "chan"
    pkg = built(tool(), chan, url=(chan / "linux-64").as_uri() + "/" + tool().filename)
    index_channel(chan, write_zst=False, write_shards=False)
    work = tmp_path / "w"
    work.mkdir()
    lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [pkg], env_name=name)
    env = cli_env(tmp_path)
    outside = Outside(tmp_path, tmp_path / "cache", work)
    done = envlock("pack", "--lock", str(lock), "-o", str(work / "out.tar"), "--json", env=env)
    assert_refused(done)
    assert outside.changed() == {} and not (work / "out.tar").exists()


# --------------------------------------------------------------------------- Why 4: the `..` cache entry


@pytest.mark.parametrize("last", ["...tar.bz2", ".tar.bz2", "..conda", "%2E%2E.tar.bz2", "x-1-%2E%2E.tar.bz2"])
def test_a_package_file_name_cannot_name_the_cache_itself(last: str, tmp_path: Path) -> None:
    chan = tmp_path / "chan"
    spec = tool()
    archive = write_package(spec, chan / "noarch")
    renamed = archive.with_name(last.replace("%2E", "."))
    archive.rename(renamed)
    pkg = locked(spec, renamed, url=(chan / "noarch").as_uri() + "/" + last)
    lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [pkg])
    env = cli_env(tmp_path)
    cache = tmp_path / "cache"
    (cache / "pkgs" / "someone-else-1-0" / "info").mkdir(parents=True)
    (cache / "pkgs" / "someone-else-1-0" / "info" / "index.json").write_text("{}")
    (cache / "keep-me").write_text("another user's file")
    outside = Outside(tmp_path, tmp_path / "env")
    done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"), "--json", env=env)
    assert_refused(done)
    assert (cache / "keep-me").read_text() == "another user's file"
    assert (cache / "pkgs" / "someone-else-1-0" / "info" / "index.json").is_file()
    changed = outside.changed()
    # Only envlock's own file locks may appear in the cache (taken before the refusal).
    assert all(p.startswith("cache/file-locks") or p == "cache/file-locks" for p in changed.get("base", {})), changed
    assert not (tmp_path / "env").exists()


def test_a_sha256_in_a_lock_is_hex_before_it_names_a_directory(tmp_path: Path) -> None:
    """The wheel cache's entry is named by the lock's sha256; a lock cannot make it a path."""
    chan = tmp_path / "chan"
    py = built(python311(), chan, url=(chan / "linux-64").as_uri() + "/" + python311().filename)
    w = build_wheel("ninja", "1.11.1")
    with AnyPathServer({w.filename: w.data}) as server:
        entry = wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{w.filename}", w.data)
        text = write_lock(tmp_path / "lock" / "conda-lock.yml", [py], [entry]).read_text()
        bad = text.replace(entry.sha256, "../../../../standin/" + "a" * 40)
        (tmp_path / "lock" / "conda-lock.yml").write_text(bad)
        done = envlock("create", "--lock", str(tmp_path / "lock" / "conda-lock.yml"), "-p", str(tmp_path / "env"),
                       "--json", env=cli_env(tmp_path))
    assert_refused(done, "sha256 of ninja")
    assert not (tmp_path / "standin").exists() and not (tmp_path / "env").exists()


# --------------------------------------------------------------------------- unpack: the manifest's own paths


@pytest.mark.parametrize("field,rel", [("channels", "../../../elsewhere/conda-forge"), ("channels", "/abs/conda-forge"),
                                       ("channels", "channels/%2E%2E/%2E%2E/%2E%2E/%2E%2E/elsewhere/conda-forge"),
                                       ("pypi", "../../../elsewhere/simple")])
def test_unpack_reads_channels_only_inside_the_archive(field: str, rel: str, tmp_path: Path) -> None:
    """The manifest says where each channel lies in the extracted copy; it cannot point create elsewhere."""
    spec = tool()
    archive = write_package(spec, tmp_path / "elsewhere" / "conda-forge" / "linux-64")
    index_channel(tmp_path / "elsewhere" / "conda-forge", write_zst=False, write_shards=False)
    lock = write_lock(tmp_path / "lk" / "conda-lock.yml", [locked(spec, archive)])
    channels = {"https://conda.anaconda.org/conda-forge/": rel if field == "channels" else "channels/conda-forge"}
    members = {f"channels/conda-forge/linux-64/{archive.name}": archive.read_bytes()} if field == "pypi" else {"x": b""}
    tar = craft_archive(tmp_path, lock.read_text(), members,
                         {"channels": channels, "pypi": rel if field == "pypi" else None})
    env = cli_env(tmp_path)
    outside = Outside(tmp_path, tmp_path / "cache", tmp_path / "env")
    done = envlock("unpack", str(tar), "-p", str(tmp_path / "env"), env=env)
    assert_refused(done)
    assert outside.changed() == {} and not (tmp_path / "env").exists()


@pytest.mark.parametrize("change", [{"envlock_pack_version": "x"}, {"envlock_pack_version": None},
                                    {"envlock_pack_version": [1]}, {"envlock_pack_version": 1.5},
                                    {"lock": 7}, {"platform": ["linux-64"]}, {"channels": "conda-forge"},
                                    {"channels": {"https://conda.anaconda.org/conda-forge/": 3}}, {"pypi": {"a": 1}}])
def test_a_manifest_of_the_wrong_types_is_one_error(change: dict, tmp_path: Path) -> None:
    spec = tool()
    archive = write_package(spec, tmp_path / "b" / "linux-64")
    lock = write_lock(tmp_path / "lk" / "conda-lock.yml", [locked(spec, archive)])
    tar = craft_archive(tmp_path, lock.read_text(), {f"channels/conda-forge/linux-64/{archive.name}": archive.read_bytes()},
                         {"pypi": None, **change})
    done = envlock("unpack", str(tar), "-p", str(tmp_path / "env"), env=cli_env(tmp_path))
    assert_refused(done, str(tar))
    assert not (tmp_path / "env").exists()
