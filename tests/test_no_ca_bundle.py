"""No CA certificate bundle (a chroot, a slim image, SSL_CERT_FILE/SSL_CERT_DIR pointing nowhere).

py-rattler 0.28 panicked in `create` ("rust future panicked: unknown error" after a Rust backtrace) and failed
`resolve` with "internal error: ValueError: builder error", even for file:// channels. Real processes here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.output import logical_lines

from tests.lockproject import make_project

ENVLOCK = [sys.executable, "-m", "envlock"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    nowhere = str(tmp_path / "no-such-ca")
    return {**os.environ, "SSL_CERT_FILE": nowhere, "SSL_CERT_DIR": nowhere,
            "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), **extra}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(tmp_path_factory.mktemp("noca"), test_channel, platforms=("linux-64",))


def test_create_and_resolve_work_from_file_channels_without_a_system_bundle(project, test_channel, tmp_path) -> None:
    mirror = f"conda-forge={test_channel.as_uri()}"
    created = subprocess.run([*ENVLOCK, "create", "--project-dir", str(project), "-p", str(tmp_path / "env"), "-q",
                              "--mirror", mirror], capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "env" / "bin" / "nvcc").is_file()
    assert "panicked" not in created.stderr and "Traceback" not in created.stderr
    assert logical_lines(created.stderr) == [
        f"warning: no CA certificates could be loaded (SSL_CERT_FILE={tmp_path / 'no-such-ca'} has none); "
        "rattler uses certifi's bundle, as envlock's own downloads do"]
    (tmp_path / "p").mkdir()
    resolved = subprocess.run([*ENVLOCK, "resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64",
                               "--mirror", mirror, "--project-dir", str(tmp_path / "p")],
                              capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert resolved.returncode == 0, resolved.stderr
    assert "internal error" not in resolved.stderr and len(logical_lines(resolved.stderr)) == 1


def test_without_any_bundle_it_is_one_error_and_a_hint(test_channel, tmp_path) -> None:
    """Not even certifi's (a site without it): one `error:` line, one `hint:` line, exit 4, no panic."""
    shadow = tmp_path / "shadow"
    (shadow / "certifi").mkdir(parents=True)
    (shadow / "certifi" / "__init__.py").write_text("raise ImportError('no certifi on this machine')\n")
    (tmp_path / "p").mkdir()
    proc = subprocess.run([*ENVLOCK, "resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64",
                           "--mirror", f"conda-forge={test_channel.as_uri()}", "--project-dir", str(tmp_path / "p")],
                          capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path, PYTHONPATH=os.pathsep.join([str(shadow), *sys.path])))
    assert proc.returncode == 4, proc.stderr
    assert logical_lines(proc.stderr) == [
        "error: no CA certificates could be loaded for rattler's HTTP client",
        "hint: install the system's CA certificates (e.g. apt-get install ca-certificates) or set SSL_CERT_FILE to a "
        "PEM bundle; rattler needs them even for file:// channels",
    ]
    assert list((tmp_path / "p").iterdir()) == []
