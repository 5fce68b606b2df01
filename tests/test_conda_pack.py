"""conda-pack (the PyPI package, issue 14 item 5) on an env made by `envlock create`.

conda-pack packs the env (envlock's activation hooks and conda-meta/envlock are files no package owns: it
takes them as text and records the prefix in them), the original is moved away, the archive is unpacked
elsewhere and conda-unpack rewrites the prefix. Then, in a real bash, conda-pack's own `bin/activate` runs the
env's activate.d scripts: envlock's hook must set CUDA_HOME to the new place and put its nvcc first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.test_create import cli, lock_of, project  # noqa: F401 - session fixture

CONDA_PACK = Path(sys.executable).parent / "conda-pack"


def test_conda_pack_and_conda_unpack_relocate_an_envlock_env(project: Path, tmp_path: Path,  # noqa: F811
                                                             test_channel_url: str) -> None:
    if not CONDA_PACK.is_file():
        pytest.skip("conda-pack is not installed (pip install -e '.[test]')")
    original = tmp_path / "built" / "cu121"
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    proc = cli("create", "--lock", str(lock_of(project)), "-p", str(original), "--platform", "linux-64",
               "--mirror", f"conda-forge={test_channel_url}", "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    archive = tmp_path / "env.tar.gz"
    done = subprocess.run([str(CONDA_PACK), "-p", str(original), "-o", str(archive)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    original.rename(tmp_path / "built" / "gone")  # nothing may still point at the original place
    moved = tmp_path / "elsewhere" / "train-env"
    moved.mkdir(parents=True)
    with tarfile.open(archive) as tf:
        tf.extractall(moved, filter="tar")
    # conda-unpack's shebang is `/usr/bin/env python`; this toolchain-only env has no python of its own.
    done = subprocess.run([sys.executable, str(moved / "bin" / "conda-unpack")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    script = (f". '{moved}/bin/activate'; printf '%s\\n' \"$CUDA_HOME\" \"$(command -v nvcc)\" \"$CPATH\"; "
              "nvcc --version | tail -1")
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CUDA_HOME": "/usr/local/cuda"})
    assert shell.returncode == 0, shell.stderr
    cuda_home, nvcc, cpath, version = shell.stdout.splitlines()
    assert cuda_home == str(moved) and nvcc == f"{moved}/bin/nvcc"
    assert cpath.split(":")[0] == f"{moved}/targets/x86_64-linux/include"
    assert "cuda_12.1" in version
    hook = (moved / "etc" / "conda" / "activate.d" / "envlock-cuda.sh").read_text()
    assert str(moved) in hook and "built/cu121" not in hook
    # envlock's own door agrees
    run = cli("run", "-p", str(moved), "--", "printenv", "CUDA_HOME", env=env)
    assert run.stdout.strip() == str(moved), run.stderr
