"""`envlock pack` / `envlock unpack` (issue 14 item 1): one archive to a node that never saw a channel.

Real locks (tests/test_create.py's toolchain lock, tests/test_pypi_part.py's full lock with its PyPI part),
real packages from the test channel served over HTTP by a server the test stops before unpacking, real
wheels from the loopback index (taken down before unpacking). Unpack runs with a fresh cache and every
proxy variable pointing at a closed port, so any network access would fail. The archive's channel is also
installed by the real conda 26.7.1 (tests/test_conda.py's fixture).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from envlock.formats import read_lock
from tests.channelbuilder import ChannelServer
from tests.test_conda import conda_venv  # noqa: F401 - session fixture (the real conda, built once)
from tests.test_create import assert_one_error, cli, lock_of, project  # noqa: F401 - session fixture
from tests.test_pypi_part import NAME as FULL, full_project  # noqa: F401 - session fixture

DEAD = "http://127.0.0.1:9"  # nothing listens there: a proxy that makes every network access fail


def offline_env(tmp_path: Path, cache: str = "cache", **extra: str) -> dict[str, str]:
    """A node that never saw a channel: a fresh cache, no mirrors, every request sent to a dead proxy."""
    env = {k: v for k, v in os.environ.items() if k not in ("ENVLOCK_MIRRORS", "NO_PROXY", "no_proxy")}
    env.update({"ENVLOCK_CACHE_DIR": str(tmp_path / cache), "ENVLOCK_CONFIG_DIR": str(tmp_path / "no-config"),
                "HTTP_PROXY": DEAD, "HTTPS_PROXY": DEAD, "ALL_PROXY": DEAD, "http_proxy": DEAD,
                "https_proxy": DEAD, "all_proxy": DEAD, "PIP_INDEX_URL": DEAD + "/simple/"})
    env.update(extra)
    return env


def connected_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ENVLOCK_MIRRORS"}
    env.update({"ENVLOCK_CACHE_DIR": str(tmp_path / "pack-cache"), "ENVLOCK_CONFIG_DIR": str(tmp_path / "no-config")})
    return env


@pytest.fixture
def served_channel(tmp_path: Path, channel_root: Path) -> ChannelServer:
    """A private copy of the test channel behind its own HTTP server (the test deletes both)."""
    root = tmp_path / "upstream"
    shutil.copytree(channel_root / "conda-forge", root / "conda-forge")
    return ChannelServer(root).start()


def _members(archive: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(archive) as tf:
        return {m.name: m for m in tf.getmembers()}


def _flip_byte_in(archive: Path, member: str) -> None:
    info = _members(archive)[member]
    with archive.open("r+b") as fh:
        fh.seek(info.offset_data + info.size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))


def _leftovers(cache: Path) -> list[Path]:
    return [p for p in (cache / "unpack").glob("*")] if (cache / "unpack").is_dir() else []


# --------------------------------------------------------------------------- the "done when"


def test_pack_on_a_connected_machine_then_unpack_offline_and_nvcc_runs(
    project: Path, tmp_path: Path, served_channel: ChannelServer  # noqa: F811
) -> None:
    archive = tmp_path / "out" / "env.tar"
    archive.parent.mkdir()
    proc = cli("pack", "--project-dir", str(project), "--platform", "linux-64", "-o", str(archive), "--json",
               "--mirror", f"conda-forge={served_channel.channel_url('conda-forge')}", env=connected_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    lock = read_lock(lock_of(project))
    assert doc["packages"] == len(lock.packages_for("linux-64")) and doc["platform"] == "linux-64"
    assert list(archive.parent.iterdir()) == [archive]  # no staging dir or temp file left beside it
    served_channel.stop()
    shutil.rmtree(tmp_path / "upstream")  # the channel is gone

    members = _members(archive)
    manifest = json.loads(tarfile.open(archive).extractfile("envlock-pack.json").read())  # type: ignore[union-attr]
    assert next(iter(members)) == "envlock-pack.json" and set(manifest["members"]) == set(members) - {"envlock-pack.json"}
    assert {"locks/torch2.3.0-cu121/conda-lock.yml", "environments/torch2.3.0-cu121.yml",
            "channels/conda-forge/linux-64/repodata.json", "channels/conda-forge/noarch/repodata.json",
            "conda-linux-64.txt", "locks/torch2.3.0-cu121/activate.sh"} <= set(members)
    packed = {m.rsplit("/", 1)[1] for m in members if m.endswith((".tar.bz2", ".conda"))}
    assert packed == {p.filename for p in lock.packages_for("linux-64")}  # exactly the lock's packages

    prefix = tmp_path / "node" / "cu&121"
    env = offline_env(tmp_path)
    proc = cli("unpack", str(archive), "-p", str(prefix), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["action"] == "created"
    nvcc = subprocess.run(cli_args("run", "-p", str(prefix), "--", "nvcc", "--version"), capture_output=True,
                          text=True, env=env)
    assert nvcc.returncode == 0 and "release 12.1" in nvcc.stdout, nvcc.stderr
    assert not (prefix / "CACHEDIR.TAG").exists()  # rattler's tag is removed: an env is not a cache
    meta = json.loads((prefix / "conda-meta" / "envlock").read_text())
    kept = prefix / "share" / "envlock" / "locks" / "torch2.3.0-cu121" / "conda-lock.yml"
    assert meta["lock_path"] == str(kept) and kept.read_bytes() == lock_of(project).read_bytes()
    assert _leftovers(tmp_path / "cache") == []
    # again onto the same env: nothing to do
    proc = cli("unpack", str(archive), "-p", str(prefix), "--json", env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["action"] == "unchanged", proc.stderr


def cli_args(*args: str) -> list[str]:
    from tests.test_create import ENVLOCK

    return [*ENVLOCK, *args]


@pytest.fixture(scope="module")
def packed(project: Path, tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:  # noqa: F811
    """The toolchain lock's linux-64 archive (from the file:// test channel)."""
    out = tmp_path_factory.mktemp("packed") / "env.tar"
    proc = cli("pack", "--project-dir", str(project), "--platform", "linux-64", "-o", str(out), "-q",
               "--mirror", f"conda-forge={test_channel_url}")
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_same_lock_packs_to_the_same_bytes(packed: Path, project: Path, tmp_path: Path,  # noqa: F811
                                                test_channel_url: str) -> None:
    again = tmp_path / "again.tar"
    proc = cli("pack", "--project-dir", str(project), "--platform", "linux-64", "-o", str(again), "-q",
               "--mirror", f"conda-forge={test_channel_url}", env=connected_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert hashlib.sha256(again.read_bytes()).digest() == hashlib.sha256(packed.read_bytes()).digest()
    proc = cli("pack", "--project-dir", str(project), "--platform", "linux-64", "-o", str(again),
               "--mirror", f"conda-forge={test_channel_url}", env=connected_env(tmp_path))
    assert_one_error(proc, 1, "exists")  # no silent overwrite; --force replaces


# --------------------------------------------------------------------------- corruption: refused, nothing left


@pytest.mark.parametrize("member", ["channels/conda-forge/linux-64/cuda-nvcc-impl-12.1.105-h3b68e60_0.tar.bz2",
                                    "locks/torch2.3.0-cu121/conda-lock.yml"])
def test_a_flipped_byte_is_refused_and_nothing_is_left(packed: Path, tmp_path: Path, member: str) -> None:
    archive = tmp_path / "bad.tar"
    shutil.copy(packed, archive)
    assert member in _members(archive)
    _flip_byte_in(archive, member)
    prefix = tmp_path / "env"
    proc = cli("unpack", str(archive), "-p", str(prefix), env=offline_env(tmp_path))
    assert_one_error(proc, 1, f"member {member} is corrupt")
    assert not prefix.exists() and _leftovers(tmp_path / "cache") == []
    assert not (tmp_path / "cache" / "pkgs").exists()  # refused before create fetched anything


def test_a_package_swapped_with_a_matching_manifest_is_refused_by_the_locks_hash(packed: Path, tmp_path: Path) -> None:
    """Manifest and package rewritten together (an edited archive): create's check against the lock refuses it."""
    victim = "channels/conda-forge/linux-64/cuda-nvcc-impl-12.1.105-h3b68e60_0.tar.bz2"
    archive = tmp_path / "swapped.tar"
    with tarfile.open(packed) as src, tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as dst:
        manifest = json.loads(src.extractfile("envlock-pack.json").read())  # type: ignore[union-attr]
        body = bytearray(src.extractfile(victim).read())  # type: ignore[union-attr]
        body[len(body) // 2] ^= 0xFF
        manifest["members"][victim] = hashlib.sha256(body).hexdigest()
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("envlock-pack.json")
        info.size = len(data)
        dst.addfile(info, io.BytesIO(data))
        for m in src.getmembers()[1:]:
            payload = bytes(body) if m.name == victim else src.extractfile(m).read()  # type: ignore[union-attr]
            m.size = len(payload)
            dst.addfile(m, io.BytesIO(payload))
    prefix = tmp_path / "env"
    proc = cli("unpack", str(archive), "-p", str(prefix), env=offline_env(tmp_path))
    assert_one_error(proc, 1, "sha256 mismatch for cuda-nvcc-impl-12.1.105-h3b68e60_0.tar.bz2")
    assert not prefix.exists() and _leftovers(tmp_path / "cache") == []


def test_a_truncated_archive_or_another_tar_is_refused(packed: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar"
    cut.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    proc = cli("unpack", str(cut), "-p", str(tmp_path / "e1"), env=offline_env(tmp_path))
    assert proc.returncode == 1 and "error: " in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "e1").exists()
    other = tmp_path / "other.tar"
    with tarfile.open(other, "w") as tf:
        tf.add(__file__, arcname="test.py")
    proc = cli("unpack", str(other), "-p", str(tmp_path / "e2"), env=offline_env(tmp_path))
    assert_one_error(proc, 1, "is not an envlock pack archive")
    assert not (tmp_path / "e2").exists() and _leftovers(tmp_path / "cache") == []


def test_unpacking_onto_a_directory_that_is_not_an_env_is_refused(packed: Path, tmp_path: Path) -> None:
    target = tmp_path / "data"
    target.mkdir()
    (target / "results.csv").write_text("precious\n")
    proc = cli("unpack", str(packed), "-p", str(target), env=offline_env(tmp_path))
    assert_one_error(proc, 1, "is not a conda environment")
    assert [p.name for p in target.iterdir()] == ["results.csv"] and _leftovers(tmp_path / "cache") == []


# --------------------------------------------------------------------------- bad input when packing


def test_packing_with_a_package_not_reachable_names_the_first_and_writes_nothing(
    project: Path, tmp_path: Path, test_channel: Path  # noqa: F811
) -> None:
    chan = tmp_path / "partial" / "conda-forge"
    shutil.copytree(test_channel, chan)
    order = [p.filename for p in read_lock(lock_of(project)).packages_for("linux-64")]
    first, later = order[3], order[-2]
    for name in (later, first):  # removed in reverse order: the error must still name the lock's first
        next(chan.rglob(name)).unlink()
    out = tmp_path / "out"
    out.mkdir()
    proc = cli("pack", "--project-dir", str(project), "--platform", "linux-64", "-o", str(out / "env.tar"),
               "--mirror", f"conda-forge={chan}", env=connected_env(tmp_path))
    assert_one_error(proc, 1, first)
    assert "1 more not reachable" in proc.stderr and later not in proc.stderr
    assert list(out.iterdir()) == []  # no archive, no staging dir


def test_pack_refuses_a_platform_the_lock_lacks(project: Path, tmp_path: Path) -> None:  # noqa: F811
    one = lock_of(project).parent / "conda-linux-64.lock"  # an @EXPLICIT lock holds one platform
    proc = cli("pack", "--project-dir", str(project), "--lock", str(one), "--platform", "win-64", "-o",
               str(tmp_path / "x.tar"), env=connected_env(tmp_path))
    assert_one_error(proc, 1, "has no win-64 packages")
    assert not (tmp_path / "x.tar").exists()
    proc = cli("pack", "--project-dir", str(project), "--platform", "osx-arm64", "-o", str(tmp_path / "x.tar"),
               env=connected_env(tmp_path))
    assert_one_error(proc, 2, "torch on macOS has no CUDA")  # not a platform envlock locks: a usage error


# --------------------------------------------------------------------------- the PyPI part


def test_a_full_lock_packs_its_wheels_and_unpacks_them_offline(full_project: Path, tmp_path: Path,  # noqa: F811
                                                               test_channel_url: str) -> None:
    lock = full_project / "locks" / FULL / "conda-lock.yml"
    archive = tmp_path / "full.tar"
    proc = cli("pack", "--lock", str(lock), "--platform", "linux-64", "-o", str(archive), "-q",
               "--mirror", f"conda-forge={test_channel_url}", env=connected_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    wheels = read_lock(lock).pypi_for("linux-64")
    members = _members(archive)
    assert {f"pypi/files/{w.filename}" for w in wheels} <= set(members)
    assert "pypi/simple/torch/index.html" in members and "locks/torch2.7.1-cu126/requirements-linux-64.txt" in members
    prefix = tmp_path / "env"
    proc = cli("unpack", str(archive), "-p", str(prefix), "--json", env=offline_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["wheels"] == len(wheels) and doc["packages"] == len(read_lock(lock).packages_for("linux-64"))
    assert "cuda = '12.6'" in (prefix / "lib" / "python3.11" / "site-packages" / "torch" / "version.py").read_text()


def test_the_archives_pypi_part_installs_with_plain_pip_as_documented(full_project: Path, tmp_path: Path,  # noqa: F811
                                                                      test_channel_url: str) -> None:
    """The pip line conda-<platform>.txt documents for the PyPI part, run as written with the real pip (the
    host python with --target stands in for PREFIX/bin/python: the test channel's python is a stand-in),
    offline: every wheel is found in pypi/files and matches the requirements file's hashes."""
    lock = full_project / "locks" / FULL / "conda-lock.yml"
    archive = tmp_path / "full.tar"
    proc = cli("pack", "--lock", str(lock), "--platform", "linux-64", "-o", str(archive), "-q",
               "--mirror", f"conda-forge={test_channel_url}", env=connected_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    with tarfile.open(archive) as tf:
        tf.extractall(unpacked, filter="data")
    usage = " ".join(ln.removeprefix("#").strip() for ln in (unpacked / "conda-linux-64.txt").read_text().splitlines()
                     if ln.startswith("#"))  # fmt: skip
    documented = usage.split("a PyPI part: ", 1)[1].split(")", 1)[0]
    assert documented.startswith("PREFIX/bin/python -m pip install --no-index --find-links pypi/files")
    target = tmp_path / "site"
    command = documented.replace("PREFIX/bin/python", shlex.quote(sys.executable), 1) + f" --target {target} -q"
    env = {**offline_env(tmp_path), "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(["bash", "-c", command], cwd=unpacked, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "cuda = '12.6'" in (target / "torch" / "version.py").read_text()
    wheel = next((unpacked / "pypi" / "files").glob("torch-*.whl"))
    wheel.write_bytes(wheel.read_bytes()[:-8] + b"tampered")  # one wheel that is not the locked one
    shutil.rmtree(target)
    bad = subprocess.run(["bash", "-c", command], cwd=unpacked, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "HASHES" in bad.stderr


# --------------------------------------------------------------------------- plain conda


def test_the_archives_channel_installs_with_plain_conda(conda_venv: Path, packed: Path, project: Path,  # noqa: F811
                                                        tmp_path: Path) -> None:
    """The command conda-<platform>.txt documents, run as written with the real conda 26.7.1, offline."""
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    with tarfile.open(packed) as tf:
        tf.extractall(unpacked, filter="data")
    usage = (unpacked / "conda-linux-64.txt").read_text().splitlines()[2].removeprefix("#   ")
    assert usage.startswith("conda create --offline -p PREFIX --override-channels -c file://$PWD/channels/conda-forge")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".condarc").write_text(f"pkgs_dirs: [{home / 'pkgs'}]\nsolver: classic\nalways_yes: true\n"
                                   "add_pip_as_python_dependency: false\nnotify_outdated_conda: false\n")
    prefix = tmp_path / "conda-env"
    command = usage.replace("conda ", f"'{conda_venv}/bin/python' -m conda ", 1).replace("PREFIX", str(prefix))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "CONDARC": str(home / ".condarc"),
           "LC_ALL": "C.UTF-8", "CONDA_OVERRIDE_CUDA": "12.1", "HTTPS_PROXY": DEAD, "HTTP_PROXY": DEAD}
    proc = subprocess.run(["bash", "-c", command], cwd=unpacked, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wanted = {p.filename.removesuffix(".tar.bz2").removesuffix(".conda")
              for p in read_lock(lock_of(project)).packages_for("linux-64")}
    assert {p.stem for p in (prefix / "conda-meta").glob("*.json")} == wanted
    assert (prefix / "bin" / "nvcc").is_file()
    # The recipe's activation step (no envlock): `conda activate` then sets CUDA_HOME to the env, as
    # `envlock run` does, and `conda deactivate` gives the old one back.
    lines = (unpacked / "conda-linux-64.txt").read_text().splitlines()
    step = next(ln for ln in lines if ln.startswith("#   for k in activate deactivate")).removeprefix("#   ")
    proc = subprocess.run(["bash", "-c", step.replace("PREFIX", shlex.quote(str(prefix)))], cwd=unpacked, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    hook = f'eval "$(\'{conda_venv}/bin/python\' -m conda shell.bash hook)"'
    script = (f"{hook}; conda activate '{prefix}'; echo \"$CUDA_HOME|$(command -v nvcc)\"; conda deactivate; "
              "echo \"$CUDA_HOME\"")
    shell = subprocess.run(["bash", "-c", script], env={**env, "CUDA_HOME": "/usr/local/cuda-11.8"},
                           capture_output=True, text=True, timeout=120)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.splitlines() == [f"{prefix}|{prefix}/bin/nvcc", "/usr/local/cuda-11.8"]
