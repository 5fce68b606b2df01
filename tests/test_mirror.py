"""`envlock mirror` (issue 14 item 2): a directory of exactly what the locks need, then create AND re-lock against
it with no other network — over file:// and behind a plain static HTTP server (Python's SimpleHTTPRequestHandler,
nothing envlock-specific), with a fresh cache and every proxy pointing at a closed port.
"""

from __future__ import annotations

import functools
import json
import shutil
import stat
import threading
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest

from tests.output import unfolded

from envlock.formats import read_lock
from tests.channelbuilder import ChannelServer
from tests.lockproject import snapshot
from tests.loopserver import LoopbackServer
from tests.test_create import assert_one_error, cli, lock_of, project, project_124  # noqa: F401 - fixtures
from tests.test_pack import connected_env, offline_env
from tests.test_pypi_part import NAME as FULL, full_project  # noqa: F401 - session fixture
from tests.wheelindex import WheelIndex


class StaticServer:
    """Any static HTTP server: the stdlib's, over one directory, counting the paths it serves."""

    def __init__(self, root: Path) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                outer.paths.append(self.path)

        self.httpd = LoopbackServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def upstream(tmp_path: Path, channel_root: Path) -> ChannelServer:
    """A private copy of the test channel behind its own HTTP server (the connected side)."""
    shutil.copytree(channel_root / "conda-forge", tmp_path / "upstream" / "conda-forge")
    server = ChannelServer(tmp_path / "upstream").start()
    yield server
    server.stop()


