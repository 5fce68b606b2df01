"""The macros a setup.py extension or a JIT load() defines, read with `ast` and never run: `define_macros`,
`undef_macros`, `-D`/`-U` in `extra_compile_args` (both the list and the {'cxx': …, 'nvcc': …} forms) and a
JIT call's `extra_cflags`/`extra_cuda_cflags` — each with the `if` tests it sits under, judged as a build
with no environment switch set would see them:

  * `os.environ.get("X", "1") == "1"`, `os.getenv("X")`, `"X" in os.environ`, `int(os.getenv(...))`,
    `.lower() in ("1", "true")` and names bound to such reads: the switch's default decides (a macro under
    `if os.getenv("WITH_NVTX"):` is not defined unless WITH_NVTX is set), and the switch is named;
  * a platform test (`sys.platform == "win32"`, ROCm): as pystatic.known_false says;
  * anything else (`torch.cuda.is_available()`, a call into the project): cannot be known before the build.

A `libraries=` item or `-l` flag added only under a switch that is off by default is likewise not this
build's (`switched_off`).

A macro is then defined (True, or its int value), undefined (False: `undef_macros`, `-U`, or defined only
under a switch that is off by default) or undecided (None), with a line saying why. `complete` is False when
some of the flags or macros could not be read (a value computed elsewhere): then a macro the build does not
name may still be defined, and nothing is ruled out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from envlock.sources.pystatic import UNKNOWN, Evaluator, dotted, known_false

_ENV_CALLS = ("os.environ.get", "os.getenv", "environ.get", "getenv")
_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
Cond = tuple[ast.expr, bool]  # an `if` test and whether the statement is in its body (True) or its else


@dataclass(frozen=True, slots=True)
class Macro:
    name: str
    value: bool | int | None  # True / int: defined; False: not defined; None: cannot be known before the build
    why: str  # "setup.py:12", "setup.py:12, only when USE_NVTX is set", "-UX (setup.py:30)"


def _const(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else UNKNOWN


class _Switches:
    """Judges `if` tests as a build with no environment switch set would (True / False / None)."""

    def __init__(self, scopes: Sequence[Sequence[ast.stmt]]) -> None:
        self.names: dict[str, ast.expr] = {}
        for body in scopes:
            for st in ast.walk(ast.Module(body=list(body), type_ignores=[])):
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                    name = st.targets[0].id
                    self.names[name] = st.value if name not in self.names else ast.Constant(UNKNOWN)  # rebound: unknown

    def value(self, node: ast.AST, depth: int = 0) -> tuple[object, list[str], list[str]]:
        """(value, switches read, outside things it depends on) of an expression, no switch being set."""
        if depth > 12:
            return UNKNOWN, [], ["a value computed too deep to follow"]
        d = depth + 1
        if isinstance(node, ast.Constant):
            return node.value, [], []
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name.endswith(_ENV_CALLS) and node.args and isinstance(node.args[0], ast.Constant):
                default = _const(node.args[1]) if len(node.args) > 1 else None
                return default, [str(node.args[0].value)], []
            if name in ("int", "bool", "str", "float") and len(node.args) == 1:
                v, sw, out = self.value(node.args[0], d)
                try:
                    conv = {"int": int, "bool": bool, "str": str, "float": float}[name]
                    return (conv(v) if v is not UNKNOWN else UNKNOWN), sw, out  # type: ignore[call-overload]  # v is a switch's text or number: conv may refuse it (caught)
                except (TypeError, ValueError):
                    return UNKNOWN, sw, [*out, ast.unparse(node)[:60]]
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("lower", "upper", "strip") and not node.args:
                v, sw, out = self.value(node.func.value, d)
                return (getattr(v, node.func.attr)() if isinstance(v, str) else v), sw, out
        if isinstance(node, ast.Subscript) and dotted(node.value).endswith("environ") and isinstance(node.slice, ast.Constant):
            return None, [str(node.slice.value)], []
        if isinstance(node, ast.Name) and node.id in self.names:
            return self.value(self.names[node.id], d)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.value(e, d) for e in node.elts]
            return tuple(v for v, _, _ in items), [s for _, sw, _ in items for s in sw], [o for *_, out in items for o in out]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v, sw, out = self.truth(node.operand, d)
            return (UNKNOWN if v is None else not v), sw, out
        if isinstance(node, ast.BoolOp):
            return self._boolop(node, d)
        if isinstance(node, ast.IfExp):  # `True if os.getenv("X", "0") == "1" else False`
            v, sw, out = self.truth(node.test, d)
            if v is None:
                return UNKNOWN, sw, out
            got, sw2, out2 = self.value(node.body if v else node.orelse, d)
            return got, sw + sw2, out2
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node, d)
        verdict = known_false(node)
        if verdict is not None:
            return not verdict, [], []
        return UNKNOWN, [], [ast.unparse(node)[:60]]

    def truth(self, node: ast.AST, depth: int = 0) -> tuple[bool | None, list[str], list[str]]:
        v, sw, out = self.value(node, depth)
        if v is UNKNOWN:
            return None, sw, out
        if isinstance(v, str) and sw:
            return v.strip().lower() not in ("", "0", "false", "no", "off"), sw, out  # a switch's text
        return bool(v), sw, out

    def _boolop(self, node: ast.BoolOp, d: int) -> tuple[object, list[str], list[str]]:
        parts = [self.truth(v, d) for v in node.values]
        sw = [s for _, ss, _ in parts for s in ss]
        out = [o for *_, oo in parts for o in oo]
        vals = [v for v, _, _ in parts]
        if isinstance(node.op, ast.And):
            v = False if False in vals else (None if None in vals else True)
        else:
            v = True if True in vals else (None if None in vals else False)
        return (UNKNOWN, sw, out) if v is None else (v, sw, [])

    def _compare(self, node: ast.Compare, d: int) -> tuple[object, list[str], list[str]]:
        op, right = node.ops[0], node.comparators[0]
        if isinstance(op, (ast.In, ast.NotIn)) and dotted(right).endswith("environ") and isinstance(node.left, ast.Constant):
            return isinstance(op, ast.NotIn), [str(node.left.value)], []  # `"X" in os.environ`: not set
        a, sa, oa = self.value(node.left, d)
        b, sb, ob = self.value(right, d)
        if a is UNKNOWN or b is UNKNOWN:
            verdict = known_false(node)
            return (UNKNOWN, sa + sb, [ast.unparse(node)[:60]]) if verdict is None else (not verdict, [], [])
        if isinstance(op, (ast.In, ast.NotIn)):
            try:
                hit = a in b  # type: ignore[operator]  # b a tuple or str here; TypeError is caught
            except TypeError:
                return UNKNOWN, sa + sb, [*oa, *ob, ast.unparse(node)[:60]]
            return hit if isinstance(op, ast.In) else not hit, sa + sb, []
        ops = {ast.Eq: lambda x, y: x == y, ast.NotEq: lambda x, y: x != y, ast.Is: lambda x, y: x is y,
               ast.IsNot: lambda x, y: x is not y}  # fmt: skip
        for kind, fn in ops.items():
            if isinstance(op, kind):
                return fn(a, b), sa + sb, []
        try:
            cmp = {ast.Gt: a > b, ast.GtE: a >= b, ast.Lt: a < b, ast.LtE: a <= b}  # type: ignore[operator]  # mixed types raise TypeError, caught
        except TypeError:
            return UNKNOWN, sa + sb, [ast.unparse(node)[:60]]
        return next((v for k, v in cmp.items() if isinstance(op, k)), UNKNOWN), sa + sb, []


def _with_conds(body: Sequence[ast.stmt], conds: tuple[Cond, ...] = ()) -> Iterator[tuple[ast.stmt, tuple[Cond, ...]]]:
    for st in body:
        yield st, conds
        if isinstance(st, ast.If):
            yield from _with_conds(st.body, (*conds, (st.test, True)))
            yield from _with_conds(st.orelse, (*conds, (st.test, False)))
        elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                yield from _with_conds(getattr(st, part, []) or [], conds)
            for handler in getattr(st, "handlers", []):
                yield from _with_conds(handler.body, conds)


class BuildMacros:
    """The macros of the build calls in one scope chain (a module, the function a setup() call is in)."""

    def __init__(self, scopes: Sequence[Sequence[ast.stmt]], ev: Evaluator, path: str) -> None:
        self.scopes, self.ev, self.path = scopes, ev, path
        self.switches = _Switches(scopes)
        self.complete = True

    def _items(self, node: ast.AST | None, conds: tuple[Cond, ...] = ()) -> Iterator[tuple[ast.AST, tuple[Cond, ...], int]]:
        """The elements of a list-valued argument with the `if` tests each was added under."""
        if node is None:
            return
        if isinstance(node, (ast.List, ast.Tuple)) and not (isinstance(node, ast.Tuple) and len(node.elts) == 2
                                                             and isinstance(node.elts[0], ast.Constant)):  # fmt: skip
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    yield from self._items(e.value, conds)
                else:
                    yield e, conds, getattr(e, "lineno", 0)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            yield from self._items(node.left, conds)
            yield from self._items(node.right, conds)
        elif isinstance(node, ast.Dict):
            for v in node.values:
                yield from self._items(v, conds)
        elif isinstance(node, ast.Name):
            found = False
            for body in self.scopes:
                for st, where in _with_conds(body):
                    value = _binding(st, node.id)
                    if value is not None:
                        found = True
                        if isinstance(value, ast.Call) and dotted(value.func) in ("list", "tuple"):
                            value = value.args[0] if value.args else ast.List(elts=[])
                        yield from self._items(value, (*conds, *where))
            self.complete = self.complete and found
        elif isinstance(node, ast.IfExp):  # `["-lx"] if WITH_X else []`: each side under its test
            yield from self._items(node.body, (*conds, (node.test, True)))
            yield from self._items(node.orelse, (*conds, (node.test, False)))
        elif isinstance(node, ast.Call) and dotted(node.func) in ("list", "tuple") and node.args:
            yield from self._items(node.args[0], conds)
        else:
            self.complete = False  # a list made elsewhere: its macros are unknown

    def _state(self, conds: tuple[Cond, ...], line: int) -> tuple[bool | None, str]:
        """Whether a build with no switch set runs the statement, and the words for it."""
        value: bool | None = True
        switches: list[str] = []
        outside: list[str] = []
        for test, in_body in conds:
            v, sw, out = self.switches.truth(test)
            v = v if in_body or v is None else not v
            switches += sw
            outside += out
            value = False if (value is False or v is False) else (None if (value is None or v is None) else True)
        where = f"{self.path}:{line}"
        sw = ", ".join(dict.fromkeys(switches))
        if value is True:
            return True, where + (f" by default (the {sw} switch can change it)" if sw else "")
        if value is False:
            return False, (f"{where} defines it only when {sw} is set" if sw else
                           f"{where} defines it only under a condition that is false here")  # fmt: skip
        return None, f"{where} defines it only when {', '.join(dict.fromkeys(outside)) or sw}"

    def switched_off(self, nodes: Sequence[ast.AST | None]) -> set[str]:
        """The strings of list-valued arguments (libraries=, extra_link_args=) added only under a switch that
        is off in this build (`if WITH_METIS: libraries += ['metis']`): not this build's."""
        complete, on, off = self.complete, set(), set()
        for node in nodes:
            for elt, conds, line in self._items(node):
                kind, vals = self.ev.value(elt)
                if kind == "s" and UNKNOWN not in vals:
                    (off if self._state(conds, line)[0] is False else on).update(vals)
        self.complete = complete  # what this reading could not follow says nothing of the macros
        return off - on

    def read(self, call: ast.Call, flag_nodes: Sequence[ast.AST | None]) -> list[Macro]:
        """Every macro the call's define_macros / undef_macros / -D / -U flags name, merged per name."""
        got: dict[str, list[Macro]] = {}
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        for elt, conds, line in self._items(kw.get("define_macros")):
            if not (isinstance(elt, ast.Tuple) and elt.elts and isinstance(elt.elts[0], ast.Constant)):
                self.complete = False
                continue
            raw = _const(elt.elts[1]) if len(elt.elts) > 1 else None
            value: bool | int = 1 if raw is None else (int(raw) if isinstance(raw, int) or str(raw).isdigit() else True)
            state, why = self._state(conds, line or call.lineno)
            got.setdefault(str(elt.elts[0].value), []).append(Macro(str(elt.elts[0].value), value if state else state, why))  # type: ignore[arg-type]  # state is True/False/None: a Macro value
        for elt, conds, line in self._items(kw.get("undef_macros")):
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                state, why = self._state(conds, line or call.lineno)
                got.setdefault(elt.value, []).append(Macro(elt.value, False if state else None, f"undef_macros, {why}"))
        for node in flag_nodes:
            for elt, conds, line in self._items(node):
                kind, vals = self.ev.value(elt)
                if kind != "s" or UNKNOWN in vals or not vals:
                    self.complete = self.complete and kind == "s"
                    continue
                for flag in vals:
                    if flag.startswith(("-D", "-U")) and len(flag) > 2:
                        name, _, val = flag[2:].partition("=")
                        state, why = self._state(conds, line or call.lineno)
                        if flag.startswith("-U"):
                            got.setdefault(name, []).append(Macro(name, False if state else None, f"-U{name} ({why})"))
                        else:
                            v: bool | int = int(val) if val.lstrip("-").isdigit() else (1 if not val else True)
                            got.setdefault(name, []).append(Macro(name, v if state else state, why))
        return [_merge(ms) for ms in got.values()]


def _binding(st: ast.stmt, name: str) -> ast.AST | None:
    """What `st` adds to the list bound to `name` (an assignment, +=, append/extend/insert), if anything."""
    if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
        return st.value
    if isinstance(st, ast.Assign) and isinstance(st.value, (ast.Tuple, ast.List)):  # `a, b = [], ["x"]`
        for t in st.targets:
            if isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) == len(st.value.elts):
                hit = [v for e, v in zip(t.elts, st.value.elts) if isinstance(e, ast.Name) and e.id == name]
                if hit:
                    return hit[0]
    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == name:
        return st.value
    if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and st.target.id == name:
        return st.value
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute):
        f = st.value.func
        if isinstance(f.value, ast.Name) and f.value.id == name and st.value.args:
            if f.attr in ("append", "insert"):
                return ast.List(elts=[st.value.args[-1]])
            if f.attr == "extend":
                return st.value.args[0]
    return None


def _merge(ms: list[Macro]) -> Macro:
    """One macro from every place that names it: defined anywhere wins, then undecided, then undefined."""
    for pick in (lambda m: m.value not in (None, False), lambda m: m.value is None, lambda m: True):
        hit = next((m for m in ms if pick(m)), None)
        if hit is not None:
            return hit
    return ms[0]
