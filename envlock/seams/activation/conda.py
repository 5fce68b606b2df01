"""conda's own activation of a prefix, so that `envlock run`, `envlock shell-hook` and `envlock doctor`
give what `conda activate` gives.

Follows conda 26.7.1's activate.py: `_build_activate_stack` (not stacked), `build_reactivate` and
`build_deactivate`, and the order of `_yield_commands`: PATH (deactivation only), the old env's
deactivate.d scripts, unset variables, exported variables (PATH on activation, CONDA_PREFIX,
CONDA_SHLVL, CONDA_DEFAULT_ENV, CONDA_PROMPT_MODIFIER, CONDA_PREFIX_<n>, the env's `env_vars`), then
the env's activate.d scripts, sorted by path (deactivate.d: reversed), those ending in the shell's
extension (.sh for bash/zsh, .fish for fish). An "unset" is `export X=''` in sh, as conda writes it.
Not copied: conda's own metavariables (CONDA_EXE, _CE_M, ...), `condabin` on PATH, the PS1 rewrite,
`--stack`, and "base" as CONDA_DEFAULT_ENV (envlock does not know conda's root prefix).

A prefix without envlock's hook (made by conda, say) gets envlock's activation at the place the hook
would sort to. `run_environ` executes the sh form in bash and reads the environment back; on Windows
(no bash) it applies the variables and envlock's activation in Python and runs no .bat script.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envlock.seams.activation.model import HOOK_NAME, activate_environ, deactivate_environ, is_windows
from envlock.models import CUDNN_NAMES
from envlock.names import split_conda_filename
from envlock.formats.untrusted import read_json

_UNSET = "***unset***"  # conda's CONDA_ENV_VARS_UNSET_VAR
_RESERVED = ("PATH", "CONDA_PREFIX", "CONDA_SHLVL", "CONDA_DEFAULT_ENV", "CONDA_PROMPT_MODIFIER")
#: Variables a shell sets by itself: never part of an activation's result.
SHELL_NOISE = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})


@dataclass(frozen=True)
class Script:
    """An activate.d/deactivate.d script: a file, or envlock's hook text where the prefix has none."""

    path: str
    text: str | None = None


@dataclass(frozen=True)
class Step:
    """One activation or deactivation, in the order conda emits it."""

    export_path: dict[str, str] = field(default_factory=dict)
    deactivate_scripts: tuple[Script, ...] = ()
    unset_vars: tuple[str, ...] = ()
    export_vars: dict[str, str] = field(default_factory=dict)
    activate_scripts: tuple[Script, ...] = ()


@dataclass(frozen=True)
class Hooks:
    """envlock's own hook texts for one prefix and shell family (inserted where the prefix lacks them)."""

    ext: str
    activate: str
    deactivate: str


def prefix_activation(prefix: Path) -> tuple[str, str, bool]:
    """(platform, torch_source, has_cudnn) of a prefix: from conda-meta/envlock, else from its package records
    (an env made by conda, conda-lock or conda-pack): the packages' subdir, conda's pytorch, cuDNN."""
    from envlock.seams import envrecord

    meta = envrecord.read(prefix)
    act: dict[str, object] = meta["activation"] if isinstance(meta.get("activation"), dict) else {}
    anchor: dict[str, object] = meta["anchor"] if isinstance(meta.get("anchor"), dict) else {}
    records = sorted((prefix / "conda-meta").glob("*.json")) if (prefix / "conda-meta").is_dir() else []
    names = {(split_conda_filename(p.stem) or ("",))[0] for p in records}
    platform = str(meta.get("platform") or _subdir(records))
    torch_source = str(act.get("torch_source") or anchor.get("torch_source")
                       or ("conda-forge" if "pytorch" in names else "pip"))
    if "has_cudnn" in act:
        return platform, torch_source, bool(act["has_cudnn"])
    return platform, torch_source, bool(names & CUDNN_NAMES)


def _subdir(records: list[Path]) -> str:
    """The platform of an env's packages (the first record that is not noarch), else this machine's."""
    from envlock.models import host_platform

    for path in records:
        doc = read_json(path)
        subdir = doc.get("subdir") if isinstance(doc, dict) else None
        if subdir in _PLATFORMS:  # a record's text is not trusted: only a platform envlock knows
            return str(subdir)
    return host_platform()


_PLATFORMS = ("linux-64", "linux-aarch64", "linux-ppc64le", "win-64")


