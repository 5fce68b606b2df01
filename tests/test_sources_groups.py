"""The groups beside the toolkit (issue 35.1): NCCL, cuSPARSELt, cuDSS, cuTENSOR, CUTLASS, libaio and Eigen as
`--with` groups — refused where conda-forge has no build, named by `doctor --for`, added by `resolve --for`,
and an env made that way in which a JIT-style build of the sources finds every header (a real env created
from the test channel, whose packages have the real layout: include/, lib/; the system's g++ with the flags
torch's cpp_extension uses, since the test channel's compilers are stand-ins and torch is not installed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.core.rules import make_plan
from envlock.core.tables import cuda_tables, extras_tables
from envlock.errors import PlanError
from envlock.formats import read_lock
from envlock.models import Anchor, PlanOptions
from envlock.sources.classify import source_tables
from envlock.sources.load import load_scan
from tests.test_doctor import base_env, cudart_stub, doctor  # noqa: F401 - fixture
from tests.test_doctor_groups import prefix_with
from tests.test_sources import write

BESIDE = ("nccl", "cusparselt", "cudss", "cutensor", "cutlass", "libaio", "eigen")
SPARSE = {"src/sparse.cu": '#include <cuda_runtime.h>\n#include <cusparseLt.h>\n#include "comm.h"\n',
          "src/comm.h": "#pragma once\n#include <nccl.h>\n"}  # fmt: skip


def first(cuda: str, platform: str = "linux-64", with_: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    a = Anchor(torch="2.8.0", cuda=cuda, cudnn=None, source="table", detail="test")
    return make_plan(a, PlanOptions(platforms=(platform,), with_extras=with_), cuda_tables(), extras_tables()).platforms[0].candidates


# ------------------------------------------------------------------------------------------- the table


def test_each_group_beside_the_toolkit_maps_its_headers_and_libraries_to_its_package() -> None:
    t = source_tables()
    extras = extras_tables().extras
    for name in BESIDE:
        e = extras[name]
        assert e.beside and e.packages["cf-split"], name
        for h in e.headers:  # the group's marker headers are classified to the group's own package
            rel = h.split("/", 1)[1] if e.include_dir else h
            p = t.header(rel)
            assert (p.kind, p.group, p.default) == ("cuda", name, False), (h, p)
    # cusparseLt.h is cuSPARSELt's, not cuSPARSE's (`cusparse*.h`): e081238 took it for the default set
    assert t.header("cusparseLt.h").package == "cusparselt-dev" and t.header("cusparse.h").package == "libcusparse-dev"
    assert {n: t.library(n).group for n in ("nccl", "cusparseLt", "cudss", "cutensor", "aio")} == {
        "nccl": "nccl", "cusparseLt": "cusparselt", "cudss": "cudss", "cutensor": "cutensor", "aio": "libaio"}


@pytest.mark.parametrize(
    ("cuda", "platform", "group", "why"),
    [("13.0", "win-64", "nccl", "--with nccl: NCCL, collective communication (nccl.h: torch's ProcessGroupNCCL, c10d and distributed kernels) is not built for win-64"),
     ("13.0", "win-64", "libaio", "is not built for win-64"),
     ("11.8", "linux-64", "cusparselt", "--with cusparselt: conda has no cusparselt package for CUDA 11.8"),
     ("11.8", "linux-64", "cudss", "conda has no cudss package for CUDA 11.8"),
     ("11.6", "linux-64", "nccl", "conda has no nccl package for CUDA 11.6"),
     ("11.8", "linux-64", "cutlass", "conda has no cutlass package for CUDA 11.8")],
)  # fmt: skip
def test_a_group_where_conda_forge_has_no_build_is_refused_naming_it(cuda: str, platform: str, group: str, why: str) -> None:
    with pytest.raises(PlanError) as err:
        first(cuda, platform, (group,))
    assert why in err.value.message


@pytest.mark.parametrize(
    ("cuda", "platform", "group", "spec"),
    [("12.0", "linux-64", "cusparselt", "cusparselt-dev"), ("13.2", "linux-aarch64", "nccl", "nccl"),
     ("11.8", "linux-64", "nccl", "nccl"), ("11.7", "linux-64", "libaio", "libaio"), ("13.0", "win-64", "eigen", "eigen"),
     ("12.9", "win-64", "cudss", "libcudss-dev"), ("13.0", "linux-64", "cutensor", "cutensor")],
)  # fmt: skip
def test_a_group_is_one_spec_where_conda_forge_builds_it(cuda: str, platform: str, group: str, spec: str) -> None:
    c = first(cuda, platform, (group,))[0]
    assert c.extras == ((group, spec),) and spec in c.specs


def test_with_all_is_the_toolkit_and_none_of_the_groups_beside_it() -> None:
    c = first("13.0", with_=("all",))[0]
    assert not set(c.specs) & {"nccl", "cusparselt-dev", "eigen", "libaio", "cutlass", "cutensor", "libcudss-dev"}


# ------------------------------------------------------------------------------------------- doctor --for


def _beside(prefix: Path, *groups: str) -> Path:
    """The groups' headers where conda-forge puts them: <prefix>/include (torch adds $CUDA_HOME/include)."""
    for g in groups:
        for h in extras_tables().extras[g].headers:
            (prefix / "include" / h).parent.mkdir(parents=True, exist_ok=True)
            (prefix / "include" / h).write_text(f"/* {h} */\n")
    return prefix


