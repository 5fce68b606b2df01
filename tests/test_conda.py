"""The real conda (26.7.1, ../shared/tools/conda) on envs made by `envlock create` and on envlock's files.

`conda activate` / `conda deactivate` in bash, zsh and fish against `envlock run` and `envlock shell-hook`;
`conda create --file locks/<name>/conda-linux-64.lock` and `conda env create -f environments/<name>.yml`
from the test channel (conda's channel_alias points "conda-forge" at it over file://; the explicit lock's
canonical https://conda.anaconda.org URLs are found in a package cache seeded with the channel's files).
conda is installed once into the suite's cache (tests/suitecache.py: ENVLOCK_TEST_CACHE, else the user cache dir) and reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED
from tests.suitecache import suite_cache
from tests.test_activation import snapshots
from tests.test_create import lock_of, project, project_124  # noqa: F401 - session fixtures
from tests.test_pypi_part import NAME as FULL, full_project  # noqa: F401 - session fixture

ENVLOCK = [sys.executable, "-m", "envlock"]
CONDA_TOOL = SHARED / "tools" / "conda"
#: What a door's environment is compared on: everything but the shell's and conda's own bookkeeping.
IGNORED = {"_", "SHLVL", "PWD", "OLDPWD", "LOGNAME", "USER", "CONDA_EXE", "_CONDA_EXE", "_CE_M", "_CE_CONDA",
           "CONDA_PYTHON_EXE", "_CONDA_ROOT", "CONDARC", "LC_CTYPE"}


@pytest.fixture(scope="session")
def conda_venv() -> Path:
    """A venv with the real conda, built by ../shared/tools/conda/install.sh once and cached."""
    wheels = sorted(CONDA_TOOL.glob("conda-*.whl"))
    if not (CONDA_TOOL / "install.sh").is_file() or not wheels:
        pytest.skip(f"the real conda is not beside the checkout (looked for {CONDA_TOOL}/install.sh)")
    key = hashlib.sha256(wheels[-1].read_bytes() + (CONDA_TOOL / "install.sh").read_bytes()).hexdigest()[:16]
    root = suite_cache()
    venv = root / f"conda-{key}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"conda-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs at once build it once
        if not (venv / ".envlock-ok").is_file():
            shutil.rmtree(venv, ignore_errors=True)
            from tests.pipenv import user_pip_environ  # conda's dependencies come from the user's real index

            proc = subprocess.run(["bash", str(CONDA_TOOL / "install.sh"), str(venv)], capture_output=True,
                                  text=True, timeout=600, env=user_pip_environ())
            if proc.returncode != 0:
                pytest.fail(f"install.sh failed: {proc.stderr[-2000:]}")
            (venv / ".envlock-ok").write_text(proc.stdout)
    return venv


@pytest.fixture(scope="module")
def conda_env(conda_venv: Path, channel_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment a conda user has: a condarc pointing conda-forge at the test channel, no base active."""
    home = tmp_path_factory.mktemp("conda-home")
    # A package cache seeded with the channel's files under their canonical URLs (conda's urls.txt), as a
    # Docker build with a mounted cache has it: `conda create --offline --file` installs the lock from it.
    pkgs = home / "pkgs"
    pkgs.mkdir()
    urls = []
    for subdir in ("linux-64", "noarch"):
        for archive in sorted((channel_root / "conda-forge" / subdir).glob("*.tar.bz2")):
            shutil.copy(archive, pkgs / archive.name)
            urls.append(f"https://conda.anaconda.org/conda-forge/{subdir}/{archive.name}\n")
    (pkgs / "urls.txt").write_text("".join(urls))
    condarc = home / ".condarc"
    condarc.write_text(
        f"channel_alias: {channel_root.as_uri()}\n"
        "channels: [conda-forge]\n"
        f"pkgs_dirs: [{home / 'pkgs'}]\n"
        f"envs_dirs: [{home / 'envs'}]\n"
        "add_pip_as_python_dependency: false\n"  # the test channel has python but no pip
        "solver: classic\nauto_activate: false\nalways_yes: true\nchangeps1: true\nnotify_outdated_conda: false\n"
    )
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "CONDARC": str(condarc),
            "LC_ALL": "C.UTF-8", "ENVLOCK_CACHE_DIR": str(home / "envlock-cache")}


