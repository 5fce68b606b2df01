"""activate.bat / deactivate.bat for cmd.exe (the rules: envlock/seams/activation/model.py; lists use ';').

No ( ) blocks: a ')' in an expanded value ("Program Files (x86)") would end a block early, so every
branch is a `goto` over the lines it skips. List membership and removal use cmd's substitution
(`%VAR:;entry;=%`) through `call set`, which compares case-insensitively, as Windows does. A prefix
holding '%' or '=' cannot be matched that way (cmd's substitution syntax has no escape).
No cmd.exe can run on the machines that test envlock: these are checked as golden files.
"""

from __future__ import annotations

from envlock.seams.activation.model import (
    ACTIVE,
    CHANGED,
    OLD,
    SET,
    ActivationSpec,
    EnvOp,
    Shell,
    bookkeeping,
    changed_vars,
    env_ops,
    norm_prefix,
    undo_kinds,
)
from envlock.seams.activation.sh import prefix_note


def bat_literal(text: str) -> str:
    """A literal for `set "VAR=..."` in a .bat file ('%' doubled; Windows paths cannot hold '"')."""
    if '"' in text or not text.isprintable():
        from envlock.errors import UnsafeNameError

        raise UnsafeNameError(f"not a valid Windows path for cmd.exe: {text!r}", hint="choose a path without it")
    return text.replace("%", "%%")


def _path(rel: str) -> str:
    return "%_ENVLOCK_P%" if not rel else "%_ENVLOCK_P%\\" + rel.replace("/", "\\")


class _Labels:
    def __init__(self, stem: str) -> None:
        self.stem, self.n = stem, 0

    def next(self) -> str:
        self.n += 1
        return f"envlock_{self.stem}{self.n}"


def _op(op: EnvOp, labels: _Labels) -> list[str]:
    var, skip = op.var, labels.next()
    lines = [f'@set "_ENVLOCK_T={_path(op.rel)}"']
    if op.action == "set":
        # %X% of an undefined X is empty in a .bat: `set "OLD="` then records "was unset".
        return [*lines, f'@if /i "%{var}%"=="%_ENVLOCK_T%" goto :{skip}', f'@set "{OLD}{var}=%{var}%"',
                f'@set "{SET}{var}=%_ENVLOCK_T%"', f'@set "{var}=%_ENVLOCK_T%"', f":{skip}"]
    if op.action != "prepend":
        raise ValueError(f"cmd renders prepends only, not {op.action} of {var}")
    mark = bookkeeping(var, op.action)
    return [
        *lines,
        # An entry already in the list (conda's own Library\bin) is not ours: leave it, record nothing.
        f'@set "_ENVLOCK_W=;%{var}%;"',
        '@call set "_ENVLOCK_X=%%_ENVLOCK_W:;%_ENVLOCK_T%;=%%"',
        f'@if not "%_ENVLOCK_X%"=="%_ENVLOCK_W%" goto :{skip}',
        f'@if defined {var} set "{var}=%_ENVLOCK_T%;%{var}%"',
        f'@if not defined {var} set "{var}=%_ENVLOCK_T%"',
        f'@if defined {mark} set "{mark}=%{mark}%;%_ENVLOCK_T%"',
        f'@if not defined {mark} set "{mark}=%_ENVLOCK_T%"',
        f":{skip}",
    ]


def restore_lines(labels: _Labels) -> list[str]:
    """Undo whatever envlock's activation recorded (generic: it reads only the bookkeeping variables)."""
    lines: list[str] = []
    kinds = undo_kinds(True)
    for var, actions in kinds.items():
        for action in actions:
            mark, skip = bookkeeping(var, action), labels.next()
            if action == "set":
                lines += [
                    f"@if not defined {mark} goto :{skip}",
                    f'@if /i not "%{var}%"=="%{mark}%" goto :{skip}',
                    f'@set "{var}=%{OLD}{var}%"',
                    f":{skip}",
                ]
                continue
            # Windows activations add one entry per list: remove its first occurrence. Everything after it
            # is R (`*;entry;` cuts up to it); everything before it is what is left when ";entry;R" is cut.
            lines += [
                f"@if not defined {mark} goto :{skip}",
                f"@if not defined {var} goto :{skip}",
                f'@set "_ENVLOCK_W=;%{var}%;"',
                f'@call set "_ENVLOCK_R=%%_ENVLOCK_W:*;%{mark}%;=%%"',
                f'@if "%_ENVLOCK_R%"=="%_ENVLOCK_W%" goto :{skip}',
                f'@call set "_ENVLOCK_B=%%_ENVLOCK_W:;%{mark}%;%_ENVLOCK_R%=%%"',
                f'@set "{var}=%_ENVLOCK_B%;%_ENVLOCK_R%"',
                f'@if "%{var}:~0,1%"==";" set "{var}=%{var}:~1%"',
                f'@if defined {var} if "%{var}:~-1%"==";" set "{var}=%{var}:~0,-1%"',
                f":{skip}",
            ]
    marks = sorted({bookkeeping(v, a) for v, acts in kinds.items() for a in acts})
    olds = sorted({OLD + v for v, acts in kinds.items() if "set" in acts})
    temps = ["_ENVLOCK_W", "_ENVLOCK_R", "_ENVLOCK_B"]
    return lines + [f'@set "{n}="' for n in [*marks, *olds, CHANGED, ACTIVE, *temps]]