# --------------------------------------------------------------------------- conda's rules


def _shlvl(environ: Mapping[str, str]) -> int:
    try:
        return int(environ.get("CONDA_SHLVL", "").strip() or 0)
    except ValueError:
        return 0


def _same_path(a: str, b: str, windows: bool) -> bool:
    return os.path.normcase(a) == os.path.normcase(b) if windows else a == b


def path_dirs(prefix: str, windows: bool) -> list[str]:
    """What conda puts on PATH for a prefix (`_get_path_dirs`)."""
    if not windows:
        return [prefix + "/bin"]
    msys = [f"{prefix}\\Library\\{v}\\bin" for v in ("ucrt64", "clang64", "mingw64", "clangarm64")
            if os.path.isdir(f"{prefix}\\Library\\{v}")][:1]
    rest = ("Library\\mingw-w64\\bin", "Library\\usr\\bin", "Library\\bin", "Scripts", "bin")
    return [prefix, *msys, *(f"{prefix}\\{d}" for d in rest)]


def _replace_prefix_in_path(path: str, old: str | None, new: str | None, windows: bool) -> str:
    """conda's `_replace_prefix_in_path`: the old prefix's dirs out, the new one's in at their place."""
    sep = ";" if windows else ":"
    entries = path.split(sep)
    first = 0
    if old is not None:
        dirs = path_dirs(old, windows)
        found = [i for i, e in enumerate(entries) if _same_path(e, dirs[0], windows)]
        if found:
            first = found[0]
            last = None
            for d in reversed(dirs):
                hits = [i for i, e in enumerate(entries) if _same_path(e, d, windows)]
                if hits:
                    last = hits[0]
                    break
            del entries[first : (last if last is not None else first) + 1]
    if new is not None:
        entries[first:first] = path_dirs(new, windows)
    return sep.join(entries)


def default_env(prefix: str) -> str:
    """CONDA_DEFAULT_ENV: the name for envs/<name>, else the path."""
    parent, name = os.path.split(prefix.rstrip("/\\"))
    return name if os.path.basename(parent) == "envs" else prefix


def env_vars(prefix: str) -> dict[str, str]:
    """The env's `conda env config vars` and etc/conda/env_vars.d (conda's `_get_environment_env_vars`)."""
    out: dict[str, str] = {}
    pkg_dir = Path(prefix, "etc", "conda", "env_vars.d")
    if pkg_dir.is_dir():
        for path in sorted(pkg_dir.iterdir()):  # a package's files: any shape at all
            doc = read_json(path)
            out.update(doc if isinstance(doc, dict) else {})
    state = read_json(Path(prefix, "conda-meta", "state"))
    found = state.get("env_vars") if isinstance(state, dict) else None
    out.update(found if isinstance(found, dict) else {})
    return {str(k): str(v) for k, v in out.items() if k not in _RESERVED}


def scripts(prefix: str, kind: str, ext: str, hooks: Hooks | None = None) -> tuple[Script, ...]:
    """A prefix's `kind`.d scripts for one extension, in conda's order, envlock's hook included."""
    folder = os.path.join(prefix, "etc", "conda", f"{kind}.d")
    try:
        paths = {entry.path for entry in os.scandir(folder) if entry.path.endswith(ext)}
    except OSError:
        paths = set()
    own = os.path.join(folder, HOOK_NAME + ext)
    texts: dict[str, str | None] = dict.fromkeys(paths)
    if hooks is not None and hooks.ext == ext and own not in paths:
        texts[own] = hooks.activate if kind == "activate" else hooks.deactivate
    order = sorted(texts, reverse=kind == "deactivate")
    return tuple(Script(p, texts[p]) for p in order)


