"""Shells are a registry (envlock/seams/activation/__init__.py SHELLS): a new shell is its renderer module declaring a
`Shell` and one line in SHELLS. Here a toy shell is added that way (in-process) and every door takes it: the
lock's scripts, an env's hooks, `envlock shell-hook --shell`, its usage error's list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import envlock.seams.activation as activation
from envlock.seams.activation import ActivationSpec, Shell, hook_files, render_scripts, shell_hook, shell_names
from envlock.cli import run


def _toy() -> Shell:
    def activate(spec: ActivationSpec) -> str:
        return f"toy-activate {spec.prefix or '$CONDA_PREFIX'} {spec.torch_source}\n"

    def deactivate(spec: ActivationSpec | None) -> str:
        return "toy-deactivate\n"

    return Shell("toy", "toy", windows=False, render_activate=activate, render_deactivate=deactivate,
                 aliases=("toysh",))


@pytest.fixture
def with_toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(activation, "SHELLS", (*activation.SHELLS, _toy()))  # the one line a new shell adds


def test_the_registry_is_what_every_door_reads(with_toy: None, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert shell_names()[-2:] == ("toysh", "toy")
    scripts = render_scripts(ActivationSpec(("linux-64",)))
    assert scripts["activate.toy"] == "toy-activate $CONDA_PREFIX pip\n" and "deactivate.toy" in scripts
    assert "activate.toy" not in render_scripts(ActivationSpec(("win-64",)))  # a linux shell
    hooks = hook_files("linux-64", "/opt/env")
    assert hooks["etc/conda/activate.d/envlock-cuda.toy"] == "toy-activate /opt/env pip\n"
    assert shell_hook("toysh", "linux-64", "/opt/env", deactivate=True) == "toy-deactivate\n"
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "envlock").write_text(json.dumps({"platform": "linux-64"}))
    assert run(["shell-hook", "-p", str(prefix), "--shell", "toy"]) == 0
    assert capsys.readouterr().out == f"toy-activate {prefix} pip\n"  # no conda step: envlock's own hook


def test_an_unknown_shell_is_a_usage_error_listing_the_registry(with_toy: None,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["shell-hook", "-p", "/nonexistent", "--shell", "tcsh"]) == 2
    err = " ".join(capsys.readouterr().err.split())  # error and hint lines are folded to 80 columns
    assert "--shell 'tcsh' is not a shell envlock writes for (bash, zsh, sh, fish, powershell, cmd, toysh, toy)" in err
    assert "--shell toysh, --shell toy" in err  # the hint names each as the option to pass


def test_the_shipped_shells() -> None:
    assert shell_names() == ("bash", "zsh", "sh", "fish", "powershell", "cmd")
    assert set(render_scripts(ActivationSpec(("linux-64", "win-64")))) == {
        f"{kind}.{ext}" for kind in ("activate", "deactivate") for ext in ("sh", "ps1", "bat")}
    assert {Path(p).suffix for p in hook_files("linux-64", "/p")} == {".sh", ".fish"}
    assert {Path(p).suffix for p in hook_files("win-64", "C:\\p")} == {".ps1", ".bat"}
