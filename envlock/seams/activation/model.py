"""The activation as data: one list of operations per platform, and the same operations applied in Python.

PURE: values in, values out. Every shell renderer (sh.py, fish.py, powershell.py, cmd.py) and
`activate_environ` follow these rules, so a change here is a change in every shell at once.

Composing with conda, micromamba, `envlock run` and `envlock shell-hook` (facts §9; conda's
activate.py): conda puts `<prefix>/bin` on PATH and sets CONDA_PREFIX *before* it runs activate.d
scripts, and on deactivation writes a PATH without the env's dirs *before* it runs deactivate.d
scripts. So the activation

* changes only what differs: a `set` whose variable already holds the value, or a path entry that is
  already in its list (conda's own `<prefix>/bin`), is left alone and not recorded;
* records what it changed: `_ENVLOCK_OLD_<VAR>` (the value before; absent = unset) and
  `_ENVLOCK_SET_<VAR>` (the value it set) for `set`; `_ENVLOCK_PREPENDED_<VAR>` /
  `_ENVLOCK_APPENDED_<VAR>` (the entries it added, joined with the list separator) for path lists;
  `_ENVLOCK_CREATED` names the lists that did not exist before; `_ENVLOCK_VARS` names everything changed;
* deactivation restores a `set` variable only if it still holds the value the activation set (a newer
  value is the user's and stays), and removes from a list exactly the entries it added (the first
  occurrence of a prepended entry, the last of an appended one) and nothing else, so entries the user
  added meanwhile stay; a list it created and that is empty again is unset.

`_ENVLOCK_PREFIX` marks the active prefix: activating it again changes nothing; activating another
prefix first undoes the active one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from envlock.models import TorchSource, record

Action = Literal["set", "prepend", "append"]

#: conda-forge's `targets/<name>` per linux subdir (facts §9.1).
TARGETS: dict[str, str] = {"linux-64": "x86_64-linux", "linux-aarch64": "sbsa-linux", "linux-ppc64le": "ppc64le-linux"}
TARGETS_TOKEN = "{targets}"
HOOK_NAME = "envlock-cuda"  # etc/conda/{activate,deactivate}.d/envlock-cuda.<ext>

ACTIVE = "_ENVLOCK_PREFIX"  # the prefix currently activated by envlock
CHANGED = "_ENVLOCK_VARS"  # space-separated names of the variables the activation changed
CREATED = "_ENVLOCK_CREATED"  # space-separated names of the path lists it created (unset before)
OLD = "_ENVLOCK_OLD_"  # set: _ENVLOCK_OLD_<VAR>, the value before (absent: it was unset)
SET = "_ENVLOCK_SET_"  # set: _ENVLOCK_SET_<VAR>, the value the activation set
PREPENDED = "_ENVLOCK_PREPENDED_"  # prepend: the entries added at the front
APPENDED = "_ENVLOCK_APPENDED_"  # append: the entries added at the end


@record
class EnvOp:
    """One change to one variable; `rel` is a '/'-separated path below the prefix ('' = the prefix)."""

    var: str
    action: Action
    rel: str


@record
class ActivationSpec:
    """What the scripts depend on.

    platforms: the lock's platforms (sh/fish scripts cover the linux ones, ps1/bat cover win-64).
    prefix: fixed path (installed hooks, shell-hook), or None: taken at activation time from the
    first argument, else `$ENVLOCK_PREFIX`, else `$CONDA_PREFIX` (the scripts in locks/<name>/).
    bridge_sh: the fish hook also runs the prefix's other activate.d/*.sh scripts in bash and takes
    over their changes (conda's fish activation runs only *.fish: conda-forge's compiler and
    cuda-nvcc packages ship *.sh only, so fish would get no CC, CXX or NVCC_PREPEND_FLAGS).
    conda_prefix_only: with prefix None, the prefix is $CONDA_PREFIX and nothing else (no argument, no
    $ENVLOCK_PREFIX): pixi sources a manifest's activation scripts with CONDA_PREFIX set to its env
    (envlock export pixi), and a stray ENVLOCK_PREFIX must not point them at another env.
    """

    platforms: tuple[str, ...]
    torch_source: TorchSource = "pip"
    has_cudnn: bool = False
    prefix: str | None = None
    bridge_sh: bool = False
    conda_prefix_only: bool = False


def checked_prefix(prefix: str, windows: bool) -> str:
    """A prefix for the scripts' fixed-prefix slot: the shells' quoting carries any other character as data, but
    NUL ends a string in every shell, and the list separator (':', ';' on Windows) would make the prefix's
    bin/ two PATH entries; cmd.exe's `set "VAR=…"` cannot carry '"' or a control character. UnsafeNameError
    for those (tests/security/test_hostile_names.py)."""
    from envlock.errors import UnsafeNameError

    bad = [c for c in ("\0", ";" if windows else ":") if c in prefix]
    if windows and ('"' in prefix or not prefix.isprintable()):
        bad.append('"' if '"' in prefix else "a control character")
    if bad:
        raise UnsafeNameError(f"refusing the prefix {prefix!r}: activation cannot carry {bad[0]!r} in a path "
                              f"(it would split {'PATH' if bad[0] in ':;' else 'the value'})",
                              hint="choose a prefix path without it")
    return prefix


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
    target = f"targets/{TARGETS_TOKEN}"
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
    """The variables `ops` may change, in first-use order."""
    return tuple(dict.fromkeys(op.var for op in ops))


def undo_kinds(windows: bool) -> dict[str, tuple[Action, ...]]:
    """Every variable any activation of the OS family may change, with the kinds of change it may make.

    Deactivation handles all of them, whatever torch source or cuDNN the activation had.
    """
    platform = "win-64" if windows else "linux-64"
    kinds: dict[str, list[Action]] = {}
    for source in ("pip", "conda-forge"):
        for op in env_ops(platform, source, True):
            if op.action not in kinds.setdefault(op.var, []):
                kinds[op.var].append(op.action)
    return {var: tuple(actions) for var, actions in kinds.items()}


def bookkeeping(var: str, action: Action) -> str:
    """The variable that records what `action` did to `var`."""
    return {"set": SET, "prepend": PREPENDED, "append": APPENDED}[action] + var


# --------------------------------------------------------------------------- Python (envlock run, doctor)


def join(prefix: str, rel: str, windows: bool) -> str:
    """prefix + rel with the OS's separator ('' = the prefix itself)."""
    if not rel:
        return prefix
    return prefix + "\\" + rel.replace("/", "\\") if windows else prefix + "/" + rel


