"""Activation of a CUDA toolchain prefix: scripts per shell, and the same logic applied in Python.

PURE: values in, text (or a new environment mapping) out; no I/O. One list of operations
(`env_ops`) drives every renderer and `activate_environ`, so the shells and `envlock run` agree.

What activation does (facts §9): `CUDA_HOME`/`CUDA_PATH` → the prefix (`<prefix>\\Library` on
Windows, where torch looks for `bin\\nvcc.exe` and `include`); `<prefix>/bin` on `PATH`; the
`targets/<arch>/include` dir on `CPATH` and in `CUDA_INC_PATH` (conda-forge's CUDA 12+ headers are
not in `<prefix>/include`, and torch's cpp_extension reads `CUDA_INC_PATH`); the lib dirs on
`LIBRARY_PATH` and `LD_LIBRARY_PATH`, APPENDED when torch comes from pip (its bundled CUDA libraries
must keep winning, facts §9.5) and PREPENDED for conda-forge's pytorch; `CUDNN_HOME` when cuDNN is
locked. Every changed variable is saved in `_ENVLOCK_OLD_<VAR>` and restored exactly on
deactivation (unset stays unset); `_ENVLOCK_PREFIX` marks the active prefix, so a second activation
of the same prefix changes nothing and activating another prefix first restores the old values.

envlock leaves `CC`, `CXX` and `NVCC_PREPEND_FLAGS` alone: they belong to conda-forge's compiler and
cuda-nvcc activation. torch adds `-ccbin $CC` on top of cuda-nvcc's `NVCC_PREPEND_FLAGS=-ccbin=$CXX`;
nvcc 13.0 (measured) warns "incompatible redefinition for option 'compiler-bindir'" and uses the
last one (torch's `$CC`), and is silent when both name the same compiler, so nothing needs fixing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from envlock.models import TorchSource

Shell = Literal["bash", "zsh", "sh", "fish", "powershell", "cmd"]
SHELLS: tuple[str, ...] = ("bash", "zsh", "sh", "fish", "powershell", "cmd")
Action = Literal["set", "prepend", "append"]

#: conda-forge's `targets/<name>` per linux subdir (facts §9.1).
TARGETS: dict[str, str] = {"linux-64": "x86_64-linux", "linux-aarch64": "sbsa-linux", "linux-ppc64le": "ppc64le-linux"}
#: Every variable envlock may change, per OS family (deactivation handles all of them).
POSIX_VARS: tuple[str, ...] = (
    "CUDA_HOME", "CUDA_PATH", "PATH", "CUDA_INC_PATH", "CPATH", "LIBRARY_PATH", "LD_LIBRARY_PATH", "CUDNN_HOME",
)
WINDOWS_VARS: tuple[str, ...] = ("CUDA_HOME", "CUDA_PATH", "PATH", "INCLUDE", "LIB", "CUDNN_HOME")
ACTIVE = "_ENVLOCK_PREFIX"  # the prefix currently activated by envlock
CHANGED = "_ENVLOCK_VARS"  # space-separated names of the variables the activation changed
OLD = "_ENVLOCK_OLD_"  # _ENVLOCK_OLD_<VAR>: the value before activation (absent: it was unset)
_TARGETS_TOKEN = "{targets}"
_HOOK_NAME = "envlock-cuda"


@dataclass(frozen=True, slots=True)
class EnvOp:
    """One change to one variable; `rel` is a '/'-separated path below the prefix ('' = the prefix)."""

    var: str
    action: Action
    rel: str


@dataclass(frozen=True, slots=True)
class ActivationSpec:
    """What the scripts depend on.

    platforms: the lock's platforms (sh/fish scripts cover the linux ones, ps1/bat cover win-64).
    prefix: fixed path (installed hooks, shell-hook), or None: taken at activation time from the
    first argument, else `$ENVLOCK_PREFIX`, else `$CONDA_PREFIX` (the scripts in locks/<name>/).
    """

    platforms: tuple[str, ...]
    torch_source: TorchSource = "pip"
    has_cudnn: bool = False
    prefix: str | None = None


def is_windows(platform: str) -> bool:
    """True for win-* subdirs."""
    return platform.startswith("win-")


def env_ops(platform: str, torch_source: str = "pip", has_cudnn: bool = False) -> tuple[EnvOp, ...]:
    """The activation of one platform as ordered operations (the single source of truth)."""
    if is_windows(platform):
        ops = [
            EnvOp("CUDA_HOME", "set", "Library"),
            EnvOp("CUDA_PATH", "set", "Library"),
            EnvOp("PATH", "prepend", "Library/bin"),
            EnvOp("INCLUDE", "prepend", "Library/include"),
            EnvOp("LIB", "prepend", "Library/lib"),
        ]
        if has_cudnn:
            ops.append(EnvOp("CUDNN_HOME", "set", "Library"))
        return tuple(ops)
    # pip torch finds its own CUDA libs through RPATH; the env's older libs must come after them.
    libs: Action = "prepend" if torch_source == "conda-forge" else "append"
    target = f"targets/{_TARGETS_TOKEN}"
    lib_dirs = ["lib", f"{target}/lib", f"{target}/lib/stubs"]  # stubs last: link-time libcuda.so only
    ops = [
        EnvOp("CUDA_HOME", "set", ""),
        EnvOp("CUDA_PATH", "set", ""),
        EnvOp("PATH", "prepend", "bin"),
        EnvOp("CUDA_INC_PATH", "set", f"{target}/include"),
        EnvOp("CPATH", "prepend", f"{target}/include"),
    ]
    # Prepending one at a time reverses the order, so prepend the list back to front.
    ordered = lib_dirs if libs == "append" else list(reversed(lib_dirs))
    ops += [EnvOp("LIBRARY_PATH", libs, d) for d in ordered]
    ops.append(EnvOp("LD_LIBRARY_PATH", libs, "lib"))
    if has_cudnn:
        ops.append(EnvOp("CUDNN_HOME", "set", ""))
    return tuple(ops)


def changed_vars(ops: tuple[EnvOp, ...]) -> tuple[str, ...]:
    """The variables `ops` change, in first-use order."""
    return tuple(dict.fromkeys(op.var for op in ops))


# --------------------------------------------------------------------------- Python (envlock run)


def _join(prefix: str, rel: str, windows: bool) -> str:
    if not rel:
        return prefix
    return prefix + "\\" + rel.replace("/", "\\") if windows else prefix + "/" + rel


def _norm_prefix(prefix: str, windows: bool) -> str:
    stripped = prefix.rstrip("\\/" if windows else "/")
    return stripped or prefix


def deactivate_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` with envlock's activation undone (unchanged when none is active)."""
    env = dict(environ)
    if ACTIVE not in env:
        return env
    for var in env.get(CHANGED, "").split():
        old = env.pop(OLD + var, None)
        if old is None:
            env.pop(var, None)
        else:
            env[var] = old
    env.pop(CHANGED, None)
    env.pop(ACTIVE, None)
    return env


