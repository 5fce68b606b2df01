"""The request read once (issue 26 item 5): resolve's --torch (with its +label), --cuda, --torch-source, the
platforms and channels, and a spec's envlock block, are parsed by one function each (envlock/resolve/asked.py)
into a frozen Asked; the command, the anchor's sources, the anchor and the spec written take it.

Before: the command parsed --torch and --cuda, then resolve() parsed them again, split --torch on '+' for the
mirror check, and checked the platforms twice (resolve and the spec it wrote); `lock` read a spec's torch twice.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter
from pathlib import Path

import pytest

import envlock.core.anchor
from envlock.errors import AnchorError, SpecError, UsageError
from envlock.usecases.resolve import asked as asked_module
from envlock.usecases.resolve import of_request, of_spec
from tests.lockproject import cli

ENVLOCK = Path(__file__).resolve().parent.parent / "envlock"
READERS = ("read_torch", "parse_cuda", "check_platforms", "check_torch_source")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each reader of a request's inputs runs (the real functions, counted)."""
    seen: Counter[str] = Counter()

    def counted(name: str, real):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            seen[name] += 1
            return real(*args, **kwargs)
        return wrapper

    for name in ("read_torch", "parse_cuda"):
        monkeypatch.setattr(envlock.core.anchor, name, counted(name, getattr(envlock.core.anchor, name)))
    for name in ("check_platforms", "check_torch_source"):
        monkeypatch.setattr(asked_module, name, counted(name, getattr(asked_module, name)))
    return seen


def test_resolve_reads_each_input_once(tmp_path: Path, capsys: pytest.CaptureFixture[str], calls: Counter[str]) -> None:
    code, out, err = cli(capsys, "resolve", "--torch", "2.3.0+cu121", "--cuda", "12.1", "--toolchain-only",
                         "--platform", "linux-64", "--platform", "win-64", "--platform", "linux-64",
                         "--dry-run", "--project-dir", str(tmp_path))
    assert code == 0, err
    assert calls == {"read_torch": 1, "parse_cuda": 1, "check_platforms": 1, "check_torch_source": 1}, calls


def test_the_asked_is_frozen_and_holds_what_was_read() -> None:
    asked = of_request(" 2.3.0+cu121 ", cuda="12.01", platforms=("win-64", "linux-64", "win-64"))
    assert (asked.torch.text, str(asked.torch.version), asked.label) == ("2.3.0+cu121", "2.3.0", "cu121")
    assert asked.cuda == "12.1" and asked.torch_source == "pip" and asked.platforms == ("win-64", "linux-64")
    assert asked.channel_names == ("conda-forge",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        asked.cuda = "11.8"  # type: ignore[misc]  # frozen: what flows down cannot be changed on the way
    with pytest.raises(UsageError, match="is not a torch source"):
        of_request("2.3.0", torch_source="conda")
    with pytest.raises(SpecError, match="not a full torch release"):
        of_request("2.3")
    with pytest.raises(AnchorError, match="macOS"):
        of_request("2.3.0", platforms=("osx-arm64",))


def test_a_spec_is_read_by_of_spec() -> None:
    from envlock.formats.spec import parse_spec

    spec = parse_spec("name: x\nenvlock: {torch: '2.7.1+cu128', cuda: '12.8', torch_source: pip}\n")
    asked = of_spec(spec)
    assert (asked.torch.text, asked.label, asked.cuda, asked.platforms) == ("2.7.1+cu128", "cu128", "12.8", ("linux-64",))


def test_only_asked_py_parses_a_request_s_inputs() -> None:
    """No other module calls the readers (anchor.py defines two of them; formats/spec.py's reader checks a spec's
    torch_source as it reads the file, create's --torch-source is its own option)."""
    allowed = {("asked.py", name) for name in READERS} | {("spec.py", "check_torch_source"), ("create.py", "check_torch_source")}
    found = []
    for path in sorted(ENVLOCK.rglob("*.py")):  # by file name: the layout move (item 9) may change the folders
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if name in READERS and (path.name, name) not in allowed:
                    found.append(f"{path.relative_to(ENVLOCK).as_posix()}:{node.lineno} {name}")
    assert found == []
    assert (asked_module.__file__ or "").endswith("asked.py")