def norm_prefix(prefix: str, windows: bool) -> str:
    """The prefix without a trailing separator (a bare root stays as it is)."""
    stripped = prefix.rstrip("\\/" if windows else "/")
    return stripped or prefix


def _same(a: str, b: str, windows: bool) -> bool:
    # Windows paths compare case-insensitively (cmd's substitution and PowerShell's -eq do too).
    return a.lower() == b.lower() if windows else a == b


def _remove(entries: list[str], entry: str, *, last: bool, windows: bool) -> list[str]:
    order = range(len(entries) - 1, -1, -1) if last else range(len(entries))
    for i in order:
        if _same(entries[i], entry, windows):
            return entries[:i] + entries[i + 1 :]
    return entries


def deactivate_environ(environ: Mapping[str, str], windows: bool = False) -> dict[str, str]:
    """A copy of `environ` with envlock's activation undone (unchanged when none is active)."""
    env = dict(environ)
    if ACTIVE not in env:
        return env
    sep = ";" if windows else ":"
    created = env.get(CREATED, "").split()
    for var, actions in undo_kinds(windows).items():
        for action in actions:
            mark = env.pop(bookkeeping(var, action), None)
            if mark is None:
                continue
            if action == "set":
                old = env.pop(OLD + var, None)
                if var in env and env[var] == mark:  # a newer value is the user's and stays
                    if old is None:
                        del env[var]
                    else:
                        env[var] = old
                continue
            if var not in env:
                continue
            entries = env[var].split(sep)
            for entry in mark.split(sep):
                entries = _remove(entries, entry, last=action == "append", windows=windows)
            env[var] = sep.join(entries)
            if not env[var] and (var in created or windows):
                del env[var]  # Windows has no empty variables
    for name in (CHANGED, CREATED, ACTIVE):
        env.pop(name, None)
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
    prefix = norm_prefix(prefix, windows)
    if environ.get(ACTIVE) == prefix:
        return dict(environ)
    env = deactivate_environ(environ, windows)
    sep = ";" if windows else ":"
    targets = TARGETS.get(platform, "")
    changed: list[str] = []
    created: list[str] = []
    for op in env_ops(platform, torch_source, has_cudnn):
        value = join(prefix, op.rel.replace(TARGETS_TOKEN, targets), windows)
        current = env.get(op.var)
        if op.action == "set":
            if current == value:
                continue
            if current is not None:
                env[OLD + op.var] = current
            env[SET + op.var] = env[op.var] = value
        else:
            if current is not None and any(_same(e, value, windows) for e in current.split(sep)):
                continue  # already there (conda puts <prefix>/bin on PATH itself): not ours to remove
            if current is None and not windows:  # Windows has no empty variables to tell apart
                created.append(op.var)
            if not current:
                env[op.var] = value
            else:
                env[op.var] = value + sep + current if op.action == "prepend" else current + sep + value
            mark = bookkeeping(op.var, op.action)
            env[mark] = env[mark] + sep + value if mark in env else value
        if op.var not in changed:
            changed.append(op.var)
    if changed:
        env[CHANGED] = " ".join(changed)
    if created:
        env[CREATED] = " ".join(created)
    env[ACTIVE] = prefix
    return env


@record
class Shell:
    """One shell envlock renders for: what a renderer module (sh.py, fish.py, ...) declares as its SHELL and
    activation/__init__.py lists in SHELLS. Adding a shell is that new module and its line there."""

    name: str  # what --shell takes
    ext: str  # the scripts' extension: activate.<ext>, etc/conda/activate.d/envlock-cuda.<ext>
    windows: bool  # for win-64 envs (else for the linux ones)
    render_activate: Callable[[ActivationSpec], str]
    render_deactivate: Callable[[ActivationSpec | None], str]
    aliases: tuple[str, ...] = ()  # other names --shell takes for it (bash, zsh for sh)
    in_lock: bool = True  # written beside a lock (locks/<name>/activate.<ext>); always an env's hook
    #: conda's activation step (envlock.seams.activation.conda.Step) as text the shell evaluates; None: `shell-hook`
    #: prints envlock's own hook only (conda's activation is replicated for sh and fish)
    render_step: Callable[[Any], str] | None = None