def activate_environ(
    environ: Mapping[str, str],
    prefix: str,
    platform: str,
    *,
    torch_source: str = "pip",
    has_cudnn: bool = False,
) -> dict[str, str]:
    """A copy of `environ` as the activation scripts leave it (bookkeeping variables included)."""
    windows = is_windows(platform)
    prefix = _norm_prefix(prefix, windows)
    if environ.get(ACTIVE) == prefix:
        return dict(environ)
    env = deactivate_environ(environ)
    ops = env_ops(platform, torch_source, has_cudnn)
    names = changed_vars(ops)
    for var in names:
        if var in env:
            env[OLD + var] = env[var]
        else:
            env.pop(OLD + var, None)
    env[CHANGED] = " ".join(names)
    sep = ";" if windows else ":"
    targets = TARGETS.get(platform, "")
    for op in ops:
        value = _join(prefix, op.rel.replace(_TARGETS_TOKEN, targets), windows)
        current = env.get(op.var, "")
        if op.action == "set":
            env[op.var] = value
        elif value in current.split(sep) and not windows:
            # already there (conda puts <prefix>/bin on PATH itself). cmd.exe cannot test list
            # membership safely, so Windows always adds; the _ENVLOCK_PREFIX guard still makes a
            # second activation a no-op there.
            continue
        elif not current:
            env[op.var] = value
        elif op.action == "prepend":
            env[op.var] = value + sep + current
        else:
            env[op.var] = current + sep + value
    env[ACTIVE] = prefix
    return env


# --------------------------------------------------------------------------- POSIX sh (bash, zsh, dash)


def sh_quote(text: str) -> str:
    """Single-quote for POSIX sh: nothing inside is expanded."""
    return "'" + text.replace("'", "'\\''") + "'"


