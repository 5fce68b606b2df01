"""`--torch installed` asks the python the user would run (issue 34, item 1): `--python-exe`, else the active
venv / conda env, else python3 on PATH — one rule (envlock.seams.installed_torch.user_python) for resolve, doctor
and the hints that name it; never envlock's own interpreter (envlock may live in a venv of its own, as pipx puts it).

Real venvs (`python -m venv`), activated by their own `bin/activate` in bash; torch is a tiny real importable
package in the venv's site-packages (`__version__`, `version.cuda`, `backends.cudnn.version()`: what envlock
reads), since no CUDA torch can be installed here. envlock runs from the test suite's venv: a second venv.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from envlock.errors import AnchorError
from envlock.seams.installed_torch import probe, user_python
from tests.output import flat
from tests.test_anchor import fake_torch

ENVLOCK = f"{shlex.quote(sys.executable)} -m envlock"


def _fake_env(root: Path) -> Path:
    """A folder shaped like an env (bin/python → this interpreter): enough for the rule, which only looks."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    return root


def test_the_rule_in_its_order(tmp_path: Path) -> None:
    venv, conda = _fake_env(tmp_path / "venv"), _fake_env(tmp_path / "conda")
    system = _fake_env(tmp_path / "system")
    (system / "bin" / "python3").symlink_to(sys.executable)
    path = str(system / "bin")
    # nothing active: python3 on PATH
    assert user_python(None, {"PATH": path}) == type(user_python(None, {}))(str(system / "bin" / "python3"),
                                                                             "python3 on PATH")
    # an active venv (its bin on PATH or not: VIRTUAL_ENV is what activation says)
    got = user_python(None, {"PATH": path, "VIRTUAL_ENV": str(venv)})
    assert (got.exe, got.why) == (str(venv / "bin" / "python"), "the active venv $VIRTUAL_ENV")
    # a conda env alone
    got = user_python(None, {"PATH": path, "CONDA_PREFIX": str(conda)})
    assert (got.exe, got.why) == (str(conda / "bin" / "python"), "the active conda env $CONDA_PREFIX")
    # both: the one earlier on PATH, as the shell picks (a venv activated inside conda's base, or conda on top)
    both = {"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(conda)}
    assert user_python(None, {**both, "PATH": f"{venv}/bin:{conda}/bin:{path}"}).exe == str(venv / "bin" / "python")
    assert user_python(None, {**both, "PATH": f"{conda}/bin:{venv}/bin:{path}"}).exe == str(conda / "bin" / "python")
    assert user_python(None, {**both, "PATH": path}).exe == str(venv / "bin" / "python")  # neither on PATH: the venv
    # an active env without a python (a toolchain-only env): the next one
    assert user_python(None, {"PATH": path, "CONDA_PREFIX": str(tmp_path)}).exe == str(system / "bin" / "python3")
    # --python-exe wins; a bare name is looked up on PATH
    assert user_python("python3", {**both, "PATH": path}) == type(got)(str(system / "bin" / "python3"), "--python-exe")
    assert user_python(None, {"PATH": str(tmp_path / "nowhere")}).exe is None


def test_no_python_at_all_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(AnchorError, match="no python to ask") as info:
        probe(None, {"PATH": str(tmp_path)})
    assert "--python-exe" in info.value.hint


def _venv_with_torch(root: Path, version: str = "2.7.1+cu126", cuda: str = "12.6", cudnn: int = 90501) -> Path:
    """A real venv (no pip: nothing is installed from an index) with a tiny torch in its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    purelib = sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)})
    fake_torch(Path(purelib), version=version, cuda=cuda, cudnn=cudnn)
    return root


def _in_venv(venv: Path, command: str, cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`command` in bash after `. VENV/bin/activate` (what a user types), envlock from the suite's own venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    env.update(extra or {})
    script = f". {shlex.quote(str(venv / 'bin' / 'activate'))} && {command}"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_resolve_in_an_activated_venv_anchors_on_its_torch_and_doctors_fix_works(
    tmp_path: Path, test_channel_url: str
) -> None:
    """The Done-when of item 1: envlock installed in one venv, torch in another, that one activated. On e081238
    resolve asked envlock's own interpreter ("torch cannot be imported by …/envlock-venv/bin/python3")."""
    venv = _venv_with_torch(tmp_path / "train")
    assert Path(sys.executable).resolve().parent != (venv / "bin").resolve()  # envlock lives elsewhere
    project = tmp_path / "project"
    project.mkdir()
    mirrors = {"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}", "ENVLOCK_ENVS_DIR": str(tmp_path / "envs")}
    done = _in_venv(venv, f"{ENVLOCK} resolve --torch installed --toolchain-only --platform linux-64", project, mirrors)
    assert done.returncode == 0, done.stdout + done.stderr
    out = flat(done.stdout)
    assert "torch 2.7.1 → CUDA 12.6" in out, out
    assert f"installed in {venv / 'bin' / 'python'} (the active venv $VIRTUAL_ENV)" in out  # the python it asked
    lock = project / "locks" / "torch2.7.1-cu126" / "conda-lock.yml"
    assert lock.is_file()

    # doctor, in the same shell, asks the same python; its fix line runs as written (in a fresh project)
    doc = _in_venv(venv, f"{ENVLOCK} doctor --json", project, mirrors)
    findings = json.loads(doc.stdout)["findings"]
    torch = next(f for f in findings if f["code"] == "torch.found")
    assert torch["severity"] == "ok" and str(venv / "bin" / "python") in torch["message"], torch
    fixes = [m.group(0) for f in findings for m in [re.search(r"envlock resolve --torch installed[^()]*?&& envlock create",
                                                              f.get("hint") or "")] if m]
    assert fixes, findings  # this machine's CUDA 13.0 has no cusparse.h (and is another major than torch's 12.6)
    fix = fixes[0]
    assert f"--python-exe {shlex.quote(str(venv / 'bin' / 'python'))}" in fix and "--toolchain-only" in fix
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    ran = _in_venv(venv, fix.replace("envlock ", f"{ENVLOCK} "), fresh, mirrors)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "envs" / "torch2.7.1-cu126" / "bin" / "nvcc").exists()


def test_resolve_without_an_active_env_asks_python3_on_path_not_envlocks_own(tmp_path: Path, test_channel_url: str) -> None:
    """With no venv active, python3 on PATH (here: the venv's, by PATH alone) is asked, as --help says."""
    venv = _venv_with_torch(tmp_path / "train", version="2.3.0+cu121", cuda="12.1", cudnn=8902)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    done = subprocess.run([sys.executable, "-m", "envlock", "resolve", "--torch", "installed", "--toolchain-only",
                           "--dry-run", "--json", "--project-dir", str(tmp_path / "p"),
                           "--mirror", f"conda-forge={test_channel_url}"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    anchor = json.loads(done.stdout)["anchor"]
    assert (anchor["torch"], anchor["cuda"]) == ("2.3.0", "12.1")
    assert f"{venv / 'bin' / 'python3'} (python3 on PATH)" in anchor["detail"]
