"""The build units a project's Python declares: setup.py extensions, JIT `load()`/`load_inline()` calls,
and (with a profile) op-builder classes such as DeepSpeed's (`ast` only: nothing is run)."""

from __future__ import annotations

import ast
import dataclasses
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envlock.sources.buildmacros import BuildMacros
from envlock.sources.facts import flag_facts, setup_facts
from envlock.sources.pystatic import EXTENSION_CALLS, Evaluator, Fact, PyUnit, dotted, statements

_JIT_CALLS = ("load", "load_inline")
_LIST_KEYS = ("sources", "include_dirs", "extra_include_paths", "libraries", "extra_link_args", "extra_ldflags")


def _parse(text: str, path: str) -> ast.Module | None:
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _calls(tree: ast.Module) -> Iterator[tuple[list[Sequence[ast.stmt]], ast.Call]]:
    """Every call with the chain of bodies (module, enclosing functions) whose names it can see."""

    def visit(node: ast.AST, chain: list[Sequence[ast.stmt]]) -> Iterator[tuple[list[Sequence[ast.stmt]], ast.Call]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from visit(child, [*chain, child.body])
            else:
                if isinstance(child, ast.Call):
                    yield chain, child
                yield from visit(child, chain)

    yield from visit(tree, [tree.body])


def _kw(call: ast.Call, *names: str, pos: int | None = None) -> ast.AST | None:
    for k in call.keywords:
        if k.arg in names:
            return k.value
    return call.args[pos] if pos is not None and len(call.args) > pos else None


def _strings(ev: Evaluator, node: ast.AST | None) -> tuple[str, ...]:
    if node is None:
        return ()
    kind, vals = ev.value(node)
    return vals if kind in ("s", "l") else ("*",)


def _flags(ev: Evaluator, node: ast.AST | None) -> list[str]:
    """The strings of a list of flags or of a {'cxx': [...], 'nvcc': [...]} dict."""
    if isinstance(node, ast.Dict):
        return [s for v in node.values for s in _strings(ev, v)]
    return list(_strings(ev, node)) if node is not None else []


def _macros(node: ast.AST | None) -> list[str]:
    """define_macros=[('NAME', value), ...] names."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return []
    return [e.elts[0].value for e in node.elts if isinstance(e, ast.Tuple) and e.elts
            and isinstance(e.elts[0], ast.Constant) and isinstance(e.elts[0].value, str)]  # fmt: skip


def _facts(ev: Evaluator, call: ast.Call, where: str) -> tuple[Fact, ...]:
    """The standard and arch flags: a {'cxx': [...], 'nvcc': [...]} dict's by key, extra_cuda_cflags' as nvcc's."""
    node, out = _kw(call, "extra_compile_args", "extra_cflags"), []
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            nvcc = isinstance(k, ast.Constant) and k.value == "nvcc"
            out += flag_facts(_strings(ev, v), where, cuda_flags=nvcc)
    else:
        out += flag_facts(_flags(ev, node), where, cuda_flags=False)
    out += flag_facts(_flags(ev, _kw(call, "extra_cuda_cflags")), where)
    return tuple(dict.fromkeys(out))


def _unit(kind: str, ev: Evaluator, call: ast.Call, path: str, name_node: ast.AST | None,
          chain: Sequence[Sequence[ast.stmt]] = ()) -> PyUnit:  # fmt: skip
    flags = _flags(ev, _kw(call, "extra_compile_args", "extra_cflags")) + _flags(ev, _kw(call, "extra_cuda_cflags"))
    bm = BuildMacros(chain or [[]], ev, path)
    macros = bm.read(call, [_kw(call, "extra_compile_args", "extra_cflags"), _kw(call, "extra_cuda_cflags")])
    off = bm.switched_off([_kw(call, "libraries"), _kw(call, "extra_link_args", "extra_ldflags")])
    links = [x for x in _strings(ev, _kw(call, "extra_link_args", "extra_ldflags")) if x not in off]
    names = _strings(ev, name_node) if name_node is not None else ("*",)
    inline = ()
    if kind == "jit" and dotted(call.func).endswith("load_inline"):
        inline = tuple(_strings(ev, _kw(call, "cpp_sources", pos=1)) + _strings(ev, _kw(call, "cuda_sources", pos=2)))
    sources = _strings(ev, _kw(call, "sources", pos=1)) if not inline else ()
    return PyUnit(
        kind=kind,
        name=names[0] if names else "*",
        where=f"{path}:{call.lineno}",
        sources=sources,
        include_dirs=_strings(ev, _kw(call, "include_dirs", "extra_include_paths"))
        + tuple(f[2:] for f in flags if f.startswith("-I")),
        libraries=tuple(x for x in _strings(ev, _kw(call, "libraries")) if x not in off)
        + tuple(x[2:] for x in links if x.startswith("-l")),
        defines=tuple(_macros(_kw(call, "define_macros"))) + tuple(f[2:].split("=")[0] for f in flags if f.startswith("-D")),
        inline=inline,
        cuda=not dotted(call.func).endswith("CppExtension"),
        macros=tuple((m.name, m.value, m.why) for m in macros),
        macros_read=bm.complete,
        facts=_facts(ev, call, f"{path}:{call.lineno}"),
    )


def python_units(files: Mapping[str, str], jit_calls: tuple[str, ...] = ()) -> list[PyUnit]:
    """setup.py's extensions and every JIT load()/load_inline() of the project's .py files (and calls of the
    project's own functions that take a JIT build's arguments as load() does: a profile's `jit_calls`)."""
    out: list[PyUnit] = []
    for path in sorted(p for p in files if p.endswith(".py")):
        text = files[path]
        is_setup = posixpath.basename(path) == "setup.py" and "/" not in path
        if not is_setup and "cpp_extension" not in text and not any(f"{c}(" in text for c in jit_calls):
            continue
        tree = _parse(text, path)
        if tree is None:
            continue
        checks = tuple(setup_facts(tree, path)) if is_setup else ()
        for chain, call in _calls(tree):
            last = dotted(call.func).rsplit(".", 1)[-1]
            if is_setup and (last in EXTENSION_CALLS or (last.lower().endswith("extension") and not last.lower().startswith("build"))):
                ev = Evaluator(chain, file=path)
                unit = _unit("extension", ev, call, path, _kw(call, "name", pos=0), chain)
                own = unit.facts
                if any(f.key == "arch" for f in checks):  # setup.py's own arch flags, with their nvcc gates, win
                    own = tuple(f for f in own if f.key != "arch")
                out.append(dataclasses.replace(unit, facts=own + checks))
            elif last in _JIT_CALLS + jit_calls and _kw(call, "sources", "cpp_sources", "cuda_sources", pos=1) is not None:
                ev = Evaluator(chain, file=path)
                out.append(_unit("jit", ev, call, path, _kw(call, "name", pos=0), chain))
    merged: dict[tuple[str, str], PyUnit] = {}
    for u in out:  # the same JIT build at two call sites (a first build, a reload) is one unit
        merged.setdefault((u.kind, u.name), u)
    return list(merged.values())


def builder_units(files: Mapping[str, str], profile: Mapping[str, Any]) -> list[PyUnit]:
    """One unit per op-builder class of `profile['builders']` (a folder) with a NAME, as DeepSpeed has."""
    folder = profile["builders"].rstrip("/") + "/"
    skip = set(profile.get("skip_bases", ()))
    mods = {p: _parse(t, p) for p, t in files.items() if p.startswith(folder) and p.endswith(".py")
            and "/" not in p[len(folder):]}  # fmt: skip
    skip_modules = {f"{folder}{m}.py" for m in profile.get("skip_modules", ())}
    classes: dict[str, tuple[str, ast.Module, ast.ClassDef]] = {}
    for path, tree in sorted(mods.items()):
        for node in tree.body if tree else []:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (path, tree, node)  # type: ignore[assignment]  # tree is not None inside the loop over its body
    defs = {k: v[2] for k, v in classes.items()}
    out = []
    for cname, (path, tree, cls) in sorted(classes.items()):
        if path in skip_modules:
            continue
        ev = Evaluator([tree.body], defs, cls, path)
        mro = [c.name for c in ev.mro()]
        if any(b in skip for b in mro[1:2]) or not any(isinstance(s, ast.Assign) for s in cls.body):
            continue  # a base class, or a builder of a CPU-only family
        name = ev.value(ast.Attribute(ast.Name("self"), "NAME"))
        if name[0] != "s" or not name[1] or "NAME" not in {t.id for s in cls.body if isinstance(s, ast.Assign)
                                                          for t in s.targets if isinstance(t, ast.Name)}:  # fmt: skip
            continue
        srcs = ev.method("sources")
        incs = ev.method("include_paths")
        flags = ev.method("extra_ldflags")
        libs = tuple(x[2:] for x in flags[1] if x.startswith("-l")) + ev.method("libraries_args")[1]
        defines = tuple(x[2:].split("=")[0] for x in ev.method("nvcc_args")[1] + ev.method("cxx_args")[1] if x.startswith("-D"))
        out.append(PyUnit("builder", name[1][0], f"{path}:{cls.lineno}", tuple(srcs[1]) if srcs[0] != "?" else ("*",),
                          tuple(incs[1]), tuple(dict.fromkeys(libs)), defines,
                          extra={"builder": (cname,)}))  # fmt: skip
    return out


__all__ = ["builder_units", "python_units", "statements"]