def activate_step(environ: Mapping[str, str], prefix: str, ext: str, hooks: Hooks | None = None) -> Step:
    """`conda activate PREFIX` (not stacked) from `environ`."""
    windows = ext in (".bat", ".ps1")
    sep = ";" if windows else ":"
    old_shlvl, old_prefix = _shlvl(environ), environ.get("CONDA_PREFIX")
    if old_prefix == prefix and old_shlvl > 0:  # conda reactivates
        modifier = f"({environ.get('CONDA_DEFAULT_ENV', default_env(prefix))}) "
        return Step(
            deactivate_scripts=scripts(prefix, "deactivate", ext, hooks),
            export_vars={"PATH": _replace_prefix_in_path(environ.get("PATH", ""), prefix, prefix, windows),
                         "CONDA_SHLVL": str(old_shlvl), "CONDA_PROMPT_MODIFIER": modifier},
            activate_scripts=scripts(prefix, "activate", ext, hooks),
        )
    own = {k: v for k, v in env_vars(prefix).items() if v != _UNSET}
    for name in [n for n in own if n in environ]:
        own[f"__CONDA_SHLVL_{old_shlvl}_{name}"] = environ[name]
    name = default_env(prefix)
    base = {"CONDA_PREFIX": prefix, "CONDA_SHLVL": str(old_shlvl + 1), "CONDA_DEFAULT_ENV": name,
            "CONDA_PROMPT_MODIFIER": f"({name}) "}
    if old_shlvl == 0:
        path = sep.join([*path_dirs(prefix, windows), *([environ["PATH"]] if "PATH" in environ else [])])
        return Step(export_vars={"PATH": path, **base, **own}, activate_scripts=scripts(prefix, "activate", ext, hooks))
    path = _replace_prefix_in_path(environ.get("PATH", ""), old_prefix, prefix, windows)
    return Step(
        deactivate_scripts=scripts(old_prefix, "deactivate", ext) if old_prefix else (),
        export_vars={"PATH": path, **base, **own, f"CONDA_PREFIX_{old_shlvl}": old_prefix or ""},
        activate_scripts=scripts(prefix, "activate", ext, hooks),
    )


def deactivate_step(environ: Mapping[str, str], ext: str, hooks: Hooks | None = None) -> Step:
    """`conda deactivate` from `environ` (nothing when no env is active)."""
    windows = ext in (".bat", ".ps1")
    old_prefix, old_shlvl = environ.get("CONDA_PREFIX"), _shlvl(environ)
    if not old_prefix or old_shlvl < 1:
        return Step()
    restore: dict[str, str] = {}
    unset: list[str] = []
    new_shlvl = old_shlvl - 1
    for var in env_vars(old_prefix):
        saved = environ.get(f"__CONDA_SHLVL_{new_shlvl}_{var}")
        if saved:
            restore[var] = saved
        else:
            unset.append(var)
    deactivate = scripts(old_prefix, "deactivate", ext, hooks)
    if old_shlvl == 1:
        path = _replace_prefix_in_path(environ.get("PATH", ""), old_prefix, None, windows)
        return Step(export_path={"PATH": path}, deactivate_scripts=deactivate,
                    unset_vars=("CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_PROMPT_MODIFIER", *unset),
                    export_vars={"CONDA_SHLVL": "0", **restore})
    new_prefix = environ.get(f"CONDA_PREFIX_{new_shlvl}", "")
    stacked = f"CONDA_STACKED_{old_shlvl}" in environ
    path = _replace_prefix_in_path(environ.get("PATH", ""), old_prefix, None if stacked else new_prefix, windows)
    name = default_env(new_prefix)
    return Step(
        export_path={"PATH": path},
        deactivate_scripts=deactivate,
        unset_vars=(f"CONDA_PREFIX_{new_shlvl}", *([f"CONDA_STACKED_{old_shlvl}"] if stacked else []), *unset),
        export_vars={"CONDA_PREFIX": new_prefix, "CONDA_SHLVL": str(new_shlvl), "CONDA_DEFAULT_ENV": name,
                     "CONDA_PROMPT_MODIFIER": f"({name}) ", **env_vars(new_prefix), **restore},
        activate_scripts=scripts(new_prefix, "activate", ext),
    )


# --------------------------------------------------------------------------- rendering and running


def render_step(step: Step, shell: str) -> str:
    """The step as text `shell` evaluates, in conda's order (the shell's own render_step: sh for bash, zsh, sh;
    fish); ValueError for a shell that has none (PowerShell and cmd get envlock's own hook only)."""
    from envlock.seams.activation import shell_named

    found = shell_named(shell)
    if found is None or found.render_step is None:
        raise ValueError(f"no conda activation step for {shell!r}")
    return found.render_step(step)


def _apply_vars(environ: Mapping[str, str], step: Step) -> dict[str, str]:
    env = dict(environ)
    env.update(step.export_path)
    for key in step.unset_vars:
        env.pop(key, None)
    env.update(step.export_vars)
    return env


