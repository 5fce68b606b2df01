"""A name that does not resolve: said in words, with the host and the setting that chose it, and not retried
(issue 34.5).

On e081238 an offline resolve printed urllib3's text (`HTTPSConnectionPool(host=…)…NameResolutionError`) and
waited 7-10 s while rattler and uv asked the resolver again. Here envlock runs in a network namespace with only
a loopback device (`unshare -n`, root): no resolver can be reached, and no packet leaves. The hosts are
envlock's own defaults (pip's default index, the canonical channel), read from envlock, never named here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.output import error_and_hint


def _isolated_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "-n", "true"], check=False, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not _isolated_ok(), reason="needs `unshare -n` (root, or a user namespace) to run "
                                                           "envlock where no resolver can be reached")


def _offline_env(tmp_path: Path) -> dict[str, str]:
    """No mirror, no index setting (pip's default index), a cache of the test's own."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "ENVLOCK_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                                "https_proxy", "all_proxy"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"),
            "ENVLOCK_CONFIG_DIR": str(tmp_path / "config"), "COLUMNS": "200"}


def _isolated(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(["unshare", "-n", sys.executable, "-m", "envlock", *args], check=False, capture_output=True,
                          text=True, env=env, timeout=120)
    return done, time.monotonic() - start


def _host(url: str) -> str:
    return urlsplit(url).hostname or url


def test_the_index_that_does_not_resolve_is_named_with_its_setting_in_words(tmp_path: Path) -> None:
    from envlock.seams.pypi.pipconf import configured_index_url

    env = _offline_env(tmp_path)
    index, origin = configured_index_url({"PIP_CONFIG_FILE": os.devnull})
    done, _ = _isolated("resolve", "--torch", "9.9.9", "--project-dir", str(tmp_path / "p"), env=env)
    assert done.returncode == 4, done.stderr
    error, hint = error_and_hint(done.stderr)
    assert f"the name {_host(index)} does not resolve" in error and f"(from {origin})" in error, error
    assert "not retried" in error and "attempts" not in error, error
    assert not any(w in done.stderr for w in ("HTTPSConnectionPool", "NameResolutionError", "Max retries")), done.stderr
    assert "PIP_INDEX_URL" in hint and "--cuda" in hint, hint


def test_a_resolve_where_no_name_resolves_stops_at_once_naming_the_host(tmp_path: Path) -> None:
    """The conda part (rattler) and the PyPI part (uv) run side by side; both retried a failed lookup (7.3 s here
    on e081238, measured); each now asks the resolver once first."""
    from envlock.seams.mirror_urls import CANONICAL_BASE

    env = _offline_env(tmp_path)
    done, took = _isolated("resolve", "--torch", "2.7.1", "--platform", "linux-64", "--project-dir",
                           str(tmp_path / "p"), env=env)
    assert done.returncode == 4, done.stderr
    error, _ = error_and_hint(done.stderr)
    assert "does not resolve" in error and "not retried" in error, error
    assert _host(CANONICAL_BASE) in error or "package index" in error or "index pip uses" in error, error
    assert "lookup address information" not in error and "dns error" not in done.stderr, done.stderr
    assert took < 5, f"{took:.1f} s: a failed lookup was retried"
    assert not (tmp_path / "p" / "locks").exists()  # nothing half-written


def test_a_download_that_cannot_resolve_its_host_names_it_once(tmp_path: Path, test_channel: Path) -> None:
    """create of a lock with canonical URLs, no mirror, an empty cache: the download says the host, once."""
    from envlock.formats import read_lock
    from tests.lockproject import make_project

    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",), name="first")
    first = read_lock(project / "locks" / "first" / "conda-lock.yml").packages[0].url
    env = _offline_env(tmp_path)
    done, took = _isolated("create", "-q", "-p", str(tmp_path / "env"), "--project-dir", str(project), env=env)
    assert done.returncode == 4, done.stderr
    error, _ = error_and_hint(done.stderr)
    assert f"the name {_host(first)} does not resolve" in error and "attempts" not in error, error
    assert took < 5, f"{took:.1f} s"
    assert not (tmp_path / "env").exists()
