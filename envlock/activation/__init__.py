"""Activation of a CUDA toolchain prefix: one list of operations, rendered per shell, applied in Python.

  model.py       the operations (`env_ops`), their bookkeeping, and the same rules applied to a mapping
  sh.py fish.py powershell.py cmd.py   one renderer per shell
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

from envlock.activation import cmd, fish, powershell, sh
from envlock.activation.model import (
    ACTIVE,
    CHANGED,
    CREATED,
    HOOK_NAME,
    OLD,
    TARGETS,
    ActivationSpec,
    EnvOp,
    activate_environ,
    changed_vars,
    deactivate_environ,
    env_ops,
    is_windows,
)

__all__ = [
    "ACTIVE", "CHANGED", "CREATED", "OLD", "TARGETS", "ActivationSpec", "EnvOp", "activate_environ",
    "changed_vars", "deactivate_environ", "env_ops", "hook_files", "is_windows", "render_scripts", "shell_hook",
]  # fmt: skip

_RENDERERS = {
    "sh": ("sh", sh.render_activate, sh.render_deactivate),
    "fish": ("fish", fish.render_activate, fish.render_deactivate),
    "powershell": ("ps1", powershell.render_activate, powershell.render_deactivate),
    "cmd": ("bat", cmd.render_activate, cmd.render_deactivate),
}
_POSIX_SHELLS = ("sh", "fish")


def render_scripts(spec: ActivationSpec, shells: tuple[str, ...] = ("sh", "powershell", "cmd")) -> dict[str, str]:
    """filename → text: activate/deactivate.{sh,fish} for linux platforms, .{ps1,bat} for win-64."""
    has_linux = any(not is_windows(p) for p in spec.platforms)
    has_win = any(is_windows(p) for p in spec.platforms)
    out: dict[str, str] = {}
    for shell in shells:
        ext, activate, deactivate = _RENDERERS[shell]
        if has_linux if shell in _POSIX_SHELLS else has_win:
            out[f"activate.{ext}"] = activate(spec)
            out[f"deactivate.{ext}"] = deactivate(spec)
    return out


def hook_spec(platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False) -> ActivationSpec:
    """The spec of the hooks installed into a prefix (the fish hook bridges the env's *.sh scripts)."""
    return ActivationSpec((platform,), torch_source, has_cudnn, prefix, bridge_sh=not is_windows(platform))  # type: ignore[arg-type]


def hook_files(platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False) -> dict[str, str]:
    """Relative path under the prefix → text of the conda activate.d/deactivate.d hooks."""
    shells = ("powershell", "cmd") if is_windows(platform) else ("sh", "fish")
    out: dict[str, str] = {}
    for name, text in render_scripts(hook_spec(platform, prefix, torch_source, has_cudnn), shells).items():
        kind, ext = name.split(".")
        out[f"etc/conda/{kind}.d/{HOOK_NAME}.{ext}"] = text
    return out


def shell_hook(shell: str, platform: str, prefix: str, torch_source: str = "pip", has_cudnn: bool = False,
               *, deactivate: bool = False) -> str:
    """envlock's own hook for one shell (what etc/conda/activate.d/envlock-cuda.<ext> holds)."""
    kind = {"bash": "sh", "zsh": "sh", "sh": "sh"}.get(shell, shell)
    if kind not in _RENDERERS:
        raise ValueError(f"unknown shell {shell!r}")
    if (kind in _POSIX_SHELLS) == is_windows(platform):
        raise ValueError(f"a {shell} hook for a {platform} environment")
    spec = hook_spec(platform, prefix, torch_source, has_cudnn)
    return _RENDERERS[kind][2 if deactivate else 1](spec)