def run_environ(environ: Mapping[str, str], step: Step, *, platform: str, torch_source: str = "pip",
                has_cudnn: bool = False, timeout: float = 120.0) -> tuple[dict[str, str], str | None]:
    """The environment after `step`, and the error of a failing activation script (None when fine).

    Linux: the sh form runs in bash (the scripts' own output goes to stderr) and `env -0` reads the
    result back. Windows: the variables are applied in Python, then envlock's own activation; the env's
    activate.d/*.bat scripts (e.g. the Visual Studio compiler activation) are not run.
    """
    prefix = step.export_vars.get("CONDA_PREFIX", "")
    if is_windows(platform):
        env = deactivate_environ(_apply_vars(environ, step), True)
        return activate_environ(env, prefix, platform, torch_source=torch_source, has_cudnn=has_cudnn), None
    body = "{\n" + render_step(step, "bash") + "} 1>&2\nenv -0\n"
    from envlock.seams import proc

    done = proc.attempt(["bash", "--noprofile", "--norc", "-c", body], what="running the activation scripts",
                        timeout=timeout, env=environ, out_errors="surrogateescape")
    if done.rc in (124, 127) and not done.out:  # bash itself could not run, or ran past the timeout
        return _apply_vars(environ, step), f"bash could not run the activation scripts: {done.err}"
    if done.rc != 0:
        return _apply_vars(environ, step), (done.err.strip().splitlines() or [f"exit {done.rc}"])[-1]
    pairs = (item.split("=", 1) for item in done.out.split("\0") if "=" in item)
    env = {k: v for k, v in pairs if k not in SHELL_NOISE}
    env.update({k: environ[k] for k in SHELL_NOISE if k in environ})  # bash's own, not the activation's
    return env, None


# --------------------------------------------------------------------------- the three doors


def _ext(shell: str) -> str:
    """The extension of `shell`'s scripts, with its dot (.sh for bash, zsh and sh)."""
    from envlock.seams.activation import shell_named

    found = shell_named(shell)
    return f".{found.ext}" if found is not None else ".sh"


def own_hooks(shell: str, prefix: Path) -> Hooks:
    """envlock's hook texts for `prefix` in `shell` (used where the prefix has no hook file)."""
    from envlock.seams.activation import shell_hook

    platform, torch_source, has_cudnn = prefix_activation(prefix)
    args = (shell, platform, str(prefix), torch_source, has_cudnn)
    return Hooks(_ext(shell), shell_hook(*args), shell_hook(*args, deactivate=True))


def prefix_step(environ: Mapping[str, str], prefix: Path, shell: str) -> Step:
    """`conda activate PREFIX` for `shell` (bash, zsh and sh run .sh scripts; fish .fish; cmd .bat)."""
    return activate_step(environ, str(prefix), _ext(shell), own_hooks(shell, prefix))


def deactivation_step(environ: Mapping[str, str], shell: str) -> Step:
    """`conda deactivate` for `shell`, envlock's hook included where the active prefix has none."""
    active = environ.get("CONDA_PREFIX")
    hooks = own_hooks(shell, Path(active)) if active and Path(active, "conda-meta").is_dir() else None
    return deactivate_step(environ, _ext(shell), hooks)


def activated_environ(environ: Mapping[str, str], prefix: Path, *, own_hook: bool = True,
                      ) -> tuple[dict[str, str], tuple[str, ...], str | None]:
    """The environment `conda activate PREFIX` gives in bash (cmd on Windows): (env, scripts run, error).

    What `envlock run` executes in and what `envlock doctor -p` checks. own_hook=False: a prefix without
    envlock's hook gets none (what conda alone gives it; doctor). With a failing script (or no bash) the
    env still gets conda's variables and envlock's own activation, and the error is returned.
    """
    platform, torch_source, has_cudnn = prefix_activation(prefix)
    shell = "cmd" if is_windows(platform) else "bash"
    step = activate_step(environ, str(prefix), _ext(shell), own_hooks(shell, prefix) if own_hook else None)
    env, error = run_environ(environ, step, platform=platform, torch_source=torch_source, has_cudnn=has_cudnn)
    if error is not None and own_hook:
        env = activate_environ(deactivate_environ(env), str(prefix), platform, torch_source=torch_source,
                               has_cudnn=has_cudnn)
    ran = tuple(s.path for s in step.deactivate_scripts + step.activate_scripts)
    return env, ran, error
