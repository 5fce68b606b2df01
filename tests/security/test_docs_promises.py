"""The docs say what exists (issue 33.8): every test docs/security.md's attack table names is there, every file of
the repository the docs name is there, and every `envlock …` command the docs show parses with envlock's own parser.

Mechanical on purpose: a table row that names a test somebody renamed, or a command line whose option was renamed,
fails here instead of staying in the docs untrue.
"""

from __future__ import annotations

import ast
import io
import json
import re
import shlex
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from envlock.cli import app

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SECURITY = REPO / "docs" / "security.md"


# --------------------------------------------------------------------------- the attack table's tests


def _table_rows() -> list[tuple[str, str]]:
    """(row number, test cell) of every row of docs/security.md's attack table."""
    text = SECURITY.read_text(encoding="utf-8")
    table = text[text.index("## Attack table"):]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] not in ("#", "---"):
            rows.append((cells[0], cells[3]))
    return rows


def _named_tests(cell: str) -> Iterator[tuple[Path, str | None]]:
    """(file, test function or None) for every test file and `test_…` name in a test cell; a name belongs to the file
    named last before it. A bare file name lives under tests/security/."""
    current: Path | None = None
    for m in re.finditer(r"((?:tests/)?[\w/]*test_\w+\.py)|`(test_\w+)`", cell):
        if m.group(1):
            name = m.group(1)
            current = REPO / name if name.startswith("tests/") else REPO / "tests" / "security" / name
            yield current, None
        else:
            assert current is not None, f"{m.group(2)} is named before any test file: {cell[:80]}"
            yield current, m.group(2)


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_the_security_table_names_exists() -> None:
    rows = _table_rows()
    assert len(rows) >= 25 and {"1", "5", "33.2", "33.7b", "s9"} <= {r for r, _ in rows}  # the table was read
    missing = []
    named = 0
    for row, cell in rows:
        tests = list(_named_tests(cell))
        if not tests:
            missing.append(f"row {row}: names no test")
        for path, func in tests:
            named += func is not None
            if not path.is_file():
                missing.append(f"row {row}: {path.relative_to(REPO)} does not exist")
            elif func is not None and func not in _functions(path):
                missing.append(f"row {row}: {path.relative_to(REPO)} has no {func}")
    assert missing == []
    assert named > 50


def test_the_table_reader_finds_a_missing_test() -> None:
    """The check above fails on what it looks for (a reader that finds nothing proves nothing)."""
    (found,) = [f for _, f in _named_tests("`test_writes.py` (`test_no_such_test`)") if f]
    assert found == "test_no_such_test" and found not in _functions(REPO / "tests/security/test_writes.py")


# --------------------------------------------------------------------------- files the docs name

#: Names the docs use as examples or placeholders, not as files of this repository.
PLACEHOLDERS = {"tests/test_x.py"}
_REPO_PATH = re.compile(r"(?<![\w./~-])((?:envlock|tests|tools|benchmarks)/[\w./-]*\w)")


def _named_paths() -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for m in _REPO_PATH.finditer(doc.read_text(encoding="utf-8")):
            yield doc.name, m.group(1)


def test_every_file_the_docs_name_exists() -> None:
    paths = list(_named_paths())
    assert len(paths) > 100
    missing = sorted({f"{doc}: {p}" for doc, p in paths if p not in PLACEHOLDERS and not (REPO / p).exists()
                      and not (REPO / "envlock" / p).exists()})  # `data/sources.yaml` is envlock/data/… too
    assert missing == []


# --------------------------------------------------------------------------- commands the docs show