@pytest.fixture(scope="module")
def prefix(project: Path, conda_env: dict[str, str], test_channel_url: str,  # noqa: F811
           tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An env made by the `envlock create` command (linux-64, torch 2.3.0 → CUDA 12.1, gcc/gxx, cuda-nvcc)."""
    # shell characters on purpose; a space is one nvcc cannot read there, refused by create (test_prefix_path.py)
    target = tmp_path_factory.mktemp("envs") / "cu(121)&x"
    proc = subprocess.run([*ENVLOCK, "create", "--lock", str(lock_of(project)), "-p", str(target),
                           "--mirror", f"conda-forge={test_channel_url}", "--platform", "linux-64"],
                          env=conda_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return target


def _hook(shell: str, venv: Path) -> str:
    conda = f"'{venv}/bin/python' -m conda"
    return f"{conda} shell.fish hook | source" if shell == "fish" else f'eval "$({conda} shell.{shell} hook)"'


def _shell(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} is not installed here (.ci/run installs zsh and fish)")
    return exe


def _view(env: dict[str, str], condabin: str) -> dict[str, str]:
    """An environment without shell/conda bookkeeping; PATH without conda's own condabin entry."""
    out = {k: v for k, v in env.items() if k not in IGNORED}
    if "PATH" in out:
        out["PATH"] = ":".join(p for p in out["PATH"].split(":") if p != condabin)
    return out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_conda_deactivate_after_a_user_path_change(conda_venv: Path, conda_env: dict[str, str], prefix: Path,
                                                   tmp_path: Path, shell: str) -> None:
    """The issue's check: P/bin leaves PATH, the user's /x/bin stays, CUDA_HOME and CC come back."""
    exe = _shell(shell)
    add = "set -gx PATH /x/bin $PATH" if shell == "fish" else "export PATH=/x/bin:$PATH"
    env = {**conda_env, "CUDA_HOME": "/usr/local/cuda-11.8", "CC": "/usr/bin/gcc", "LD_LIBRARY_PATH": "/torch/lib"}
    base, active, after = snapshots(exe, [_hook(shell, conda_venv), f"conda activate '{prefix}'; {add}",
                                          "conda deactivate"], env, tmp_path)
    assert active["CUDA_HOME"] == str(prefix) and active["CC"] == f"{prefix}/bin/x86_64-conda-linux-gnu-cc"
    assert active["LD_LIBRARY_PATH"] == f"/torch/lib:{prefix}/lib"  # pip torch: the env's libs after torch's
    path = after["PATH"].split(":")
    assert f"{prefix}/bin" not in path and path[0] == "/x/bin"
    assert path[1:] == base["PATH"].split(":")
    for var in ("CUDA_HOME", "CC", "LD_LIBRARY_PATH"):
        assert after[var] == env[var], var
    for var in ("CUDA_PATH", "CPATH", "LIBRARY_PATH", "CXX", "NVCC_PREPEND_FLAGS", "_ENVLOCK_PREFIX"):
        assert after.get(var, "") == "", var  # conda "unsets" with export X='' in sh
    # Set by the user while active: a newer value is the user's and stays.
    (kept,) = snapshots(exe, [_hook(shell, conda_venv) + f"; conda activate '{prefix}'; "
                              + ("set -gx CUDA_HOME /mine; " if shell == "fish" else "export CUDA_HOME=/mine; ")
                              + "conda deactivate"], env, tmp_path)
    assert kept["CUDA_HOME"] == "/mine"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_three_doors_give_one_environment(conda_venv: Path, conda_env: dict[str, str], prefix: Path,
                                          tmp_path: Path, shell: str) -> None:
    """`conda activate`, `envlock shell-hook` and `envlock run` leave the same variables in the shell."""
    exe = _shell(shell)
    env = {**conda_env, "CUDA_HOME": "/usr/local/cuda-11.8", "CPATH": "/opt/inc"}
    hook = " ".join(f"'{a}'" for a in ENVLOCK) + f" shell-hook -p '{prefix}' --shell {shell}"
    hook = f"{hook} | source" if shell == "fish" else f'eval "$({hook})"'
    run = " ".join(f"'{a}'" for a in ENVLOCK) + f" run -p '{prefix}' -- /usr/bin/env -0 > '{tmp_path}/run'"
    (via_conda,) = snapshots(exe, [_hook(shell, conda_venv) + f"; conda activate '{prefix}'"], env, tmp_path)
    (via_hook,) = snapshots(exe, [hook], env, tmp_path)  # each door from a fresh shell
    snapshots(exe, [run], env, tmp_path)
    raw = (tmp_path / "run").read_bytes().decode().split("\0")
    via_run = dict(item.split("=", 1) for item in raw if item)
    condabin = f"{conda_venv}/condabin"
    assert _view(via_conda, condabin) == _view(via_hook, condabin) == _view(via_run, condabin)
    for var, value in (("CUDA_HOME", str(prefix)), ("CUDA_PATH", str(prefix)), ("CXX", f"{prefix}/bin/x86_64-conda-linux-gnu-c++"),
                       ("CPATH", f"{prefix}/targets/x86_64-linux/include:/opt/inc"),
                       ("NVCC_PREPEND_FLAGS", f" -ccbin={prefix}/bin/x86_64-conda-linux-gnu-c++")):
        assert via_conda[var] == value, var


def test_shell_hook_deactivate_after_conda_activate(conda_venv: Path, conda_env: dict[str, str], prefix: Path,
                                                    tmp_path: Path) -> None:
    """Either side undoes the other: `shell-hook --deactivate` after `conda activate` = `conda deactivate`."""
    undo = " ".join(f"'{a}'" for a in ENVLOCK) + " shell-hook --deactivate --shell bash"
    env = {**conda_env, "CUDA_HOME": "/usr/local/cuda-11.8"}
    start = _hook("bash", conda_venv) + f"; conda activate '{prefix}'; export PATH=/x/bin:$PATH"
    (by_conda,) = snapshots("bash", [start + "; conda deactivate"], env, tmp_path)
    (by_envlock,) = snapshots("bash", [start + f'; eval "$({undo})"'], env, tmp_path)
    assert by_envlock == by_conda and by_conda["CUDA_HOME"] == "/usr/local/cuda-11.8"


def test_conda_create_from_the_explicit_lock(conda_venv: Path, conda_env: dict[str, str], project: Path,  # noqa: F811
                                             tmp_path: Path) -> None:
    """`conda create --file locks/<name>/conda-linux-64.lock`: conda installs envlock's @EXPLICIT file.

    The lock names canonical https://conda.anaconda.org URLs with md5s; conda takes each package from its
    cache by that URL and hash (--offline: nothing is fetched).
    """
    explicit = lock_of(project).parent / "conda-linux-64.lock"
    target = tmp_path / "from-explicit"
    proc = subprocess.run([f"{conda_venv}/bin/python", "-m", "conda", "create", "--offline", "-p", str(target), "--file",
                           str(explicit)], env=conda_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wanted = {line.rsplit("/", 1)[1].split("#")[0].removesuffix(".conda").removesuffix(".tar.bz2")
              for line in explicit.read_text().splitlines() if line.startswith("http")}
    assert wanted and {p.stem for p in (target / "conda-meta").glob("*.json")} == wanted
    assert (target / "bin" / "nvcc").is_file()


def test_conda_env_create_from_the_spec(conda_venv: Path, conda_env: dict[str, str], project_124: Path,  # noqa: F811
                                        tmp_path: Path) -> None:
    """`conda env create -f environments/<name>.yml`: the spec envlock writes is one conda solves.

    A linux-64 spec (conda reads no `# [win64]` selectors: a multi-platform spec is for conda-lock).
    """
    spec = next((project_124 / "environments").glob("*.yml"))
    target = tmp_path / "from-spec"
    proc = subprocess.run([f"{conda_venv}/bin/python", "-m", "conda", "env", "create", "-p", str(target), "-f",
                           str(spec)], env={**conda_env, "CONDA_OVERRIDE_CUDA": "12.4"},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    names = {p.stem.rsplit("-", 2)[0] for p in (target / "conda-meta").glob("*.json")}
    assert {"cuda-nvcc", "cuda-version", "libcusparse-dev", "gxx_linux-64"} <= names


def test_conda_activate_on_a_full_env_gives_its_python_torch_and_ninja(conda_venv: Path, conda_env: dict[str, str],
                                                                       full_project: Path, test_channel_url: str,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    """A full env (python + the PyPI part) under a real `conda activate`: the env's python imports the locked
    torch with the anchor's CUDA, torchrun and ninja come from the env, and deactivate takes all of it away."""
    prefix = tmp_path / "full-env"  # no space: create refuses one nvcc cannot read (tests/test_prefix_path.py)
    proc = subprocess.run([*ENVLOCK, "create", "--lock", str(full_project / "locks" / FULL / "conda-lock.yml"),
                           "-p", str(prefix), "--mirror", f"conda-forge={test_channel_url}", "--platform", "linux-64",
                           "-q"], env=conda_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    site = prefix / "lib" / "python3.11" / "site-packages"
    # The test channel's python execs this machine's: PYTHONPATH points it at the env's site-packages.
    script = "; ".join([
        _hook("bash", conda_venv),
        f"conda activate '{prefix}'",
        "command -v python torchrun ninja",
        f"PYTHONPATH='{site}' python -c 'import torch, os; print(torch.version.cuda, os.environ[\"CUDA_HOME\"])'",
        "ninja --version",
        "conda deactivate",
        "command -v torchrun || echo no-torchrun",
        'echo "CUDA_HOME=${CUDA_HOME:-}"',
    ])
    done = subprocess.run(["bash", "-c", script], env=conda_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [f"{prefix}/bin/python", f"{prefix}/bin/torchrun", f"{prefix}/bin/ninja"], done.stdout
    assert lines[3] == f"12.6 {prefix}" and lines[4].startswith("1.13.2")
    assert lines[5:] == ["no-torchrun", "CUDA_HOME="], done.stdout
