"""What a project's Python says it compiles, read with `ast` and never run (setup.py, JIT `load()` calls,
op-builder classes).

Values are evaluated statically to lists of path patterns: string constants, f-strings, lists, `+`,
`os.path.join`/`Path`/`/`, `glob.glob`, comprehensions, names bound in the same function or module
(every binding counts: a union), `self.method()` and `super().method()` of classes in the same files.
What cannot be known (an environment variable, a call to something else) becomes `*`, so a source list
that cannot be read turns into a pattern that matches every source. Branches under a condition known false
for a Linux CUDA build (`self.is_rocm_pytorch()`, `torch.version.hip`, `sys.platform == "win32"`,
`os.name == "nt"`, `IS_HIP_EXTENSION`) are skipped.
"""

from __future__ import annotations

import ast
import itertools
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

UNKNOWN = "*"
MAX_ALTERNATIVES = 32
FALSE_CALLS = frozenset({"is_rocm_pytorch", "is_hip", "is_sycl_enabled", "is_xpu", "is_npu"})
FALSE_NAMES = frozenset({"IS_HIP_EXTENSION", "IS_ROCM", "USE_ROCM", "torch.version.hip", "IS_WINDOWS"})
EXTENSION_CALLS = ("CUDAExtension", "CppExtension", "Extension", "Pybind11Extension", "CUDAExtension_")


@dataclass(frozen=True, slots=True)
class Use:
    """A header, library or build-system package a unit needs that its sources do not show (a CMake link
    item, a find_package(), meson's dependency())."""

    name: str
    what: str  # "header" | "library" | "package"
    via: str  # where it is asked for
    conditional: bool = False  # under a condition the reading could not decide, or not REQUIRED


@dataclass(frozen=True, slots=True)
class Fact:
    """Something the build asks of the toolchain: a C++ / CUDA standard, a GPU architecture, an nvcc bound."""

    key: str  # "cxx_std" | "cuda_std" | "arch" | "nvcc_min" | "nvcc_below" | "nvcc_max" | "cuda_language" | "downloads"
    value: str
    where: str
    nvcc: str = ""  # the nvcc version this fact needs (an arch built only from nvcc X on)


@dataclass(frozen=True)
class PyUnit:
    """One thing the Python compiles: a setup.py extension, a JIT `load()`, an op builder."""

    kind: str  # "extension" | "jit" | "builder"
    name: str  # may hold `*` where it is computed
    where: str  # path:line
    sources: tuple[str, ...] = ()  # patterns, relative to the project root (or starting with `*`)
    include_dirs: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()  # -l names
    defines: tuple[str, ...] = ()  # -D / define_macros names
    # every macro the build names: (name, True/int defined | False undefined | None undecided, why); read:
    # whether all its define_macros and flags could be read (then a macro it does not name is not defined)
    macros: tuple[tuple[str, bool | int | None, str], ...] = ()
    macros_read: bool = False
    inline: tuple[str, ...] = ()  # load_inline's source texts
    cuda: bool = True  # CppExtension: no nvcc
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)
    uses: tuple[Use, ...] = ()  # needs the build system states (CMake, meson)
    facts: tuple[Fact, ...] = ()


Val = tuple[str, tuple[str, ...]]  # ("s", alternatives) | ("l", items) | ("?", ())


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return dotted(node.func) + "()"
    return ""


def known_false(test: ast.AST) -> bool | None:
    """True when `test` is false on a Linux CUDA build, False when it is known true, None otherwise."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = known_false(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):  # `torch.version.hip and …` is false when one part is; `a or b` when all are
        verdicts = [known_false(v) for v in test.values]
        if isinstance(test.op, ast.And):
            return True if True in verdicts else (False if all(v is False for v in verdicts) else None)
        return True if all(v is True for v in verdicts) else (False if False in verdicts else None)
    if isinstance(test, ast.Call) and dotted(test.func).rsplit(".", 1)[-1] in FALSE_CALLS:
        return True
    if dotted(test) in FALSE_NAMES:
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant):
        left, value, op = dotted(test.left), test.comparators[0].value, test.ops[0]
        verdict = {("sys.platform", "win32"), ("sys.platform", "darwin"), ("os.name", "nt"),
                   ("platform.system()", "Windows"), ("platform.system()", "Darwin")}  # fmt: skip
        if (left, value) in verdict:
            return isinstance(op, ast.Eq) if isinstance(op, (ast.Eq, ast.NotEq)) else None
    return None


def statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested ones too, skipping branches known false and nested defs."""
    for st in body:
        yield st
        if isinstance(st, ast.If):
            verdict = known_false(st.test)
            if verdict is not True:
                yield from statements(st.body)
            if verdict is not False:
                yield from statements(st.orelse)
        elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                yield from statements(getattr(st, part, []) or [])
            for handler in getattr(st, "handlers", []):
                yield from statements(handler.body)


