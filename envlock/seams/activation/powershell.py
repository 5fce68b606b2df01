"""activate.ps1 / deactivate.ps1 (the rules: envlock/seams/activation/model.py; Windows lists use ';').

PowerShell compares strings case-insensitively, as Windows paths are compared. Windows has no empty
variables (setting one to '' removes it), so a list emptied by deactivation is removed.
No PowerShell can run on the machines that test envlock: these are checked as golden files.
"""

from __future__ import annotations

from envlock.seams.activation.model import (
    ACTIVE,
    APPENDED,
    CHANGED,
    OLD,
    PREPENDED,
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
from envlock.seams.activation.sh import indent, prefix_note


#: PowerShell ends a single-quoted string at any of these (its tokenizer's IsSingleQuote), not only at '.
_PS_QUOTES = ("'", "\u2018", "\u2019", "\u201a", "\u201b")


def ps_quote(text: str) -> str:
    """Single-quote for PowerShell (nothing expands): every character PowerShell takes for a single quote, the
    typographic ones included, is doubled."""
    for q in _PS_QUOTES:
        text = text.replace(q, q + q)
    return "'" + text + "'"


def _path(rel: str) -> str:
    return '"$_envlock_p"' if not rel else '"$_envlock_p\\' + rel.replace("/", "\\") + '"'


def _op(op: EnvOp) -> list[str]:
    value, var = _path(op.rel), op.var
    if op.action == "set":
        return [
            f"if ($env:{var} -ne {value}) {{",
            f"    if ($null -ne $env:{var}) {{ $env:{OLD}{var} = $env:{var} }} "
            f"else {{ Remove-Item Env:\\{OLD}{var} -ErrorAction SilentlyContinue }}",
            f"    $env:{SET}{var} = {value}; $env:{var} = {value}",
            "}",
        ]
    mark = bookkeeping(var, op.action)
    new = f'{value[:-1]};$env:{var}"' if op.action == "prepend" else f'"$env:{var};{value[1:]}'
    return [
        # An entry already in the list (conda's own Library\bin) is not ours: leave it, record nothing.
        f"if (-not (($env:{var} -split ';') -contains {value})) {{",
        f"    if ($env:{var}) {{ $env:{var} = {new} }} else {{ $env:{var} = {value} }}",
        f'    if ($env:{mark}) {{ $env:{mark} = "$env:{mark};{value[1:]} }} else {{ $env:{mark} = {value} }}',
        "}",
    ]


def restore_lines() -> list[str]:
    """Undo whatever envlock's activation recorded (generic: it reads only the bookkeeping variables)."""
    lines: list[str] = []
    kinds = undo_kinds(True)
    for var, actions in kinds.items():
        for action in actions:
            mark = bookkeeping(var, action)
            if action == "set":
                lines += [
                    f"if ($null -ne $env:{mark} -and $env:{var} -eq $env:{mark}) {{",
                    f"    if ($null -ne $env:{OLD}{var}) {{ $env:{var} = $env:{OLD}{var} }} "
                    f"else {{ Remove-Item Env:\\{var} -ErrorAction SilentlyContinue }}",
                    "}",
                ]
                continue
            step = "for ($j = $_envlock_l.Count - 1; $j -ge 0; $j--)" if action == "append" else \
                "for ($j = 0; $j -lt $_envlock_l.Count; $j++)"
            lines += [
                f"if ($null -ne $env:{mark} -and $null -ne $env:{var}) {{",
                f"    $_envlock_l = [System.Collections.Generic.List[string]]($env:{var} -split ';')",
                f"    foreach ($_envlock_e in ($env:{mark} -split ';')) {{",
                f"        {step} {{",
                "            if ($_envlock_l[$j] -eq $_envlock_e) { $_envlock_l.RemoveAt($j); break }",
                "        }",
                "    }",
                f"    if ($_envlock_l.Count -gt 0 -and ($_envlock_l -join ';')) {{ $env:{var} = $_envlock_l -join ';' }} "
                f"else {{ Remove-Item Env:\\{var} -ErrorAction SilentlyContinue }}",
                "}",
            ]
    marks = sorted({bookkeeping(v, a) for v, acts in kinds.items() for a in acts})
    olds = sorted({OLD + v for v, acts in kinds.items() if "set" in acts})
    names = ", ".join(f"Env:\\{n}" for n in [*marks, *olds, CHANGED, ACTIVE])
    return lines + [
        f"Remove-Item {names} -ErrorAction SilentlyContinue",
        "Remove-Variable _envlock_l, _envlock_e, j -ErrorAction SilentlyContinue",
    ]


def render_activate(spec: ActivationSpec) -> str:
    """activate.ps1 (dot-source it: `. .\\activate.ps1 [PREFIX]`)."""
    ops = env_ops("win-64", spec.torch_source, spec.has_cudnn)
    if spec.prefix is not None:
        prefix_lines = [f"$_envlock_p = {ps_quote(norm_prefix(spec.prefix, True))}"]
    else:
        prefix_lines = [
            "$_envlock_p = if ($args.Count -ge 1) { [string]$args[0] } elseif ($env:ENVLOCK_PREFIX) "
            "{ $env:ENVLOCK_PREFIX } else { $env:CONDA_PREFIX }",
            "if (-not $_envlock_p -or -not (Test-Path -LiteralPath (Join-Path $_envlock_p 'conda-meta'))) {",
            "    Write-Error \"envlock: activate.ps1: no conda environment at '$_envlock_p'; pass the prefix:"
            " . .\\activate.ps1 PREFIX (or set ENVLOCK_PREFIX)\"",
            "    return",
            "}",
            "$_envlock_p = $_envlock_p.TrimEnd('\\')",
        ]
    names = changed_vars(ops)
    body = [
        f"if ($null -ne $env:{ACTIVE}) {{",
        *indent(restore_lines()),
        "}",
        *[line for op in ops for line in _op(op)],
        "$_envlock_v = @(" + ", ".join(ps_quote(v) for v in names) + ") | Where-Object {",
        f"    (Test-Path \"Env:\\{SET}$_\") -or (Test-Path \"Env:\\{PREPENDED}$_\") -or (Test-Path \"Env:\\{APPENDED}$_\")",
        "}",
        f"if ($_envlock_v) {{ $env:{CHANGED} = $_envlock_v -join ' ' }}",
        f"$env:{ACTIVE} = $_envlock_p",
        "Remove-Variable _envlock_v -ErrorAction SilentlyContinue",
    ]
    lines = [
        "# envlock: activate the CUDA toolchain of a conda environment (PowerShell: dot-source this file).",
        "# Generated by envlock; do not edit. Undo with the matching deactivate script.",
        prefix_note(spec, "the first argument (. .\\activate.ps1 PREFIX)"),
        "# Windows: CUDA_HOME/CUDA_PATH = <prefix>\\Library; Library\\bin on PATH, Library\\include on INCLUDE,",
        "# Library\\lib on LIB. Changes only what differs; deactivation restores a variable only if it still",
        "# holds the value set here and removes exactly the list entries added here.",
        *prefix_lines,
        f"if ($env:{ACTIVE} -ne $_envlock_p) {{",
        *indent(body),
        "}",
        "Remove-Variable _envlock_p -ErrorAction SilentlyContinue",
    ]
    return "\r\n".join(lines) + "\r\n"


def render_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.ps1."""
    lines = [
        "# envlock: undo the CUDA toolchain activation (PowerShell: dot-source this file).",
        "# Generated by envlock; do not edit. Restores only what still holds the value the activation set and",
        "# removes only the list entries it added.",
        f"if ($null -ne $env:{ACTIVE}) {{",
        *indent(restore_lines()),
        "}",
    ]
    return "\r\n".join(lines) + "\r\n"


SHELL = Shell("powershell", "ps1", windows=True, render_activate=render_activate,
              render_deactivate=render_deactivate)
