"""`envlock run` and `envlock shell-hook` on prefixes created from a real resolve of the test channel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.output import logical_lines, unfolded

from envlock.usecases.create import CreateRequest, create_env
from envlock.seams import envrecord
from tests.test_activation import snapshots
from tests.test_create import lock_of, project  # noqa: F401 - `project` is a session fixture

ENVLOCK = [sys.executable, "-m", "envlock"]
BASE = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C.UTF-8"}


@pytest.fixture(scope="module")
def prefixes(project: Path, tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> dict[str, Path]:  # noqa: F811
    """A linux-64 prefix (a path with shell characters: a space is one nvcc cannot read there, refused by create,
    tests/test_prefix_path.py) and a win-64 prefix (with a space), created once."""
    root = tmp_path_factory.mktemp("run")
    out = {}
    for platform in ("linux-64", "win-64"):
        prefix = root / (f"env({platform})" if platform.startswith("linux") else f"env {platform}")
        create_env(CreateRequest(lock_of(project), prefix, platform, cache_dir=root / "pkgs",
                                 mirrors={"conda-forge": test_channel_url}))
        out[platform] = prefix
    return out


def envlock(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, env=env or BASE, timeout=60)


def test_run_passes_the_exit_code_and_activates(prefixes: dict[str, Path]) -> None:
    prefix = prefixes["linux-64"]
    script = 'command -v nvcc; echo "$CUDA_HOME"; nvcc --version | tail -1; exit 7'
    proc = envlock("run", "-p", str(prefix), "--", "sh", "-c", script)
    assert proc.returncode == 7, proc.stderr
    which, home, version = proc.stdout.strip().splitlines()
    assert which == str(prefix / "bin" / "nvcc") and home == str(prefix)
    assert "12.1" in version


def test_run_without_double_dash_keeps_the_commands_options(prefixes: dict[str, Path]) -> None:
    proc = envlock("run", "-p", str(prefixes["linux-64"]), "sh", "-c", 'echo "$CPATH"')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{prefixes['linux-64']}/targets/x86_64-linux/include"


def test_run_compiles_against_the_env_headers(prefixes: dict[str, Path]) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    probe = "printf '#include <cusparse.h>\\n#include <cuda_runtime.h>\\n' | gcc -E -x c - > /dev/null"
    assert subprocess.run(["sh", "-c", probe], env=BASE, capture_output=True).returncode != 0
    assert envlock("run", "-p", str(prefixes["linux-64"]), "--", "sh", "-c", probe).returncode == 0


def test_run_refuses_clearly(prefixes: dict[str, Path], tmp_path: Path) -> None:
    cases = [  # usage errors exit 2, the others 1
        (["run", "-p", str(prefixes["linux-64"])], "no command given", 2),
        (["run", "-p", str(tmp_path / "nope"), "--", "true"], "is not a conda environment", 1),
        (["run", "--", "true"], "which environment?", 2),
        (["run", "-p", "x", "-n", "y", "--", "true"], "either -p/--prefix or -n/--name", 2),
        (["run", "-p", str(prefixes["win-64"]), "--", "true"], "is a win-64 environment", 1),
        (["run", "-p", str(prefixes["linux-64"]), "--", "no-such-command-xyz"], "cannot run 'no-such-command-xyz'", 1),
    ]
    for args, needle, code in cases:
        proc = envlock(*args)
        assert proc.returncode == code, (args, proc.stderr)
        lines = logical_lines(proc.stderr.strip())
        assert lines[0].startswith("error: ") and needle in lines[0], proc.stderr
        assert lines[1].startswith("hint: ") and "Traceback" not in proc.stderr


def test_run_on_a_prefix_envlock_did_not_create(prefixes: dict[str, Path], tmp_path: Path) -> None:
    """No conda-meta/envlock: pip torch is assumed, cuDNN is seen from conda-meta."""
    copy = tmp_path / "foreign"
    shutil.copytree(prefixes["linux-64"], copy, symlinks=True)
    (copy / envrecord.REL).unlink()
    for hook in copy.glob("etc/conda/*.d/envlock-cuda.*"):
        hook.unlink()  # no envlock hook: run applies envlock's own activation in its place
    proc = envlock("run", "-p", str(copy), "--", "sh", "-c", 'echo "$CUDNN_HOME|$LD_LIBRARY_PATH"')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{copy}|{copy}/lib"


def _run_env(prefix: Path, env: dict[str, str]) -> dict[str, str]:
    dump = envlock("run", "-p", str(prefix), "--", "/usr/bin/env", "-0", env=env)
    assert dump.returncode == 0, dump.stderr
    # Python's C-locale coercion (PEP 538) adds LC_CTYPE to its own environment, which run passes on.
    return {k: v for k, v in (i.split("=", 1) for i in dump.stdout.split("\0") if i) if k not in ("_", "LC_CTYPE")}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_hook_eval_equals_envlock_run(prefixes: dict[str, Path], tmp_path: Path, shell: str) -> None:
    """Two doors, one environment: `eval "$(envlock shell-hook)"` in bash, zsh and fish = `envlock run`.

    Both run the env's own activate.d scripts in conda's order, so the compilers' CC/CXX and cuda-nvcc's
    NVCC_PREPEND_FLAGS are there too (fish: through the hook's bash bridge).
    """
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed here")
    prefix = prefixes["linux-64"]
    cmd = " ".join(f"'{a}'" for a in ENVLOCK) + f" shell-hook -p '{prefix}' --shell {shell}"
    step = f"{cmd} | source" if shell == "fish" else f'eval "$({cmd})"'
    env = {**BASE, "CUDA_HOME": "/usr/local/cuda-11.8", "CC": "/usr/bin/gcc"}
    (via_hook,) = snapshots(exe, [step], env, tmp_path)
    via_run = _run_env(prefix, env)
    shell_own = {"LOGNAME", "USER"}  # zsh and fish export these by themselves
    assert {k: v for k, v in via_hook.items() if k not in shell_own} == via_run
    assert via_run["CUDA_HOME"] == str(prefix) and via_run["CONDA_PREFIX"] == str(prefix)
    assert via_run["CC"] == f"{prefix}/bin/x86_64-conda-linux-gnu-cc"  # conda-forge's names (…-cc, …-c++)
    assert via_run["NVCC_PREPEND_FLAGS"].strip() == f"-ccbin={prefix}/bin/x86_64-conda-linux-gnu-c++"
    assert via_run["PATH"].split(":")[0] == f"{prefix}/bin"


@pytest.mark.parametrize("shell", ["bash", "fish"])
def test_shell_hook_deactivate_undoes_it(prefixes: dict[str, Path], tmp_path: Path, shell: str) -> None:
    """`shell-hook --deactivate` runs the deactivate.d scripts (as `conda deactivate`): CC back, CUDA_HOME back."""
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed here")
    prefix = prefixes["linux-64"]
    cmd = " ".join(f"'{a}'" for a in ENVLOCK) + f" shell-hook --shell {shell}"
    on, off = (f"{cmd} -p '{prefix}' | source", f"{cmd} --deactivate | source") if shell == "fish" else (
        f"eval \"$({cmd} -p '{prefix}')\"", f"eval \"$({cmd} --deactivate)\"")
    add = "set -gx PATH /x/bin $PATH" if shell == "fish" else "export PATH=/x/bin:$PATH"
    env = {**BASE, "CUDA_HOME": "/usr/local/cuda-11.8", "CC": "/usr/bin/gcc"}
    base, active, after = snapshots(exe, ["true", on + "; " + add, off], env, tmp_path)
    assert active["CC"] != "/usr/bin/gcc" and active["CUDA_HOME"] == str(prefix)
    assert after["CC"] == "/usr/bin/gcc" and after["CUDA_HOME"] == "/usr/local/cuda-11.8"
    assert after["PATH"] == "/x/bin:" + base["PATH"]  # the user's entry stays, the env's bin/ goes
    assert "NVCC_PREPEND_FLAGS" not in after and not any(k.startswith("_ENVLOCK") for k in after)


def test_shell_hook_text_per_shell(prefixes: dict[str, Path]) -> None:
    linux, win = prefixes["linux-64"], prefixes["win-64"]
    fish = envlock("shell-hook", "-p", str(linux), "--shell", "fish")
    assert f"set -gx CONDA_PREFIX '{linux}'" in fish.stdout
    assert f"source '{linux}/etc/conda/activate.d/envlock-cuda.fish'" in fish.stdout
    ps1 = envlock("shell-hook", "-p", str(win), "--shell", "powershell")
    assert ps1.stdout.replace("\r\n", "\n") == (win / "etc/conda/activate.d/envlock-cuda.ps1").read_bytes().decode(
    ).replace("\r\n", "\n")
    bat = envlock("shell-hook", "-p", str(win), "--shell", "cmd")
    assert bat.returncode == 0 and f'@set "_ENVLOCK_P={win}"' in bat.stdout
    default = envlock("shell-hook", "-p", str(linux), env={**BASE, "SHELL": "/usr/bin/fish"})
    assert default.stdout == fish.stdout  # the shell comes from $SHELL
    for args, needle, code in (
        (["--shell", "cmd", "-p", str(linux)], "no cmd hook for a linux-64 environment", 1),
        (["--shell", "tcsh", "-p", str(linux)], "--shell 'tcsh' is not a shell envlock writes for", 2),
        (["--shell", "bash", "-p", str(win)], "no bash hook for a win-64 environment", 1),
        (["--shell", "bash", "--deactivate", "-p", str(linux)], "--deactivate takes no -p/-n", 2),
    ):
        proc = envlock("shell-hook", *args)
        assert proc.returncode == code and proc.stderr.startswith("error: ") and needle in unfolded(proc.stderr), \
            proc.stderr


def test_doctor_gives_the_same_verdict_inside_run_as_with_p(prefixes: dict[str, Path]) -> None:
    """`envlock run -p P -- envlock doctor` and `envlock doctor -p P` see the same env: same findings.

    The system gcc is on PATH and CC is set to it, as on a machine whose gcc is too new for the env's
    nvcc: both must judge the env's own compiler (the gxx activation's CXX, cuda-nvcc's -ccbin).
    """
    prefix = prefixes["linux-64"]
    env = {**BASE, "CC": "/usr/bin/gcc", "CXX": "/usr/bin/g++"}
    outside = envlock("doctor", "-p", str(prefix), "--json", env=env)
    inside = envlock("run", "-p", str(prefix), "--", *ENVLOCK, "doctor", "--json", env=env)
    a, b = (json.loads(p.stdout)["findings"] for p in (outside, inside))
    verdict = lambda fs: {f["code"]: f["severity"] for f in fs}  # noqa: E731
    assert verdict(a) == verdict(b) and outside.returncode == inside.returncode
    host = {f["code"]: f for f in a}["host_compiler.version"]
    assert str(prefix) in json.dumps(host) and host == {f["code"]: f for f in b}["host_compiler.version"]


def test_envlock_json_of_a_win_prefix_drives_run_and_hooks(prefixes: dict[str, Path]) -> None:
    meta = json.loads((prefixes["win-64"] / envrecord.REL).read_text())
    assert meta["platform"] == "win-64" and meta["activation"] == {"torch_source": "pip", "has_cudnn": True}
    assert os.path.isfile(prefixes["win-64"] / "etc/conda/deactivate.d/envlock-cuda.bat")
