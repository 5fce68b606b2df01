"""Slow tier: a CUDA toolchain made from NVIDIA's own PyPI wheels, locked and created by envlock, diagnosed.

tests/nvidia_wheels.py repackages the wheels as conda packages in conda-forge's layout and indexes them with
rattler; `envlock resolve` locks torch 2.14.1's CUDA 13.0 against that channel, `envlock create` builds the
env, and `envlock run -p PREFIX -- envlock doctor --compile` must report no error: the env's own nvcc
compiles and links a .cu including cusparse.h, with /usr/local (the system CUDA) off PATH and CUDA_HOME.
Then the cuSPARSE package is removed (its files and its conda-meta record, as `conda remove --force` does):
doctor names cusparse.h and the envlock command that repairs it, and that command, run as printed, does.

Needs pip access to NVIDIA's wheels once (~0.9 GB, cached; see nvidia_wheels.cache_dir()) and gcc.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None, reason="needs gcc/g++"),
]
CLEAN_PATH = "/usr/bin:/bin"  # no /usr/local/bin (this machine's system nvcc), no /usr/local/cuda


@pytest.fixture(scope="module")
def channel() -> Path:
    from tests import nvidia_wheels

    try:
        path, took = nvidia_wheels.build_channel()
    except RuntimeError as exc:  # no index reachable, or pip refused
        pytest.skip(f"NVIDIA wheels unavailable: {exc}")
    print(
        f"nvidia wheels channel {path}: download {took['download_s']:.1f} s, repackage+index {took['build_s']:.1f} s"
    )
    return path


def _env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "ENVLOCK_CACHE_DIR")}
    return {**keep, "PATH": CLEAN_PATH, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _envlock(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envlock", *args],
        env=_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _doctor(prefix: Path) -> tuple[int, dict[str, Any]]:
    """`envlock run -p PREFIX -- envlock doctor --compile --json` (the env's activation, no conda)."""
    r = _envlock(
        "run", "-p", str(prefix), "--", sys.executable, "-m", "envlock", "doctor", "--compile", "--json"
    )
    return r.returncode, json.loads(r.stdout)


@pytest.fixture(scope="module")
def env(channel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(prefix, lock) created by envlock from the wheel channel."""
    project = tmp_path_factory.mktemp("project")
    prefix = tmp_path_factory.mktemp("envs") / "cuda13"
    r = _envlock(
        "resolve",
        "--torch",
        "2.14.1",
        "--channel",
        channel.as_uri(),
        "--platform",
        "linux-64",
        "--toolchain-only",  # the conda toolchain is what doctor checks (no PyPI part: no network here)
        "--project-dir",
        str(project),
        "--lock",
        "nv",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lock = project / "locks" / "nv" / "conda-lock.yml"
    r = _envlock("create", "--lock", str(lock), "-p", str(prefix), "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    return prefix, lock


def test_env_from_nvidia_wheels_is_green_and_compiles(env: tuple[Path, Path]) -> None:
    prefix, _ = env
    rc, doc = _doctor(prefix)
    by = {f["code"]: f for f in doc["findings"]}
    assert rc == 0 and doc["summary"]["error"] == 0, [
        f["message"] for f in doc["findings"] if f["severity"] == "error"
    ]
    assert {f["code"] for f in doc["findings"] if f["severity"] == "warning"} <= {
        "driver.present"
    }  # no GPU here
    assert by["env.target"]["details"]["envlock_env"] and by["env.target"]["details"]["active"]
    assert by["nvcc.found"]["details"]["path"] == str(prefix / "bin" / "nvcc")
    assert by["nvcc.found"]["details"]["top"] == str(
        prefix
    )  # nvcc's own nvcc.profile root: the env, not /usr/local
    assert by["cuda_home.consistent"]["details"]["CUDA_HOME"] == str(prefix)
    assert by["header.cusparse.h"]["details"]["path"] == str(
        prefix / "targets/x86_64-linux/include/cusparse.h"
    )
    compiled = by["compile.nvcc"]
    assert compiled["severity"] == "ok" and "cusparse_header=" in compiled["details"]["run_output"]
    assert compiled["details"]["command"][0] == str(prefix / "bin" / "nvcc")
    assert str(prefix) in " ".join(compiled["details"]["command"])  # linked against the env's cudart
    print(f"compile.nvcc: {compiled['details']['seconds']} s")


def _remove_package(prefix: Path, name: str) -> None:
    """What `conda remove --force NAME` does: delete the files its conda-meta record lists, then the record."""
    record = next((prefix / "conda-meta").glob(f"{name}-[0-9]*.json"))
    for rel in json.loads(record.read_text())["files"]:
        (prefix / rel).unlink()
    record.unlink()


def test_removed_cusparse_is_named_and_the_printed_fix_works(env: tuple[Path, Path]) -> None:
    prefix, lock = env
    _remove_package(prefix, "libcusparse-dev")
    rc, doc = _doctor(prefix)
    by = {f["code"]: f for f in doc["findings"]}
    assert rc == 1
    assert {f["code"] for f in doc["findings"] if f["severity"] == "error"} == {
        "header.cusparse.h",
        "compile.nvcc",
    }
    assert "cusparse.h not found" in by["header.cusparse.h"]["message"]
    assert "cusparse.h: No such file or directory" in by["compile.nvcc"]["message"]
    fix = by["header.cusparse.h"]["hint"].split("   (")[0]
    assert fix == f"envlock create --lock {lock} -p {prefix}"
    argv = shlex.split(fix)
    r = _envlock(*argv[1:])  # the hint, run as printed
    assert r.returncode == 0, r.stdout + r.stderr
    rc, doc = _doctor(prefix)
    assert rc == 0 and doc["summary"]["error"] == 0