def _sh_path(rel: str, targets: str) -> str:
    """The path as it goes inside double quotes (the prefix comes from $_envlock_p, never re-parsed)."""
    rel = rel.replace(_TARGETS_TOKEN, targets)
    return "$_envlock_p" if not rel else f"$_envlock_p/{rel}"


def _sh_op(op: EnvOp, targets: str) -> list[str]:
    value = _sh_path(op.rel, targets)
    var = op.var
    if op.action == "set":
        return [f'export {var}="{value}"']
    new = f"{value}${{{var}:+:${var}}}" if op.action == "prepend" else f"${{{var}:+${var}:}}{value}"
    # The case test keeps an entry that is already there (the quoted value matches literally).
    return [f'case ":${{{var}:-}}:" in *:"{value}":*) ;; *) export {var}="{new}" ;; esac']


def _sh_restore(all_vars: tuple[str, ...]) -> list[str]:
    lines = []
    for var in all_vars:
        lines += [
            f'case " ${{{CHANGED}:-}} " in *" {var} "*)',
            f'    if [ -n "${{{OLD}{var}+x}}" ]; then export {var}="${OLD}{var}"; else unset {var}; fi',
            f"    unset {OLD}{var} ;;",
            "esac",
        ]
    return lines + [f"unset {CHANGED} {ACTIVE}"]


def _sh_prefix_lines(spec: ActivationSpec, script: str) -> list[str]:
    if spec.prefix is not None:
        return [f"_envlock_p={sh_quote(_norm_prefix(spec.prefix, False))}"]
    return [
        '_envlock_p="${1:-${ENVLOCK_PREFIX:-${CONDA_PREFIX:-}}}"',
        'case "$_envlock_p" in */) _envlock_p="${_envlock_p%/}" ;; esac',
        'if [ -z "$_envlock_p" ] || [ ! -d "$_envlock_p/conda-meta" ]; then',
        f'    echo "envlock: {script}: no conda environment at \'$_envlock_p\'; pass the prefix:'
        f' . {script} PREFIX (or set ENVLOCK_PREFIX, or activate the env with conda first)" >&2',
        "    unset _envlock_p",
        "    return 1 2>/dev/null || exit 1",
        "fi",
    ]


def _sh_targets_lines(linux: list[str]) -> tuple[list[str], str]:
    if len(linux) == 1:
        return [], TARGETS.get(linux[0], "x86_64-linux")
    # A lock for several linux platforms: the machine that activates decides.
    arms = [f"    {pat}) _envlock_t={TARGETS[p]} ;;" for p, pat in (
        ("linux-aarch64", "aarch64|arm64"), ("linux-ppc64le", "ppc64le")) if p in linux]
    return ['case "$(uname -m 2>/dev/null)" in', *arms, "    *) _envlock_t=x86_64-linux ;;", "esac"], "$_envlock_t"


def _indent(lines: list[str], n: int = 4) -> list[str]:
    return [(" " * n + line) if line else line for line in lines]


def _sources_note(spec: ActivationSpec) -> str:
    if spec.torch_source == "conda-forge":
        return "# torch from conda-forge: the env's lib dirs are PREPENDED to LD_LIBRARY_PATH and LIBRARY_PATH."
    return ("# torch from pip: the env's lib dirs are APPENDED to LD_LIBRARY_PATH and LIBRARY_PATH, so torch's own\n"
            "# bundled CUDA libraries keep winning (an older libnvJitLink first breaks `import torch`).")


def _prefix_note(spec: ActivationSpec, how: str) -> str:
    if spec.prefix is not None:
        return "# Prefix: fixed (the environment this file was made for)."
    return f"# Prefix: {how}, else $ENVLOCK_PREFIX, else $CONDA_PREFIX."


