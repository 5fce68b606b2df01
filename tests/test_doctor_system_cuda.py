"""`envlock doctor` against the real system CUDA of this machine kind (nvcc + cudart, no cuSPARSE headers).

Skipped where there is no system nvcc. Expects exactly the seed's failure: the math-library headers
(cusparse.h first, the one ATen/cuda/CUDAContextLight.h includes first) are missing, named with their fix,
and `--compile` fails with nvcc's own "cusparse.h: No such file or directory". Everything else is real and
must be fine: nvcc runs, cudart loads and reports its version, gcc is within nvcc's limit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.doctor import HEADERS
from envlock.doctor.programs import ccbin


def _system_toolkit() -> Path | None:
    """The toolkit the system nvcc really runs from (nvcc's own TOP; /usr/local/bin/nvcc may be a wrapper)."""
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
    )
    if nvcc is None:
        return None
    proc = subprocess.run(
        [nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
        capture_output=True,
        text=True,
        timeout=60,
    )
    top = next(
        (ln.split("=", 1)[1] for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("#$ TOP=")),
        None,
    )
    return Path(os.path.normpath(top)) if top else None


TOOLKIT = _system_toolkit()
pytestmark = pytest.mark.skipif(TOOLKIT is None, reason="no system CUDA (nvcc) on this machine")


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One `envlock doctor --compile --json` run with CUDA_HOME at the system toolkit, no conda env active."""
    assert TOOLKIT is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA", "CUDA", "CPATH", "NVCC_"))}
    env.update(CUDA_HOME=str(TOOLKIT), PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [sys.executable, "-m", "envlock", "doctor", "--compile", "--json", "--python-exe", sys.executable],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    doc = json.loads(proc.stdout)
    doc["_rc"] = proc.returncode
    if (TOOLKIT / "include" / "cusparse.h").exists():
        pytest.skip(f"{TOOLKIT} is a full toolkit (it has cusparse.h): the seed failure cannot show here")
    return doc


def test_exactly_the_seed_failure(result: dict) -> None:
    errors = {f["code"] for f in result["findings"] if f["severity"] == "error"}
    missing = {f"header.{h}" for h in HEADERS if not (TOOLKIT / "include" / h).exists()}  # type: ignore[operator]
    assert "header.cusparse.h" in missing
    assert errors == missing | {"compile.nvcc"}
    assert result["_rc"] == 1 and result["exit_code"] == 1


def test_cusparse_is_named_with_its_fix(result: dict) -> None:
    f = next(f for f in result["findings"] if f["code"] == "header.cusparse.h")
    assert "cusparse.h not found" in f["message"]
    assert "libcusparse-dev" in f["hint"] and "cuda-version=" in f["hint"]


def test_compile_fails_the_way_the_seed_describes(result: dict) -> None:
    f = next(f for f in result["findings"] if f["code"] == "compile.nvcc")
    assert "fatal error: cusparse.h: No such file or directory" in f["message"]
    assert "libcusparse-dev" in f["hint"]
    assert f["details"]["seconds"] > 0


def test_the_rest_of_the_real_toolkit_is_fine(result: dict) -> None:
    by = {f["code"]: f for f in result["findings"]}
    assert by["nvcc.found"]["severity"] == "ok" and by["nvcc.found"]["details"]["version"]
    assert by["cuda_home.consistent"]["severity"] == "ok"
    assert by["cudart.loadable"]["severity"] in ("ok", "warning")  # warning: not on the loader's path
    assert by["cudart.loadable"]["details"]["version"] >= 11000
    assert by["host_compiler.version"]["severity"] == "ok"
    assert by["header.cuda_runtime.h"]["severity"] == "ok"


def test_ccbin_clash_is_what_this_nvcc_really_does() -> None:
    """conda-forge's NVCC_PREPEND_FLAGS=-ccbin=$CXX plus torch's -ccbin $CC: this nvcc warns and takes the last."""
    gxx, gcc = shutil.which("g++"), shutil.which("gcc")
    if not (gxx and gcc):
        pytest.skip("needs gcc and g++")
    env = {**os.environ, "NVCC_PREPEND_FLAGS": f"-ccbin={gxx}"}
    answer = ccbin(TOOLKIT / "bin" / "nvcc", gcc, gxx, env)  # type: ignore[operator]
    assert "compiler-bindir" in answer.said, answer.output
    assert answer.rc == 0 and "the last value of this option was used" in answer.said  # nvcc 13.0: a warning, not fatal


def test_ccbin_is_no_clash_without_torch() -> None:
    """Only torch's builder adds -ccbin $CC: with no torch importable the doctor does not cry wolf."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA", "CUDA", "CPATH", "NVCC_"))}
    env.update(
        CUDA_HOME=str(TOOLKIT),
        NVCC_PREPEND_FLAGS="-ccbin=g++",
        CC="gcc",
        PYTHONPATH=os.pathsep.join(sys.path),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "envlock", "doctor", "--json", "--python-exe", sys.executable],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    f = next(f for f in json.loads(proc.stdout)["findings"] if f["code"] == "host_compiler.ccbin")
    assert f["severity"] == "ok" and "only torch's builder" in f["message"]


# ------------------------------------------------- two -ccbin: conda-forge's $CXX and torch's $CC

TORCH_STAND_IN = '''"""A stand-in torch for doctor's probe: version, CUDA, no cuDNN, no GPU (torch adds -ccbin $CC)."""
__version__ = "2.11.0+cu130"
class version:
    cuda = "13.0"
class backends:
    class cudnn:
        @staticmethod
        def version():
            return None
class cuda:
    @staticmethod
    def is_available():
        return False
'''


def _ccbin_doctor(tmp_path: Path, cc: Path, cxx: Path) -> dict:
    """doctor --json with conda-forge's activation shape: CC, CXX, NVCC_PREPEND_FLAGS=-ccbin=$CXX, torch importable."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(TORCH_STAND_IN)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONDA", "CUDA", "CPATH", "NVCC_"))}
    env.update(CUDA_HOME=str(TOOLKIT), CC=str(cc), CXX=str(cxx), NVCC_PREPEND_FLAGS=f" -ccbin={cxx}",
               PATH=f"{cc.parent}{os.pathsep}{env['PATH']}", PYTHONPATH=os.pathsep.join([str(site), *sys.path]))
    proc = subprocess.run([sys.executable, "-m", "envlock", "doctor", "--json", "--python-exe", sys.executable],
                          env=env, capture_output=True, text=True, timeout=300)
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == proc.returncode
    return next(f for f in doc["findings"] if f["code"] == "host_compiler.ccbin")


@pytest.fixture
def conda_style_gcc(tmp_path: Path) -> tuple[Path, Path]:
    """<env>/bin/x86_64-conda-linux-gnu-cc and -c++: the C and C++ drivers of one gcc install, as conda-forge names them."""
    gcc, gxx = shutil.which("gcc"), shutil.which("g++")
    if not (gcc and gxx):
        pytest.skip("needs gcc and g++")
    bindir = tmp_path / "env" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "x86_64-conda-linux-gnu-cc").symlink_to(gcc)
    (bindir / "x86_64-conda-linux-gnu-c++").symlink_to(gxx)
    return bindir / "x86_64-conda-linux-gnu-cc", bindir / "x86_64-conda-linux-gnu-c++"


def test_ccbin_of_one_gcc_install_is_ok_and_names_the_compiler_nvcc_uses(tmp_path: Path, conda_style_gcc) -> None:
    """What every env envlock makes has (the H200 record: the one thing between doctor --compile and all green)."""
    cc, cxx = conda_style_gcc
    f = _ccbin_doctor(tmp_path, cc, cxx)
    assert f["severity"] == "ok", f
    assert f"uses torch's -ccbin $CC={cc}" in f["message"] and "same gcc install" in f["message"]
    assert f["details"]["same_toolchain"] is True and "compiler-bindir" in f["details"]["nvcc_said"]  # nvcc did warn


def test_ccbin_of_two_different_compilers_stays_a_warning(tmp_path: Path, conda_style_gcc) -> None:
    _, cxx = conda_style_gcc
    other = tmp_path / "elsewhere" / "cc"  # another install: a wrapper of its own, not the C++ driver's sibling
    other.parent.mkdir()
    other.write_text(f"#!/bin/sh\nexec {shutil.which('gcc')} \"$@\"\n")
    other.chmod(0o755)
    f = _ccbin_doctor(tmp_path, other, cxx)
    assert f["severity"] == "warning", f
    assert "a different compiler" in f["message"] and f"torch's -ccbin $CC={other} wins over {cxx}" in f["message"]
    assert f["details"]["same_toolchain"] is False