def _shown_commands() -> Iterator[tuple[str, str]]:
    """(doc, command) for every literal `envlock …` line of a code block and every `envlock …` in backticks; a
    synopsis (`[NAME]`, `A | B`, `…`, `<name>`) is left out: it is a pattern, not a command line."""
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        found = []
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for raw in block.splitlines():
                line = re.sub(r"^\s*\$\s*", "", raw)
                found += [part.strip() for part in re.split(r"&&", line.split("  #")[0])]
        found += re.findall(r"`(envlock [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for shown in found:
            cmd = " ".join(shown.split())
            if cmd.startswith("envlock ") and not re.search(r"[\[\]|…<>]", cmd):
                yield doc.name, cmd


def _inline_commands() -> set[str]:
    """The commands the docs name in running text (`envlock resolve --for SOURCE`: the part that matters, so a
    required option it leaves out may be missing); a code block's line is a whole command line."""
    return {" ".join(c.split()) for doc in DOCS
            for c in re.findall(r"`(envlock [^`]+)`", re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S))}


def _parse(argv: list[str]) -> None:
    """Parse a command line as `envlock` does (every option, argument and their types), running nothing."""
    root = typer.main.get_command(app)
    ctx = root.make_context("envlock", list(argv))
    cmd: Any = root
    while hasattr(cmd, "get_command"):  # a group: its command's own parse next (typer's click or click itself)
        rest = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
        if not rest:
            return
        name, *rest = rest
        sub = cmd.get_command(ctx, name)
        if sub is None:
            raise NotParsed(f"no such command {name!r}")
        if hasattr(sub, "get_command") and not rest:
            return  # `envlock export` alone: its help, exit 0 (docs/reference.md)
        ctx = sub.make_context(name, rest, parent=ctx)
        cmd = sub


class NotParsed(Exception):
    pass


def _parses(argv: list[str]) -> str | None:
    """None when `argv` parses, else the parser's message (typer vendors its own click: its exceptions are known by
    their `exit_code`, 0 for --help and --version)."""
    try:
        _parse(argv)
    except NotParsed as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - the parser's exception types are typer's or click's
        if getattr(exc, "exit_code", None) == 0:
            return None
        if hasattr(exc, "format_message"):
            return str(exc.format_message())
        raise
    return None


SHOWN = sorted(set(_shown_commands()))


def test_the_docs_show_commands() -> None:
    assert len(SHOWN) > 60 and ("doctor.md", "envlock doctor -p ~/envs/train --compile") in SHOWN


@pytest.mark.parametrize(("doc", "command"), SHOWN, ids=[f"{d}: {c[:60]}" for d, c in SHOWN])
def test_every_command_the_docs_show_parses(doc: str, command: str) -> None:
    argv = shlex.split(command)[1:]
    if "--" in argv:
        argv = argv[:argv.index("--") + 1] + ["true"]  # what runs inside `envlock run` is not envlock's
    said = _parses(argv)
    if said is not None and command in _inline_commands() and said.startswith(("Missing option", "Missing argument")):
        said = None  # a command named in running text, not a whole command line
    assert said is None, f"{doc}: `{command}` does not parse"


@pytest.mark.parametrize("command", ["envlock create --no-such-option", "envlock resolv", "envlock doctor --compile x",
                                     "envlock create -n", "envlock export dockerfile --devcontainer x y"])
def test_the_parser_refuses_what_envlock_refuses(command: str) -> None:
    """The parse above is envlock's own: it refuses a wrong command line (a parser that takes anything proves
    nothing)."""
    assert _parses(shlex.split(command)[1:])


# --------------------------------------------------------------------------- the limits table's words


def _limits_rows() -> dict[str, str]:
    """first cell -> last cell of docs/security.md's limits table."""
    text = SECURITY.read_text(encoding="utf-8")
    table = text[text.index("## Limits"):text.index("## Attack table")]
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table.splitlines() if line.startswith("| ")]
    return {r[0]: r[-1] for r in rows if len(r) == 3}


def _said(cell: str) -> str:
    """The `error: …` text a cell quotes, with its placeholders (… and N) as regular expressions."""
    (quoted,) = re.findall(r"`error: (.*?)`", cell)
    return ".*".join(re.escape(part) for part in re.split(r"…| N\b", quoted)).replace(r"line\ .*", r"line\ \d+")


