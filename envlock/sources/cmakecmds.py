"""The CMake commands envlock follows (cmake.py's Reader runs them; each handler gets the command's expanded
arguments and where it runs). Variables: set, unset, option, list, string, math, file(GLOB…),
get_filename_component. Structure: include, add_subdirectory, project, enable_language, find_package,
FetchContent_Declare / ExternalProject_Add. Targets: the add_* calls of cmake.py's TARGET_CALLS,
target_sources, target_link_libraries, target_include_directories, target_compile_definitions,
target_compile_options, target_compile_features, set_target_properties, set_property(TARGET…), and the
directory-wide include_directories, add_compile_definitions, add_definitions, link_libraries.
Any other command is ignored (it changes nothing envlock reads)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from envlock.sources import buildsys
from envlock.sources.cmakelang import UNKNOWN, Block, Command, expand, split, version
from envlock.sources.pystatic import Fact, Use

#: target-making commands -> the keywords among their arguments that are not sources
TARGET_CALLS = {"add_library": ("STATIC", "SHARED", "MODULE", "OBJECT", "EXCLUDE_FROM_ALL"),
                "add_executable": ("WIN32", "MACOSX_BUNDLE", "EXCLUDE_FROM_ALL"),
                "cuda_add_library": ("STATIC", "SHARED", "MODULE", "EXCLUDE_FROM_ALL"),
                "cuda_add_executable": ("WIN32", "MACOSX_BUNDLE", "EXCLUDE_FROM_ALL"),
                "pybind11_add_module": ("MODULE", "SHARED", "EXCLUDE_FROM_ALL", "NO_EXTRAS", "THIN_LTO", "OPT_SIZE",
                                        "SYSTEM", "WITHOUT_SOABI"),
                "python_add_library": ("MODULE", "SHARED", "STATIC", "WITH_SOABI", "USE_SABI"),
                "python3_add_library": ("MODULE", "SHARED", "STATIC", "WITH_SOABI", "USE_SABI"),
                "nanobind_add_module": ("NB_STATIC", "NB_SHARED", "STABLE_ABI", "FREE_THREADED", "NB_DOMAIN", "LTO",
                                        "NOMINSIZE", "NOSTRIP", "MUSL_DYNAMIC_LIBCPP", "PROTECT_STACK", "NB_SUPPRESS_WARNINGS")}  # fmt: skip
VISIBILITY = {"PRIVATE", "PUBLIC", "INTERFACE", "SYSTEM", "BEFORE", "AFTER", "LINK_PUBLIC", "LINK_PRIVATE",
              "LINK_INTERFACE_LIBRARIES", "debug", "optimized", "general"}  # fmt: skip
SRC, BIN = "\x02", "\x03"  # CMAKE_SOURCE_DIR / CMAKE_BINARY_DIR as values: made project-relative at the end
NVCC_VERSION = ("CMAKE_CUDA_COMPILER_VERSION", "CUDAToolkit_VERSION", "CUDA_VERSION", "CUDA_VERSION_STRING")


@dataclass
class Target:
    name: str
    where: str
    dir: str
    unit: bool  # built from sources (not INTERFACE / IMPORTED / ALIAS)
    conditional: bool
    sources: list[str] = field(default_factory=list)
    incdirs: list[str] = field(default_factory=list)
    links: list[tuple[str, str, bool]] = field(default_factory=list)  # (item, where, conditional)
    defines: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    props: dict[str, str] = field(default_factory=dict)


@dataclass
class Scope:
    vars: dict[str, str]
    uncertain: set[str]  # set under an undecided if(): their value is not a decision
    parent: Scope | None = None


@dataclass
class Dir:
    path: str  # relative to the project root ("" at the top)
    incdirs: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    links: list[tuple[str, str, bool]] = field(default_factory=list)


@dataclass(frozen=True)
class At:
    """Where a command runs: its variables, its folder, the files and calls that led there, whether an
    undecided if() is around it, and its `file:line`."""

    scope: Scope
    d: Dir
    chain: tuple[str, ...]
    cond: bool
    here: str


class Commands:
    """The handlers (`_c_<command>`), mixed into cmake.Reader (which has the attributes below)."""

    files: Mapping[str, str]
    targets: dict[str, Target]
    config: list[Use]  # the configure step's needs
    facts: list[Fact]  # project-wide

    def _c_set(self, w: list[str], at: At) -> None:
        if not w:
            return
        name, vals = w[0], w[1:]
        if "CACHE" in vals:
            if name in at.scope.vars:
                return  # a cache default: -D (or an earlier set) wins
            vals = vals[: vals.index("CACHE")]
        parent = bool(vals) and vals[-1] == "PARENT_SCOPE"
        vals = vals[:-1] if parent else vals
        self._set(at.scope, name, ";".join(vals) if vals else None, at.cond, parent)

    def _c_unset(self, w: list[str], at: At) -> None:
        if w:
            self._set(at.scope, w[0], None, at.cond, "PARENT_SCOPE" in w)

    def _c_option(self, w: list[str], at: At) -> None:
        if w and w[0] not in at.scope.vars:
            self._set(at.scope, w[0], w[2] if len(w) > 2 else "OFF", at.cond)

    def _c_list(self, w: list[str], at: At) -> None:
        if len(w) < 2:
            return
        op, var, rest = w[0].upper(), w[1], w[2:]
        cur = split(self._get(at.scope, var) or "")
        if op in ("APPEND", "PREPEND"):
            new = cur + rest if op == "APPEND" else rest + cur
        elif op == "INSERT":
            new = cur + rest[1:]
        elif op == "REMOVE_ITEM":
            new = [x for x in cur if x not in rest]
        elif op == "REMOVE_DUPLICATES":
            new = list(dict.fromkeys(cur))
        elif op in ("POP_BACK", "POP_FRONT"):
            take = cur[-1:] if op == "POP_BACK" else cur[:1]
            new = cur[:-1] if op == "POP_BACK" else cur[1:]
            for out in rest[:1]:
                self._set(at.scope, out, ";".join(take), at.cond)
        elif op == "SORT":
            new = sorted(cur)
        elif op == "TRANSFORM" and rest and rest[0] in ("APPEND", "PREPEND") and len(rest) > 1:
            new = [x + rest[1] if rest[0] == "APPEND" else rest[1] + x for x in cur]
            if "OUTPUT_VARIABLE" in rest:
                k = rest.index("OUTPUT_VARIABLE")
                var = rest[k + 1] if k + 1 < len(rest) else var
        elif op in ("LENGTH", "GET", "FIND", "JOIN", "SUBLIST", "TRANSFORM", "FILTER"):
            if rest and op != "FILTER":
                self._set(at.scope, rest[-1], UNKNOWN, at.cond)
            return
        else:
            return
        self._set(at.scope, var, ";".join(new), at.cond)

    def _c_string(self, w: list[str], at: At) -> None:
        if len(w) < 2:
            return
        op = w[0].upper()
        if op in ("APPEND", "PREPEND"):
            cur = self._get(at.scope, w[1]) or ""
            add = "".join(w[2:])
            self._set(at.scope, w[1], cur + add if op == "APPEND" else add + cur, at.cond)
        elif op in ("TOLOWER", "TOUPPER") and len(w) > 2:
            self._set(at.scope, w[2], w[1].lower() if op == "TOLOWER" else w[1].upper(), at.cond)
        elif op in ("CONCAT", "JOIN"):
            self._set(at.scope, w[1] if op == "CONCAT" else w[2], "".join(w[2:]) if op == "CONCAT" else w[1].join(w[3:]), at.cond)
        elif op == "REPLACE" and len(w) > 3:
            self._set(at.scope, w[3], "".join(w[4:]).replace(w[1], w[2]) if w[1] else "".join(w[4:]), at.cond)
        elif op == "REGEX" and len(w) > 3:
            self._set(at.scope, w[4] if w[1].upper() == "REPLACE" and len(w) > 4 else w[3], UNKNOWN, at.cond)
        elif op in ("LENGTH", "SUBSTRING", "FIND", "STRIP", "COMPARE", "MD5", "SHA256", "TIMESTAMP", "RANDOM"):
            self._set(at.scope, w[-1], UNKNOWN, at.cond)

    def _c_math(self, w: list[str], at: At) -> None:
        if len(w) > 1:
            self._set(at.scope, w[1], UNKNOWN, at.cond)

    def _c_file(self, w: list[str], at: At) -> None:
        if len(w) < 2:
            return
        if w[0] in ("GLOB", "GLOB_RECURSE"):
            base, pats, skip = at.scope.vars.get("CMAKE_CURRENT_SOURCE_DIR", SRC), [], False
            for x in w[2:]:
                if skip:
                    skip = False
                elif x in ("RELATIVE", "LIST_DIRECTORIES"):
                    skip = True
                elif x not in ("CONFIGURE_DEPENDS", "FOLLOW_SYMLINKS"):
                    pats.append(x if x.startswith((SRC, BIN, "/")) else f"{base}/{x}")
            self._set(at.scope, w[1], ";".join(pats), at.cond)
        elif w[0] in ("READ", "STRINGS", "TO_CMAKE_PATH", "TO_NATIVE_PATH", "REAL_PATH", "RELATIVE_PATH", "SIZE"):
            self._set(at.scope, w[2] if w[0] in ("READ", "STRINGS", "REAL_PATH", "SIZE") and len(w) > 2 else w[-1], UNKNOWN, at.cond)

    def _c_get_filename_component(self, w: list[str], at: At) -> None:
        if len(w) > 2:
            keep = w[2] in ("DIRECTORY", "PATH") and UNKNOWN not in w[1]
            self._set(at.scope, w[0], posixpath.dirname(w[1]) if keep else UNKNOWN, at.cond)

    def _c_include(self, w: list[str], at: At) -> None:
        if not w:
            return
        name, found = w[0], None
        cands = [name] if name.endswith(".cmake") or "/" in name else [f"{m}/{name}.cmake" for m in
                                                                        split(at.scope.vars.get("CMAKE_MODULE_PATH", ""))]  # fmt: skip
        for c in cands:
            rel = rel_path(c, at.d.path)
            if rel is not None and rel in self.files:
                found = rel
                break
        if found is not None:
            here_dir = abs_dir(posixpath.dirname(found))
            saved = at.scope.vars.get("CMAKE_CURRENT_LIST_DIR")
            at.scope.vars["CMAKE_CURRENT_LIST_DIR"] = here_dir
            self._file(found, at.scope, at.d, at.chain, at.cond)
            if saved is not None:
                at.scope.vars["CMAKE_CURRENT_LIST_DIR"] = saved
        if name in ("FetchContent", "ExternalProject"):
            at.scope.vars[f"_envlock_{name}"] = "1"

    def _c_add_subdirectory(self, w: list[str], at: At) -> None:
        rel = rel_path(w[0], at.d.path) if w else None
        if rel is None or posixpath.join(rel, "CMakeLists.txt") not in self.files:
            return
        child = Scope({**at.scope.vars, "CMAKE_CURRENT_SOURCE_DIR": abs_dir(rel), "CMAKE_CURRENT_LIST_DIR": abs_dir(rel)},
                      set(at.scope.uncertain), at.scope)  # fmt: skip
        self._file(posixpath.join(rel, "CMakeLists.txt"), child, Dir(rel, list(at.d.incdirs), list(at.d.defines), list(at.d.links)),
                   at.chain, at.cond)  # fmt: skip

    def _c_project(self, w: list[str], at: At) -> None:
        if not w:
            return
        at.scope.vars["PROJECT_NAME"] = w[0]
        words = w[w.index("LANGUAGES") + 1 :] if "LANGUAGES" in w else w[1:]
        if "CUDA" in words:
            self.facts.append(Fact("cuda_language", f"project({w[0]} … CUDA)", at.here))

    def _c_enable_language(self, w: list[str], at: At) -> None:
        if "CUDA" in w:
            self.facts.append(Fact("cuda_language", "enable_language(CUDA)" + (" (conditional)" if at.cond else ""), at.here))

    def _c_find_package(self, w: list[str], at: At) -> None:
        if not w:
            return
        name = w[0]
        required = "REQUIRED" in w
        floor = w[1] if len(w) > 1 and version(w[1]) else None
        entry = buildsys.package(name)
        if name in ("CUDAToolkit", "CUDA") and floor:
            self.facts.append(Fact("nvcc_min", floor, f"{at.here} find_package({name} {floor})"))
        if entry is None:
            self.config.append(Use(name, "package", f"{at.here} find_package({name})", at.cond or not required))
            return
        for key, value in entry.get("sets", {}).items():
            self._set(at.scope, key, value, at.cond)
        for what, key in (("header", "headers"), ("library", "libraries")):
            for item in entry[key]:
                self.config.append(Use(item, what, f"{at.here} find_package({name}{' REQUIRED' if required else ''})",
                                                at.cond or not required))  # fmt: skip

    def _c_fetchcontent_declare(self, w: list[str], at: At) -> None:
        if w:
            self.facts.append(Fact("downloads", w[0], f"{at.here} FetchContent_Declare"))

    _c_externalproject_add = _c_fetchcontent_declare

    def _c_cpmaddpackage(self, w: list[str], at: At) -> None:
        """CPM.cmake: `CPMAddPackage("gh:NVIDIA/cccl@2.8.0")` or `CPMAddPackage(NAME cccl …)` downloads."""
        name = w[w.index("NAME") + 1] if "NAME" in w[:-1] else (w[0].split(":", 1)[-1].split("@")[0] if w else "")
        if name:
            self.facts.append(Fact("downloads", name, f"{at.here} CPMAddPackage"))

    _c_cpmfindpackage = _c_cpmaddpackage

    def _c_include_directories(self, w: list[str], at: At) -> None:
        at.d.incdirs += [here_path(x, at) for x in w if x not in VISIBILITY]

    def _c_add_compile_definitions(self, w: list[str], at: At) -> None:
        at.d.defines += w

    def _c_add_definitions(self, w: list[str], at: At) -> None:
        at.d.defines += [x[2:] for x in w if x.startswith(("-D", "/D"))]

    def _c_link_libraries(self, w: list[str], at: At) -> None:
        at.d.links += [(x, at.here, at.cond) for x in w if x not in VISIBILITY]

    def _target(self, call: str, w: list[str], at: At) -> None:
        if not w:
            return
        kind = set(w[1:3])
        unit = not kind & {"IMPORTED", "ALIAS", "INTERFACE"}
        d = at.d
        t = Target(w[0], at.here, d.path, unit, at.cond, incdirs=list(d.incdirs), defines=list(d.defines), links=list(d.links))
        skip = False
        for x in w[1:]:
            if skip:
                skip = False
            elif x in ("NB_DOMAIN", "USE_SABI"):
                skip = True
            elif x not in TARGET_CALLS[call] and x not in ("IMPORTED", "ALIAS", "INTERFACE", "GLOBAL"):
                t.sources.append(x)
        if not unit:
            t.sources = []
        for key in ("CMAKE_CUDA_ARCHITECTURES", "CMAKE_CXX_STANDARD", "CMAKE_CUDA_STANDARD", "CMAKE_CUDA_FLAGS",
                    "CMAKE_CXX_FLAGS"):  # fmt: skip
            if key in at.scope.vars:
                t.props[key] = at.scope.vars[key]
        if call.startswith("cuda_add"):
            t.props["_cuda"] = "1"
        self.targets.setdefault(w[0], t)

    def _tw(self, w: list[str]) -> tuple[Target | None, list[str]]:
        return (self.targets.get(w[0]) if w else None), [x for x in w[1:] if x not in VISIBILITY]

    def _c_target_sources(self, w: list[str], at: At) -> None:
        t, items = self._tw(w)
        if t:
            t.sources += [here_path(x, at) for x in items if x not in ("FILE_SET", "TYPE", "BASE_DIRS", "FILES", "HEADERS", "CXX_MODULES")]

    def _c_target_link_libraries(self, w: list[str], at: At) -> None:
        t, items = self._tw(w)
        if t:
            t.links += [(x, at.here, at.cond) for x in items]

    def _c_target_include_directories(self, w: list[str], at: At) -> None:
        t, items = self._tw(w)
        if t:
            t.incdirs += [here_path(x, at) for x in items]

    def _c_target_compile_definitions(self, w: list[str], at: At) -> None:
        t, items = self._tw(w)
        if t:
            t.defines += [x[2:] if x.startswith("-D") else x for x in items]

    def _c_target_compile_options(self, w: list[str], at: At) -> None:
        t, items = self._tw(w)
        if t:
            t.flags += items
            t.defines += [x[2:] for x in items if x.startswith("-D")]

    def _c_target_compile_features(self, w: list[str], at: At) -> None:
        t, items = self._tw(w)
        for f in items if t else ():
            m = re.fullmatch(r"(cxx|cuda)_std_(\d+)", f)
            if m and t:
                t.props["CXX_STANDARD" if m.group(1) == "cxx" else "CUDA_STANDARD"] = m.group(2)

    def _c_set_target_properties(self, w: list[str], at: At) -> None:
        if "PROPERTIES" not in w:
            return
        k = w.index("PROPERTIES")
        pairs = w[k + 1 :]
        for name in w[:k]:
            t = self.targets.get(name)
            for i in range(0, len(pairs) - 1, 2):
                if t:
                    t.props[pairs[i]] = pairs[i + 1]

    def _c_set_property(self, w: list[str], at: At) -> None:
        if not w or w[0] != "TARGET" or "PROPERTY" not in w:
            return
        k = w.index("PROPERTY")
        for name in w[1:k]:
            t = self.targets.get(name)
            if t and k + 1 < len(w):
                t.props[w[k + 1]] = ";".join(w[k + 2 :])

    def _nvcc_bound(self, cmd: Command, body: Sequence[Command | Block], scope: Scope, file: str) -> None:
        """`if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 11.8) message(FATAL_ERROR …)`: an nvcc floor (or ceiling)."""
        words = [a.text for a in cmd.args]
        if len(words) != 3 or words[0] not in NVCC_VERSION or not words[1].startswith("VERSION_"):
            return
        fatal = any(isinstance(n, Command) and n.name == "message" and n.args and n.args[0].text in ("FATAL_ERROR", "SEND_ERROR")
                    for n in body)  # fmt: skip
        bound = expand(words[2], lambda n: self._get(scope, n))
        if not fatal or version(bound) is None:
            return
        op = words[1][8:]
        key = {"LESS": "nvcc_min", "GREATER_EQUAL": "nvcc_below", "GREATER": "nvcc_max"}.get(op)
        if key:
            self.facts.append(Fact(key, bound, f"{file}:{cmd.line}"))


def here_path(path: str, at: At) -> str:
    """A relative path of a command, made relative to the folder the command runs in (CMake's CMP0076)."""
    if path.startswith((SRC, BIN, "/", UNKNOWN, "$<")):
        return path
    return f"{abs_dir(at.d.path)}/{path}"


def abs_dir(rel: str) -> str:
    return f"{SRC}/{rel}" if rel else SRC


def rel_path(path: str, here: str) -> str | None:
    """A path as CMake would see it from folder `here`, relative to the project root (None: outside, generated)."""
    if UNKNOWN in path or path.startswith(BIN):
        return None
    if path.startswith(SRC):
        path = path[len(SRC) :].lstrip("/")
    elif path.startswith("/"):
        return None
    else:
        path = posixpath.join(here, path)
    norm = posixpath.normpath(path) if path else "."
    return None if norm.startswith("..") else ("" if norm == "." else norm)