def _mirror(dest: Path, tmp_path: Path, *args: str) -> dict:
    proc = cli("mirror", *args, str(dest), "--json", env=connected_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _records(dest: Path) -> set[str]:
    out = set()
    for repodata in dest.glob("conda-forge/*/repodata.json"):
        doc = json.loads(repodata.read_text())
        out |= set(doc.get("packages", {})) | set(doc.get("packages.conda", {}))
    return out


# --------------------------------------------------------------------------- the "done when"


def test_mirror_then_create_with_only_the_mirror_and_a_fresh_cache(project: Path, tmp_path: Path,  # noqa: F811
                                                                   upstream: ChannelServer) -> None:
    dest = tmp_path / "mirror"
    doc = _mirror(dest, tmp_path, "--project-dir", str(project), "--mirror", f"conda-forge={upstream.channel_url()}")
    lock = read_lock(lock_of(project))
    assert doc["packages"] == len({p.url for p in lock.packages}) == doc["fetched"]
    assert doc["mirrors"] == [f"conda-forge={dest.as_uri()}/conda-forge"]
    assert _records(dest) == {p.filename for p in lock.packages}  # exactly what the lock needs, every platform
    assert {p.parent.name for p in dest.glob("conda-forge/*/repodata.json")} == {"noarch", "linux-64", "linux-aarch64", "win-64"}
    upstream.stop()
    shutil.rmtree(tmp_path / "upstream")
    prefix = tmp_path / "env"
    # a URL key (not the channel's name) pointed at the mirror's root: the error says which subdirectory to use
    canonical = "https://conda.anaconda.org/conda-forge"
    wrong = cli("create", "--project-dir", str(project), "-p", str(prefix), "--platform", "linux-64",
                env=offline_env(tmp_path, ENVLOCK_MIRRORS=f"{canonical}={dest.as_uri()}"))
    assert_one_error(wrong, 1, "is missing")
    assert f"hint: {dest} is an envlock mirror" in unfolded(wrong.stderr)
    assert f"conda-forge={dest.as_uri()}/conda-forge" in unfolded(wrong.stderr)
    assert not prefix.exists()
    # the line as written: the mirror's root names its conda-forge/ (and what mirror printed works too)
    for entry, where in ((f"conda-forge={dest.as_uri()}", prefix), (doc["mirrors"][0], tmp_path / "env2")):
        env = offline_env(tmp_path, ENVLOCK_MIRRORS=entry)
        proc = cli("create", "--project-dir", str(project), "-p", str(where), "--platform", "linux-64", "-q", env=env)
        assert proc.returncode == 0, proc.stderr
        nvcc = cli("run", "-p", str(where), "--", "nvcc", "--version", env=env)
        assert "release 12.1" in nvcc.stdout, nvcc.stderr


def test_served_by_a_static_http_server_create_and_relock_need_nothing_else(
    project: Path, tmp_path: Path, test_channel: Path  # noqa: F811
) -> None:
    dest = tmp_path / "mirror"
    _mirror(dest, tmp_path, "--project-dir", str(project), "--mirror", f"conda-forge={test_channel}")
    modes = {stat.S_IMODE(p.stat().st_mode) & 0o444 for p in dest.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert modes == {0o444}  # readable by the web server's user
    server = StaticServer(dest)
    try:
        env = offline_env(tmp_path, ENVLOCK_MIRRORS=f"conda-forge={server.url}/conda-forge", NO_PROXY="127.0.0.1")
        proc = cli("create", "--project-dir", str(project), "-p", str(tmp_path / "env"), "--platform", "linux-64",
                   "-q", env=env)
        assert proc.returncode == 0, proc.stderr
        assert sum(p.endswith(".tar.bz2") for p in server.paths) == len(read_lock(lock_of(project)).packages_for("linux-64"))
        # re-locking every platform against the mirror: the same bytes (its repodata keeps the spec's cutoff working)
        relock = shutil.copytree(project, tmp_path / "relock", ignore=shutil.ignore_patterns(".cache"))
        before = snapshot(relock)
        proc = cli("lock", "--all", "--project-dir", str(relock), env={**env, "ENVLOCK_CACHE_DIR": str(tmp_path / "c2")})
        assert proc.returncode == 0, proc.stderr
        assert snapshot(relock) == before
        assert any("repodata" in p for p in server.paths)
    finally:
        server.stop()


# --------------------------------------------------------------------------- incremental


def test_a_rerun_fetches_nothing_and_a_new_lock_only_what_is_new(project: Path, project_124: Path,  # noqa: F811
                                                                tmp_path: Path, upstream: ChannelServer) -> None:
    dest = tmp_path / "mirror"
    src = ["--mirror", f"conda-forge={upstream.channel_url()}"]
    _mirror(dest, tmp_path, "--project-dir", str(project), "--platform", "linux-64", *src)
    upstream.reset_log()
    again = _mirror(dest, tmp_path, "--project-dir", str(project), "--platform", "linux-64", *src)
    assert again["fetched"] == 0 and upstream.count() == 0
    first = read_lock(lock_of(project)).packages_for("linux-64")
    second = read_lock(lock_of(project_124)).packages_for("linux-64")
    new = {p.url for p in second} - {p.url for p in first}
    assert new  # CUDA 12.4 against 12.1: another toolchain
    more = _mirror(dest, tmp_path, "--lock", str(lock_of(project_124)), *src)
    assert more["fetched"] == len(new) == upstream.count("*.tar.bz2")
    assert _records(dest) == {p.filename for p in (*first, *second)}
    assert set(more["locks"]) == {"torch2.3.0-cu121", "torch2.4.0-cu124"} or len(more["locks"]) == 2
    manifest = json.loads((dest / "envlock-mirror.json").read_text())
    assert manifest["channels"] == {"conda-forge": "conda-forge"} and len(manifest["locks"]) == 2


def test_mirror_bad_input(project: Path, tmp_path: Path, test_channel: Path) -> None:  # noqa: F811
    proc = cli("mirror", "--project-dir", str(project), str(tmp_path / "m"), "--mirror", f"conda-forg={test_channel}",
               env=connected_env(tmp_path))
    assert_one_error(proc, 2, "--mirror conda-forg=")
    proc = cli("mirror", "--project-dir", str(project), "--platform", "osx-64", str(tmp_path / "m"),
               "--mirror", f"conda-forge={test_channel}", env=connected_env(tmp_path))
    assert_one_error(proc, 2, "--platform 'osx-64' is not a platform")  # not a choice: a usage error
    one = lock_of(project).parent / "conda-linux-64.lock"
    proc = cli("mirror", "--project-dir", str(project), "--lock", str(one), "--platform", "win-64", str(tmp_path / "m"),
               "--mirror", f"conda-forge={test_channel}", env=connected_env(tmp_path))
    assert_one_error(proc, 1, "no lock given has win-64")
    assert not (tmp_path / "m").exists()


# --------------------------------------------------------------------------- the PyPI part


def test_the_pypi_part_create_and_relock_through_pypi_equals(full_project: Path, tmp_path: Path,  # noqa: F811
                                                             test_channel: Path, wheel_index: WheelIndex) -> None:
    """Wheels in a PEP 503 index: create finds each by name (`pypi=`), a re-lock gets canonical URLs back."""
    dest = tmp_path / "mirror"
    doc = _mirror(dest, tmp_path, "--project-dir", str(full_project), "--mirror", f"conda-forge={test_channel}")
    wheels = read_lock(lock_of(full_project)).pypi_for("linux-64")
    assert doc["wheels"] == len(wheels) and f"pypi={dest.as_uri()}/pypi/simple" in doc["mirrors"]
    torch_page = (dest / "pypi" / "simple" / "torch" / "index.html").read_text()
    assert 'data-upload-time="' in torch_page and "data-dist-info-metadata=" in torch_page
    server = StaticServer(dest)
    try:
        mirrors = f"conda-forge={server.url}/conda-forge,pypi={server.url}/pypi/simple"
        env = offline_env(tmp_path, ENVLOCK_MIRRORS=mirrors, NO_PROXY="127.0.0.1")
        seen = len(wheel_index.requests)
        proc = cli("create", "--project-dir", str(full_project), "-p", str(tmp_path / "env"), "--platform", "linux-64",
                   "--json", env=env)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["wheels"] == len(wheels)
        relock = shutil.copytree(full_project, tmp_path / "relock")
        before = snapshot(relock)
        proc = cli("lock", "--all", "--project-dir", str(relock), env={**env, "ENVLOCK_CACHE_DIR": str(tmp_path / "c2")})
        assert proc.returncode == 0, proc.stderr
        assert snapshot(relock) == before  # canonical wheel URLs, same pins, same bytes
        assert len(wheel_index.requests) == seen  # the real index was never asked
        assert sum("/pypi/files/" in p and p.endswith(".whl") for p in server.paths) == len(wheels)
    finally:
        server.stop()
