"""Scan a project's sources: per build unit, every header and library it needs from outside the project and
what provides each (pure over the files read by reader.py)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from envlock.sources import cpp
from envlock.sources.classify import Provider, SourceTables
from envlock.sources.buildsys import build_units, drives_cmake
from envlock.sources.discover import builder_units, python_units
from envlock.sources.pystatic import UNKNOWN, Fact, PyUnit
from envlock.sources.reader import HEADER_SUFFIXES, SOURCE_SUFFIXES, SourceFiles


@dataclass(frozen=True, slots=True)
class Need:
    """One outside header or library a unit needs."""

    name: str
    what: str  # "header" | "library"
    provider: Provider
    via: str  # where: "csrc/x.cu:12", "setup.py:40", "through torch's ATen/…"
    conditional: bool = False  # only under a condition the scanner could not decide
    because: str = ""  # the macro that makes it needed, skipped or undecided ("WITH_NVTX is not defined (…)")


@dataclass(frozen=True)
class Unit:
    """One extension, JIT load or op that is compiled on its own."""

    name: str
    kind: str  # "extension" | "jit" | "builder" | "all"
    where: str
    sources: tuple[str, ...]
    needs: tuple[Need, ...]
    computed: tuple[str, ...] = ()  # `#include MACRO` lines not followed
    note: str | None = None
    outside: tuple[str, ...] = ()  # every outside header name, whatever provides it
    builder: str = ""  # the op-builder class (profiles with builders)
    skipped: tuple[Need, ...] = ()  # outside CUDA headers the build's own macros leave out (not needed)
    facts: tuple[Fact, ...] = ()  # the standard, arches, nvcc bounds the build asks for (facts.py)

    def missing_kinds(self, *kinds: str) -> list[Need]:
        return [n for n in self.needs if n.provider.kind in kinds]

    def groups(self) -> list[str]:
        """`--with` groups beyond the default dev set that its CUDA headers/libraries come from."""
        return sorted({n.provider.group for n in self.needs if n.provider.kind == "cuda" and n.provider.group
                       and not n.provider.default})  # fmt: skip


@dataclass(frozen=True)
class Scan:
    """What `doctor --for SOURCE` judges an env by."""

    origin: str
    units: tuple[Unit, ...]
    skipped: tuple[str, ...] = ()
    profile: str | None = None
    notes: tuple[str, ...] = ()  # what the build-system reading cut short

    def groups(self) -> list[str]:
        return sorted({g for u in self.units for g in u.groups()})

    def cuda_headers(self) -> list[str]:
        return sorted({n.name for u in self.units for n in u.needs if n.provider.kind == "cuda" and n.what == "header"})


def _match(files: Sequence[str], pattern: str) -> list[str]:
    pattern = pattern.replace("**", "*").lstrip("./") if not pattern.startswith("*") else pattern.replace("**", "*")
    alts = [pattern] + ([pattern[2:]] if pattern.startswith("*/") else [])
    return [f for f in files if any(fnmatchcase(f, a) for a in alts)]


#: Macros that come from outside the project (compilers, Python, CUDA, torch and the libraries' headers):
#: never ruled out because the project does not define them.
_OUTSIDE = re.compile(r"^(_|CUDA|CUDART|CUB_|THRUST|NV|NCCL|CUTLASS|CUTE|CUSPARSE|CUBLAS|CUSOLVER|CURAND|CUFFT|"
                      r"CUDNN|CUTENSOR|CUDSS|TORCH|C10|AT_|ATEN|CAFFE2|PYBIND11|PY|EIGEN|GOOGLE|GLOG|FMT|SPDLOG|"
                      r"BOOST|MPI|OMPI|HIP|ROCM|SYCL|NDEBUG|DEBUG|GLM|OPENMP|OMP)")  # fmt: skip
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


class _Closure:
    """Following one unit's includes through the project's own files."""

    def __init__(self, src: SourceFiles, tables: SourceTables) -> None:
        self.src, self.tables = src, tables
        self.dirs = {posixpath.dirname(p) for p in src.files}
        self.by_suffix: dict[str, list[str]] = {}
        for p in src.files:
            if p.endswith(HEADER_SUFFIXES + SOURCE_SUFFIXES) or "." not in posixpath.basename(p):
                parts = p.split("/")
                for i in range(1, len(parts)):
                    self.by_suffix.setdefault("/".join(parts[i:]), []).append(p)
        self._parsed: dict[tuple[Any, ...], tuple[list[cpp.Include], list[int], list[cpp.Include]]] = {}
        self._defined: set[str] | None = None

    def project_switch(self, name: str) -> bool:
        """Whether `name` is a macro only the build could define: the project never #defines it and it is
        not a name the compiler, CUDA, torch or another library's headers define."""
        if self._defined is None:
            self._defined = {m for text in self.src.files.values() for m in _DEFINE.findall(text)}
        return bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", name)) and not _OUTSIDE.match(name) and name not in self._defined

    def include_dirs(self, patterns: Sequence[str]) -> list[str]:
        out = []
        for pat in patterns:
            if pat == UNKNOWN:
                continue
            alts = [pat.rstrip("/")] + ([pat[2:].rstrip("/")] if pat.startswith("*/") else [])
            out += sorted(d for d in self.dirs if any(fnmatchcase(d, a) for a in alts))
        return list(dict.fromkeys(out))

    def find(self, inc: cpp.Include, here: str, dirs: Sequence[str]) -> str | None:
        files = self.src.files
        cands = ([posixpath.normpath(posixpath.join(posixpath.dirname(here), inc.name))] if inc.quoted else [])
        cands += [posixpath.normpath(posixpath.join(d, inc.name)) for d in dirs]
        hit = next((c for c in cands if c in files), None)
        if hit is None and (inc.quoted or "/" in inc.name):
            near = sorted(self.by_suffix.get(inc.name, ()), key=lambda p: (p.count("/"), p))
            hit = near[0] if near else None
        return hit

    def run(self, unit: PyUnit, sources: Sequence[str], note: str | None) -> Unit:
        dirs = self.include_dirs(unit.include_dirs)
        macros: dict[str, bool | int | None] = dict.fromkeys(unit.defines, 1)
        notes: dict[str, str] = {}
        if unit.macros:  # what the build's own words say (define_macros, -D/-U, switches): KNOWN where undecided
            macros = {n: v for n, v, _ in unit.macros if v is not None or n not in cpp.KNOWN}
            notes = {n: why for n, _, why in unit.macros}
        undefined = self.project_switch if unit.macros_read else None
        if not unit.cuda:
            macros.update({"__CUDACC__": False, "__NVCC__": False, "WITH_CUDA": None})
        needs: dict[tuple[str, str], Need] = {}
        skipped: dict[str, Need] = {}
        outside: set[str] = set()
        computed: list[str] = []
        seen: set[str] = set()
        todo = [(s, self.src.files.get(s, "")) for s in sources] + [(f"{unit.where} (inline)", t) for t in unit.inline]
        while todo:
            path, text = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            key = (path, unit.defines, unit.cuda, unit.macros, unit.macros_read)
            if key not in self._parsed:
                self._parsed[key] = cpp.read(text, macros, undefined, notes)
            incs, comp, left_out = self._parsed[key]
            computed += [f"{path}:{n}" for n in comp]
            for inc in left_out:
                p = self.tables.header(inc.name) if self.find(inc, path, dirs) is None else None
                if p is not None and p.kind == "cuda" and inc.name not in skipped:
                    skipped[inc.name] = Need(inc.name, "header", p, f"{path}:{inc.line}", False, inc.because)
            for inc in incs:
                hit = self.find(inc, path, dirs)
                if hit is not None:
                    todo.append((hit, self.src.files[hit]))
                    continue
                outside.add(inc.name)
                self._need(needs, inc.name, "header", f"{path}:{inc.line}", inc.conditional, inc.because)
        for lib in unit.libraries:
            if lib != UNKNOWN:
                self._need(needs, lib, "library", unit.where, False)
        for use in unit.uses:
            self._need(needs, use.name, use.what, use.via, use.conditional)
        order = {k: i for i, k in enumerate(("cuda", "driver", "gone", "not_cuda", "unknown"))}
        kept = sorted(needs.values(), key=lambda n: (order.get(n.provider.kind, 9), n.what, n.name))
        left = tuple(n for k, n in sorted(skipped.items()) if ("header", k) not in needs)
        return Unit(unit.name, unit.kind, unit.where, tuple(sources), tuple(kept), tuple(computed), note,
                    tuple(sorted(outside)), unit.extra.get("builder", ("",))[0], left, unit.facts)  # fmt: skip

    def _need(self, needs: dict[tuple[str, str], Need], name: str, what: str, via: str, conditional: bool,
              because: str = "") -> None:  # fmt: skip
        key = (what, name)
        old = needs.get(key)
        if old is not None and (old.conditional <= conditional) and (not old.via.startswith("through") or via.startswith("through")):
            return  # a direct, unconditional include is the one kept
        p = self.tables.header(name) if what == "header" else self.tables.library(name) if what == "library" else \
            Provider("unknown", why=f"the build-system package {name} ({via}), which no CUDA package gives")
        needs[key] = Need(name, what, p, via, conditional, because)
        if what != "header" or p.kind != "torch":
            return
        for glob, extra in self.tables.through_torch.items():
            if fnmatchcase(name, glob):
                for h in extra:
                    self._need(needs, h, "header", f"through torch's {name} ({via})", conditional, because)


