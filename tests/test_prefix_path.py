"""A prefix nvcc cannot use (issue 34, item 4): whitespace, `"`, `$` or a backquote in an env's path.

conda-forge's cuda-nvcc activation appends `-ccbin=$CXX` (PREFIX/bin/<triplet>-c++) to NVCC_PREPEND_FLAGS. The
machine's real nvcc (13.0) is asked here how it parses that variable: it splits it at whitespace and keeps quotes
as part of the path, and runs the host compiler through `sh -c "…"` (so `$` and a backquote are expanded and `"`
ends the quoting). No quoting makes such a path work, and envlock cannot reorder conda-forge's activation (its
script runs last, by name), so create refuses such a prefix with the reason and doctor flags an existing one.
On e081238 `create -p "/x/with space/env"` succeeded, doctor was green, and nvcc failed in the env.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.names import nvcc_cannot_use, usable_path
from tests.output import flat

ENVLOCK = [sys.executable, "-m", "envlock"]
NAME = "torch2.7.1-cu126"
REFUSED = (" ", "\t", '"', "$", "`")
CARRIED = (",", "'", ";", "&", "(", "#", "%", ":", "+", "@", "=", "!", "|", "\\", "~")


def _nvcc() -> str:
    """The machine's own nvcc (never an env's stand-in: `envlock run` puts the env's bin/ first on PATH)."""
    for cand in (shutil.which("nvcc", path=os.environ.get("PATH", "")), "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.isfile(cand):
            return os.path.realpath(cand)
    pytest.skip("no system nvcc on this machine (PATH, /usr/local/cuda): nvcc's flag parsing cannot be asked")


def _ccbin_builds(nvcc: str, root: Path, char: str) -> subprocess.CompletedProcess[str]:
    """Preprocess a .cu with NVCC_PREPEND_FLAGS as conda-forge's activation writes it, CXX under a folder whose
    name holds `char` (a link to the machine's g++)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ for nvcc to use as its host compiler")
    where = root / f"a{char}b" / "bin"
    where.mkdir(parents=True)
    (where / "x86_64-conda-linux-gnu-c++").symlink_to(gxx)
    src = root / "k.cu"
    src.write_text("__global__ void k() {}\n")
    env = {**os.environ, "NVCC_PREPEND_FLAGS": f" -ccbin={where}/x86_64-conda-linux-gnu-c++"}
    return subprocess.run([nvcc, "-E", str(src), "-o", str(root / "k.ii")], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("char", REFUSED + CARRIED, ids=lambda c: repr(c))
def test_nvcc_reads_a_ccbin_path_exactly_where_envlock_says_it_can(char: str, tmp_path: Path) -> None:
    done = _ccbin_builds(_nvcc(), tmp_path, char)
    assert (done.returncode == 0) == (nvcc_cannot_use(tmp_path / f"a{char}b") is None), (char, done.stderr)
    if char in (" ", "\t"):
        assert "A single input file is required" in done.stderr  # the variable split at the whitespace
    assert usable_path(f"/x/a{char}b") == ("/x/a-b" if char in REFUSED else f"/x/a{char}b")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    root = tmp_path_factory.mktemp("prefix-path")
    done = subprocess.run([*ENVLOCK, "resolve", "--torch", "2.7.1", "--toolchain-only", "--platform", "linux-64",
                           "--mirror", f"conda-forge={test_channel_url}", "--project-dir", str(root)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return root


def _envlock(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, timeout=300, env=env)


def test_create_refuses_a_prefix_nvcc_cannot_use_and_its_hint_runs(project: Path, tmp_path: Path,
                                                                   test_channel_url: str) -> None:
    cf = f"conda-forge={test_channel_url}"
    bad = tmp_path / "with space" / "env"
    done = _envlock("create", "--project-dir", str(project), "-p", str(bad), "--mirror", cf)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    err = flat(done.stderr).replace(" \\ ", " ")  # a command folded with ` \` at a line's end, joined
    assert err.startswith(f"error: {bad} has a space: conda-forge's nvcc activation puts") and "NVCC_PREPEND_FLAGS" in err
    assert not (tmp_path / "with space").exists()  # nothing made
    fixed = tmp_path / "with-space" / "env"
    assert f"--prefix {fixed} " in err
    hint = err.split("hint:", 1)[1]
    command = hint[hint.index("`") + 1: hint.rindex("`")]
    import shlex

    ran = subprocess.run([*ENVLOCK, *shlex.split(command)[1:]], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert (fixed / "bin" / "nvcc").exists()
    # -n NAME under an envs dir nvcc cannot use: refused the same way, naming ENVLOCK_ENVS_DIR
    envs = tmp_path / "my envs"
    named = _envlock("create", "--project-dir", str(project), "-n", "train", "--mirror", cf,
                     env={**os.environ, "ENVLOCK_ENVS_DIR": str(envs)})
    assert named.returncode == 1 and "ENVLOCK_ENVS_DIR" in named.stderr and not (envs / "train").exists()
    assert f"{envs / 'train'} has a space" in flat(named.stderr)


def test_doctor_flags_an_env_at_such_a_path_where_real_nvcc_fails(project: Path, tmp_path: Path,
                                                                  test_channel_url: str) -> None:
    """An env moved (or made by another tool) to a path with a space: the real nvcc, run in its activation,
    fails to parse its flags; at a path without one it gets past them. doctor says so; on e081238 it was green."""
    nvcc = _nvcc()
    plain = tmp_path / "plain" / "env"
    done = _envlock("create", "--project-dir", str(project), "-p", str(plain), "--mirror", f"conda-forge={test_channel_url}",
                    "-q")
    assert done.returncode == 0, done.stderr
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")

    def nvcc_in(prefix: Path) -> subprocess.CompletedProcess[str]:
        return _envlock("run", "-p", str(prefix), "--", nvcc, "-E", str(src), "-o", str(tmp_path / "k.ii"))

    ok = nvcc_in(plain)
    assert "A single input file is required" not in ok.stderr  # past the flags (the channel's g++ is a stand-in)
    assert _envlock("doctor", "-p", str(plain), "--json").stdout.count('"env.path"') == 0
    moved = tmp_path / "with space" / "env"
    moved.parent.mkdir()
    plain.rename(moved)
    broken = nvcc_in(moved)
    assert broken.returncode != 0 and "A single input file is required" in broken.stderr, broken.stderr
    doc = _envlock("doctor", "-p", str(moved), "--json")
    assert doc.returncode == 1
    found = {f["code"]: f for f in json.loads(doc.stdout)["findings"]}
    path = found["env.path"]
    assert path["severity"] == "error" and "has a space" in path["message"]
    assert f"-p {tmp_path / 'with-space' / 'env'}" in path["hint"] and "envlock create --lock" in path["hint"]
