"""A meson project's build units, read statically (mesonlang.py parses the language; nothing is run).

From the top meson.build through `subdir()`, with the values meson would have (assignments, `files()`,
`include_directories()`, `join_paths()` and `/`, `get_option()` from `-D` values or meson.options'
defaults), `if` decided in three values (Linux with nvcc and gcc known; the rest undecided: both branches
count, what they add is conditional):

  * one unit per target (`library`, `shared_library`, `static_library`, `shared_module`, `executable`,
    `py.extension_module`) with its sources, include directories, `-D` arguments and the libraries of its
    `dependencies:` (`dependency('cuda', modules: ['cublas', 'cufft'])`: cudart and each module's library;
    another `dependency('name')` by data/buildsystems.yaml; `compiler.find_library('name')`);
  * one unit `meson.build` for the configure step: every `dependency()` (required unless `required: false`),
    the CUDA language, `dependency('cuda', version: '>=12.0')` as an nvcc floor, the C++ standard of
    `default_options` / `override_options`, the flags of `add_project_arguments(…, language: 'cuda')`.
Bounded: MAX_STEPS statements in all, subdir() and expressions MAX_DEPTH deep, each file once per chain.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envlock.sources import buildsys
from envlock.sources.facts import flag_facts
from envlock.sources.mesonlang import MAX_DEPTH, Parser, option_defaults, tokens
from envlock.sources.pystatic import Fact, PyUnit, Use

MAX_STEPS = 100_000
MAX_ITEMS = 1024
MAX_VALUE = 64 << 10  # characters of one string value
_TARGETS = ("library", "shared_library", "static_library", "shared_module", "executable", "both_libraries",
            "extension_module")  # fmt: skip

class _Unknown:
    def __repr__(self) -> str:
        return "?"


UNK = _Unknown()


@dataclass
class Dep:
    uses: list[tuple[str, str]] = field(default_factory=list)  # (name, what)
    incdirs: list[str] = field(default_factory=list)
    optional: bool = False  # `required: false`, or made under an undecided if


@dataclass
class Obj:
    kind: str  # "python" | "compiler" | "module" | "incdirs" | "target"
    value: Any = None


class _Reader:
    def __init__(self, files: Mapping[str, str], defines: Mapping[str, str]) -> None:
        self.files, self.defines = files, dict(defines)
        self.vars: dict[str, Any] = {"host_machine": Obj("machine"), "build_machine": Obj("machine"),
                                     "target_machine": Obj("machine"), "meson": Obj("meson")}  # fmt: skip
        self.options = option_defaults(files)
        self.units: list[PyUnit] = []
        self.config: list[Use] = []
        self.facts: list[Fact] = []
        self.notes: list[str] = []
        self.steps, self.dir, self.file = 0, "", "meson.build"

    def run_file(self, path: str, chain: tuple[str, ...], cond: bool) -> None:
        if path in chain or len(chain) >= MAX_DEPTH:
            self.notes.append(f"{path}: not read again")
            return
        try:
            body = Parser(tokens(self.files[path])).block(())
        except (ValueError, IndexError, RecursionError) as exc:
            self.notes.append(f"{path}: not read past an error ({exc})")
            return
        saved = (self.dir, self.file)
        self.dir, self.file = posixpath.dirname(path), path
        self.body(body, (*chain, path), cond)
        self.dir, self.file = saved

    def body(self, stmts: list[Any], chain: tuple[str, ...], cond: bool) -> None:
        for st in stmts:
            self.steps += 1
            if self.steps > MAX_STEPS:
                return
            if st[0] == "set":
                value = self.ev(st[3], cond, chain)
                old = self.vars.get(st[1])
                self.vars[st[1]] = _plus(old, value) if st[2] == "+=" else value
            elif st[0] == "expr":
                self.ev(st[1], cond, chain)
            elif st[0] == "if":
                undecided = False
                for test, part in [*st[1], (("const", True), st[2])]:
                    v = _truth(self.ev(test, cond, chain))
                    if v is False:
                        continue
                    self.body(part, chain, cond or undecided or v is None)
                    if v is True and not undecided:
                        break
                    undecided = True
            elif st[0] == "foreach":
                items = self.ev(st[2], cond, chain)
                seq = list(items.items()) if isinstance(items, dict) else items if isinstance(items, list) else []
                for item in seq[:MAX_ITEMS]:
                    vals = item if isinstance(item, tuple) else (item,)
                    self.vars.update(zip(st[1], vals))
                    self.body(st[3], chain, cond)

    def ev(self, e: Any, cond: bool, chain: tuple[str, ...]) -> Any:
        kind = e[0]
        if kind in ("str", "const"):
            return e[1]
        if kind == "fstr":
            return re.sub(r"@(\w+)@", lambda m: v if isinstance(v := self.vars.get(m.group(1)), str) else "*", e[1])[:MAX_VALUE]
        if kind == "var":
            return self.vars.get(e[1], UNK)
        if kind == "list":
            return [self.ev(x, cond, chain) for x in e[1]][:MAX_ITEMS]
        if kind == "dict":
            vals = [self.ev(x, cond, chain) for x in e[1]]
            return {str(k): v for k, v in zip(vals[::2], vals[1::2])}
        if kind == "not":
            v = _truth(self.ev(e[1], cond, chain))
            return UNK if v is None else not v
        if kind == "?":
            v = _truth(self.ev(e[1], cond, chain))
            return UNK if v is None else self.ev(e[2] if v else e[3], cond, chain)
        if kind == "op":
            return _op(e[1], self.ev(e[2], cond, chain), self.ev(e[3], cond, chain))
        if kind == "call":
            pos, kw = e[2]
            return self.call(e[1], [self.ev(a, cond, chain) for a in pos],
                             {k: self.ev(v, cond, chain) for k, v in kw.items()}, f"{self.file}:{e[3]}", cond, chain)  # fmt: skip
        if kind == "method":
            obj = self.ev(e[1], cond, chain)
            pos, kw = e[3]
            return self.method(obj, e[2], [self.ev(a, cond, chain) for a in pos], {k: self.ev(v, cond, chain) for k, v in kw.items()},
                               f"{self.file}:{e[4]}", cond)  # fmt: skip
        return UNK

    def call(self, name: str, a: list[Any], kw: dict[str, Any], here: str, cond: bool, chain: tuple[str, ...]) -> Any:
        if name == "project":
            langs = [x for x in _flat(a[1:]) if isinstance(x, str)]
            self._languages(langs, here, cond)
            self._std(kw.get("default_options"), here)
        elif name == "add_languages":
            self._languages([x for x in _flat(a) if isinstance(x, str)], here, cond)
        elif name == "files":
            return [self._path(x) for x in _flat(a) if isinstance(x, str)]
        elif name == "include_directories":
            return Obj("incdirs", [self._path(x) for x in _flat(a) if isinstance(x, str)])
        elif name == "join_paths":
            return "/".join(x if isinstance(x, str) else "*" for x in a)[:MAX_VALUE]
        elif name == "get_option":
            return self.defines.get(a[0], self.options.get(a[0], UNK)) if a and isinstance(a[0], str) else UNK
        elif name == "import":
            return Obj("python") if a and a[0] == "python" else Obj("module")
        elif name == "subdir" and a and isinstance(a[0], str):
            self.run_file(posixpath.normpath(posixpath.join(self.dir, a[0], "meson.build")), chain, cond)
        elif name == "dependency" and a and isinstance(a[0], str):
            return self._dependency(a[0], kw, here, cond)
        elif name == "declare_dependency":
            dep = Dep()
            for d in _flat([kw.get("dependencies", [])]):
                if isinstance(d, Dep):
                    dep.uses += d.uses
            dep.incdirs = _incdirs(kw.get("include_directories"))
            return dep
        elif name in ("add_project_arguments", "add_global_arguments"):
            flags = [x for x in _flat(a) if isinstance(x, str)]
            self.facts += flag_facts(flags, here, cuda_flags=kw.get("language") == "cuda")
        elif name in _TARGETS:
            return self._target(a, kw, here, cond)
        return UNK

    def method(self, obj: Any, name: str, a: list[Any], kw: dict[str, Any], here: str, cond: bool) -> Any:
        if isinstance(obj, Obj) and obj.kind == "python":
            if name == "find_installation":
                return Obj("python")
            if name == "dependency":
                return Dep([("Python.h", "header")])
            if name == "extension_module":
                return self._target(a, kw, here, cond)
        if isinstance(obj, Obj) and obj.kind == "meson" and name == "get_compiler":
            return Obj("compiler", a[0] if a else "")
        if isinstance(obj, Obj) and obj.kind == "machine" and name in ("system", "cpu_family"):
            return "linux" if name == "system" else UNK
        if isinstance(obj, Obj) and obj.kind == "compiler":
            if name == "get_id":
                return {"cuda": "nvcc", "cpp": "gcc", "c": "gcc"}.get(str(obj.value), UNK)
            if name == "find_library" and a and isinstance(a[0], str):
                return Dep([(a[0], "library")], optional=kw.get("required") is False)
        if isinstance(obj, str) and name in ("startswith", "endswith", "contains") and a and isinstance(a[0], str):
            return getattr(obj, "__contains__" if name == "contains" else name)(a[0])
        if isinstance(obj, (list, str)) and name == "length":
            return len(obj)
        return UNK

    def _languages(self, langs: list[str], here: str, cond: bool) -> None:
        if "cuda" in langs:
            self.facts.append(Fact("cuda_language", "meson: cuda" + (" (conditional)" if cond else ""), here))

    def _std(self, options: Any, here: str) -> None:
        self.facts += _std_facts(options, here)

    def _dependency(self, name: str, kw: dict[str, Any], here: str, cond: bool) -> Dep:
        optional = cond or kw.get("required") is False or _truth(kw.get("required", True)) is not True
        via = f"{here} dependency('{name}')"
        if name == "cuda":
            mods = [m for m in _flat([kw.get("modules", [])]) if isinstance(m, str)]
            mods = mods if any(m.startswith("cudart") for m in mods) else ["cudart", *mods]
            dep = Dep([("cuda_runtime.h", "header"), *(buildsys.cuda_target(m)[::-1] for m in mods)], optional=optional)
            for v in _flat([kw.get("version", [])]):
                m = re.fullmatch(r"\s*>=?\s*(\d+(?:\.\d+)*)", v) if isinstance(v, str) else None
                if m:
                    self.facts.append(Fact("nvcc_min", m.group(1), via))
        else:
            entry = buildsys.package(name)
            if entry is None:
                self.config.append(Use(name, "package", via, optional))
                return Dep()
            dep = Dep([(h, "header") for h in entry["headers"]] + [(x, "library") for x in entry["libraries"]],
                      optional=optional)
        self.config += [Use(n, w, via, optional) for n, w in dep.uses]
        return dep

    def _target(self, a: list[Any], kw: dict[str, Any], here: str, cond: bool) -> Obj:
        if not a or not isinstance(a[0], str):
            return Obj("target")
        sources = [x if isinstance(x, str) else "*" for x in _flat([a[1:], kw.get("sources", [])]) if not isinstance(x, (Obj, Dep))]
        sources = [s if "/" in s and s.startswith(self.dir) else self._path(s) for s in sources]
        uses, incdirs = [], _incdirs(kw.get("include_directories"))
        for d in _flat([kw.get("dependencies", [])]):
            if isinstance(d, Dep):
                uses += [Use(n, w, here, cond or d.optional) for n, w in d.uses if w == "library" or n != "cuda_runtime.h"]
                incdirs += d.incdirs
        flags = [x for k in ("cpp_args", "cuda_args", "c_args") for x in _flat([kw.get(k, [])]) if isinstance(x, str)]
        facts = [*self.facts, *flag_facts(flags, here), *_std_facts(kw.get("override_options"), here)]
        cuda = any(f.key == "cuda_language" for f in self.facts) or any(s.endswith(".cu") for s in sources)
        self.units.append(PyUnit("meson", a[0], here, tuple(sources), tuple(incdirs),
                                 defines=tuple(f[2:].split("=")[0] for f in flags if f.startswith("-D")),
                                 cuda=cuda, uses=tuple(uses), facts=tuple(dict.fromkeys(facts))))  # fmt: skip
        return Obj("target", a[0])

    def _path(self, p: str) -> str:
        return posixpath.normpath(posixpath.join(self.dir, p)) if self.dir else posixpath.normpath(p)


def _std_facts(options: Any, here: str) -> list[Fact]:
    out = []
    for o in _flat([options]):
        m = re.fullmatch(r"(cpp|cuda)_std=(?:c|gnu)\+\+(\d+)", o) if isinstance(o, str) else None
        if m:
            out.append(Fact("cxx_std" if m.group(1) == "cpp" else "cuda_std", m.group(2), here))
    return out


def _flat(items: Any) -> list[Any]:
    out, todo = [], [items]
    while todo and len(out) < MAX_ITEMS:
        x = todo.pop()
        if isinstance(x, list):
            todo += reversed(x)
        else:
            out.append(x)
    return out


def _incdirs(value: Any) -> list[str]:
    return [d for x in _flat([value]) if isinstance(x, Obj) and x.kind == "incdirs" for d in x.value]


def _truth(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _plus(a: Any, b: Any) -> Any:
    if isinstance(a, list):
        return [*a, *(b if isinstance(b, list) else [b])][:MAX_ITEMS]
    return (a + b)[:MAX_VALUE] if isinstance(a, str) and isinstance(b, str) else UNK


def _op(op: str, a: Any, b: Any) -> Any:
    if op in ("and", "or"):
        x, y = _truth(a), _truth(b)
        if op == "and":
            return False if x is False or y is False else (True if x and y else UNK)
        return True if x or y else (False if x is False and y is False else UNK)
    if a is UNK or b is UNK:
        return UNK
    if op == "+":
        return _plus(a, b)
    if op == "/" and isinstance(a, str) and isinstance(b, str):
        return posixpath.join(a, b)[:MAX_VALUE]
    if op in ("==", "!="):
        return (a == b) == (op == "==")
    if op in ("in", "not in") and isinstance(b, (list, str, dict)):
        return (a in b) == (op == "in")
    return UNK


def read_meson(files: Mapping[str, str], defines: Mapping[str, str]) -> tuple[list[PyUnit], list[str]]:
    """The units of the top meson.build: the configure step `meson.build`, then one per target."""
    r = _Reader(files, defines)
    r.run_file("meson.build", (), False)
    config = PyUnit("meson", "meson.build", "meson.build", (), uses=tuple(dict.fromkeys(r.config)), facts=tuple(r.facts))
    return [config, *r.units], r.notes