def test_doctor_for_a_tree_including_cusparselt_names_with_cusparselt(tmp_path: Path, cudart_stub: Path) -> None:
    """The issue's case: e081238 said "missing cusparseLt.h — fix: see the header.* findings above" (none was)."""
    tree = write(tmp_path / "proj", SPARSE)
    scans = (load_scan(str(tree)),)
    f = doctor(prefix_with(tmp_path / "a", cudart_stub, "curand"), base_env(tmp_path), for_=(str(tree),), scans=scans)["source.all_sources"]
    assert f.severity == "warning" and "missing cusparseLt.h, nccl.h" in f.message
    assert f.message.endswith("→ --with cusparselt --with nccl"), f.message
    assert "above" not in (f.hint or "") and "cusparselt-dev, nccl" in (f.hint or "")
    assert "add cusparselt, nccl to `with:`" in (f.hint or "")  # the spec lists both
    good = doctor(_beside(prefix_with(tmp_path / "b", cudart_stub, "curand"), "cusparselt", "nccl"), base_env(tmp_path),
                  for_=(str(tree),), scans=scans)["source.all_sources"]  # fmt: skip
    assert good.severity == "ok", good.message


def test_a_header_no_package_gives_says_what_to_do_instead(tmp_path: Path, cudart_stub: Path) -> None:
    tree = write(tmp_path / "proj", {"csrc/k.cu": "#include <cuda_runtime.h>\n#include <flashinfer/vec_dtypes.cuh>\n"})
    f = doctor(prefix_with(tmp_path / "a", cudart_stub), base_env(tmp_path), for_=(str(tree),),
               scans=(load_scan(str(tree)),))["source.all_sources"]  # fmt: skip
    assert f.severity == "info" and "flashinfer/vec_dtypes.cuh" in f.message
    assert "a vendored folder, a git submodule" in f.message and "no package envlock knows gives" in f.message
    assert "above" not in f.message and "above" not in (f.hint or "")


def test_eigen_in_its_own_folder_is_found_and_the_build_must_add_it(tmp_path: Path, cudart_stub: Path) -> None:
    tree = write(tmp_path / "proj", {"csrc/k.cpp": "#include <Eigen/Core>\n"})
    scans = (load_scan(str(tree)),)
    bare = doctor(prefix_with(tmp_path / "a", cudart_stub), base_env(tmp_path), for_=(str(tree),), scans=scans)
    assert bare["source.all_sources"].severity == "warning" and "--with eigen" in bare["source.all_sources"].message
    p = _beside(prefix_with(tmp_path / "b", cudart_stub), "eigen")
    f = doctor(p, base_env(tmp_path), for_=(str(tree),), scans=scans)["source.all_sources"]
    assert f.severity == "info" and f"Eigen/Core from {p / 'include' / 'eigen3'}, a folder the build must add" in f.message
    assert f.details["in_include_subdir"] == {"Eigen/Core": str(p / "include" / "eigen3")}


# ------------------------------------------------------------------------------------ resolve --for, build


def _envlock(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], check=False, env=env, capture_output=True, text=True, timeout=600)


def _jit_preprocess(prefix: Path, source: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """What torch's JIT build runs first, inside the env's activation: the host compiler with
    -I$CUDA_HOME/include (cpp_extension.include_paths(cuda=True)) and the activation's CPATH."""
    script = f'exec g++ -E -x c++ -I"$CUDA_HOME/include" -o /dev/null {source}'
    return _envlock("run", "-p", str(prefix), "--", "sh", "-c", script, env=env)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_resolve_for_makes_an_env_in_which_the_jit_build_finds_every_header(tmp_path: Path, test_channel: Path) -> None:
    tree = write(tmp_path / "proj", SPARSE)
    project = tmp_path / "project"
    env = {**base_env(tmp_path), "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # fmt: skip
    mirror = ["--mirror", f"conda-forge={test_channel.as_uri()}", "--platform", "linux-64", "--toolchain-only",
              "--project-dir", str(project)]  # fmt: skip
    r = _envlock("resolve", "--torch", "2.11.0", "--for", str(tree), "--lock", "for", "--json", *mirror, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["with"] == ["cusparselt", "nccl"]
    names = {p.name for p in read_lock(project / "locks/for/conda-lock.yml").packages}
    assert {"cusparselt-dev", "cusparselt", "nccl"} <= names
    r = _envlock("resolve", "--torch", "2.11.0", "--lock", "plain", "--json", *mirror, env=env)  # the default set
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("for", "plain"):
        r = _envlock("create", "--lock", str(project / f"locks/{name}/conda-lock.yml"), "-p", str(tmp_path / name), "-q",
                     "--mirror", f"conda-forge={test_channel.as_uri()}", env=env)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
    built = _jit_preprocess(tmp_path / "for", tree / "src/sparse.cu", env)
    assert built.returncode == 0, built.stderr  # cuda_runtime.h (CPATH), cusparseLt.h and nccl.h ($CUDA_HOME/include)
    plain = _jit_preprocess(tmp_path / "plain", tree / "src/sparse.cu", env)
    assert plain.returncode != 0 and "cusparseLt.h: No such file or directory" in plain.stderr  # as doctor predicts
    # doctor in each env says what the build found
    for name, sev in (("for", "ok"), ("plain", "warning")):
        r = _envlock("doctor", "-p", str(tmp_path / name), "--for", str(tree), "--json", env=env)
        got = {f["code"]: f for f in json.loads(r.stdout)["findings"]}
        assert got["source.all_sources"]["severity"] == sev, got["source.all_sources"]
