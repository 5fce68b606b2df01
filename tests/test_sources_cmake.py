"""CMake, scikit-build-core and meson projects read by the source scanner (envlock/sources/cmake.py, meson.py,
buildsys.py): one test per construct on small trees written here, the hostile shapes bounded, and
`doctor --for` / `resolve --for` on a CMake tree."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from envlock.cli import run
from envlock.sources.classify import source_tables
from envlock.sources.facts import summary
from envlock.sources.reader import read_sources
from envlock.sources.scan import Unit, scan
from tests.output import flat
from tests.test_doctor import base_env, cudart_stub, doctor  # noqa: F401 - fixture
from tests.test_doctor_groups import prefix_with
from tests.test_sources import write

KERNEL = {"csrc/k.cu": "#include <cuda_runtime.h>\n", "csrc/bind.cpp": "#include <vector>\n"}


def units(root: Path, files: dict[str, str], defines: dict[str, str] | None = None) -> dict[str, Unit]:
    got = scan(read_sources(write(root, {**KERNEL, **files})), source_tables(), {"defines": defines or {}})
    return {u.name: u for u in got.units}


def needs(unit: Unit) -> dict[str, tuple[str, str | None, bool]]:
    return {n.name: (n.provider.kind, n.provider.group, n.conditional) for n in unit.needs}


def cmake(body: str) -> dict[str, str]:
    return {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.24)\nproject(demo LANGUAGES CXX CUDA)\n" + body}


# ------------------------------------------------------------------------------------------- CMake constructs


def test_find_package_cuda_toolkit_nccl_and_an_unknown_package(tmp_path: Path) -> None:
    got = units(tmp_path, cmake("find_package(CUDAToolkit 12.1 REQUIRED)\nfind_package(NCCL REQUIRED)\n"
                                "find_package(CUDA)\nfind_package(FancyLib REQUIRED)\nfind_package(Git)\n"))  # fmt: skip
    n = needs(got["CMakeLists.txt"])  # the configure step is a unit of its own
    assert n["cuda_runtime.h"][:2] == ("cuda", None) and n["cudart"][0] == "cuda"
    assert n["cuda_runtime.h"][2] is False  # REQUIRED
    assert n["nccl.h"][2] is False and n["nccl"][2] is False  # NCCL's header and library, required
    assert n["FancyLib"] == ("unknown", None, False)  # REQUIRED and nothing envlock knows gives it
    assert "Git" not in n  # a build tool: nothing of the toolchain
    via = next(x.via for x in got["CMakeLists.txt"].needs if x.name == "nccl.h")
    assert via == "CMakeLists.txt:4 find_package(NCCL REQUIRED)"
    assert summary(got["CMakeLists.txt"].facts)["nvcc_min"] == "12.1"  # find_package(CUDAToolkit 12.1)
    optional = units(tmp_path / "b", cmake("find_package(NCCL)\n"))
    assert needs(optional["CMakeLists.txt"])["nccl.h"][2] is True  # not REQUIRED: configure goes on without it


@pytest.mark.parametrize(
    ("item", "name", "group"),
    [("CUDA::cufft", "cufft", "cufft"), ("CUDA::cufft_static", "cufft", "cufft"), ("CUDA::nvrtc", "nvrtc", "nvrtc"),
     ("CUDA::nvml", "nvidia-ml", "nvml"), ("CUDA::nvtx3", "nvtx3/nvToolsExt.h", "nvtx"),
     ("CUDA::cuFile", "cufile", "cufile"), ("CUDA::cupti", "cupti", "cupti"), ("CUDA::nppial", "nppial", "npp"),
     ("CUDA::cublasLt", "cublasLt", None), ("${CUDA_CUFFT_LIBRARIES}", "cufft", "cufft"), ("-lcurand", "curand", None)],
)  # fmt: skip
def test_cuda_link_items_map_to_their_package_and_group(tmp_path: Path, item: str, name: str, group: str | None) -> None:
    got = units(tmp_path, cmake(f"find_package(CUDA)\nadd_library(k SHARED csrc/k.cu)\ntarget_link_libraries(k PRIVATE {item})\n"))
    kind, g, conditional = needs(got["k"])[name]
    assert (kind, conditional) == ("cuda", False)
    assert g == group or (group is None and got["k"].groups() == [])  # cublasLt, curand: the default dev set


def test_the_driver_api_a_generator_expression_and_the_project_s_own_targets(tmp_path: Path) -> None:
    got = units(tmp_path, cmake(
        "add_library(core STATIC csrc/k.cu)\ntarget_link_libraries(core PUBLIC CUDA::cuda_driver)\n"
        "target_include_directories(core PUBLIC include)\n"
        "add_library(ext MODULE csrc/bind.cpp)\n"
        "target_link_libraries(ext PRIVATE core $<$<BOOL:${WITH_CUFFT}>:CUDA::cufft> $<BUILD_INTERFACE:CUDA::curand>)\n"))
    n = needs(got["ext"])
    assert n["cuda"][0] == "driver"  # through the project's own target `core`, which it links
    assert n["cufft"] == ("cuda", "cufft", True)  # only when WITH_CUFFT: conditional
    assert n["curand"][2] is False  # BUILD_INTERFACE: the build uses it
    assert "core" not in n  # the project's own target is not a library to find


def test_enable_language_and_project_languages_make_the_build_a_cuda_build(tmp_path: Path) -> None:
    for i, head in enumerate(("project(p LANGUAGES CXX CUDA)", "project(p CXX CUDA)", "project(p CXX)\nenable_language(CUDA)")):
        got = units(tmp_path / str(i), {"CMakeLists.txt": f"{head}\nadd_library(x SHARED csrc/bind.cpp)\n"})
        assert summary(got["CMakeLists.txt"].facts) == {} and any(f.key == "cuda_language" for f in got["CMakeLists.txt"].facts)
    plain = units(tmp_path / "c", {"CMakeLists.txt": "project(p CXX)\nadd_library(x SHARED csrc/bind.cpp)\n"})
    assert not any(f.key == "cuda_language" for f in plain["CMakeLists.txt"].facts)


def test_cmake_cuda_architectures_a_target_property_and_the_standards(tmp_path: Path) -> None:
    got = units(tmp_path, cmake(
        'set(CMAKE_CUDA_ARCHITECTURES "80;90a-real")\nset(CMAKE_CXX_STANDARD 17)\n'
        "add_library(a SHARED csrc/k.cu)\nadd_library(b SHARED csrc/k.cu)\n"
        "set_target_properties(b PROPERTIES CUDA_ARCHITECTURES 100 CUDA_STANDARD 20)\n"
        "target_compile_features(b PUBLIC cxx_std_20)\n"
        'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_120,code=sm_120")\nadd_library(c SHARED csrc/k.cu)\n'))
    assert summary(got["a"].facts) == {"cxx_std": "c++17", "arch": ["80", "90a"]}
    assert summary(got["b"].facts) == {"cxx_std": "c++20", "cuda_std": "c++20", "arch": ["100"]}
    assert summary(got["c"].facts)["arch"] == ["80", "90a", "120"]  # CMAKE_CUDA_FLAGS' -gencode


def test_an_nvcc_floor_from_a_fatal_error(tmp_path: Path) -> None:
    got = units(tmp_path, cmake('if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS "11.8")\n  message(FATAL_ERROR "old")\n'
                                'elseif(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL "14.0")\n  message(FATAL_ERROR "new")\nendif()\n'
                                'if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS "12.0")\n  message(STATUS "only a message")\nendif()\n'))  # fmt: skip
    assert summary(got["CMakeLists.txt"].facts) == {"nvcc_min": "11.8", "nvcc_below": "14.0"}


@pytest.mark.parametrize("call", ["add_library(ext SHARED", "pybind11_add_module(ext MODULE THIN_LTO",
                                  "Python_add_library(ext MODULE WITH_SOABI", "python_add_library(ext MODULE",
                                  "nanobind_add_module(ext NB_STATIC NB_DOMAIN demo", "cuda_add_library(ext SHARED",
                                  "add_executable(ext"])  # fmt: skip
def test_the_sources_of_each_target_call_are_scanned_like_setup_py_s(tmp_path: Path, call: str) -> None:
    files = {"csrc/inc/deep.h": "#include <cufft.h>\n", "csrc/x.cu": '#include "inc/deep.h"\n',
             "csrc/sub/CMakeLists.txt": "target_sources(ext PRIVATE y.cu)\n", "csrc/sub/y.cu": "#include <nvrtc.h>\n",
             **cmake("set(SRCS csrc/x.cu)\nlist(APPEND SRCS ${CMAKE_CURRENT_SOURCE_DIR}/csrc/bind.cpp)\n"
                     f"{call} ${{SRCS}})\nadd_subdirectory(csrc/sub)\ntarget_include_directories(ext PRIVATE csrc)\n")}  # fmt: skip
    u = units(tmp_path, files)["ext"]
    assert u.sources == ("csrc/bind.cpp", "csrc/sub/y.cu", "csrc/x.cu") and u.kind == "cmake"
    n = needs(u)
    assert n["cufft.h"] == ("cuda", "cufft", False) and n["nvrtc.h"] == ("cuda", "nvrtc", False)
    assert next(x.via for x in u.needs if x.name == "cufft.h") == "csrc/inc/deep.h:1"  # through the project's header


def test_file_glob_functions_and_macros_and_foreach(tmp_path: Path) -> None:
    files = cmake("file(GLOB_RECURSE KERNELS CONFIGURE_DEPENDS csrc/*.cu)\n"
                  "function(make_ext name)\n  add_library(${name} SHARED ${ARGN})\n  target_link_libraries(${name} CUDA::curand)\nendfunction()\n"
                  "foreach(n IN ITEMS one two)\n  make_ext(ext_${n} ${KERNELS})\nendforeach()\n")  # fmt: skip
    got = units(tmp_path, files)
    assert set(got) == {"CMakeLists.txt", "ext_one", "ext_two"}
    assert got["ext_one"].sources == ("csrc/k.cu",) and "curand" in needs(got["ext_two"])


def test_if_is_decided_where_linux_and_the_options_decide_it(tmp_path: Path) -> None:
    files = cmake('option(WITH_NVTX "nvtx" OFF)\nset(BACKEND "cpu" CACHE STRING "cpu or cuda")\n'
                  "if(WIN32)\n  find_package(WinOnly REQUIRED)\nelseif(UNIX AND NOT APPLE)\n  find_package(NCCL REQUIRED)\nendif()\n"
                  "if(WITH_NVTX)\n  find_package(NVTX REQUIRED)\nendif()\n"
                  'if(BACKEND STREQUAL "cuda")\n  find_package(cuTENSOR REQUIRED)\nendif()\n'
                  "if(SOMETHING_FROM_OUTSIDE)\n  find_package(cudss REQUIRED)\nendif()\n")  # fmt: skip
    n = needs(units(tmp_path, files)["CMakeLists.txt"])
    assert "WinOnly" not in n and n["nccl.h"][2] is False  # WIN32 is false, UNIX true on Linux
    assert "nvtx3/nvToolsExt.h" not in n and "cutensor.h" not in n  # option()/cache defaults decide
    assert n["cudss.h"][2] is True  # a value only -D could give: both branches count, conditional
    configured = needs(units(tmp_path / "b", files, {"BACKEND": "cuda", "WITH_NVTX": "ON"})["CMakeLists.txt"])
    assert configured["cutensor.h"][2] is False and configured["nvtx3/nvToolsExt.h"][2] is False  # -D wins


def test_scikit_build_core_s_source_dir_and_defines_configure_the_reading(tmp_path: Path) -> None:
    files = {"pyproject.toml": '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
                               '[tool.scikit-build]\ncmake.source-dir = "native"\n[tool.scikit-build.cmake.define]\nUSE_CUFFT = true\n',
             "native/CMakeLists.txt": "project(p CXX CUDA)\nadd_library(ext MODULE k.cu)\n"
                                      "if(USE_CUFFT)\n  target_link_libraries(ext PRIVATE CUDA::cufft)\nendif()\n",
             "native/k.cu": "#include <cuda_runtime.h>\n",
             "setup.py": "from setuptools import setup, Extension\nsetup(ext_modules=[Extension('ext', sources=[])])\n"}  # fmt: skip
    got = units(tmp_path, files)
    assert set(got) == {"CMakeLists.txt", "ext"}  # the sourceless setup.py Extension is the wrapper, dropped
    assert got["ext"].sources == ("native/k.cu",) and needs(got["ext"])["cufft"] == ("cuda", "cufft", False)


# ------------------------------------------------------------------------------------------- meson


def test_meson_dependency_cuda_modules_options_and_subdir(tmp_path: Path) -> None:
    files = {"meson.build": "project('p', 'cpp', 'cuda', default_options: ['cpp_std=c++17'])\n"
                            "py = import('python').find_installation()\n"
                            "cuda = dependency('cuda', version: '>=12.4', modules: ['cufft', 'nvrtc'])\n"
                            "nccl = dependency('nccl', required: get_option('with_nccl'))\n"
                            "subdir('csrc')\n"
                            "if host_machine.system() == 'windows'\n  srcs += files('win.cpp')\nendif\n"
                            "py.extension_module('_p', srcs, dependencies: [cuda, nccl],\n"
                            "  cuda_args: ['-gencode=arch=compute_90a,code=sm_90a', '-DWITH_X'])\n",
             "csrc/meson.build": "srcs = files('k.cu', 'bind.cpp')\n",
             "meson.options": "option('with_nccl', type: 'boolean', value: false)\n"}  # fmt: skip
    got = units(tmp_path, files)
    u = got["_p"]
    assert u.kind == "meson" and u.sources == ("csrc/bind.cpp", "csrc/k.cu") and u.where == "meson.build:9"
    n = needs(u)
    assert n["cufft"] == ("cuda", "cufft", False) and n["nvrtc"] == ("cuda", "nvrtc", False) and n["cudart"][0] == "cuda"
    assert n["nccl"][2] is True  # required: get_option('with_nccl'), false by default
    assert summary(u.facts) == {"cxx_std": "c++17", "arch": ["90a"], "nvcc_min": "12.4"}
    assert needs(got["meson.build"])["nccl.h"][2] is True
    on = units(tmp_path / "b", files, {"with_nccl": True})  # type: ignore[dict-item]  # a -D value
    assert needs(on["_p"])["nccl"][2] is False


# ------------------------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize(
    "text",
    ["if(A)\n" * 20000 + "add_library(x k.cu)\n" + "endif()\n" * 20000,
     'set(A "x")\n' + "set(A ${A}${A}${A}${A})\n" * 200 + "add_library(x ${A})\n",
     "function(f)\n f()\nendfunction()\nf()\n",
     "include(CMakeLists.txt)\n" * 3,
     "foreach(i RANGE 100000000)\n add_library(t${i} k.cu)\nendforeach()\n",
     "set(x [==[ unterminated bracket\n" + "a" * 100000,
     'message("unterminated quote\n' + "(" * 50000,
     "add_library(x " + "(" * 100000 + "k.cu)\n",
     "if(" + "(" * 5000 + "A" + ")" * 5000 + ")\nendif()\n",
     "set(A \"${B}\")\n" + "set(B \"${A}${A}\")\n" * 60 + "add_library(x ${B})\n"],
    ids=["nesting", "doubling", "recursion", "include-cycle", "huge-foreach", "bracket", "quote", "parens",
         "deep-condition", "ping-pong"],
)  # fmt: skip
def test_hostile_cmake_is_read_in_bounded_time_and_space(tmp_path: Path, text: str) -> None:
    write(tmp_path, {"CMakeLists.txt": text, "k.cu": "#include <cuda_runtime.h>\n"})
    start = time.monotonic()
    got = scan(read_sources(tmp_path), source_tables())
    assert time.monotonic() - start < 20  # (each takes well under a second; the bound is for a loaded machine)
    assert sum(len(u.sources) for u in got.units) < 5000


@pytest.mark.parametrize(
    "text",
    ["x = " + "[" * 100000 + "]" * 100000, "x = " + "(" * 5000 + "1" + ")" * 5000, "subdir('.')\n",
     "if true\n" * 5000 + "endif\n" * 5000, "x = 'a'\n" + "x = x + x\n" * 100, "foreach i : " + "[1," * 3000 + "]" * 3000 + "\nendforeach\n",
     "x = '''unterminated\n" + "'" * 10000],
    ids=["brackets", "parens", "subdir-self", "nesting", "doubling", "nested-foreach", "triple-quote"],
)  # fmt: skip
def test_hostile_meson_is_read_in_bounded_time_and_space(tmp_path: Path, text: str) -> None:
    write(tmp_path, {"meson.build": text, "k.cu": "#include <cuda_runtime.h>\n"})
    start = time.monotonic()
    scan(read_sources(tmp_path), source_tables())
    assert time.monotonic() - start < 20


# ------------------------------------------------------------------------------------------- the commands


CUFFT_PROJECT = cmake("find_package(CUDAToolkit REQUIRED)\npybind11_add_module(_fft MODULE csrc/k.cu csrc/bind.cpp)\n"
                      "target_link_libraries(_fft PRIVATE CUDA::cufft CUDA::cublas)\n")  # fmt: skip


def test_doctor_for_a_cmake_tree_names_the_group_of_a_linked_library(tmp_path: Path, cudart_stub: Path) -> None:
    tree = write(tmp_path / "proj", {**KERNEL, **CUFFT_PROJECT})
    from envlock.sources.load import load_scan

    scans = (load_scan(str(tree)),)
    got = doctor(prefix_with(tmp_path / "a", cudart_stub, "curand"), base_env(tmp_path), for_=(str(tree),), scans=scans)
    f = got["source._fft"]
    assert f.severity == "warning" and "cufft (lib)" in f.message and "--with cufft" in f.message
    assert f.details["missing_libraries"] == ["cufft"] and f.details["kind"] == "cmake"
    ok = doctor(prefix_with(tmp_path / "b", cudart_stub, "curand", "cufft"), base_env(tmp_path), for_=(str(tree),), scans=scans)
    assert ok["source._fft"].severity == "ok" and ok["source.CMakeLists.txt"].severity == "ok"


def test_resolve_for_a_cmake_tree_adds_the_group(tmp_path: Path, capsys: pytest.CaptureFixture[str], test_channel: Path) -> None:
    tree = write(tmp_path / "proj", {**KERNEL, **CUFFT_PROJECT})
    code = run(["resolve", "--torch", "2.11.0", "--platform", "linux-64", "--for", str(tree), "--mirror",
                f"conda-forge={test_channel.as_uri()}", "--project-dir", str(tmp_path / "p"), "--json"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0 and json.loads(out.out)["with"] == ["cufft"]
    assert "--with cufft (cufft, CMakeLists.txt:5 (CUDA::cufft))" in flat(out.err)


# ------------------------------------------------------------------------------------------- setup.py's build facts


def test_setup_py_states_its_standard_arches_and_nvcc_floor(tmp_path: Path) -> None:
    setup = '''\
import sys
from packaging.version import Version
from torch.utils.cpp_extension import CUDAExtension, CUDA_HOME
_, bare_metal_version = get_cuda_bare_metal_version(CUDA_HOME)
if bare_metal_version < Version("11.6"):
    raise RuntimeError("needs CUDA 11.6")
if bare_metal_version < Version("12.0"):
    print("only a warning")
cc_flag = ["-gencode", "arch=compute_80,code=sm_80"]
if bare_metal_version >= Version("12.8"):
    cc_flag += ["-gencode", "arch=compute_100,code=sm_100"]
if sys.platform == "win32":
    cc_flag += ["-gencode", "arch=compute_61,code=sm_61"]
ext = CUDAExtension("k", ["csrc/k.cu"], extra_compile_args={"cxx": ["-O3", "-std=c++17"], "nvcc": ["-std=c++17"] + cc_flag})
'''
    u = units(tmp_path, {"setup.py": setup})["k"]
    assert summary(u.facts) == {"cxx_std": "c++17", "cuda_std": "c++17", "arch": ["80", "100 (nvcc >= 12.8)"],
                                "nvcc_min": "11.6"}  # fmt: skip  (a warning is no floor; Windows' arch is not Linux's)


def test_configure_time_downloads_are_named(tmp_path: Path, cudart_stub: Path) -> None:
    """FetchContent_Declare / CPMAddPackage fetch code when CMake configures: an offline build needs it in place."""
    tree = write(tmp_path / "proj", {**KERNEL, **cmake('include(FetchContent)\nFetchContent_Declare(cutlass GIT_REPOSITORY x)\n'
                                                       'CPMAddPackage("gh:NVIDIA/cccl@2.8.0")\nCPMAddPackage(NAME fmt VERSION 10)\n'
                                                       "add_library(k SHARED csrc/k.cu)\n")})  # fmt: skip
    from envlock.sources.load import load_scan

    scans = (load_scan(str(tree)),)
    assert summary(scans[0].units[0].facts)["downloads"] == ["NVIDIA/cccl", "cutlass", "fmt"]
    f = doctor(prefix_with(tmp_path / "a", cudart_stub), base_env(tmp_path), for_=(str(tree),), scans=scans)["source.CMakeLists.txt"]
    assert f.severity == "info" and "downloads cutlass (CMakeLists.txt:4 FetchContent_Declare), NVIDIA/cccl (CMakeLists.txt:5" in f.message


def test_a_build_extension_override_is_not_an_extension(tmp_path: Path) -> None:
    setup = ("from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
             "class B(BuildExtension):\n    def build_extension(self, ext):\n        return super().build_extension(ext)\n"
             "CUDAExtension('k', ['csrc/k.cu'])\n")  # fmt: skip
    assert set(units(tmp_path, {"setup.py": setup})) == {"k"}  # not a `*` unit for super().build_extension(ext)


def test_a_set_difference_and_a_rocm_conjunction_in_setup_py(tmp_path: Path) -> None:
    """xFormers' shape: `list(set(a) - set(b))` is within a (not every source), and `torch.version.hip and …`
    is a branch a CUDA build skips (not a source list of its own)."""
    setup = ("import glob, torch\nfrom torch.utils.cpp_extension import CUDAExtension\n"
             "srcs = glob.glob('csrc/*.cu')\nsrcs = list(set(srcs) - set(glob.glob('csrc/x*.cu')))\n"
             "if torch.version.hip and torch.cuda.is_available():\n    srcs += [f.upper() for f in srcs]\n"
             "CUDAExtension('k', srcs)\n")  # fmt: skip
    u = units(tmp_path, {"setup.py": setup, "other/n.cu": "#include <nvrtc.h>\n"})["k"]
    assert u.sources == ("csrc/k.cu",)  # not other/n.cu, which a `*` would have read


# ------------------------------------------------------------------------------------------- beside a setup.py

OWN_SETUP = ("from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
             "setup(ext_modules=[CUDAExtension('p._C', ['csrc/k.cu', 'csrc/bind.cpp'])])\n")  # fmt: skip
LIB = cmake("add_library(standalone SHARED csrc/k.cu csrc/bind.cpp)\ntarget_link_libraries(standalone PRIVATE CUDA::cufft)\n")


def test_cmake_or_meson_beside_a_setup_py_that_builds_its_own_extensions_is_not_a_build(tmp_path: Path) -> None:
    """Before: torch-sparse 0.6.18's CMakeLists.txt (its standalone C++ library) was a unit `torchsparse` beside
    the setup.py extensions pip builds, asking for what only that other build links."""
    got = units(tmp_path / "a", {"setup.py": OWN_SETUP, **LIB})
    assert set(got) == {"p._C"} and "cufft" not in needs(got["p._C"])
    meson = {"meson.build": "project('p', 'cuda')\ndependency('cuda', modules: ['cufft'])\n"}
    assert set(units(tmp_path / "b", {"setup.py": OWN_SETUP, **meson})) == {"p._C"}


@pytest.mark.parametrize(
    "setup",
    [OWN_SETUP.replace("from setuptools", "import subprocess\nsubprocess.check_call(['cmake', '-S', '.'])\nfrom setuptools"),
     "from skbuild import setup\nsetup(name='p')\n",
     "from setuptools import setup, Extension\nclass CMakeExtension(Extension):\n    pass\n"
     "setup(ext_modules=[CMakeExtension('wrapper', sources=['csrc/k.cu'])])\n",
     OWN_SETUP + "# pyproject names scikit-build-core\n"],
)  # fmt: skip
def test_cmake_is_still_read_where_the_build_is_cmake_s(tmp_path: Path, setup: str) -> None:
    files = {"setup.py": setup, **LIB}
    if "pyproject" in setup:
        files["pyproject.toml"] = '[build-system]\nbuild-backend = "scikit_build_core.build"\n'
    got = units(tmp_path, files)
    assert "standalone" in got and needs(got["standalone"])["cufft"] == ("cuda", "cufft", False)
