"""Build systems besides setup.py: which one a project configures (pyproject.toml's build backend —
scikit-build-core, meson-python —, else a top-level CMakeLists.txt or meson.build), the `-D` values it is
configured with, and what CMake's and meson's names for libraries stand for (data/buildsystems.yaml).

    build_units(files, defines, setup_builds)   the CMake and meson units of a project (cmake.py, meson.py),
                                  and notes; none where setup.py builds its own extensions (pip builds from
                                  setup.py: a CMakeLists.txt beside it, as torch-sparse's, is another build)
    drives_cmake(text)            whether a setup.py hands its build to CMake or meson (scikit-build, a
                                  CMakeExtension, a `cmake` command it runs)
    link_uses(item, where, cond)  one CMake link item (CUDA::cufft, cublas, -lnccl, a .so path) as Uses
    package(name)                 find_package(NAME) / dependency('name') from the table
"""

from __future__ import annotations

import ast
import functools
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from envlock import REINSTALL_HINT
from envlock.errors import EnvlockError
from envlock.sources.cmakelang import UNKNOWN, strip_genex
from envlock.sources.pystatic import PyUnit, Use

CMAKE_BACKENDS = ("scikit_build_core", "py_build_cmake", "cmake_build_extension")
MESON_BACKENDS = ("mesonpy",)
_STATIC = re.compile(r"_static(_nocallback|_pic)?$|_lto$")
_LIBNAME = re.compile(r"[A-Za-z0-9_+.-]+")
_DRIVERS = ("skbuild", "scikit_build_core", "cmake_build_extension", "py_build_cmake", "cmake", "mesonpy", "mesonbuild")
_COMMANDS = frozenset({"cmake", "cmake3", "meson", "ctest"})


@functools.cache
def table() -> dict[str, Any]:
    """data/buildsystems.yaml, validated once."""
    from envlock.core.tables import _yaml

    doc = _yaml("buildsystems.yaml")
    try:
        targets, packages, standards = doc["cuda_targets"], doc["packages"], doc["standards"]
        ok = doc["schema_version"] == 1 and all(
            isinstance(v, dict) and isinstance(v.get("gcc"), str) and isinstance(v.get("nvcc"), str) for v in standards.values()
        ) and all(
            isinstance(v, dict) and len(v) == 1 and set(v) <= {"header", "library"} for v in targets.values()
        ) and all(
            isinstance(p, dict) and isinstance(p["headers"], list) and isinstance(p["libraries"], list)
            and isinstance(p.get("sets", {}), dict) for p in packages.values()
        )  # fmt: skip
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise EnvlockError("envlock's package data is invalid: buildsystems.yaml", hint=REINSTALL_HINT)
    lower = {k.lower(): v for k, v in packages.items()}
    return {"cuda_targets": targets, "packages": packages, "lower": lower, "standards": standards}


def package(name: str) -> dict[str, Any] | None:
    """find_package(NAME) / dependency('name'): its table entry (exact name first, then any case)."""
    t = table()
    return t["packages"].get(name) or t["lower"].get(name.lower())


def cuda_target(name: str) -> tuple[str, str]:
    """CUDA::<name> (or a meson cuda module) -> ('library' | 'header', its name)."""
    base = _STATIC.sub("", name)
    entry = table()["cuda_targets"].get(base)
    if entry is None:
        return "library", base
    what = next(iter(entry))
    return what, entry[what]


def link_uses(item: str, where: str, conditional: bool) -> list[Use]:
    """One link item of target_link_libraries()/link_libraries() as what it needs (the project's own targets
    are resolved before this; imported targets of other packages and link flags need nothing here)."""
    value, gen = strip_genex(item)
    conditional = conditional or gen
    if value is None or UNKNOWN in value or not value:
        return []
    if value.startswith("CUDA::"):
        what, name = cuda_target(value[6:])
        return [Use(name, what, f"{where} ({value})", conditional)]
    if "::" in value:
        return []
    if value.startswith("-l"):
        value = value[2:]
    elif value.startswith("-"):
        return []
    elif "/" in value or value.endswith((".so", ".a")):
        m = re.fullmatch(r"lib([\w+-]+?)(?:_static)?\.(?:so|a)(?:\.[\d.]+)?", posixpath.basename(value))
        if m is None:
            return []
        value = m.group(1)
    return [Use(value, "library", where, conditional)] if _LIBNAME.fullmatch(value) else []


