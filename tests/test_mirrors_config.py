"""Mirrors (issue 12 item 8, issue 14 item 3): plain paths, a channel name covering its labels, a typo'd name
refused naming the channels in play, and mirrors from ENVLOCK_MIRRORS and envlock.toml with their precedence.

Every create and resolve here is real (the test channel of tests/channelbuilder.py over file:// and over the
HTTP server on 127.0.0.1); `envlock config` is checked against which mirror a real create then fetched from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.output import flat, logical_lines, unfolded

from envlock.cli import run
from envlock.formats import read_lock
from envlock.seams.mirror_urls import MIRROR_MANIFEST, MirrorMap, channel_fetch_url, mirrored, parse_entry
from tests.test_create import assert_one_error, cli, lock_of, project  # noqa: F401 - session fixture

CF = "https://conda.anaconda.org/conda-forge/"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVLOCK_MIRRORS"}
    env.update({"ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_CONFIG_DIR": str(tmp_path / "user-config")})
    env.update(extra)
    return env


def _copy_project(project: Path, dest: Path) -> Path:  # noqa: F811
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns(".cache"))
    return dest


# --------------------------------------------------------------------------- the map itself


def test_the_longest_key_wins_and_a_name_covers_its_labels() -> None:
    mirrors = {"nvidia": "file:///m/nv", "nvidia/label/cuda-11.8.0": "https://x/l118", "conda-forge": "http://h/cf/"}
    label = "https://conda.anaconda.org/nvidia/label/cuda-11.8.0/linux-64/cuda-nvcc-11.8.89-0.tar.bz2"
    other = "https://conda.anaconda.org/nvidia/label/cuda-12.1.0/linux-64/cuda-nvcc-12.1.105-0.tar.bz2"
    assert mirrored(label, mirrors) == "https://x/l118/linux-64/cuda-nvcc-11.8.89-0.tar.bz2"
    assert mirrored(other, mirrors) == "file:///m/nv/label/cuda-12.1.0/linux-64/cuda-nvcc-12.1.105-0.tar.bz2"
    assert mirrored(CF + "noarch/a-1-0.conda", mirrors) == "http://h/cf/noarch/a-1-0.conda"
    # conda-forge= does not cover a channel whose name only starts with it
    assert mirrored("https://conda.anaconda.org/conda-forge-extra/noarch/a-1-0.conda", mirrors).startswith("https://conda")
    assert channel_fetch_url("nvidia/label/cuda-12.1.0", {"nvidia": "file:///m/nv"}) == "file:///m/nv/label/cuda-12.1.0/"
    assert channel_fetch_url("conda-forge", {}) == CF


def test_a_local_mirror_root_stands_for_the_channel_its_key_names(tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    for sub in ("conda-forge/noarch", "nvidia/label/cuda-11.8.0/noarch", "pypi/simple"):
        (root / sub).mkdir(parents=True)
    plain = tmp_path / "plain"
    (plain / "conda-forge").mkdir(parents=True)
    # without the manifest `envlock mirror` writes, a directory is taken as the channel itself
    assert parse_entry(f"conda-forge={root.as_uri()}") == ("conda-forge", root.as_uri())
    (root / MIRROR_MANIFEST).write_text("{}")
    assert parse_entry(f"conda-forge={root.as_uri()}") == ("conda-forge", (root / "conda-forge").as_uri())
    assert parse_entry(f"conda-forge={root}") == ("conda-forge", (root / "conda-forge").as_uri())  # a plain path too
    assert parse_entry(f"nvidia={root}")[1] == (root / "nvidia").as_uri()  # and the name covers its labels there
    assert parse_entry(f"pypi={root}")[1] == (root / "pypi" / "simple").as_uri()
    assert parse_entry(f"conda-forge={plain.as_uri()}")[1] == plain.as_uri()
    assert parse_entry(f"bioconda={root}")[1] == root.as_uri()  # a channel the mirror does not hold: as given
    assert parse_entry("conda-forge=http://127.0.0.1:1/mirror")[1] == "http://127.0.0.1:1/mirror"  # URLs as given


@pytest.mark.parametrize(("value", "needle", "code"), [  # 2: the value's form is wrong; 1: a path that is not there
    ("conda-forge", "is not NAME=URL", 2),
    ("conda-forge=", "is not NAME=URL", 2),
    ("=file:///x", "is not NAME=URL", 2),
    ("conda-forge=s3://bucket/cf", "only http://, https:// and file:// URLs", 2),
    ("conda-forge=./no/such/dir", "no such directory", 1),
    ("conda-forge=~nosuchuser/x", "no such directory", 1),
    ("conda-forge=a\x00b", "no such directory", 1),
])
def test_bad_mirror_values_are_one_error(value: str, needle: str, code: int, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    got = run(["config", "--mirror", value, "--project-dir", str(tmp_path)])
    err = logical_lines(capsys.readouterr().err.strip())
    assert got == code and err[0].startswith("error: ") and needle in err[0] and err[1].startswith("hint: ")


# --------------------------------------------------------------------------- plain paths, labels


def test_plain_paths_are_mirrors_and_locks_keep_canonical_urls(tmp_path: Path, test_channel: Path) -> None:
    """`--mirror conda-forge=../rel/path` (relative to the cwd) resolves and creates as file:// does."""
    work = tmp_path / "work"
    (work / "proj").mkdir(parents=True)
    rel = os.path.relpath(test_channel, work)
    env = _env(tmp_path)
    proc = cli("resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--mirror",
               f"conda-forge={rel}", "--project-dir", "proj", env=env, cwd=work)
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(lock_of(work / "proj"))
    assert lock.packages and all(p.url.startswith(CF) for p in lock.packages)
    proc = cli("create", "--project-dir", "proj", "-p", str(tmp_path / "env"), "--mirror", f"conda-forge={test_channel}",
               "-q", env=env, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env" / "bin" / "nvcc").is_file()


def test_nvidia_name_maps_its_label_channel(tmp_path: Path, test_channel: Path, nvidia_label_channel: Path) -> None:
    """`nvidia=DIR` serves nvidia/label/cuda-11.8.0 from DIR/label/cuda-11.8.0, for resolve and for create."""
    nvidia = nvidia_label_channel.parent.parent  # <root>/nvidia
    mirrors = ["--mirror", f"conda-forge={test_channel}", "--mirror", f"nvidia={nvidia}"]
    env = _env(tmp_path)
    (tmp_path / "proj").mkdir()
    proc = cli("resolve", "--torch", "2.3.0+cu118", "--toolchain-only", "--platform", "linux-64", *mirrors,
               "--project-dir", str(tmp_path / "proj"), env=env)
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(lock_of(tmp_path / "proj"))
    label = [p for p in lock.packages if p.url.startswith("https://conda.anaconda.org/nvidia/label/cuda-11.8.0/")]
    assert any(p.name == "cuda-nvcc" for p in label)
    proc = cli("create", "--project-dir", str(tmp_path / "proj"), "-p", str(tmp_path / "env"), *mirrors, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    nvcc = json.loads(next((tmp_path / "env" / "conda-meta").glob("cuda-nvcc-11.8*.json")).read_text())
    assert nvcc["url"].startswith("https://conda.anaconda.org/nvidia/label/cuda-11.8.0/")


# --------------------------------------------------------------------------- a typo is refused


@pytest.mark.parametrize("command", ["resolve", "create", "lock", "update", "pack"])
def test_a_mirror_no_channel_uses_is_refused_naming_the_ones_that_are(
    command: str, project: Path, tmp_path: Path, test_channel: Path  # noqa: F811
) -> None:
    """`conda-forg=` (a typo) fails at once, naming what is in play, before any network; nothing is written."""
    proj = _copy_project(project, tmp_path / "proj")
    before = {p: p.read_bytes() for p in proj.rglob("*") if p.is_file()}
    typo = ["--mirror", f"conda-forg={test_channel}"]
    args = {
        "resolve": ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", *typo],
        "create": ["create", "-p", str(tmp_path / "env"), "--platform", "linux-64", *typo],
        "lock": ["lock", "--all", *typo],
        "update": ["update", "cuda-nvcc", *typo],
        "pack": ["pack", "--platform", "linux-64", "-o", str(tmp_path / "env.tar"), *typo],
    }[command]
    started = time.monotonic()
    proc = cli(*args, "--project-dir", str(proj), env=_env(tmp_path))
    assert_one_error(proc, 2, "--mirror conda-forg=")
    err = unfolded(proc.stderr)
    assert "in play: conda-forge" in err and "hint: mirror one of those (--mirror conda-forge=URL" in err
    assert time.monotonic() - started < 20  # refused up front, not after the network timeouts
    assert not (tmp_path / "env").exists() and not (tmp_path / "env.tar").exists()
    assert {p: p.read_bytes() for p in proj.rglob("*") if p.is_file()} == before


def test_a_toolchain_lock_does_not_put_pypi_in_play_and_an_unused_mirror_is_not_used(
        project: Path, tmp_path: Path, test_channel: Path) -> None:  # noqa: F811
    """One rule for every source (docs/reference.md): `--mirror pypi=…` for a toolchain-only lock is not used, as
    the same entry in ENVLOCK_MIRRORS is not (it was refused on the command line only); a typo of pypi is no typo
    of a channel in play here."""
    proc = cli("create", "-p", str(tmp_path / "env"), "--project-dir", str(project), "--platform", "linux-64", "-q",
               "--mirror", f"conda-forge={test_channel}", "--mirror", "pypi=https://mirror.invalid/simple",
               env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env" / "bin" / "nvcc").is_file()


# --------------------------------------------------------------------------- mirrors from config


def test_site_mirrors_from_the_environment_that_a_lock_does_not_use_are_fine(
    project: Path, tmp_path: Path, test_channel: Path  # noqa: F811
) -> None:
    """ENVLOCK_MIRRORS is site-wide: its nvidia= and pypi= entries are unused by a toolchain-only lock, not refused."""
    env = _env(tmp_path, ENVLOCK_MIRRORS=f"conda-forge={test_channel.as_uri()}, nvidia=https://mirror.invalid/nvidia "
                                         "pypi=https://mirror.invalid/simple")
    proc = cli("create", "-p", str(tmp_path / "env"), "--project-dir", str(project), "--platform", "linux-64", "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env" / "bin" / "nvcc").is_file()


def test_precedence_cli_over_environment_over_project_over_user(
    project: Path, tmp_path: Path, test_channel: Path, channel_server  # noqa: F811, ANN001
) -> None:
    """Each source really decides where create fetches from, and `envlock config` says which one did."""
    proj = _copy_project(project, tmp_path / "proj")
    user_dir = tmp_path / "user-config"
    user_dir.mkdir()
    # the user's mirror: a loopback port nothing listens on (refused at once; no name is looked up)
    (user_dir / "envlock.toml").write_text('[mirrors]\nconda-forge = "http://127.0.0.1:9/user-mirror/conda-forge"\n'
                                           'nvidia = "http://127.0.0.1:9/user-mirror/nvidia"\n')
    bad = _env(tmp_path)
    # user config only: its (unreachable) mirror is used, so create fails naming that host (one retry: the
    # default three wait ~7 s of rattler's backoff for what is not this test's subject)
    proc = cli("create", "-p", str(tmp_path / "e0"), "--project-dir", str(proj), "--platform", "linux-64", "-q",
               env={**bad, "ENVLOCK_HTTP_TIMEOUT": "2", "ENVLOCK_HTTP_RETRIES": "1"}, timeout=180)
    assert proc.returncode != 0 and "127.0.0.1:9" in flat(proc.stderr), proc.stderr
    # the project's envlock.toml (a path relative to it) overrides the user's
    rel = os.path.relpath(test_channel, proj)
    (proj / "envlock.toml").write_text(f'[mirrors]\nconda-forge = "{rel}"\n')
    proc = cli("create", "-p", str(tmp_path / "e1"), "--project-dir", str(proj), "--platform", "linux-64", "-q", env=bad)
    assert proc.returncode == 0, proc.stderr
    # ENVLOCK_MIRRORS overrides the project: the packages come from the HTTP server
    channel_server.reset_log()
    http = {**bad, "ENVLOCK_MIRRORS": f"conda-forge={channel_server.channel_url('conda-forge')}",
            "ENVLOCK_CACHE_DIR": str(tmp_path / "cache2")}
    proc = cli("create", "-p", str(tmp_path / "e2"), "--project-dir", str(proj), "--platform", "linux-64", "-q", env=http)
    assert proc.returncode == 0, proc.stderr
    assert channel_server.count("/conda-forge/*/cuda-nvcc-12.*") == 1
    # --mirror overrides ENVLOCK_MIRRORS: no request reaches the server
    channel_server.reset_log()
    proc = cli("create", "-p", str(tmp_path / "e3"), "--project-dir", str(proj), "--platform", "linux-64", "-q",
               "--mirror", f"conda-forge={test_channel.as_uri()}", env={**http, "ENVLOCK_CACHE_DIR": str(tmp_path / "c3")})
    assert proc.returncode == 0, proc.stderr
    assert channel_server.count() == 0
    # and `envlock config` reports the same order, with what each entry hides
    proc = cli("config", "--json", "--project-dir", str(proj), "--mirror", "pypi=https://cli.invalid/simple", env=http)
    doc = json.loads(proc.stdout)
    assert doc["mirrors"]["conda-forge"]["from"] == "ENVLOCK_MIRRORS"
    assert [s["from"] for s in doc["mirrors"]["conda-forge"]["shadows"]] == [
        f"project {proj.absolute() / 'envlock.toml'}", f"user {user_dir / 'envlock.toml'}"]
    assert doc["mirrors"]["conda-forge"]["shadows"][0]["url"] == test_channel.resolve().as_uri()
    assert doc["mirrors"]["nvidia"]["from"].startswith("user ") and doc["mirrors"]["pypi"]["from"] == "--mirror"
    assert doc["cache_dir"] == {"path": str(tmp_path / "cache2"), "from": "ENVLOCK_CACHE_DIR"}
    text = cli("config", "--project-dir", str(proj), env=http).stdout
    assert "conda-forge" in text and "(from ENVLOCK_MIRRORS)" in text and "overrides" in text and "(read)" in text


@pytest.mark.parametrize(("content", "needle"), [
    ("[mirrors\nconda-forge = 1", "is not valid TOML"),
    ('[mirror]\nconda-forge = "https://x"\n', "unknown setting 'mirror'"),
    ("[mirrors]\nconda-forge = 3\n", "must be a string URL or path"),
])
def test_a_broken_config_file_is_one_error_naming_it(content: str, needle: str, tmp_path: Path) -> None:
    (tmp_path / "envlock.toml").write_text(content)
    proc = cli("config", "--project-dir", str(tmp_path), env=_env(tmp_path))
    assert_one_error(proc, 1, needle)
    assert str(tmp_path / "envlock.toml") in unfolded(proc.stderr)


def test_a_config_folder_the_user_cannot_enter_is_one_error_naming_it() -> None:
    """It was an internal error (Path.is_file raises EACCES): e.g. a second user whose ENVLOCK_CONFIG_DIR is another's."""
    from tests.second_user import open_dir, second_user

    as_other, env = second_user()
    with open_dir("envlock-private-config-", 0o700) as private:
        env = {**env, "ENVLOCK_CONFIG_DIR": str(private), "HOME": "/"}
        proc = subprocess.run([*as_other, "-m", "envlock", "config"], capture_output=True, text=True, cwd="/", env=env)
    assert_one_error(proc, 1, f"cannot read {private}/envlock.toml: Permission denied")
    assert "ENVLOCK_CONFIG_DIR" in unfolded(proc.stderr)
