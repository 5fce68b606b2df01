"""Errors carry what they are about as data, and hints are made from it (issue 26 item 3).

A hint part is text, a `Retry` (the user's command changed) or a `Setting` (one input with a placeholder value);
an error raised for a request read from a spec (`lock`, `update`, `check`) says them as that spec's keys. No
module rewrites a message or a hint as text: the ast check below finds `.replace(` on one, and an error rebuilt
from another's words (`type(exc)(exc.message, ...)`), which drops its data.
"""

from __future__ import annotations

import ast
from pathlib import Path

from envlock.errors import AnchorError, EnvlockError, Setting, SolveError, SpecError, again, plain_hint

ENVLOCK = Path(__file__).resolve().parent.parent / "envlock"


def test_a_setting_is_the_option_on_a_command_line_and_the_key_in_a_spec() -> None:
    cuda = Setting("--cuda", "X.Y", "the CUDA torch was built with")
    assert plain_hint(("or ", cuda)) == "or pass the CUDA torch was built with as --cuda X.Y"
    assert plain_hint(("or ", cuda), spec="demo") == (
        "or set the CUDA torch was built with as `cuda: X.Y` in environments/demo.yml's envlock block")
    err = AnchorError("torch 9.9.9 is not in envlock's table", hint=("run once online, or ", Setting("--cuda", "X.Y")))
    assert err.hint == "run once online, or pass --cuda X.Y" and err.spec is None
    assert err.from_spec("demo") is err and err.spec == "demo"
    assert err.hint == "run once online, or set `cuda: X.Y` in environments/demo.yml's envlock block"


def test_a_retry_of_the_spec_s_inputs_is_an_edit_of_the_spec() -> None:
    retry = again("--torch", "2.3.0", "--cuda", "12.4", "--toolchain-only", drop=("--python", "--pip"))
    assert retry.in_spec("demo") == ("set `torch: 2.3.0`, `cuda: 12.4` and `toolchain_only: true` and remove "
                                     "`python` and the `- pip:` list in environments/demo.yml's envlock block")
    assert again(drop=("--torch-source",)).in_spec("demo") == "remove `torch_source` in environments/demo.yml's envlock block"
    assert again("--platform", "linux-64").in_spec("demo") is None  # not a key of the envlock block: a command
    assert again("--cuda", "12.4", command="resolve").in_spec("demo") is None
    err = SpecError("x", hint=("the release: ", again("--torch", "2.3.0"))).from_spec("demo")
    assert err.hint == "the release: set `torch: 2.3.0` in environments/demo.yml's envlock block"


def test_an_error_said_again_keeps_its_class_hint_and_data() -> None:
    err = SolveError("no CUDA toolchain solves on win-64: …", hint=("h", Setting("--cuda", "X.Y")), detail=("d",),
                     platform="win-64", package="cuda-nvcc", cause="missing", asked="nvcc", failures=("f",))
    err.from_spec("demo")
    told = err.saying("demo: " + err.message)
    assert type(told) is SolveError and told.message == str(told) == "demo: no CUDA toolchain solves on win-64: …"
    assert (told.platform, told.package, told.cause, told.asked, told.spec) == ("win-64", "cuda-nvcc", "missing", "nvcc", "demo")
    assert told.hint_parts == err.hint_parts and told.detail == ("d",) and told.failures == ("f",)
    assert err.message.startswith("no CUDA")  # the original is unchanged
    rolled = err.saying(hint="the env was restored")
    assert rolled.hint == "the env was restored" and rolled.message == err.message and rolled.platform == "win-64"


def _rewrites(tree: ast.AST) -> list[int]:
    """Lines that edit an error's words as text, or rebuild an error from another's words."""
    words = {"message", "hint", "reason"}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Attribute, ast.Call)):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "replace":
            target = func.value
            while isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute):  # a.replace().replace()
                target = target.func.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in words:
                out.append(node.lineno)
        if isinstance(func, ast.Call) and getattr(func.func, "id", "") == "type" and any(
                isinstance(a, ast.Attribute) and a.attr == "message" for a in ast.walk(node) if a is not func):
            out.append(node.lineno)
    return sorted(set(out))


def test_no_module_rewrites_an_error_s_words() -> None:
    found = {f"{p.relative_to(ENVLOCK).as_posix()}:{n}" for p in sorted(ENVLOCK.rglob("*.py"))
             for n in _rewrites(ast.parse(p.read_text(encoding="utf-8")))}
    assert found == set(), "carry the data on the error (errors.py) and make the words from it"
    control = ast.parse("t = err.message.replace(' on x', '')\nh = hint.replace('a', 'b').replace('c', 'd')\n"
                        "raise type(exc)(exc.message, hint=h)\nok = path.replace('a', 'b')\n")
    assert _rewrites(control) == [1, 2, 3]
    assert isinstance(EnvlockError("x"), Exception)
