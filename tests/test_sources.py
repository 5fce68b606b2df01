"""The source scanner (envlock/sources/) on small source trees written here: includes through the project's own
headers, #if-guarded includes, libraries=/-l, setup.py extensions and JIT load()s, archives read without
extracting; `doctor --for PATH` on constructed prefixes and `resolve --for PATH` against the test channel."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.output import flat, logical_lines

from envlock.cli import run
from envlock.sources import cpp
from envlock.sources.classify import source_tables
from envlock.sources.reader import member_path, read_sources
from envlock.sources.scan import scan
from tests.test_doctor import base_env, cudart_stub, doctor  # noqa: F401 - fixture
from tests.test_doctor_groups import prefix_with

SETUP = '''\
raise SystemExit("setup.py was run")  # the scanner reads it with ast and never runs it
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
EXT = "pkg._C"
srcs = ["csrc/a.cu"]
srcs.append("csrc/b.cpp")
setup(ext_modules=[CUDAExtension(EXT, srcs, include_dirs=["csrc/include"], libraries=["curand"],
                                 extra_link_args=["-lcufft"], define_macros=[("WITH_NVTX", None)])])
'''
BACKEND = '''\
import glob, os
from torch.utils.cpp_extension import load, load_inline
PATH = os.path.dirname(os.path.abspath(__file__))
_C = load(name="jitop", sources=glob.glob(os.path.join(PATH, "csrc/*.cu")),
          extra_include_paths=[os.path.join(PATH, "inc")], extra_ldflags=["-lnvrtc"])
_I = load_inline(name="inl", cpp_sources="", cuda_sources="#include <nvml.h>\\n")
'''
TREE = {
    "setup.py": SETUP,
    "csrc/a.cu": '#include "local.h"\n#include <torch/extension.h>\n',
    "csrc/local.h": "#pragma once\n#include <inc/deep.h>\n",
    "csrc/include/inc/deep.h": "// a header of the project, found through include_dirs\n#include <cuda_profiler_api.h>\n",
    "csrc/b.cpp": (
        "#ifdef USE_ROCM\n#include <hip/hip_runtime.h>\n#else\n#include <cuda_runtime.h>\n#endif\n"
        "#ifdef WITH_NVTX\n#include <nvtx3/nvToolsExt.h>\n#endif\n"
        "#if 0\n#include <cufft.h>\n#endif\n"
        "/* #include <npp.h> */\n// #include <nvjpeg.h>\n"
        "#if defined(_WIN32) || defined(__APPLE__)\n#include <windows.h>\n#elif MY_OWN_FLAG\n#include <cupti.h>\n#endif\n"
        "#include <vector>\n#include <cutlass/cutlass.h>\n#include <ATen/native/cuda/CuFFTPlanCache.h>\n"
    ),
    "pkg/__init__.py": "",
    "pkg/_backend.py": BACKEND,
    "pkg/csrc/k.cu": '#include "x.h"\n#include <c10/cuda/CUDAGuard.h>\n',
    "pkg/inc/x.h": "#include <cusolverDn.h>\n",
    "pkg/csrc/unused.cuh": "#include <nvjpeg.h>\n",
}


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def units(path: Path) -> dict:
    return {u.name: u for u in scan(read_sources(path), source_tables()).units}


def needs(unit) -> dict[str, tuple[str, str | None, bool]]:  # type: ignore[no-untyped-def]
    return {n.name: (n.provider.kind, n.provider.group, n.conditional) for n in unit.needs}


# ------------------------------------------------------------------------------------------- #if


def test_conditions_a_linux_cuda_build_decides_and_those_it_cannot() -> None:
    incs, computed = cpp.includes(TREE["csrc/b.cpp"] + "#include HEADER_NAME\n")
    got = {i.name: i.conditional for i in incs}
    assert got == {"cuda_runtime.h": False, "nvtx3/nvToolsExt.h": True, "cupti.h": True, "vector": False,
                   "cutlass/cutlass.h": False, "ATen/native/cuda/CuFFTPlanCache.h": False}  # fmt: skip
    assert computed == [len(TREE["csrc/b.cpp"].splitlines()) + 1]
    # a macro the build defines (define_macros, -D) decides its #ifdef; a file's own #define / #undef too
    assert {i.name: i.conditional for i in cpp.includes(TREE["csrc/b.cpp"], {"WITH_NVTX": 1})[0]}["nvtx3/nvToolsExt.h"] is False
    text = "#define A\n#ifdef A\n#include <one.h>\n#endif\n#undef A\n#ifdef A\n#include <two.h>\n#endif\n"
    assert [i.name for i in cpp.includes(text)[0]] == ["one.h"]


@pytest.mark.parametrize(
    ("expr", "want"),
    [("0", False), ("1", True), ("defined(__linux__) && !defined(_MSC_VER)", True), ("defined X || 0", None),
     ("__CUDACC_VER_MAJOR__ >= 12", None), ("WITH_CUDA >= 1", True), ("(USE_ROCM)", False), ("!(1 && 0)", True),
     ("sizeof(int) == 4", None)],
)  # fmt: skip
def test_if_expressions_are_three_valued(expr: str, want: bool | None) -> None:
    assert cpp.evaluate(expr, cpp.KNOWN) is want


# ------------------------------------------------------------------------------------------- units


def test_a_setup_py_extension_follows_its_own_headers_and_reads_its_macros_and_libraries(tmp_path: Path) -> None:
    u = units(write(tmp_path, TREE))["pkg._C"]
    assert (u.kind, u.sources, u.where) == ("extension", ("csrc/a.cu", "csrc/b.cpp"), "setup.py:7")
    n = needs(u)
    assert n["cuda_profiler_api.h"] == ("cuda", "profiler-api", False)  # a.cu -> local.h -> include/inc/deep.h
    assert next(x.via for x in u.needs if x.name == "cuda_profiler_api.h") == "csrc/include/inc/deep.h:2"
    assert n["nvtx3/nvToolsExt.h"] == ("cuda", "nvtx", False)  # WITH_NVTX is one of its define_macros
    # under `#elif MY_OWN_FLAG`: a project macro setup.py never defines (its flags all read): not needed
    assert "cupti.h" not in n and {s.name: s.because for s in u.skipped} == {
        "cupti.h": "MY_OWN_FLAG is not defined (neither the build nor the sources define it)"}
    assert n["cufft.h"][:2] == ("cuda", "cufft")  # not from `#if 0`: through torch's CuFFTPlanCache.h
    assert next(x.via for x in u.needs if x.name == "cufft.h").startswith("through torch's ATen/native/cuda/CuFFTPlanCache.h")
    assert n["curand"] == ("cuda", "curand", False) and n["cufft"] == ("cuda", "cufft", False)  # libraries=, -l
    assert n["cutlass/cutlass.h"] == ("cuda", "cutlass", False)  # conda-forge's cutlass: a group beside the toolkit
    assert n["vector"][0] == "system" and n["torch/extension.h"][0] == "torch"
    assert not {"hip/hip_runtime.h", "windows.h", "npp.h", "nvjpeg.h"} & set(n)  # ROCm, Windows, comments
    assert u.groups() == ["cufft", "cutlass", "nvtx", "profiler-api"]  # curand is in the default dev set


def test_a_jit_load_resolves_its_glob_next_to_the_python_file_and_load_inline_its_text(tmp_path: Path) -> None:
    got = units(write(tmp_path, TREE))
    jit = got["jitop"]
    assert (jit.kind, jit.sources) == ("jit", ("pkg/csrc/k.cu",))  # the .cuh is not a source of it
    n = needs(jit)
    assert n["cusolverDn.h"][0] == "cuda" and n["nvrtc"] == ("cuda", "nvrtc", False)  # pkg/inc via extra_include_paths
    assert "cuda_runtime_api.h" in n  # through torch's c10/cuda headers
    assert "nvjpeg.h" not in n
    assert needs(got["inl"])["nvml.h"] == ("cuda", "nvml", False)


def test_no_python_that_declares_a_build_scans_every_source_as_one_unit(tmp_path: Path) -> None:
    write(tmp_path, {"src/a.cu": "#include <curand_kernel.h>\n#include <mystery/lib.h>\n"})
    (u,) = units(tmp_path).values()
    assert u.kind == "all" and needs(u)["mystery/lib.h"][0] == "unknown"


# ------------------------------------------------------------------------------------------- archives


def tar_of(tmp_path: Path, files: dict[str, str], *, evil: bool = False) -> Path:
    path = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"pkg-1.0/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        if evil:
            for name in ("../escape.cu", "/abs/x.cu"):
                info = tarfile.TarInfo(name)
                info.size = 3
                tf.addfile(info, io.BytesIO(b"//x"))
            link = tarfile.TarInfo("pkg-1.0/csrc/link.cu")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tf.addfile(link)
    return path


def test_an_sdist_is_read_without_extracting_and_gives_what_its_tree_gives(tmp_path: Path) -> None:
    tree = units(write(tmp_path / "tree", TREE))
    sdist = tar_of(tmp_path, TREE, evil=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    got = units(sdist)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written next to it (or anywhere)
    assert {k: needs(v) for k, v in got.items()} == {k: needs(v) for k, v in tree.items()}
    src = read_sources(sdist)
    assert "csrc/link.cu" not in src.files and not any("escape" in p for p in src.files)
    assert any("escape.cu" in s for s in src.skipped)
    z = tmp_path / "pkg-1.0.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for rel, text in TREE.items():
            zf.writestr(f"pkg-1.0/{rel}", text)
    assert {k: needs(v) for k, v in units(z).items()} == {k: needs(v) for k, v in tree.items()}


@pytest.mark.parametrize("name", ["../x.cu", "/x.cu", "a/../../x.cu", "C:/x.cu", "a\\..\\x.cu", "a/\x00.cu", ""])
def test_member_names_that_are_not_plain_relative_paths_are_refused(name: str) -> None:
    assert member_path(name) is None


def test_a_member_over_the_size_cap_is_skipped_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock.sources import reader

    monkeypatch.setattr(reader, "MAX_FILE", 64)
    src = read_sources(tar_of(tmp_path, {"big.cu": "//" + "x" * 200 + "\n", "small.cu": "#include <cuda.h>\n"}))
    assert list(src.files) == ["small.cu"] and src.skipped == ("pkg-1.0/big.cu (over 64 bytes)",)


# ------------------------------------------------------------------------------------------- the commands


def test_doctor_for_a_source_tree_names_the_missing_header_and_its_group(tmp_path: Path, cudart_stub: Path) -> None:
    tree = write(tmp_path / "proj", {"setup.py": SETUP.split("\n", 1)[1], **{k: v for k, v in TREE.items() if k.startswith("csrc/")}})
    from envlock.sources.load import load_scan

    scans = (load_scan(str(tree)),)
    lacking = doctor(prefix_with(tmp_path / "a", cudart_stub, "curand"), base_env(tmp_path), for_=(str(tree),), scans=scans)
    f = lacking["source.pkg._C"]
    assert f.severity == "warning" and "cuda_profiler_api.h" in f.message and "--with profiler-api" in f.message
    assert "add nvtx --with profiler-api" not in (f.hint or "") and "profiler-api" in (f.hint or "")
    assert f.details["missing"] == ["cuda_profiler_api.h", "cufft.h", "cufftXt.h", "cutlass/cutlass.h",
                                    "nvtx3/nvToolsExt.h"]  # fmt: skip
    assert "not needed by this build: cupti.h (MY_OWN_FLAG is not defined" in f.message
    assert "cutlass/cutlass.h" in f.details["missing"] or "--with cutlass" in f.message
    full = doctor(prefix_with(tmp_path / "b", cudart_stub, "curand", "profiler-api", "nvtx", "cufft", "cupti", "cutlass"),
                  base_env(tmp_path), for_=(str(tree),), scans=scans)  # fmt: skip
    g = full["source.pkg._C"]
    assert g.severity == "ok", g.message  # CUTLASS too: conda-forge's cutlass is a group now (`--with cutlass`)


def test_doctor_for_something_that_is_not_there_is_one_error_and_a_hint(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "envlock", "doctor", "--for", str(tmp_path / "nope.tar.gz")],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode != 0 and "Traceback" not in r.stderr
    lines = logical_lines(r.stderr.strip())  # each folded to 80 columns
    assert lines[0].startswith("error: --for ") and lines[1].startswith("hint: ")


def test_resolve_for_a_source_tree_adds_the_groups_it_needs_and_locks_them(tmp_path, capsys, test_channel) -> None:
    tree = write(tmp_path / "proj", {"src/k.cu": "#include <cuda_profiler_api.h>\n#include <curand_kernel.h>\n"})
    mirror = f"conda-forge={test_channel.as_uri()}"
    code = run(["resolve", "--torch", "2.11.0", "--platform", "linux-64", "--for", str(tree), "--mirror", mirror,
                "--project-dir", str(tmp_path / "p"), "--json"])  # fmt: skip
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert code == 0 and doc["with"] == ["profiler-api"]  # curand_kernel.h: the default set has it
    assert f"--for {tree}: --with profiler-api (cuda_profiler_api.h, src/k.cu:1)" in flat(out.err)  # folded at 80
    spec = (tmp_path / "p/environments/torch2.11.0-cu130.yml").read_text()
    assert "  with: [profiler-api]\n" in spec  # the spec keeps the groups: a re-lock needs no sources


def test_a_default_set_header_missing_is_not_a_with_to_add(tmp_path: Path, cudart_stub: Path) -> None:
    """curand is in the default dev set: an env without it is incomplete, and `--with curand` is not the fix."""
    tree = write(tmp_path / "proj", {"src/k.cu": "#include <curand_kernel.h>\n"})
    from envlock.sources.load import load_scan

    got = doctor(prefix_with(tmp_path / "a", cudart_stub), base_env(tmp_path), for_=(str(tree),),
                 scans=(load_scan(str(tree)),))["source.all_sources"]  # fmt: skip
    assert got.severity == "warning" and "curand_kernel.h" in got.message and "--with" not in got.message
    # no header.* finding is about curand_kernel.h: the fix is the package, never "see above" (e081238 said that)
    assert "above" not in got.hint and "libcurand-dev" in got.hint, got.hint
    assert got.hint.startswith("envlock create --lock locks/train/conda-lock.yml -p ")  # the env's own repair


def test_a_folder_is_read_up_to_the_total_cap_as_an_archive_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/doctor.md: at most 4 MiB each and 512 MiB in all, what is left out said (issue 33.8): a folder had the
    per-file cap only, so a checkout of many large headers was read whole."""
    from envlock.sources import reader

    monkeypatch.setattr(reader, "MAX_FILE", 64)
    monkeypatch.setattr(reader, "MAX_TOTAL", 100)
    tree = write(tmp_path / "proj", {f"k{i}.cu": "//" + "x" * 40 + "\n" for i in range(5)})
    src = read_sources(tree)
    assert sorted(src.files) == ["k0.cu", "k1.cu", "k2.cu"]  # 43 + 43 + 43 bytes: the third passes 100, then no more
    assert src.skipped == ("k3.cu (over 100 bytes read in all)", "k4.cu (over 100 bytes read in all)")
