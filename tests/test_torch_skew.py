"""The skew is measured from torch's own CUDA (issue 34, item 3).

torch 2.3.0+cu121 installed, `--cuda 12.6`: on e081238 the summary said `skew exact` and "torch's cuDNN is unknown:
no cudnn requested", with no warning, though resolve knew torch was cu121; doctor then warned "5 minors" with a
fix whose own hint was `--cuda X.Y` again. `--torch-source conda-forge --toolchain-only` printed "toolchain only
(no python, no PyPI part)" over a lock holding python and pytorch. Real venvs with a tiny real torch
(tests/test_installed_python.py), the test channel, the CLI as users run it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.formats import read_lock
from tests.output import flat
from tests.test_installed_python import _in_venv, _venv_with_torch

ENVLOCK = f"{shlex.quote(sys.executable)} -m envlock"


def _envlock(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def _meta(lock: Path, key: str) -> dict:
    return json.loads(read_lock(lock).custom_metadata[f"envlock.{key}"])


def test_an_override_is_measured_from_the_installed_torchs_cuda_and_doctor_agrees_without_a_loop(
        tmp_path: Path, test_channel_url: str) -> None:
    venv = _venv_with_torch(tmp_path / "train", version="2.3.0+cu121", cuda="12.1", cudnn=8902)
    project = tmp_path / "p"
    project.mkdir()
    env = {"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}", "ENVLOCK_ENVS_DIR": str(tmp_path / "envs")}
    py = shlex.quote(str(venv / "bin" / "python"))
    done = _in_venv(venv, f"{ENVLOCK} resolve --torch installed --python-exe {py} --cuda 12.6 --toolchain-only "
                          "--platform linux-64", project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = flat(done.stdout)
    assert "torch 2.3.0 (built with CUDA 12.1, cuDNN 8.9.2) → toolchain CUDA 12.6 (--cuda)" in out, out
    assert re.search(r"linux-64 +12\.6 .* minor\+5$", done.stdout, re.M), done.stdout  # the skew column
    assert out.count("--cuda 12.6 is 5 minors from CUDA 12.1, which torch 2.3.0 was built with") == 1
    assert "only warns about a minor mismatch (a major one fails)" in out
    assert "no cudnn requested" not in out  # the installed torch said its cuDNN
    lock = project / "locks" / "torch2.3.0-cu126" / "conda-lock.yml"
    anchor, plan = _meta(lock, "anchor"), _meta(lock, "plan.linux-64")
    assert (anchor["torch_cuda"], anchor["cuda"], anchor["cudnn"]) == ("12.1", "12.6", "8.9.2")
    assert (plan["cuda"], plan["torch_skew"]) == ("12.6", "minor+5")
    js = _in_venv(venv, f"{ENVLOCK} resolve --torch installed --cuda 12.6 --toolchain-only --platform linux-64 "
                        "--dry-run --json", project, env)
    doc = json.loads(js.stdout)
    assert (doc["anchor"]["torch_cuda"], doc["platforms"]["linux-64"]["torch_skew"]) == ("12.1", "minor+5")

    # doctor agrees, with and without the torch to ask; its fix runs and does not lead back here
    made = _in_venv(venv, f"{ENVLOCK} create -q", project, env)
    assert made.returncode == 0, made.stderr
    prefix = tmp_path / "envs" / "torch2.3.0-cu126"
    alone = json.loads(_envlock("doctor", "-p", str(prefix), "--json",
                                env={**os.environ, **env, "PATH": "/usr/bin:/bin"}).stdout)
    skew = next(f for f in alone["findings"] if f["code"] == "nvcc.skew")
    assert skew["severity"] == "warning" and "5 minors from CUDA 12.1" in skew["message"], skew
    assert skew["hint"] == "envlock resolve --torch 2.3.0+cu121 --toolchain-only && envlock create"  # no --cuda
    asked = json.loads(_in_venv(venv, f"{ENVLOCK} doctor -p {shlex.quote(str(prefix))} --json", project, env).stdout)
    skew = next(f for f in asked["findings"] if f["code"] == "nvcc.skew")
    assert skew["severity"] == "warning" and "5 minors from CUDA 12.1" in skew["message"], skew
    fix = skew["hint"]
    assert fix.startswith("envlock resolve --torch installed --python-exe") and "--cuda" not in fix
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    ran = _in_venv(venv, fix.replace("envlock ", f"{ENVLOCK} "), fresh, env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "minors from" not in flat(ran.stdout)  # no warning: the toolchain follows torch now
    again = json.loads(_in_venv(venv, f"{ENVLOCK} doctor -p {shlex.quote(str(tmp_path / 'envs' / 'torch2.3.0-cu121'))}"
                                      " --json", fresh, env).stdout)
    assert next(f for f in again["findings"] if f["code"] == "nvcc.skew")["severity"] == "ok"


def test_a_release_override_names_the_default_wheels_cuda(tmp_path: Path, test_channel_url: str) -> None:
    cf = f"conda-forge={test_channel_url}"
    far = _envlock("resolve", "--torch", "2.3.0", "--cuda", "12.6", "--toolchain-only", "--platform", "linux-64",
                   "--dry-run", "--json", "--mirror", cf, "--project-dir", str(tmp_path))
    doc = json.loads(far.stdout)
    assert (doc["anchor"]["cuda"], doc["anchor"]["torch_cuda"]) == ("12.6", "12.1")
    assert doc["platforms"]["linux-64"]["torch_skew"] == "minor+5"
    assert any("5 minors from CUDA 12.1" in w for w in doc["warnings"])
    own = _envlock("resolve", "--torch", "2.3.0", "--cuda", "11.8", "--toolchain-only", "--platform", "linux-64",
                   "--dry-run", "--json", "--mirror", cf, "--project-dir", str(tmp_path))
    doc = json.loads(own.stdout)  # a build it has: torch's own CUDA is the override's, exact
    assert doc["anchor"]["torch_cuda"] == "11.8" == doc["anchor"]["cuda"]
    assert doc["platforms"]["linux-64"]["torch_skew"] == "exact" and not doc["warnings"]
    plain = json.loads(_envlock("resolve", "--torch", "2.7.1", "--toolchain-only", "--platform", "linux-64",
                                "--dry-run", "--json", "--mirror", cf, "--project-dir", str(tmp_path)).stdout)
    assert (plain["anchor"]["torch_cuda"], plain["platforms"]["linux-64"]["torch_skew"]) == ("12.6", "exact")


def test_conda_forge_torch_with_toolchain_only_locks_no_torch_and_says_true_words(tmp_path: Path,
                                                                                    test_channel_url: str) -> None:
    cf = f"conda-forge={test_channel_url}"
    done = _envlock("resolve", "--torch", "2.8.0", "--torch-source", "conda-forge", "--toolchain-only",
                    "--platform", "linux-64", "--mirror", cf, "--project-dir", str(tmp_path / "t"))
    assert done.returncode == 0, done.stderr
    assert "toolchain only (no python, no PyPI part)" in flat(done.stdout)
    names = {p.name for p in read_lock(tmp_path / "t" / "locks" / "torch2.8.0-cu129" / "conda-lock.yml").packages}
    assert "cuda-nvcc" in names and not names & {"pytorch", "python"}, sorted(names)
    full = _envlock("resolve", "--torch", "2.8.0", "--torch-source", "conda-forge", "--platform", "linux-64",
                    "--mirror", cf, "--project-dir", str(tmp_path / "f"))
    assert full.returncode == 0, full.stderr
    out = flat(full.stdout)
    names = {p.name for p in read_lock(tmp_path / "f" / "locks" / "torch2.8.0-cu129" / "conda-lock.yml").packages}
    assert {"pytorch", "python", "cudnn"} <= names
    assert "no cudnn requested" not in out and "cuDNN comes with conda-forge's pytorch" in out, out


@pytest.mark.parametrize(("torch", "cuda", "label"), [("12.1", "12.1", "exact"), ("12.1", "12.0", "minor-1"),
                                                      ("12.1", "12.6", "minor+5"), ("12.8", "13.0", "major+1")])
def test_torch_skew_labels(torch: str, cuda: str, label: str) -> None:
    from envlock.core.rules import torch_skew

    assert torch_skew(torch, cuda) == label