class Evaluator:
    """Static values in one scope chain (a function inside a module, maybe a method of a class)."""

    def __init__(self, scopes: Sequence[Sequence[ast.stmt]], classes: dict[str, ast.ClassDef] | None = None,
                 cls: ast.ClassDef | None = None, file: str = "setup.py") -> None:  # fmt: skip
        self.bindings: dict[str, list[tuple[str, ast.AST]]] = {}
        for body in reversed(scopes):  # the innermost scope's bindings shadow the outer ones
            local: dict[str, list[tuple[str, ast.AST]]] = {}
            for st in statements(body):
                _bind(st, local)
            self.bindings.update(local)
        self.classes, self.cls, self.file = classes or {}, cls, file
        self._module: Sequence[ast.stmt] = scopes[0] if scopes else ()
        self._limit: dict[str, int] = {}

    def value(self, node: ast.AST | None, depth: int = 0) -> Val:
        if node is None or depth > 16:
            return ("?", ())
        d = depth + 1
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return ("s", (node.value,))
        if isinstance(node, ast.JoinedStr):
            parts = [self._alts(v.value if isinstance(v, ast.FormattedValue) else v, d) for v in node.values]
            return ("s", _product(parts, ""))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return ("l", tuple(x for e in node.elts for x in self._items(e, d)))
        if isinstance(node, ast.BinOp):
            return self._binop(node, d)
        if isinstance(node, ast.IfExp):
            return _union([self.value(node.body, d), self.value(node.orelse, d)])
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and len(node.generators) == 1:
            gen = node.generators[0]
            items = self._items(gen.iter, d)
            if not isinstance(gen.target, ast.Name):
                return ("l", (UNKNOWN,))
            out, var = [], gen.target.id
            saved, saved_limit = self.bindings.get(var), self._limit.pop(var, None)
            for item in items:
                self.bindings[var] = [("const", ast.Constant(item))]
                out += self._items(node.elt, d)
            if saved is None:
                self.bindings.pop(var, None)
            else:
                self.bindings[var] = saved
            if saved_limit is not None:
                self._limit[var] = saved_limit
            return ("l", tuple(out))
        if isinstance(node, ast.Name):
            return self._name(node.id, d)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            return self._class_attr(node.attr, d)
        if isinstance(node, ast.Call):
            return self._call(node, d)
        return ("?", ())

    def _alts(self, node: ast.AST, d: int) -> tuple[str, ...]:
        kind, vals = self.value(node, d)
        return vals if kind == "s" and vals else (UNKNOWN,)

    def _items(self, node: ast.AST, d: int) -> tuple[str, ...]:
        if isinstance(node, ast.Starred):
            node = node.value
        kind, vals = self.value(node, d)
        return vals if kind in ("s", "l") and vals else (UNKNOWN,) if kind == "?" else ()

    def _binop(self, node: ast.BinOp, d: int) -> Val:
        left, right = self.value(node.left, d), self.value(node.right, d)
        if isinstance(node.op, ast.Add):
            if "l" in (left[0], right[0]):
                return ("l", self._as_list(left) + self._as_list(right))
            return ("s", _product([left[1] or (UNKNOWN,), right[1] or (UNKNOWN,)], ""))
        if isinstance(node.op, ast.Div):
            return ("s", _product([left[1] or (UNKNOWN,), right[1] or (UNKNOWN,)], "/"))
        if isinstance(node.op, ast.Sub) and left[0] == "l":
            return left  # `list(set(a) - set(b))`: within a (what is taken away is not needed to know what is built)
        return ("s", (UNKNOWN,)) if isinstance(node.op, ast.Mod) else ("?", ())

    @staticmethod
    def _as_list(v: Val) -> tuple[str, ...]:
        return v[1] if v[0] in ("l", "s") else (UNKNOWN,)

    def _name(self, name: str, d: int) -> Val:
        if name == "__file__":
            return ("s", (self.file,))
        limit = self._limit.get(name, len(self.bindings.get(name, ())))
        if name not in self.bindings or limit <= 0:
            return ("?", ())
        try:
            vals: list[Val] = []
            for i, (how, node) in enumerate(self.bindings[name][:limit]):
                self._limit[name] = i  # `x = f(x)`: the x inside is what x was bound to before
                if how in ("assign", "extend", "const"):
                    vals.append(self.value(node, d) if how != "const" else ("s", (node.value,)))  # type: ignore[attr-defined]  # a `const` binding's node is an ast.Constant
                elif how == "append":
                    vals.append(("l", self._items(node, d)))
                elif how == "for":
                    vals.append(("s", self._items(node, d)))
            return _union(vals)
        finally:
            if limit == len(self.bindings[name]):
                self._limit.pop(name, None)
            else:
                self._limit[name] = limit

    def _class_attr(self, attr: str, d: int) -> Val:
        for cls in self.mro():
            for st in cls.body:
                if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in st.targets):
                    return self.value(st.value, d)
        return ("?", ())

    def mro(self) -> list[ast.ClassDef]:
        out, todo = [], [self.cls] if self.cls else []
        while todo:
            c = todo.pop(0)
            if c is None or c in out:
                continue
            out.append(c)
            todo += [self.classes.get(dotted(b).rsplit(".", 1)[-1]) for b in c.bases]  # type: ignore[misc]  # classes.get may be None: the loop skips it
        return out

    def method(self, name: str, d: int = 0, skip_first: bool = False) -> Val:
        """The union of what a method of this class (or its bases) returns."""
        for cls in self.mro()[1 if skip_first else 0 :]:
            fn = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == name), None)
            if fn is not None:
                inner = Evaluator([self._module, fn.body], self.classes, cls, self.file)
                rets = [inner.value(st.value, d) for st in statements(fn.body) if isinstance(st, ast.Return)]
                return _union(rets)
        return ("?", ())

    def _call(self, node: ast.Call, d: int) -> Val:
        name = dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        args = node.args
        if (last == "join" and "path" in name) or name in ("join", "osp.join"):
            return ("s", _product([self._alts(a, d) for a in args], "/"))
        if last == "dirname" and args:
            return ("s", tuple(dict.fromkeys(posixpath.dirname(a) if a != UNKNOWN else a for a in self._alts(args[0], d))))
        if last in ("Path", "PurePath", "PosixPath") and args:
            return ("s", _product([self._alts(a, d) for a in args], "/"))
        if last in ("glob", "iglob") and args:
            if isinstance(node.func, ast.Attribute) and name not in ("glob.glob", "glob.iglob"):
                base = self._alts(node.func.value, d)  # Path(...).glob(pattern)
                return ("l", _product([base, self._alts(args[0], d)], "/"))
            return ("l", self._alts(args[0], d))
        if last == "rglob" and isinstance(node.func, ast.Attribute) and args:
            return ("l", _product([self._alts(node.func.value, d), ("**",), self._alts(args[0], d)], "/"))
        if last in ("sorted", "list", "tuple", "set", "str", "fspath", "abspath", "realpath", "normpath",
                    "expanduser", "resolve", "absolute") and args:  # fmt: skip
            return self.value(args[0], d)
        if last in ("resolve", "absolute") and isinstance(node.func, ast.Attribute):
            return self.value(node.func.value, d)
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id == "self":
            return self.method(last, d)
        if isinstance(node.func, ast.Attribute) and dotted(node.func.value) == "super()":
            return self.method(last, d, skip_first=True)
        return ("?", ())


