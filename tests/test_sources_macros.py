"""Conditional includes decided when the build decides them (issue 35.2): setup.py's define_macros, undef_macros,
-D/-U flags and the environment switches it reads, a JIT load()'s extra_cflags/extra_cuda_cflags — read with
`ast`, never run — then `#if`/`#ifdef` evaluated with what the build defines. "Cannot decide" is left only to
what comes from outside (a GPU at build time, a CUDA header's macro, flags computed elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.sources.buildmacros import Macro  # noqa: F401 - the record the reader makes
from envlock.sources.discover import python_units
from envlock.sources.load import load_scan
from tests.test_doctor import base_env, cudart_stub, doctor  # noqa: F401 - fixture
from tests.test_doctor_groups import prefix_with
from tests.test_sources import write

SETUP = '''\
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
macros = [("WITH_CUDA", None)]
if os.getenv("WITH_NVTX"):
    macros.append(("WITH_NVTX", None))
USE_FFT = os.environ.get("USE_FFT", "1") == "1"
if USE_FFT:
    macros += [("FFT_LEVEL", "2")]
nvcc = ["-O3", "-DFAST_MATH", "-UOLD_API"]
if torch.cuda.is_available():
    nvcc.append("-DHAS_GPU")
setup(ext_modules=[CUDAExtension("p._C", ["csrc/a.cu"], define_macros=macros, undef_macros=["LEGACY"],
                                 extra_compile_args={"cxx": ["-O2"], "nvcc": nvcc})])
'''
SOURCE = """\
#include <cuda_runtime.h>
#ifdef WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif
#if FFT_LEVEL >= 2
#include <cufft.h>
#endif
#ifdef HAS_GPU
#include <cupti.h>
#endif
#ifdef MYSTERY
#include <npp.h>
#endif
#if CUDA_VERSION >= 12000
#include <nvrtc.h>
#endif
#if defined(LEGACY) || defined(OLD_API)
#include <nvjpeg.h>
#endif
#ifdef FAST_MATH
#include <curand_kernel.h>
#endif
"""


def unit_of(root: Path) -> object:
    (u,) = load_scan(str(root)).units
    return u


def test_what_the_build_defines_decides_each_include(tmp_path: Path) -> None:
    u = unit_of(write(tmp_path, {"setup.py": SETUP, "csrc/a.cu": SOURCE}))
    needed = {n.name: (n.conditional, n.because) for n in u.needs if n.provider.kind == "cuda"}  # type: ignore[attr-defined]
    left = {n.name: n.because for n in u.skipped}  # type: ignore[attr-defined]
    # an env switch that is off unless set: not needed, and the switch is named
    assert left["nvtx3/nvToolsExt.h"] == "WITH_NVTX is not defined (setup.py:7 defines it only when WITH_NVTX is set)"
    # a switch on by default: needed, with its value
    assert needed["cufft.h"] == (False, "FFT_LEVEL is 2 (setup.py:10 by default (the USE_FFT switch can change it))")
    assert needed["curand_kernel.h"] == (False, "FAST_MATH is defined (setup.py:11)")  # -D in the nvcc flags
    # a GPU at build time, a CUDA header's macro: from outside, so still undecided — and said why
    assert needed["cupti.h"] == (True, "HAS_GPU is not known before the build (setup.py:13 defines it only when "
                                       "torch.cuda.is_available())")  # fmt: skip
    assert needed["nvrtc.h"] == (True, "CUDA_VERSION is not known before the build")
    # a project macro nothing defines (setup.py read in full), and undef_macros / -U
    assert left["npp.h"] == "MYSTERY is not defined (neither the build nor the sources define it)"
    assert left["nvjpeg.h"].startswith("LEGACY is not defined (undef_macros, setup.py:14); OLD_API is not defined (-UOLD_API")
    assert u.groups() == ["cufft", "cupti", "nvrtc"]  # type: ignore[attr-defined]  # nvtx, npp, nvjpeg: not needed


@pytest.mark.parametrize(
    ("test", "defined"),
    [('os.environ.get("SW", "0") == "1"', False), ('os.environ.get("SW", "1") == "1"', True),
     ('"SW" in os.environ', False), ('"SW" not in os.environ', True), ('os.getenv("SW")', False),
     ('os.getenv("SW", "0").lower() in ("1", "true")', False), ('bool(int(os.getenv("SW", "1")))', True),
     ('os.environ["SW"] == "1"', False), ('not os.getenv("SW")', True),
     ('os.getenv("SW", "0") == "1" or torch.cuda.is_available()', None),
     ('os.getenv("SW", "1") == "1" or torch.cuda.is_available()', True), ('sys.platform == "win32"', False),
     ('True if os.getenv("SW", "0") == "1" else False', False), ('SW_ON', True)],
)  # fmt: skip
def test_environment_switches_are_judged_as_unset(test: str, defined: bool | None) -> None:
    setup = (f"import os, sys, torch\nfrom setuptools import setup\nSW_ON = os.getenv('SW', '1') != '0'\nm = []\nif {test}:\n"
             "    m.append(('X', None))\n"
             "setup(ext_modules=[CUDAExtension('p', ['a.cu'], define_macros=m)])\n")  # fmt: skip
    (u,) = python_units({"setup.py": setup})
    (m,) = u.macros
    assert m[0] == "X" and (m[1] if m[1] is None or m[1] is False else True) is defined, m


def test_a_jit_load_s_cflags_define_what_its_sources_include(tmp_path: Path) -> None:
    py = ('from torch.utils.cpp_extension import load\n'
          'op = load(name="op", sources=["k.cu"], extra_cflags=["-DUSE_NPP=1"], extra_cuda_cflags=["-DWITH_NVTX"])\n')  # fmt: skip
    src = "#ifdef WITH_NVTX\n#include <nvtx3/nvToolsExt.h>\n#endif\n#if USE_NPP\n#include <npp.h>\n#endif\n#ifdef NOPE\n#include <nvjpeg.h>\n#endif\n"
    u = unit_of(write(tmp_path, {"pkg/ops.py": py, "k.cu": src}))
    got = {n.name: n.because for n in u.needs if n.provider.kind == "cuda"}  # type: ignore[attr-defined]
    assert got == {"nvtx3/nvToolsExt.h": "WITH_NVTX is defined (pkg/ops.py:2)", "npp.h": "USE_NPP is defined (pkg/ops.py:2)"}
    assert [n.name for n in u.skipped] == ["nvjpeg.h"]  # type: ignore[attr-defined]


def test_flags_made_elsewhere_or_a_macro_the_sources_define_are_not_ruled_out(tmp_path: Path) -> None:
    src = "#ifdef MYSTERY\n#include <npp.h>\n#endif\n"
    setup = "from setuptools import setup\nsetup(ext_modules=[CUDAExtension('p', ['a.cu'], extra_compile_args=flags())])\n"
    u = unit_of(write(tmp_path / "a", {"setup.py": setup, "a.cu": src}))
    assert [(n.name, n.conditional) for n in u.needs if n.name == "npp.h"] == [("npp.h", True)]  # type: ignore[attr-defined]
    setup = "from setuptools import setup\nsetup(ext_modules=[CUDAExtension('p', ['a.cu'])])\n"
    u = unit_of(write(tmp_path / "b", {"setup.py": setup, "a.cu": src, "config.h": "#define MYSTERY 1\n"}))
    assert [(n.name, n.conditional) for n in u.needs if n.name == "npp.h"] == [("npp.h", True)]  # type: ignore[attr-defined]


def test_doctor_says_not_needed_by_this_build_where_e081238_said_may_fail(tmp_path: Path, cudart_stub: Path) -> None:
    """e081238: `#ifdef WITH_NVTX` was "may fail to build (only under an #if envlock cannot decide)" and --with nvtx
    was recommended, though the build defines no such macro."""
    tree = write(tmp_path / "proj", {"setup.py": SETUP, "csrc/a.cu": SOURCE.split("#ifdef HAS_GPU")[0]})
    scans = (load_scan(str(tree)),)
    p = prefix_with(tmp_path / "a", cudart_stub, "curand", "cufft")
    f = doctor(p, base_env(tmp_path), for_=(str(tree),), scans=scans)["source.p._C"]
    assert f.severity == "ok", f.message
    assert "not needed by this build: nvtx3/nvToolsExt.h (WITH_NVTX is not defined (setup.py:7 defines it only " \
           "when WITH_NVTX is set))" in f.message
    assert f.details["not_needed"] == {"nvtx3/nvToolsExt.h": "WITH_NVTX is not defined (setup.py:7 defines it only when WITH_NVTX is set)"}
    # and a header the build's macros make needed says so when it is missing
    g = doctor(prefix_with(tmp_path / "b", cudart_stub, "curand"), base_env(tmp_path), for_=(str(tree),), scans=scans)["source.p._C"]
    assert g.severity == "warning" and "would fail to build: missing cufft.h" in g.message
    assert "needed: FFT_LEVEL is 2 (setup.py:10 by default" in g.message and "--with cufft" in g.message


GUARDED = {
    "setup.py": "from setuptools import setup\nsetup(ext_modules=[CUDAExtension('p', ['a.cu'], include_dirs=['inc'])])\n",
    "a.cu": '#include "phmap.h"\n#include "cfg.h"\n#include "half.h"\n#include "open.h"\n',
    # torch-sparse's third_party/parallel-hashmap: a lowercase guard, so never a build switch
    "inc/phmap.h": "// header\n#if !defined(phmap_h_guard_)\n#define phmap_h_guard_\n#include <cufft.h>\n"
                   "#if CUDA_VERSION >= 12000\n#include <npp.h>\n#endif\n#endif // phmap_h_guard_\n",
    "inc/cfg.h": "#pragma once\n#ifndef CFG_H\n#define CFG_H 1\n#include <nvrtc.h>\n#endif\n",
    # not a whole-file guard: the #ifndef closes before the end, or has a branch for a second inclusion
    "inc/half.h": "#ifndef HALF_H\n#define HALF_H\n#include <cupti.h>\n#endif\n#include <cuda_runtime.h>\n",
    "inc/open.h": "#ifndef OPEN_H\n#define OPEN_H\n#include <nvjpeg.h>\n#else\n#include <curand.h>\n#endif\n",
}  # fmt: skip


def test_a_header_in_an_include_guard_is_read_as_on_its_first_inclusion(tmp_path: Path) -> None:
    """Before: "cufft.h: phmap_h_guard_ is not known before the build" made all of torch-sparse's
    third_party/parallel-hashmap conditional."""
    u = unit_of(write(tmp_path, GUARDED))
    got = {n.name: (n.conditional, n.because) for n in u.needs if n.provider.kind == "cuda"}  # type: ignore[attr-defined]
    assert got["cufft.h"] == (False, "") and got["nvrtc.h"] == (False, "")  # `#if !defined(X)`, `#ifndef X`
    assert got["npp.h"][0] is True and got["npp.h"][1] == "CUDA_VERSION is not known before the build"  # what the guard wraps is still read
    assert got["cupti.h"] == (True, "HALF_H is not known before the build")  # not the whole file
    assert got["nvjpeg.h"][0] is True and got["curand.h"][0] is True  # an #else for a second inclusion
    assert not any("guard" in b or "CFG_H" in b for _, b in got.values())


SWITCHED_LIBS = '''\
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
WITH_METIS = True if os.getenv('WITH_METIS', '0') == '1' else False
def get_extensions():
    define_macros, libraries = [], ['cusparse']
    if WITH_METIS:
        define_macros += [('WITH_METIS', None)]
        libraries += ['metis', 'cusparse']
    if os.getenv("USE_CUFFT", "1") == "1":
        libraries.append("cufft")
    if torch.cuda.is_available():
        libraries += ["nvrtc"]
    links = ["-lnvjpeg"] if os.getenv("WITH_JPEG") else ["-s"]
    return [CUDAExtension("p._C", ["a.cu"], define_macros=define_macros, libraries=libraries, extra_link_args=links)]
setup(ext_modules=get_extensions())
'''


def test_a_library_added_only_under_a_switch_that_is_off_is_not_this_build_s() -> None:
    """Before: torch-sparse's `if WITH_METIS: libraries += ['metis']` (WITH_METIS off unless set) still showed
    `outside: {metis: unknown}`, though its define_macros under the same switch were decided."""
    (u,) = python_units({"setup.py": SWITCHED_LIBS})
    assert sorted(u.libraries) == ["cufft", "cusparse", "nvrtc"]  # on by default, undecided (a GPU), unconditional
    assert dict((n, v) for n, v, _ in u.macros)["WITH_METIS"] is False and u.macros_read