def render_sh_activate(spec: ActivationSpec) -> str:
    """activate.sh for bash, zsh and dash (`source` / `.` it; safe under `set -u`)."""
    linux = [p for p in spec.platforms if not is_windows(p)] or ["linux-64"]
    targets_lines, targets = _sh_targets_lines(linux)
    ops = env_ops(linux[0], spec.torch_source, spec.has_cudnn)
    body = [
        f'if [ -n "${{{ACTIVE}+x}}" ]; then',
        *_indent(_sh_restore(POSIX_VARS)),
        "fi",
        *[f'if [ -n "${{{v}+x}}" ]; then export {OLD}{v}="${v}"; else unset {OLD}{v}; fi' for v in changed_vars(ops)],
        f"export {CHANGED}={sh_quote(' '.join(changed_vars(ops)))}",
        *[line for op in ops for line in _sh_op(op, targets)],
        f'export {ACTIVE}="$_envlock_p"',
    ]
    lines = [
        "# envlock: activate the CUDA toolchain of a conda environment (bash, zsh, sh: source this file).",
        "# Generated by envlock; do not edit. Undo with the matching deactivate script.",
        _prefix_note(spec, "the first argument (. activate.sh PREFIX in bash and zsh; POSIX sh's `.` takes none)"),
        _sources_note(spec),
        *_sh_prefix_lines(spec, "activate.sh"),
        *targets_lines,
        "# Already active for this prefix: sourcing again changes nothing.",
        f'if [ "${{{ACTIVE}:-}}" != "$_envlock_p" ]; then',
        *_indent(body),
        "fi",
        "unset _envlock_p" + (" _envlock_t" if targets_lines else ""),
    ]
    return "\n".join(lines) + "\n"