def _bind(st: ast.stmt, out: dict[str, list[tuple[str, ast.AST]]]) -> None:
    if isinstance(st, ast.Assign):
        for t in st.targets:
            if isinstance(t, ast.Name):
                out.setdefault(t.id, []).append(("assign", st.value))
    elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
        out.setdefault(st.target.id, []).append(("assign", st.value))
    elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and isinstance(st.op, ast.Add):
        out.setdefault(st.target.id, []).append(("extend", st.value))
    elif isinstance(st, ast.For) and isinstance(st.target, ast.Name):
        out.setdefault(st.target.id, []).append(("for", st.iter))
    elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute):
        f = st.value.func
        if isinstance(f.value, ast.Name) and f.attr in ("append", "extend", "insert") and st.value.args:
            how = "append" if f.attr != "extend" else "extend"
            out.setdefault(f.value.id, []).append((how, st.value.args[-1]))


def _union(vals: Sequence[Val]) -> Val:
    known = [v for v in vals if v[0] != "?"]
    if not known:
        return ("?", ())
    kind = "l" if any(v[0] == "l" for v in known) else "s"
    items = tuple(dict.fromkeys(x for v in known for x in v[1]))
    return (kind, items[: MAX_ALTERNATIVES * 8])


def _product(parts: Sequence[tuple[str, ...]], sep: str) -> tuple[str, ...]:
    parts = [p or (UNKNOWN,) for p in parts]
    out = []
    for combo in itertools.islice(itertools.product(*parts), MAX_ALTERNATIVES):
        out.append(_squash(sep.join(c for c in combo if c) if sep else "".join(combo)))
    return tuple(dict.fromkeys(out))


def _squash(s: str) -> str:
    while "***" in s:
        s = s.replace("***", "**")
    return s