def render_activate(spec: ActivationSpec) -> str:
    """activate.bat (`call activate.bat [PREFIX]`)."""
    ops = env_ops("win-64", spec.torch_source, spec.has_cudnn)
    if spec.prefix is not None:
        prefix_lines = [f'@set "_ENVLOCK_P={bat_literal(norm_prefix(spec.prefix, True))}"']
    elif spec.conda_prefix_only:  # pixi calls a manifest's scripts with CONDA_PREFIX set to its env
        prefix_lines = [
            '@set "_ENVLOCK_P=%CONDA_PREFIX%"',
            "@if not defined _ENVLOCK_P goto :envlock_noprefix",
            '@if "%_ENVLOCK_P:~-1%"=="\\" set "_ENVLOCK_P=%_ENVLOCK_P:~0,-1%"',
            '@if not exist "%_ENVLOCK_P%\\conda-meta\\" goto :envlock_noprefix',
        ]
    else:
        prefix_lines = [
            '@set "_ENVLOCK_P=%~1"',
            '@if not defined _ENVLOCK_P set "_ENVLOCK_P=%ENVLOCK_PREFIX%"',
            '@if not defined _ENVLOCK_P set "_ENVLOCK_P=%CONDA_PREFIX%"',
            "@if not defined _ENVLOCK_P goto :envlock_noprefix",
            '@if "%_ENVLOCK_P:~-1%"=="\\" set "_ENVLOCK_P=%_ENVLOCK_P:~0,-1%"',
            '@if not exist "%_ENVLOCK_P%\\conda-meta\\" goto :envlock_noprefix',
        ]
    labels = _Labels("a")
    changed = [line for v in changed_vars(ops) for line in (
        f'@if defined {SET}{v} set "_ENVLOCK_V=%_ENVLOCK_V% {v}"',
        *[f'@if defined {bookkeeping(v, a)} set "_ENVLOCK_V=%_ENVLOCK_V% {v}"'
          for a in ("prepend",) if any(o.var == v and o.action == a for o in ops)],
    )]
    lines = [
        "@REM envlock: activate the CUDA toolchain of a conda environment (cmd.exe: call this file).",
        "@REM Generated by envlock; do not edit. Undo with the matching deactivate script.",
        "@REM " + prefix_note(spec, "the first argument (call activate.bat PREFIX)").lstrip("# "),
        "@REM Windows: CUDA_HOME/CUDA_PATH = PREFIX\\Library; Library\\bin on PATH, Library\\include on INCLUDE,",
        "@REM Library\\lib on LIB. Changes only what differs; deactivation restores a variable only if it still",
        "@REM holds the value set here and removes exactly the list entries added here.",
        *prefix_lines,
        f'@if "%{ACTIVE}%"=="%_ENVLOCK_P%" goto :envlock_end',
        f"@if defined {ACTIVE} call :envlock_restore",
        *[line for op in ops for line in _op(op, labels)],
        '@set "_ENVLOCK_V="',
        *changed,
        f'@if defined _ENVLOCK_V set "{CHANGED}=%_ENVLOCK_V:~1%"',
        f'@set "{ACTIVE}=%_ENVLOCK_P%"',
        ":envlock_end",
        '@set "_ENVLOCK_P="',
        '@set "_ENVLOCK_T="',
        '@set "_ENVLOCK_V="',
        '@set "_ENVLOCK_W="',
        '@set "_ENVLOCK_X="',
        "@goto :eof",
        ":envlock_restore",
        *restore_lines(_Labels("r")),
        "@goto :eof",
    ]
    if spec.prefix is None:
        lines += [
            ":envlock_noprefix",
            "@echo envlock: activate.bat: no conda environment at CONDA_PREFIX (pixi sets it before it calls this"
            " file) 1>&2" if spec.conda_prefix_only else
            "@echo envlock: activate.bat: no conda environment; pass the prefix: call activate.bat PREFIX"
            " (or set ENVLOCK_PREFIX) 1>&2",
            '@set "_ENVLOCK_P="',
            "@exit /b 1",
        ]
    return "\r\n".join(lines) + "\r\n"


def render_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.bat."""
    lines = [
        "@REM envlock: undo the CUDA toolchain activation (cmd.exe: call this file).",
        "@REM Generated by envlock; do not edit. Restores only what still holds the value the activation set",
        "@REM and removes only the list entries it added.",
        f"@if not defined {ACTIVE} goto :eof",
        *restore_lines(_Labels("d")),
    ]
    return "\r\n".join(lines) + "\r\n"


SHELL = Shell("cmd", "bat", windows=True, render_activate=render_activate, render_deactivate=render_deactivate)