def test_the_limits_table_quotes_the_errors_envlock_words() -> None:
    from envlock.errors import SpecError
    from envlock.formats.untrusted import MiB, SPEC_CAP, load_yaml, over_cap
    from envlock.errors import ArchiveError
    from envlock.usecases.unpack import _read_manifest

    rows = _limits_rows()
    spec_row = next(v for k, v in rows.items() if k.startswith("a spec"))
    assert re.fullmatch(_said(spec_row), f"x {over_cap(int(1.5 * MiB), SPEC_CAP)}"), spec_row
    alias_row = next(v for k, v in rows.items() if k.startswith("YAML aliases"))
    with pytest.raises(SpecError) as refused:
        load_yaml("a: &x [1]\nb: *x\n", "spec.yml", SpecError, hint="h", cap=SPEC_CAP)
    assert re.fullmatch(_said(alias_row), refused.value.message), (alias_row, refused.value.message)
    manifest_row = next(v for k, v in rows.items() if k.startswith("manifest fields"))
    data = json.dumps({"envlock_pack_version": 1, "members": {}, "lock": 7, "platform": "linux-64", "channels": {}})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("envlock-pack.json")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data.encode()))
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tf, pytest.raises(ArchiveError) as refused:
        _read_manifest(tf, Path("x.tar"))
    assert re.fullmatch(_said(manifest_row), refused.value.message), (manifest_row, refused.value.message)


# --------------------------------------------------------------------------- promises no other test keeps


def test_doctor_imports_neither_torch_nor_rattler(tmp_path: Path) -> None:
    """docs/doctor.md: every program runs in a subprocess; envlock imports neither torch nor rattler (doctor, and
    doctor --for SOURCE, on a toolkit folder)."""
    import subprocess
    import sys

    (tmp_path / "tk" / "bin").mkdir(parents=True)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text("#include <cuda_runtime.h>\n#include <curand.h>\n")
    code = ("import sys\nfrom envlock.cli import run\n"
            f"code = run(['doctor', '-p', {str(tmp_path / 'tk')!r}, '--for', {str(tmp_path / 'src')!r}, '--json'])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'rattler'}), code, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.stderr.strip().splitlines()[-1] == "[] 1", done.stderr  # diagnosed (errors found), nothing imported
    assert '"source.k.cu"' in done.stdout or '"source.all_sources"' in done.stdout, done.stdout[:500]


def _leaf_commands() -> dict[str, Any]:
    root = typer.main.get_command(app)
    ctx = root.make_context("envlock", [], resilient_parsing=True)
    out: dict[str, Any] = {}

    def walk(cmd: Any, path: tuple[str, ...], ctx: Any) -> None:
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                walk(sub, (*path, name), sub.make_context(name, [], parent=ctx, resilient_parsing=True))
        else:
            out[" ".join(path)] = cmd

    walk(root, (), ctx)
    return out


def _options(cmd: Any) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", ())) if o.startswith("-")}


def _bullet(doc: str, start: str) -> str:
    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    at = text.index(start)
    return " ".join(text[at:text.index("\n- ", at)].split())


def test_the_commands_reference_md_says_take_an_environment_take_p_and_n() -> None:
    said = re.findall(r"`([a-z-]+)`", _bullet("reference.md", "- **An environment**").split("every command that takes one:")[1])
    commands = _leaf_commands()
    assert said and set(said) <= set(commands)
    assert {name for name, cmd in commands.items() if {"-p", "-n"} <= _options(cmd)} == set(said)


def test_the_commands_reference_md_says_take_quiet_take_it() -> None:
    bullet = _bullet("reference.md", "- **`-q/--quiet`**").split("prints more than its result:")[1]
    bullet = re.sub(r"\([^)]*\)", "", bullet.split("no progress and no summary")[0])
    said = set(re.findall(r"`([a-z-]+)`", bullet))
    said |= {f"export {k}" for k in re.findall(r"`export\s+([a-z|]+)", bullet)[0].split("|")}
    commands = _leaf_commands()
    assert "export pixi" in said and said <= set(commands)
    assert {name for name, cmd in commands.items() if "-q" in _options(cmd)} == said - {"export"}