def render_sh_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.sh: restore every variable the activation changed (no-op when none is active)."""
    lines = [
        "# envlock: undo the CUDA toolchain activation (bash, zsh, sh: source this file).",
        "# Generated by envlock; do not edit. Restores the values saved in _ENVLOCK_OLD_*; unset stays unset.",
        f'if [ -n "${{{ACTIVE}+x}}" ]; then',
        *_indent(_sh_restore(POSIX_VARS)),
        "fi",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- fish


def fish_quote(text: str) -> str:
    """Single-quote for fish (only \\ and ' are special inside)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_path(rel: str, targets: str) -> str:
    rel = rel.replace(_TARGETS_TOKEN, targets)
    return '"$_envlock_p"' if not rel else f'"$_envlock_p/{rel}"'


def _fish_op(op: EnvOp, targets: str) -> list[str]:
    value, var = _fish_path(op.rel, targets), op.var
    if op.action == "set":
        return [f"set -gx {var} {value}"]
    new = f"{value} ${var}" if op.action == "prepend" else f"${var} {value}"
    # "$VAR" joins a path variable with ':' — empty means unset or empty, as ${VAR:+…} in sh.
    return [
        f"if not contains -- {value} ${var}",
        f'    if test -n "${var}"; set -gx {var} {new}; else; set -gx {var} {value}; end',
        "end",
    ]


def _fish_restore(all_vars: tuple[str, ...]) -> list[str]:
    lines = [f'set -l _envlock_vars (string split " " -- "${CHANGED}")']
    for var in all_vars:
        lines += [
            f"if contains -- {var} $_envlock_vars",
            f"    if set -q {OLD}{var}; set -gx {var} ${OLD}{var}; set -e {OLD}{var}; else; set -e {var}; end",
            "end",
        ]
    return lines + [f"set -e {CHANGED}", f"set -e {ACTIVE}", "set -e _envlock_vars"]


def _fish_targets(linux: list[str]) -> tuple[list[str], str]:
    if len(linux) == 1:
        return [], TARGETS.get(linux[0], "x86_64-linux")
    lines = ["set -l _envlock_t x86_64-linux", "switch (uname -m 2>/dev/null)"]
    for platform, pattern in (("linux-aarch64", "aarch64 arm64"), ("linux-ppc64le", "ppc64le")):
        if platform in linux:
            # plain `set` updates the outer local (`set -l` would be local to the case arm)
            lines += [f"    case {pattern}", f"        set _envlock_t {TARGETS[platform]}"]
    return [*lines, "end"], "$_envlock_t"


def render_fish_activate(spec: ActivationSpec) -> str:
    """activate.fish (`source` it)."""
    linux = [p for p in spec.platforms if not is_windows(p)] or ["linux-64"]
    targets_lines, targets = _fish_targets(linux)
    ops = env_ops(linux[0], spec.torch_source, spec.has_cudnn)
    if spec.prefix is not None:
        prefix_lines = [f"set -l _envlock_p {fish_quote(_norm_prefix(spec.prefix, False))}"]
    else:
        prefix_lines = [
            "set -l _envlock_p",
            "if set -q argv[1]; set _envlock_p $argv[1]",
            "else if set -q ENVLOCK_PREFIX; set _envlock_p $ENVLOCK_PREFIX",
            "else if set -q CONDA_PREFIX; set _envlock_p $CONDA_PREFIX; end",
            'set _envlock_p (string replace -r -- "/\\$" "" "$_envlock_p")',
            'if test -z "$_envlock_p"; or not test -d "$_envlock_p/conda-meta"',
            '    echo "envlock: activate.fish: no conda environment at \'$_envlock_p\'; pass the prefix:'
            ' source activate.fish PREFIX (or set ENVLOCK_PREFIX)" >&2',
            "    return 1",
            "end",
        ]
    body = [
        f"if set -q {ACTIVE}",
        *_indent(_fish_restore(POSIX_VARS)),
        "end",
        *[f"if set -q {v}; set -gx {OLD}{v} ${v}; else; set -e {OLD}{v}; end" for v in changed_vars(ops)],
        f"set -gx {CHANGED} {fish_quote(' '.join(changed_vars(ops)))}",
        *[line for op in ops for line in _fish_op(op, targets)],
        f'set -gx {ACTIVE} "$_envlock_p"',
    ]
    lines = [
        "# envlock: activate the CUDA toolchain of a conda environment (fish: source this file).",
        "# Generated by envlock; do not edit. Undo with the matching deactivate script.",
        _prefix_note(spec, "the first argument (source activate.fish PREFIX)"),
        _sources_note(spec),
        *prefix_lines,
        *targets_lines,
        f'if test "${ACTIVE}" != "$_envlock_p"',
        *_indent(body),
        "end",
        "set -e _envlock_p" + ("; set -e _envlock_t" if targets_lines else ""),
    ]
    return "\n".join(lines) + "\n"


def render_fish_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.fish."""
    lines = [
        "# envlock: undo the CUDA toolchain activation (fish: source this file).",
        "# Generated by envlock; do not edit. Restores the values saved in _ENVLOCK_OLD_*; unset stays unset.",
        f"if set -q {ACTIVE}",
        *_indent(_fish_restore(POSIX_VARS)),
        "end",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- PowerShell


def ps_quote(text: str) -> str:
    """Single-quote for PowerShell (nothing expands; ' is doubled)."""
    return "'" + text.replace("'", "''") + "'"


def _ps_path(rel: str) -> str:
    return '"$_envlock_p"' if not rel else '"$_envlock_p\\' + rel.replace("/", "\\") + '"'


def _ps_op(op: EnvOp) -> list[str]:
    value, var = _ps_path(op.rel), op.var
    if op.action == "set":
        return [f"$env:{var} = {value}"]
    new = f'{value[:-1]};$env:{var}"' if op.action == "prepend" else f'"$env:{var};{value[1:]}'
    return [f"if ($env:{var}) {{ $env:{var} = {new} }} else {{ $env:{var} = {value} }}"]


def _ps_restore(all_vars: tuple[str, ...]) -> list[str]:
    lines = [f'$_envlock_vars = " $env:{CHANGED} "']
    for var in all_vars:
        lines += [
            f"if ($_envlock_vars.Contains(' {var} ')) {{",
            f"    if ($null -ne $env:{OLD}{var}) {{ $env:{var} = $env:{OLD}{var}; Remove-Item Env:\\{OLD}{var} }}",
            f"    else {{ Remove-Item Env:\\{var} -ErrorAction SilentlyContinue }}",
            "}",
        ]
    return lines + [
        f"Remove-Item Env:\\{CHANGED}, Env:\\{ACTIVE} -ErrorAction SilentlyContinue",
        "Remove-Variable _envlock_vars -ErrorAction SilentlyContinue",
    ]


def render_ps1_activate(spec: ActivationSpec) -> str:
    """activate.ps1 (dot-source it: `. .\\activate.ps1 [PREFIX]`)."""
    ops = env_ops("win-64", spec.torch_source, spec.has_cudnn)
    if spec.prefix is not None:
        prefix_lines = [f"$_envlock_p = {ps_quote(_norm_prefix(spec.prefix, True))}"]
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
    body = [
        f"if ($null -ne $env:{ACTIVE}) {{",
        *_indent(_ps_restore(WINDOWS_VARS)),
        "}",
        *[f"if ($null -ne $env:{v}) {{ $env:{OLD}{v} = $env:{v} }} "
          f"else {{ Remove-Item Env:\\{OLD}{v} -ErrorAction SilentlyContinue }}" for v in changed_vars(ops)],
        f"$env:{CHANGED} = {ps_quote(' '.join(changed_vars(ops)))}",
        *[line for op in ops for line in _ps_op(op)],
        f"$env:{ACTIVE} = $_envlock_p",
    ]
    lines = [
        "# envlock: activate the CUDA toolchain of a conda environment (PowerShell: dot-source this file).",
        "# Generated by envlock; do not edit. Undo with the matching deactivate script.",
        _prefix_note(spec, "the first argument (. .\\activate.ps1 PREFIX)"),
        "# Windows: CUDA_HOME/CUDA_PATH = <prefix>\\Library; Library\\bin on PATH, Library\\include on INCLUDE,",
        "# Library\\lib on LIB.",
        *prefix_lines,
        f"if ($env:{ACTIVE} -ne $_envlock_p) {{",
        *_indent(body),
        "}",
        "Remove-Variable _envlock_p -ErrorAction SilentlyContinue",
    ]
    return "\r\n".join(lines) + "\r\n"


def render_ps1_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.ps1."""
    lines = [
        "# envlock: undo the CUDA toolchain activation (PowerShell: dot-source this file).",
        "# Generated by envlock; do not edit. Restores the values saved in _ENVLOCK_OLD_*; unset stays unset.",
        f"if ($null -ne $env:{ACTIVE}) {{",
        *_indent(_ps_restore(WINDOWS_VARS)),
        "}",
    ]
    return "\r\n".join(lines) + "\r\n"


# --------------------------------------------------------------------------- cmd.exe


def bat_literal(text: str) -> str:
    """A literal for `set "VAR=..."` in a .bat file ('%' doubled; Windows paths cannot hold '"')."""
    if '"' in text or "\n" in text or "\r" in text:
        raise ValueError(f"not a valid Windows path for cmd.exe: {text!r}")
    return text.replace("%", "%%")


def _bat_path(rel: str) -> str:
    return "%_ENVLOCK_P%" if not rel else "%_ENVLOCK_P%\\" + rel.replace("/", "\\")


def _bat_op(op: EnvOp) -> list[str]:
    value, var = _bat_path(op.rel), op.var
    if op.action == "set":
        return [f'@set "{var}={value}"']
    new = f"{value};%{var}%" if op.action == "prepend" else f"%{var}%;{value}"
    # No ( ) blocks: a ')' in an expanded value ("Program Files (x86)") would end the block early.
    return [f'@if defined {var} set "{var}={new}"', f'@if not defined {var} set "{var}={value}"']


def _bat_restore(all_vars: tuple[str, ...]) -> list[str]:
    lines = [f'@set "_ENVLOCK_V= %{CHANGED}% "']
    for var in all_vars:
        # %X% of an undefined X expands to nothing in a .bat, so `set "VAR="` unsets what was unset.
        lines += [
            f'@if not "%_ENVLOCK_V: {var} =%"=="%_ENVLOCK_V%" set "{var}=%{OLD}{var}%"',
            f'@set "{OLD}{var}="',
        ]
    return lines + [f'@set "{CHANGED}="', f'@set "{ACTIVE}="', '@set "_ENVLOCK_V="']


def render_bat_activate(spec: ActivationSpec) -> str:
    """activate.bat (`call activate.bat [PREFIX]`)."""
    ops = env_ops("win-64", spec.torch_source, spec.has_cudnn)
    if spec.prefix is not None:
        prefix_lines = [f'@set "_ENVLOCK_P={bat_literal(_norm_prefix(spec.prefix, True))}"']
    else:
        prefix_lines = [
            '@set "_ENVLOCK_P=%~1"',
            '@if not defined _ENVLOCK_P set "_ENVLOCK_P=%ENVLOCK_PREFIX%"',
            '@if not defined _ENVLOCK_P set "_ENVLOCK_P=%CONDA_PREFIX%"',
            "@if not defined _ENVLOCK_P goto :envlock_noprefix",
            '@if "%_ENVLOCK_P:~-1%"=="\\" set "_ENVLOCK_P=%_ENVLOCK_P:~0,-1%"',
            '@if not exist "%_ENVLOCK_P%\\conda-meta\\" goto :envlock_noprefix',
        ]
    lines = [
        "@REM envlock: activate the CUDA toolchain of a conda environment (cmd.exe: call this file).",
        "@REM Generated by envlock; do not edit. Undo with the matching deactivate script.",
        "@REM " + _prefix_note(spec, "the first argument (call activate.bat PREFIX)").lstrip("# "),
        "@REM Windows: CUDA_HOME/CUDA_PATH = PREFIX\\Library; Library\\bin on PATH, Library\\include on INCLUDE,",
        "@REM Library\\lib on LIB.",
        *prefix_lines,
        f'@if "%{ACTIVE}%"=="%_ENVLOCK_P%" goto :envlock_end',
        f"@if defined {ACTIVE} call :envlock_restore",
        *[line for v in changed_vars(ops) for line in (f'@set "{OLD}{v}="', f'@if defined {v} set "{OLD}{v}=%{v}%"')],
        f'@set "{CHANGED}={" ".join(changed_vars(ops))}"',
        *[line for op in ops for line in _bat_op(op)],
        f'@set "{ACTIVE}=%_ENVLOCK_P%"',
        ":envlock_end",
        '@set "_ENVLOCK_P="',
        "@goto :eof",
        ":envlock_restore",
        *_bat_restore(WINDOWS_VARS),
        "@goto :eof",
    ]
    if spec.prefix is None:
        lines += [
            ":envlock_noprefix",
            "@echo envlock: activate.bat: no conda environment; pass the prefix: call activate.bat PREFIX"
            " (or set ENVLOCK_PREFIX) 1>&2",
            '@set "_ENVLOCK_P="',
            "@exit /b 1",
        ]
    return "\r\n".join(lines) + "\r\n"


def render_bat_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.bat."""
    lines = [
        "@REM envlock: undo the CUDA toolchain activation (cmd.exe: call this file).",
        "@REM Generated by envlock; do not edit. Restores the values saved in _ENVLOCK_OLD_*; unset stays unset.",
        f"@if not defined {ACTIVE} goto :eof",
        *_bat_restore(WINDOWS_VARS),
    ]
    return "\r\n".join(lines) + "\r\n"


# --------------------------------------------------------------------------- entry points


_RENDERERS = {
    "sh": ("sh", render_sh_activate, render_sh_deactivate),
    "fish": ("fish", render_fish_activate, render_fish_deactivate),
    "powershell": ("ps1", render_ps1_activate, render_ps1_deactivate),
    "cmd": ("bat", render_bat_activate, render_bat_deactivate),
}
_POSIX_SHELLS = ("sh", "fish")


def render_scripts(spec: ActivationSpec, shells: tuple[str, ...] = ("sh", "powershell", "cmd")) -> dict[str, str]:
    """filename → text: activate/deactivate.{sh,fish} for linux platforms, .{ps1,bat} for win-64."""
    has_linux = any(not is_windows(p) for p in spec.platforms)
    has_win = any(is_windows(p) for p in spec.platforms)
    out: dict[str, str] = {}
    for shell in shells:
        ext, activate, deactivate = _RENDERERS[shell]
        if (has_linux if shell in _POSIX_SHELLS else has_win):
            out[f"activate.{ext}"] = activate(spec)
            out[f"deactivate.{ext}"] = deactivate(spec)
    return out


def hook_files(platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False) -> dict[str, str]:
    """Relative path under the prefix → text of the conda activate.d/deactivate.d hooks."""
    spec = ActivationSpec((platform,), torch_source, has_cudnn, prefix)  # type: ignore[arg-type]
    shells = ("powershell", "cmd") if is_windows(platform) else ("sh", "fish")
    out: dict[str, str] = {}
    for name, text in render_scripts(spec, shells).items():
        kind, ext = name.split(".")
        out[f"etc/conda/{kind}.d/{_HOOK_NAME}.{ext}"] = text
    return out


def shell_hook(shell: str, platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False) -> str:
    """The activation script for `eval` (bash/zsh/sh), `source` (fish) or dot-sourcing (PowerShell)."""
    kind = {"bash": "sh", "zsh": "sh", "sh": "sh"}.get(shell, shell)
    if kind not in _RENDERERS:
        raise ValueError(f"unknown shell {shell!r}")
    spec = ActivationSpec((platform,), torch_source, has_cudnn, prefix)  # type: ignore[arg-type]
    if kind in _POSIX_SHELLS and is_windows(platform) or kind not in _POSIX_SHELLS and not is_windows(platform):
        raise ValueError(f"a {shell} hook for a {platform} environment")
    return _RENDERERS[kind][1](spec)
