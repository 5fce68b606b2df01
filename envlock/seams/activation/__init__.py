"""Activation of a CUDA toolchain prefix: one list of operations, rendered per shell, applied in Python.

  model.py       the operations (`env_ops`), their bookkeeping, and the same rules applied to a mapping
  sh.py fish.py powershell.py cmd.py   one renderer per shell, each declaring its SHELL (model.Shell); SHELLS
                 below lists them: a new shell is one new module and one line there
  conda.py       conda's own activation of a prefix (PATH, CONDA_*, the env's activate.d scripts in
                 conda's order), shared by `envlock run`, `envlock shell-hook` and `envlock doctor`

What activation does (facts §9): `CUDA_HOME`/`CUDA_PATH` → the prefix (`<prefix>\\Library` on
Windows, where torch looks for `bin\\nvcc.exe` and `include`); `<prefix>/bin` on `PATH`; the
`targets/<arch>/include` dir on `CPATH` and in `CUDA_INC_PATH` (conda-forge's CUDA 12+ headers are
not in `<prefix>/include`, and torch's cpp_extension reads `CUDA_INC_PATH`); the lib dirs on
`LIBRARY_PATH` and `LD_LIBRARY_PATH`, APPENDED when torch comes from pip (its bundled CUDA libraries
must keep winning, facts §9.5) and PREPENDED for conda-forge's pytorch; `CUDNN_HOME` when cuDNN is
locked. How it composes with conda's own activation: model.py.

envlock leaves `CC`, `CXX` and `NVCC_PREPEND_FLAGS` to conda-forge's compiler and cuda-nvcc activation
scripts (which `envlock run` and `shell-hook` run too). torch adds `-ccbin $CC` on top of cuda-nvcc's
`NVCC_PREPEND_FLAGS=-ccbin=$CXX`; nvcc 13.0 (measured) warns "incompatible redefinition for option
'compiler-bindir'" and uses the last one (torch's `$CC`), and is silent when both name the same
compiler, so nothing needs fixing.
"""

from __future__ import annotations

from envlock.seams.activation import cmd, fish, powershell, sh
from envlock.seams.activation.model import (
    ACTIVE,
    CHANGED,
    CREATED,
    HOOK_NAME,
    OLD,
    TARGETS,
    ActivationSpec,
    EnvOp,
    Shell,
    activate_environ,
    changed_vars,
    checked_prefix,
    deactivate_environ,
    env_ops,
    is_windows,
)

__all__ = [
    "ACTIVE", "CHANGED", "CREATED", "OLD", "SHELLS", "TARGETS", "ActivationSpec", "EnvOp", "Shell",
    "activate_environ", "changed_vars", "checked_prefix", "deactivate_environ", "env_ops", "hook_files", "is_windows",
    "render_scripts", "shell_hook", "shell_named", "shell_names",
]  # fmt: skip

#: Every shell envlock renders for, one line each (a new shell: its module with a SHELL, and its line here).
SHELLS: tuple[Shell, ...] = (sh.SHELL, fish.SHELL, powershell.SHELL, cmd.SHELL)


def shell_named(name: str) -> Shell | None:
    """The shell --shell NAME means (a name or an alias: bash and zsh are sh), None for one envlock lacks."""
    return next((s for s in SHELLS if name == s.name or name in s.aliases), None)


def shell_names() -> tuple[str, ...]:
    """Every name --shell takes, aliases first where they are the usual name (bash, zsh, sh, fish, ...)."""
    return tuple(n for s in SHELLS for n in (*s.aliases, s.name))


def render_scripts(spec: ActivationSpec, shells: tuple[str, ...] | None = None) -> dict[str, str]:
    """filename → text: activate/deactivate.<ext> of each shell (default: those written beside a lock) whose
    platforms (linux, or win-64) the spec has."""
    has = {False: any(not is_windows(p) for p in spec.platforms), True: any(is_windows(p) for p in spec.platforms)}
    chosen = [s for s in SHELLS if (s.in_lock if shells is None else s.name in shells)]
    out: dict[str, str] = {}
    for shell in chosen:
        if has[shell.windows]:
            out[f"activate.{shell.ext}"] = shell.render_activate(spec)
            out[f"deactivate.{shell.ext}"] = shell.render_deactivate(spec)
    return out


def hook_spec(platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False) -> ActivationSpec:
    """The spec of the hooks installed into a prefix (the fish hook bridges the env's *.sh scripts)."""
    prefix = checked_prefix(prefix, is_windows(platform))
    return ActivationSpec((platform,), torch_source, has_cudnn, prefix, bridge_sh=not is_windows(platform))  # type: ignore[arg-type]  # torch_source is a TorchSource read from the env record (a str there)


def hook_files(platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False) -> dict[str, str]:
    """Relative path under the prefix → text of the conda activate.d/deactivate.d hooks."""
    shells = tuple(s.name for s in SHELLS if s.windows == is_windows(platform))
    out: dict[str, str] = {}
    for name, text in render_scripts(hook_spec(platform, prefix, torch_source, has_cudnn), shells).items():
        kind, ext = name.split(".")
        out[f"etc/conda/{kind}.d/{HOOK_NAME}.{ext}"] = text
    return out


def shell_hook(shell: str, platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False,
               *, deactivate: bool = False) -> str:
    """envlock's own hook for one shell (what etc/conda/activate.d/envlock-cuda.<ext> holds)."""
    found = shell_named(shell)
    if found is None:
        raise ValueError(f"unknown shell {shell!r}")
    if found.windows != is_windows(platform):
        raise ValueError(f"a {shell} hook for a {platform} environment")
    spec = hook_spec(platform, prefix, torch_source, has_cudnn)
    return found.render_deactivate(spec) if deactivate else found.render_activate(spec)