# ------------------------------------------------------------------------------------------- pyproject


def configuration(files: Mapping[str, str]) -> tuple[str | None, str, dict[str, str], list[str]]:
    """(the build system pyproject.toml names — 'cmake' / 'meson' / None —, its source folder, the `-D`
    values it configures with, notes on what could not be read)."""
    text = files.get("pyproject.toml")
    if text is None:
        return None, "", {}, []
    from envlock.formats.untrusted import load_toml

    try:
        doc = load_toml(text, "pyproject.toml", EnvlockError, hint="")
    except EnvlockError as exc:
        return None, "", {}, [f"pyproject.toml not read: {exc}"]
    backend = str((doc.get("build-system") or {}).get("build-backend") or "")
    tool = doc.get("tool") if isinstance(doc.get("tool"), dict) else {}
    if backend.startswith(CMAKE_BACKENDS):
        sk = tool.get("scikit-build") if isinstance(tool.get("scikit-build"), dict) else {}
        cm = sk.get("cmake") if isinstance(sk.get("cmake"), dict) else {}
        top = cm.get("source-dir") or sk.get("cmake.source-dir") or "."
        defines = _defines(cm.get("define"), cm.get("args") or sk.get("cmake.args"))
        norm = posixpath.normpath(str(top)) if isinstance(top, str) else "."
        return "cmake", "" if norm == "." or norm.startswith("..") else norm, defines, []
    if backend.startswith(MESON_BACKENDS):
        mp = tool.get("meson-python") if isinstance(tool.get("meson-python"), dict) else {}
        args = mp.get("args") if isinstance(mp.get("args"), dict) else {}
        return "meson", "", _defines(None, args.get("setup")), []
    return None, "", {}, []


def _defines(table_: Any, args: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(table_, dict):
        for k, v in table_.items():
            if isinstance(v, bool):
                out[str(k)] = "ON" if v else "OFF"
            elif isinstance(v, (str, int, float)):
                out[str(k)] = str(v)
            elif isinstance(v, list):
                out[str(k)] = ";".join(str(x) for x in v)
    for a in args if isinstance(args, list) else ():
        m = re.fullmatch(r"-D([A-Za-z_][\w.-]*)(?::\w+)?=(.*)", str(a))
        if m:
            out[m.group(1)] = m.group(2)
    return out


def drives_cmake(text: str) -> bool:
    """Whether a setup.py hands its build to CMake or meson: it imports scikit-build (or another CMake/meson
    driver), names a CMake class (CMakeExtension, CMakeBuild) or runs a `cmake`/`meson` command. A setup.py
    that cannot be parsed is taken to (its CMakeLists.txt is then read as before)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in _DRIVERS for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _DRIVERS:
            return True
        name = node.id if isinstance(node, ast.Name) else node.name if isinstance(node, ast.ClassDef) else ""
        if "cmake" in name.lower() or "meson" in name.lower():
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
            word = posixpath.basename(node.value.split()[0])
            if word in _COMMANDS or node.value == "CMakeLists.txt":
                return True
    return False


def build_units(files: Mapping[str, str], defines: Mapping[str, str] | None = None,
                setup_builds: bool = False) -> tuple[list[PyUnit], list[str]]:  # fmt: skip
    """The units of the project's CMake build (pyproject's source folder, else a top CMakeLists.txt) and of
    its meson build (a top meson.build); `defines` (a profile's) come on top of pyproject's. None where
    `setup_builds` (setup.py builds its own extensions and does not drive CMake/meson) and pyproject names no
    CMake/meson backend: pip builds from setup.py, so a CMakeLists.txt beside it is not this build."""
    system, top, found, notes = configuration(files)
    if setup_builds and system is None and ("CMakeLists.txt" in files or "meson.build" in files):
        beside = " and ".join(f for f in ("CMakeLists.txt", "meson.build") if f in files)
        return [], [*notes, f"{beside} not read as a build: setup.py builds its own extensions"]
    found.update(defines or {})
    units: list[PyUnit] = []
    lists = posixpath.join(top, "CMakeLists.txt") if top else "CMakeLists.txt"
    if lists in files:
        from envlock.sources.cmake import Reader

        reader = Reader(files, found)
        units += reader.read(top)
        notes += reader.notes
    if "meson.build" in files and system != "cmake":
        from envlock.sources.meson import read_meson

        got, more = read_meson(files, found)
        units += got
        notes += more
    return units, notes
