"""A CMake project's build units, read statically (cmakelang.py reads the language; nothing is run).

From the top CMakeLists.txt (the folder scikit-build-core builds), through `add_subdirectory()` and
`include()` of the project's own files and calls of its own functions and macros, with the variables
CMake would have (`set`, `option`, `list`, `string(APPEND…)`, `file(GLOB…)`, `-D` values of
pyproject.toml's `[tool.scikit-build] cmake.define` or of a profile), and `if()` decided in three values
(Linux with nvcc and gcc known; the rest undecided: both branches count, what they add is conditional):

  * one unit per target built from sources (`add_library`, `add_executable`, `pybind11_add_module`,
    `Python_add_library`, `nanobind_add_module`, `cuda_add_library`), with its `target_sources`, include
    directories, compile definitions, and what it links (`CUDA::<target>` and plain library names, through
    the project's own targets too);
  * one unit `CMakeLists.txt` for the configure step: `find_package()` (REQUIRED: needed; else conditional),
    `enable_language(CUDA)` / `project(… LANGUAGES CUDA)`, FetchContent downloads;
  * build facts: `CMAKE_CUDA_ARCHITECTURES` / `CUDA_ARCHITECTURES`, the C++ / CUDA standard, and the nvcc
    versions the project refuses (`if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS x) message(FATAL_ERROR …)`,
    `find_package(CUDAToolkit x)`).
Bounded: MAX_STEPS commands executed in all, files and function calls MAX_DEPTH deep, each file once per
inclusion chain, a foreach over at most MAX_ITEMS items, at most MAX_UNITS targets.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence

from envlock.sources import buildsys
from envlock.sources.cmakecmds import BIN, SRC, TARGET_CALLS, At, Commands, Dir, Scope, Target, abs_dir, rel_path
from envlock.sources.cmakelang import UNKNOWN, Arg, Block, Command, Condition, blocks, commands, expand, split
from envlock.sources.cmakelang import strip_genex
from envlock.sources.facts import cmake_facts
from envlock.sources.pystatic import Fact, PyUnit, Use

MAX_STEPS = 200_000
MAX_DEPTH = 32
MAX_ITEMS = 1024
MAX_UNITS = 512
#: What CMake knows on Linux with nvcc and gcc (the rest of CMake's own variables is undecided).
KNOWN = {"UNIX": "1", "LINUX": "1", "WIN32": "", "APPLE": "", "MSVC": "", "MINGW": "", "CYGWIN": "", "ANDROID": "",
         "IOS": "", "CMAKE_SYSTEM_NAME": "Linux", "CMAKE_HOST_SYSTEM_NAME": "Linux", "CMAKE_HOST_UNIX": "1",
         "CMAKE_HOST_WIN32": "", "CMAKE_HOST_APPLE": "", "CMAKE_CUDA_COMPILER_ID": "NVIDIA",
         "CMAKE_CXX_COMPILER_ID": "GNU", "CMAKE_C_COMPILER_ID": "GNU", "CMAKE_SIZEOF_VOID_P": "8",
         "CMAKE_SOURCE_DIR": SRC, "PROJECT_SOURCE_DIR": SRC, "CMAKE_BINARY_DIR": BIN, "PROJECT_BINARY_DIR": BIN,
         "CMAKE_CURRENT_BINARY_DIR": BIN, "USE_ROCM": "", "BUILD_HIP": ""}  # fmt: skip


class Reader(Commands):
    """One reading of a CMake project (`read()`); `notes` says what was cut short."""

    def __init__(self, files: Mapping[str, str], defines: Mapping[str, str] | None = None) -> None:
        self.files, self.defines = files, dict(defines or {})
        self.steps = 0
        self.notes: list[str] = []  # what was cut short
        self.targets: dict[str, Target] = {}
        self.functions: dict[str, tuple[list[str], list[Command | Block], bool]] = {}
        self.config: list[Use] = []  # the configure step's needs
        self.facts: list[Fact] = []  # project-wide
        self.parsed: dict[str, list[Command | Block]] = {}
        self.assigned: set[str] = set()  # variables the project's files set: unset means false, not -D

    # ----------------------------------------------------------------------------------- driving
    def read(self, top: str = "") -> list[PyUnit]:
        lists = posixpath.join(top, "CMakeLists.txt") if top else "CMakeLists.txt"
        if lists not in self.files:
            return []
        scope = Scope({**KNOWN, "CMAKE_CURRENT_SOURCE_DIR": abs_dir(top), "CMAKE_CURRENT_LIST_DIR": abs_dir(top),
                       **self.defines}, set())  # fmt: skip
        self._file(lists, scope, Dir(top), (), conditional=False)
        return self._units(lists)

    def _file(self, path: str, scope: Scope, d: Dir, chain: tuple[str, ...], conditional: bool) -> None:
        if path in chain or len(chain) >= MAX_DEPTH:
            self.notes.append(f"{path}: not read again ({'a cycle' if path in chain else 'nested too deeply'})")
            return
        if path not in self.parsed:
            cmds = list(commands(self.files[path]))
            self.assigned.update(c.args[1 if c.name == "list" else 0].text for c in cmds
                                 if c.name in ("set", "list", "option") and len(c.args) > (c.name == "list"))  # fmt: skip
            self.parsed[path] = blocks(iter(cmds))
        self._body(self.parsed[path], scope, d, (*chain, path), conditional)

    def _body(self, nodes: Sequence[Command | Block], scope: Scope, d: Dir, chain: tuple[str, ...], cond: bool) -> bool:
        """Run `nodes`; False when a `return()` ended the file or function."""
        for node in nodes:
            self.steps += 1
            if self.steps > MAX_STEPS:
                if self.steps == MAX_STEPS + 1:
                    self.notes.append(f"stopped after {MAX_STEPS} CMake commands")
                return False
            if isinstance(node, Block):
                if not self._block(node, scope, d, chain, cond):
                    return False
            elif node.name == "return" and not cond:
                return False
            else:
                self._command(node, scope, d, chain, cond)
        return True

    def _block(self, blk: Block, scope: Scope, d: Dir, chain: tuple[str, ...], cond: bool) -> bool:
        head = blk.parts[0][0]
        if blk.kind == "if":
            undecided = False
            for cmd, body in blk.parts:
                value = True if cmd.name == "else" else self._condition(cmd.args, scope)
                self._nvcc_bound(cmd, body, scope, chain[-1])
                if value is False:
                    continue
                if undecided or value is None:
                    undecided = True
                    if not self._body(body, scope, d, chain, True):
                        return False
                    continue
                return self._body(body, scope, d, chain, cond)
            return True
        if blk.kind in ("function", "macro"):
            words = self._values(head.args, scope)
            if words:
                self.functions[words[0].lower()] = (words[1:], blk.parts[0][1], blk.kind == "macro")
            return True
        if blk.kind == "foreach":
            var, items = self._foreach(head.args, scope)
            for item in items[:MAX_ITEMS]:
                self._set(scope, var, item, cond)
                if not self._body(blk.parts[0][1], scope, d, chain, cond):
                    return False
            return True
        if blk.kind == "block":
            return self._body(blk.parts[0][1], scope, d, chain, cond)
        return True  # while(): its body is not followed (a loop cannot be bounded statically)

    # ----------------------------------------------------------------------------------- values
    def _get(self, scope: Scope, name: str) -> str | None:
        return scope.vars.get(name)

    def _values(self, args: Sequence[Arg], scope: Scope) -> list[str]:
        out: list[str] = []
        for a in args:
            if a.bracket:
                out.append(a.text)
                continue
            v = expand(a.text, lambda n: self._get(scope, n))
            if a.quoted:
                out.append(v)
            else:
                out += split(v)
        return out

    def _condition(self, args: Sequence[Arg], scope: Scope) -> bool | None:
        expanded = [a if a.bracket else Arg(expand(a.text, lambda n: self._get(scope, n)), a.quoted) for a in args]

        def var(name: str) -> str | None:
            if name in scope.vars:
                return None if name in scope.uncertain else scope.vars[name]
            if (name.islower() and "_" not in name) or name in self.assigned:
                raise KeyError(name)  # a word (`cuda`), or a variable of the project's that is not set
            return None  # not set here: -D, the cache, or CMake itself

        def defined(name: str) -> bool | None:
            return True if name in scope.vars and name not in scope.uncertain else None

        return Condition(expanded, var, defined).value()

    def _set(self, scope: Scope, name: str, value: str | None, cond: bool, parent: bool = False) -> None:
        target = scope.parent if parent and scope.parent else scope
        if value is None:
            target.vars.pop(name, None)
        else:
            target.vars[name] = value[: 1 << 16]
        (target.uncertain.add if cond else target.uncertain.discard)(name)

    def _foreach(self, args: Sequence[Arg], scope: Scope) -> tuple[str, list[str]]:
        words = self._values(args, scope)
        if not words:
            return "", []
        var, rest = words[0], words[1:]
        if rest[:1] == ["RANGE"]:
            nums = [int(x) for x in rest[1:3] if x.isdigit()]
            lo, hi = (0, nums[0]) if len(nums) == 1 else (nums[0], nums[1]) if len(nums) == 2 else (0, -1)
            return var, [str(i) for i in range(lo, min(hi, lo + MAX_ITEMS) + 1)]
        if rest[:1] == ["IN"]:
            items, mode = [], "ITEMS"
            for w in rest[1:]:
                if w in ("LISTS", "ITEMS", "ZIP_LISTS"):
                    mode = w
                elif mode == "LISTS":
                    items += split(self._get(scope, w) or "")
                else:
                    items.append(w)
            return var, items
        return var, rest

    # ----------------------------------------------------------------------------------- commands
    def _command(self, cmd: Command, scope: Scope, d: Dir, chain: tuple[str, ...], cond: bool) -> None:
        name, here = cmd.name, f"{chain[-1]}:{cmd.line}"
        if name in self.functions:
            self._call(cmd, scope, d, chain, cond)
            return
        handler = getattr(self, f"_c_{name}", None)
        at = At(scope, d, chain, cond, here)
        if handler is not None:
            handler(self._values(cmd.args, scope), at)
        elif name in TARGET_CALLS:
            self._target(name, self._values(cmd.args, scope), at)

    def _call(self, cmd: Command, scope: Scope, d: Dir, chain: tuple[str, ...], cond: bool) -> None:
        params, body, macro = self.functions[cmd.name]
        if len(chain) >= MAX_DEPTH:
            return
        args = self._values(cmd.args, scope)
        inner = scope if macro else Scope(dict(scope.vars), set(scope.uncertain), scope)
        for i, p in enumerate(params):
            self._set(inner, p, args[i] if i < len(args) else "", cond)
        self._set(inner, "ARGN", ";".join(args[len(params) :]), cond)
        self._set(inner, "ARGV", ";".join(args), cond)
        self._body(body, inner, d, (*chain, f"{chain[-1]}:{cmd.line} {cmd.name}()"), cond)

    # ----------------------------------------------------------------------------------- units
    def _units(self, top: str) -> list[PyUnit]:
        cuda_lang = any(f.key == "cuda_language" for f in self.facts)
        out = [PyUnit("cmake", "CMakeLists.txt", top, (), uses=tuple(self.config), facts=tuple(self.facts))]
        built = [t for t in self.targets.values() if t.unit and t.sources]
        if len(built) > MAX_UNITS:
            self.notes.append(f"{len(built)} targets: the first {MAX_UNITS} are read")
        for t in built[:MAX_UNITS]:
            incdirs, links, defines, flags = self._closure(t)
            sources = [p for s in t.sources for p in [_pattern(strip_genex(s)[0], t.dir)] if p]
            cuda = cuda_lang or "_cuda" in t.props or any(s.endswith(".cu") for s in sources)
            uses = tuple(u for item, where, c in links for u in buildsys.link_uses(item, where, c or t.conditional))
            facts = cmake_facts(t.props, flags, t.where)
            out.append(PyUnit("cmake", t.name, t.where, tuple(sources),
                              tuple(p for x in incdirs for p in [_pattern(strip_genex(x)[0], t.dir)] if p),
                              defines=tuple(x.split("=", 1)[0] for x in defines if x and UNKNOWN not in x),
                              cuda=cuda, uses=uses, facts=facts))  # fmt: skip
        return out

    def _closure(self, t: Target) -> tuple[list[str], list[tuple[str, str, bool]], list[str], list[str]]:
        """A target's include dirs, links, definitions and flags, with those of the project's targets it links."""
        incdirs, links, defines, flags = list(t.incdirs), [], list(t.defines), list(t.flags)
        seen, todo, budget = {t.name}, list(t.links), MAX_STEPS
        while todo and budget > 0:
            budget -= 1
            item, where, cond = todo.pop()
            other = self.targets.get(item)
            if other is None:
                links.append((item, where, cond))
            elif other.name not in seen and len(seen) < MAX_ITEMS:
                seen.add(other.name)
                incdirs += other.incdirs
                defines += other.defines
                todo += [(i, w, c or cond) for i, w, c in other.links]
        return incdirs, links, defines, flags




def _pattern(value: str | None, here: str) -> str | None:
    """A source or include path as a project-relative pattern (unknown parts: `*`)."""
    if not value or value.startswith(BIN):
        return None
    value = re.sub(f"{UNKNOWN}+", "*", value)
    if value.startswith("*"):
        return value
    return rel_path(value, here)
