"""`resolve`, `check` and `create` read a plain command line without typer (envlock/commands/fastargs.py): the same
function with the same arguments as typer would call it, and typer for every other line.

The reference is typer itself: each line below goes through a typer app whose command records the
arguments typer passes, and through fastargs.parse; they must agree wherever parse answers.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any, Callable

import pytest

from envlock.commands import create, lifecycle, resolve
from envlock.commands.fastargs import opt, parse, typer_command
from envlock.cli import run

COMMANDS: dict[str, Callable[..., Any]] = {
    "resolve": resolve.resolve_cmd, "check": lifecycle.check_cmd, "lock": lifecycle.lock_cmd,
    "update": lifecycle.update_cmd, "diff": lifecycle.diff_cmd, "create": create.create_cmd,
}  # fmt: skip


def typer_reads(name: str, words: list[str]) -> dict[str, Any] | None:
    """The keyword arguments typer calls the command with (None: typer refused the line)."""
    import typer

    typed = typer_command(COMMANDS[name])
    hints = typing.get_type_hints(COMMANDS[name])
    got: dict[str, Any] = {}

    def spy(**kwargs: Any) -> int:
        got.update(kwargs)
        return 0

    spy.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(annotation=hints[p.name]) for p in inspect.signature(typed).parameters.values()])
    spy.__annotations__ = {k: v for k, v in hints.items() if k != "return"}
    app = typer.Typer()
    app.callback()(lambda: None)
    app.command(name)(spy)
    try:
        app(args=[name, *words], prog_name="envlock", standalone_mode=False)
    except Exception as exc:  # noqa: BLE001 - click's usage errors: the line is refused
        assert "UsageError" in {c.__name__ for c in type(exc).__mro__} or "NoSuchOption" in type(exc).__name__, exc
        return None
    return got


PLAIN = [
    ("resolve", ["--torch", "2.3.0"]),
    ("resolve", ["--torch=2.3.0+cu118", "--cuda", "11.8", "--python", "3.10", "--json"]),
    ("resolve", ["--torch", "2.7.1", "--toolchain-only", "--platform", "linux-64", "--platform", "win-64",
                 "--mirror", "conda-forge=http://127.0.0.1:1/c", "--mirror=pypi=/srv/p", "--project-dir", "proj",
                 "--name", "x", "--offline", "--allow-insecure", "--timestamp", "-v"]),
    ("resolve", ["--project-dir", "a b", "--torch", "installed", "--python-exe", "/usr/bin/python3",
                 "--torch-source", "conda-forge", "--channel", "conda-forge", "--channel", "nvidia/label/x",
                 "--with", "nvtx", "--with=deepspeed", "--pip", "einops>=0.7", "--exclude-newer",
                 "2026-01-01T00:00:00Z", "--dry-run", "--verbose"]),
    ("resolve", ["--torch", ""]),  # an empty value is a value
    ("check", []),
    ("check", ["--json"]),
    ("check", ["env-a", "--project-dir", "p", "env-b"]),
    ("check", ["--project-dir=p", "only"]),
    ("lock", ["--all", "--mirror", "conda-forge=file:///m", "a"]),
    ("update", ["cuda-nvcc", "libcublas-dev", "--project-dir", "p"]),
    ("diff", ["a.yml", "b.yml"]),
    ("create", []),
    ("create", ["nv", "-p", "/tmp/e", "-q"]),
    ("create", ["--lock", "locks/nv/conda-lock.yml", "--prefix=/e", "--platform", "win-64", "--offline", "--json",
                "--mirror", "conda-forge=file:///m", "--mirror", "pypi=/w", "--project-dir", "p", "--locked",
                "--allow-insecure"]),
    ("create", ["-n", "train", "--frozen", "--quiet", "nv"]),
    ("create", ["--locked", "--frozen"]),  # both read; create_cmd's own usage error says they contradict
]
REFUSED = [
    ("resolve", []),  # --torch is required
    ("resolve", ["--help"]),
    ("resolve", ["-h"]),
    ("resolve", ["--torch"]),
    ("resolve", ["--torch", "2.3.0", "--torch", "2.4.0"]),  # given twice
    ("resolve", ["--torch", "2.3.0", "--json=yes"]),
    ("resolve", ["--torch", "2.3.0", "--bogus"]),
    ("resolve", ["--torch", "2.3.0", "extra"]),  # resolve takes no NAME
    ("resolve", ["--torch", "-1"]),  # click takes it as the value; typer's to say
    ("resolve", ["--torch", "2.3.0", "-vx"]),
    ("check", ["--project-dir"]),
    ("check", ["--", "x"]),
    ("create", ["--help"]),
    ("create", ["a", "b"]),  # one NAME at most
    ("create", ["-p"]),
    ("create", ["-p", "/a", "-p", "/b"]),
    ("create", ["-qp", "/a"]),  # a cluster of short flags: click's to read
    ("create", ["nv", "--bogus"]),
]


@pytest.mark.parametrize(("name", "words"), PLAIN, ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_a_plain_line_is_read_as_typer_reads_it(name: str, words: list[str]) -> None:
    fast = parse(COMMANDS[name], words)
    assert fast is not None, "a plain line must not need typer"
    assert fast == typer_reads(name, words)
    assert all(type(fast[k]) is type(v) for k, v in typer_reads(name, words).items())  # Path is Path, list is list


@pytest.mark.parametrize(("name", "words"), REFUSED, ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_any_other_line_is_left_to_typer(name: str, words: list[str]) -> None:
    assert parse(COMMANDS[name], words) is None


def test_every_parameter_of_every_command_is_declared_once_for_both_readers() -> None:
    """typer sees exactly the declared flags and help (what `--help` prints), the fast reader the same flags."""
    import typer.main

    for name, func in COMMANDS.items():
        app = typer.Typer()
        app.callback()(lambda: None)
        app.command(name)(typer_command(func))
        command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
        declared = {n: d for n, d in zip(func.__code__.co_varnames, func.__defaults__ or ())}
        assert {p.name for p in command.params} == set(declared)
        for p in command.params:
            assert tuple(p.opts + p.secondary_opts) == declared[p.name].flags or (not declared[p.name].flags)


def test_a_declaration_that_is_not_opt_or_arg_is_refused() -> None:
    def bad(x: str = "plain") -> int:
        return 0

    with pytest.raises(TypeError, match="not declared with opt"):
        parse(bad, [])
    assert parse(lambda y=opt("a", "--y"): 0, ["--y", "b"]) == {"y": "b"}


def _fresh_process(args: list[str], cwd: Path) -> dict[str, Any]:
    code = ("import json, sys\nfrom envlock.cli import run\nrc = run(sys.argv[1:])\n"
            "print(json.dumps({'rc': rc, 'loaded': sorted(m for m in ('typer', 'click', 'rich') if m in sys.modules)}))")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_resolve_and_check_run_without_typer_and_a_usage_error_still_gets_typer_s_words(
        test_channel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["resolve", "--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only", "--mirror",
            f"conda-forge={test_channel.as_uri()}", "--project-dir", str(tmp_path / "p")]
    assert _fresh_process(args, tmp_path) == {"rc": 0, "loaded": []}
    assert _fresh_process(["check", "--project-dir", str(tmp_path / "p")], tmp_path) == {"rc": 0, "loaded": []}
    assert _fresh_process(["create", "--project-dir", str(tmp_path / "p"), "-p", str(tmp_path / "env"), "-q",
                           "--mirror", f"conda-forge={test_channel.as_uri()}"], tmp_path) == {"rc": 0, "loaded": []}
    assert (tmp_path / "env" / "conda-meta" / "envlock").is_file()
    # The control: a line the fast reader leaves alone loads typer, and typer words the error.
    assert "typer" in _fresh_process(["check", "--project-dir"], tmp_path)["loaded"]
    assert run(["check", "--project-dir"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: option '--project-dir' requires an argument") and "hint: usage: envlock check" in err
