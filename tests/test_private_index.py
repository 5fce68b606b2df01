"""Private package indexes without upload times (issue 34, item 2): a static PEP 503 folder (file://) and a
loopback HTTP index whose pages carry no PEP 700 `upload-time` — what air-gapped sites and devpi-style mirrors
serve. The resolution cutoff cannot select their files (uv drops every dateless file once a cutoff applies): on
e081238 every full-env resolve against one failed ("there is no version of torch==2.7.1 … change or drop the
conflicting `- pip:` requirement", there was none), and a lock of a static index whose pages link their files
outside the index folder was refused by create.

Real uv, real wheels (tests/wheelindex.py), the real test channel; conda-lock's parser reads the lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.formats import read_lock
from tests.lockproject import snapshot
from tests.output import flat
from tests.wheelindex import WheelIndex, build_wheel, common_wheels, torch_wheels, undated, write_static

ENVLOCK = [sys.executable, "-m", "envlock"]
NAME = "torch2.7.1-cu126"
NOTE = "gives no upload times"


def _wheels() -> list:
    return torch_wheels(("3.11",), ["2.7.1"]) + common_wheels()


def _env(tmp: Path, index: str, extra: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index, "ENVLOCK_CACHE_DIR": str(tmp / "cache")}
    env.pop("PIP_EXTRA_INDEX_URL", None)
    if extra:
        env["PIP_EXTRA_INDEX_URL"] = extra
    return env


def _envlock(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, env=env, timeout=600)


def _resolve(project: Path, cf: str, env: dict[str, str], *more: str) -> subprocess.CompletedProcess[str]:
    return _envlock(env, "resolve", "--torch", "2.7.1", "--platform", "linux-64", "--python", "3.11",
                    "--mirror", f"conda-forge={cf}", "--project-dir", str(project), *more)


@pytest.fixture(scope="module")
def static(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A static file:// index whose pages link their wheels outside the index folder (`../../files/`)."""
    root = tmp_path_factory.mktemp("static")
    return root, write_static(root, _wheels(), files_apart=True)