def scan(src: SourceFiles, tables: SourceTables, profile: Mapping[str, Any] | None = None) -> Scan:
    """Every build unit of `src` and what each needs from outside (a profile adds op builders, JIT calls,
    -D values and notes, and may keep only some paths and some units)."""
    profile = profile or {}
    if profile.get("read"):
        src = keep_paths(src, profile["read"])
    all_sources = src.sources()
    py = builder_units(src.files, profile) if profile.get("builders") else []
    py += [] if profile.get("only_builders") else python_units(src.files, tuple(profile.get("jit_calls", ())))
    own = [u for u in py if u.kind == "extension" and u.where.startswith("setup.py:")]  # pip builds these
    setup_builds = any(_match(all_sources, p) for u in own for p in u.sources) and not drives_cmake(
        src.files.get("setup.py", ""))
    built, cut = build_units(src.files, profile.get("defines"), setup_builds)
    if profile.get("units"):
        py, built = [u for u in py if u.name in profile["units"]], [u for u in built if u.name in profile["units"]]
    notes = dict(profile.get("notes", {}))
    closure = _Closure(src, tables)
    units: list[Unit] = []
    for u in py + built:
        files = sorted({f for pat in u.sources for f in _match(all_sources, pat)})
        if not files and not u.inline:
            files = [s for s in u.sources if s in src.files]
        if not files and built and u.kind == "extension":
            continue  # a setup.py Extension with no sources of its own wraps the CMake / meson build
        units.append(closure.run(u, files, notes.get(u.name)))
    if not units and all_sources:
        whole = PyUnit("all", "all_sources", src.origin, ("*",))  # no Python declares a build: every source
        units.append(closure.run(whole, all_sources, None))
    units.sort(key=lambda u: (u.name, u.where))
    return Scan(src.origin, tuple(units), src.skipped, profile.get("name"), tuple(cut))


def keep_paths(src: SourceFiles, globs: Sequence[str]) -> SourceFiles:
    """Only the files a profile's `read` globs keep (`*` crosses `/`)."""
    kept = {p: t for p, t in src.files.items() if path_kept(p, globs)}
    return SourceFiles(src.origin, kept, src.skipped)


def path_kept(path: str, globs: Sequence[str]) -> bool:
    """Whether a profile's `read` globs keep `path`: one glob matches it and no `!glob` does."""
    return any(fnmatchcase(path, g) for g in globs if not g.startswith("!")) and not any(
        fnmatchcase(path, g[1:]) for g in globs if g.startswith("!"))
