"""Each outside system has one owner in envlock (README "How it is built"): rattler -> envlock/seams/conda/, HTTP ->
envlock/seams/net.py, other programs -> envlock/seams/proc.py. Read from the sources with ast (lazy imports inside functions
count, strings and comments do not).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "envlock"
#: Modules that speak HTTP themselves (urllib.request's url2pathname is a path function, not HTTP).
HTTP = ("requests", "urllib3", "http.client", "httpx", "aiohttp", "urllib.request")
HTTP_NAMES_OK = {"urllib.request": {"url2pathname", "pathname2url"}}


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """ast.walk, less the bodies of `if TYPE_CHECKING:` (annotations import nothing at run time)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _imports(tree: ast.AST) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names imported from it) of every import in `tree`, at any depth."""
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module, tuple(a.name for a in node.names)


def _sources() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _is(module: str, top: str) -> bool:
    return module == top or module.startswith(top + ".")


def test_only_conda_imports_rattler() -> None:
    found = [f"{rel}:{line} {mod}" for rel, tree in _sources() for line, mod, _ in _imports(tree)
             if _is(mod, "rattler") and not rel.startswith("seams/conda/")]
    assert found == []


def test_only_net_speaks_http() -> None:
    found = []
    for rel, tree in _sources():
        for line, mod, names in _imports(tree):
            bad = next((h for h in HTTP if _is(mod, h)), None)
            if bad and rel != "seams/net.py" and not (names and set(names) <= HTTP_NAMES_OK.get(bad, set())):
                found.append(f"{rel}:{line} {mod} {names}")
    assert found == []


#: os functions that start or become another program.
OS_RUNNERS = ("system", "popen", "startfile", "posix_spawn", "posix_spawnp", "fork", "forkpty")
OS_PREFIXES = ("exec", "spawn")


def test_only_proc_runs_programs() -> None:
    found = []
    for rel, tree in _sources():
        if rel == "seams/proc.py":
            continue
        for line, mod, names in _imports(tree):
            if _is(mod, "subprocess") or _is(mod, "pty") or (mod == "os" and any(
                    n in OS_RUNNERS or n.startswith(OS_PREFIXES) for n in names)):
                found.append(f"{rel}:{line} {mod} {names}")
        for node in _walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                    and (node.attr in OS_RUNNERS or node.attr.startswith(OS_PREFIXES))):
                found.append(f"{rel}:{node.lineno} os.{node.attr}")
    assert found == []


def test_the_checks_can_fail() -> None:
    """Control: the same scan finds what it looks for where it is (net.py's requests, conda/'s rattler)."""
    net = ast.parse((PACKAGE / "seams" / "net.py").read_text(encoding="utf-8"))
    assert any(_is(mod, "requests") for _, mod, _ in _imports(net))
    solve = ast.parse((PACKAGE / "seams" / "conda" / "solve.py").read_text(encoding="utf-8"))
    assert any(_is(mod, "rattler") for _, mod, _ in _imports(solve))
    proc = ast.parse((PACKAGE / "seams" / "proc.py").read_text(encoding="utf-8"))
    assert any(_is(mod, "subprocess") for _, mod, _ in _imports(proc))
    assert any(isinstance(n, ast.Attribute) and n.attr == "execvpe" for n in _walk(proc))