@pytest.fixture(scope="module")
def static_project(static: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    root, url = static
    project = tmp_path_factory.mktemp("static-project")
    done = _resolve(project, test_channel_url, _env(root, url))
    assert done.returncode == 0, done.stdout + done.stderr
    (project / "resolve.out").write_text(done.stdout)
    return project


def test_a_static_index_without_upload_times_locks_by_exact_pins_and_says_so_once(
        static: tuple[Path, str], static_project: Path) -> None:
    _, url = static
    out = flat((static_project / "resolve.out").read_text())
    assert out.count(NOTE) == 1 and f"{url} {NOTE}" in out, out  # once, naming the index
    spec = (static_project / "environments" / f"{NAME}.yml").read_text()
    assert f"  undated_indexes: [{url}]\n" in spec and "  exclude_newer: '" in spec
    lock = read_lock(static_project / "locks" / NAME / "conda-lock.yml")
    pins = {w.name: w for w in lock.pypi_for("linux-64")}
    assert pins["torch"].version == "2.7.1" and pins["nvidia-cuda-runtime-cu12"].version == "12.6.77"
    assert all(len(w.sha256) == 64 and w.url.startswith(url.rsplit("/", 1)[0] + "/files/") for w in pins.values())
    req = (static_project / "locks" / NAME / "requirements-linux-64.txt").read_text()
    assert f"torch==2.7.1 \\\n    --hash=sha256:{pins['torch'].sha256}\n" in req
    from conda_lock.lockfile import parse_conda_lock_file  # conda-lock's own parser reads it

    assert {p.name for p in parse_conda_lock_file(static_project / "locks" / NAME / "conda-lock.yml").package
            if p.manager == "pip"} == set(pins)


def test_the_static_lock_relocks_byte_identically_and_check_is_fresh(
        static: tuple[Path, str], static_project: Path, test_channel_url: str, tmp_path: Path) -> None:
    import shutil

    root, url = static
    project = shutil.copytree(static_project, tmp_path / "p")
    env = _env(root, url)
    before = snapshot(project)
    again = _resolve(project, test_channel_url, env)
    assert again.returncode == 0, again.stderr
    assert snapshot(project) == before  # bytes and mtimes: the spec, its record, every lock file
    relock = _envlock(env, "lock", "--all", "--mirror", f"conda-forge={test_channel_url}", "--project-dir", str(project))
    assert relock.returncode == 0, relock.stdout + relock.stderr
    assert snapshot(project) == before
    check = _envlock(env, "check", "--project-dir", str(project))
    assert check.returncode == 0, check.stdout + check.stderr


def test_create_reads_the_wheels_the_static_index_links_outside_its_folder(
        static: tuple[Path, str], static_project: Path, test_channel_url: str, tmp_path: Path) -> None:
    """Resolve never writes a URL create refuses: the pages link `../../files/…`, outside the index folder."""
    root, url = static
    env = _env(tmp_path, url)  # a fresh cache: every wheel is read from the index's files
    prefix = tmp_path / "env"
    done = _envlock(env, "create", "--lock", str(static_project / "locks" / NAME / "conda-lock.yml"), "-p",
                    str(prefix), "--mirror", f"conda-forge={test_channel_url}", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["wheels"] >= 5
    assert "cuda = '12.6'" in (prefix / "lib" / "python3.11" / "site-packages" / "torch" / "version.py").read_text()
    # A file the index does not link stays unreadable, wherever the lock says it is
    lock = static_project / "locks" / NAME / "conda-lock.yml"
    torch = next(w for w in read_lock(lock).pypi if w.name == "torch")
    stray = tmp_path / "stray" / torch.filename
    stray.parent.mkdir()
    stray.write_bytes((root / "files" / torch.filename).read_bytes())
    edited = tmp_path / "edited.yml"
    edited.write_text(lock.read_text().replace(torch.url, stray.as_uri()))
    refused = _envlock(_env(tmp_path / "other", url), "create", "--lock", str(edited), "-p", str(tmp_path / "env2"),
                       "--mirror", f"conda-forge={test_channel_url}")
    assert refused.returncode != 0 and "refusing to read" in refused.stderr, refused.stderr
    assert not (tmp_path / "env2").exists()


def test_a_relock_keeps_a_dateless_index_pins_and_refresh_moves_them(
        static_project: Path, test_channel_url: str, tmp_path: Path) -> None:
    """Without a cutoff, the earlier lock's pins are what keeps a re-lock where it was: a newer sympy on the
    index is not taken by `lock --all`; `lock --refresh` takes it."""
    import shutil

    root = tmp_path / "index"
    url = write_static(root, [*_wheels(), build_wheel("sympy", "1.99.5", requires=["mpmath<1.4,>=1.1.0"])])
    project = shutil.copytree(static_project, tmp_path / "p")
    spec = project / "environments" / f"{NAME}.yml"
    old_url = next(line for line in spec.read_text().splitlines() if "undated_indexes" in line)
    spec.write_text(spec.read_text().replace(old_url, f"  undated_indexes: [{url}]"))
    env = _env(tmp_path, url)
    cf = f"conda-forge={test_channel_url}"
    assert _envlock(env, "lock", "--all", "--mirror", cf, "--project-dir", str(project)).returncode == 0
    pins = {w.name: w.version for w in read_lock(project / "locks" / NAME / "conda-lock.yml").pypi}
    assert pins["sympy"] == "1.99.0"  # kept, though 1.99.5 is there now
    done = _envlock(env, "lock", "--refresh", "--mirror", cf, "--project-dir", str(project))
    assert done.returncode == 0, done.stdout + done.stderr
    pins = {w.name: w.version for w in read_lock(project / "locks" / NAME / "conda-lock.yml").pypi}
    assert pins["sympy"] == "1.99.5"


def test_a_loopback_index_without_upload_times(tmp_path: Path, test_channel_url: str) -> None:
    """PEP 691 JSON pages without `upload-time` (devpi-style): the same as the static folder."""
    index = WheelIndex().add(undated(_wheels())).start()
    try:
        env = _env(tmp_path, index.url)
        project = tmp_path / "p"
        done = _resolve(project, test_channel_url, env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert flat(done.stdout).count(f"{index.url} {NOTE}") == 1
        spec = (project / "environments" / f"{NAME}.yml").read_text()
        assert f"  undated_indexes: ['{index.url}']\n" in spec or f"  undated_indexes: [{index.url}]\n" in spec
        before = snapshot(project)
        assert _resolve(project, test_channel_url, env).returncode == 0
        assert snapshot(project) == before
    finally:
        index.stop()


def test_a_dated_index_keeps_its_cutoff_beside_a_dateless_extra_one(tmp_path: Path, test_channel_url: str,
                                                                     wheel_index: WheelIndex) -> None:
    """The default index gives upload times (sympy 1.99.0 is dated 2099: never locked), an extra one does not
    (the team's own packages, one depending on another): the cutoff is lifted for those packages only."""
    extra = WheelIndex().add(undated([build_wheel("team-model", "1.0", requires=["team-core>=2"]),
                                      build_wheel("team-core", "2.1")])).start()
    try:
        env = _env(tmp_path, wheel_index.url, extra.url)
        project = tmp_path / "p"
        done = _resolve(project, test_channel_url, env, "--pip", "team-model")
        assert done.returncode == 0, done.stdout + done.stderr
        pins = {w.name: w.version for w in read_lock(project / "locks" / NAME / "conda-lock.yml").pypi}
        assert pins["team-model"] == "1.0" and pins["team-core"] == "2.1" and pins["sympy"] == "1.13.3"
        out = flat(done.stdout)
        assert out.count(NOTE) == 1 and f"{extra.url} {NOTE}" in out and "team-core, team-model" in out, out
        spec = (project / "environments" / f"{NAME}.yml").read_text()
        assert extra.url in spec and wheel_index.url not in spec.split("envlock:")[1]
    finally:
        extra.stop()


def test_a_failed_pypi_solve_says_uvs_reason_and_no_pip_line_the_user_did_not_write(
        tmp_path: Path, test_channel_url: str, wheel_index: WheelIndex) -> None:
    # an index without torch at all: the error line says so; the hint names the index, not a `- pip:` line
    root = tmp_path / "bare"
    url = write_static(root, common_wheels())
    done = _resolve(tmp_path / "p", test_channel_url, _env(tmp_path, url))
    assert done.returncode == 3
    err = flat(done.stderr)
    assert "torch was not found in the package registry" in err and "- pip:" not in err, err
    assert url in err and "--toolchain-only" in err
    # the cutoff filtered what the user's own line needs: uv's reason on the error line, the line in the hint
    done = _resolve(tmp_path / "q", test_channel_url, _env(tmp_path, wheel_index.url), "--pip", "sympy>=1.99",
                    "--exclude-newer", "2025-01-01T00:00:00Z")
    assert done.returncode == 3
    err = flat(done.stderr)
    assert "(uv: `sympy` was filtered by `exclude-newer`" in err and "'sympy>=1.99'" in err, err
    assert "`envlock lock --refresh" in err
