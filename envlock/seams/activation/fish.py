"""activate.fish / deactivate.fish (the rules: envlock/seams/activation/model.py).

fish splits variables whose names end in PATH on ':' into lists, so every list envlock changes on
Linux (PATH, CPATH, LIBRARY_PATH, LD_LIBRARY_PATH) and its _ENVLOCK_PREPENDED_/_APPENDED_ record is a
real fish list, exported joined with ':' as in sh.

The installed hook also bridges the prefix's other activate.d/*.sh scripts (`bridge_sh`): conda's fish
activation runs *.fish scripts only, and conda-forge's compiler and cuda-nvcc packages ship *.sh only,
so without the bridge fish would get no CC, CXX or NVCC_PREPEND_FLAGS while bash, zsh and `envlock run`
do. The bridge sources those scripts in bash in conda's order (sorted by name; deactivate.d in reverse)
and takes over every exported variable they changed; a script with a *.fish sibling of the same name
is left to fish. It runs only while CONDA_PREFIX is the hook's prefix (inside `conda activate` or
`envlock shell-hook`), as those scripts read $CONDA_PREFIX. Without bash it says so on stderr and the rest of the activation still applies.
"""

from __future__ import annotations

from typing import Any

from envlock.seams.activation.model import (
    ACTIVE,
    APPENDED,
    CHANGED,
    CREATED,
    HOOK_NAME,
    OLD,
    PREPENDED,
    SET,
    TARGETS,
    TARGETS_TOKEN,
    ActivationSpec,
    EnvOp,
    Shell,
    bookkeeping,
    changed_vars,
    env_ops,
    is_windows,
    norm_prefix,
    undo_kinds,
)
from envlock.seams.activation.sh import COMPOSE_NOTE, indent, prefix_note, sources_note


def fish_quote(text: str) -> str:
    """Single-quote for fish (only \\ and ' are special inside)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _path(rel: str, targets: str) -> str:
    rel = rel.replace(TARGETS_TOKEN, targets)
    return '"$_envlock_p"' if not rel else f'"$_envlock_p/{rel}"'


def _op(op: EnvOp, targets: str) -> list[str]:
    value, var = _path(op.rel, targets), op.var
    if op.action == "set":
        return [
            f'if test "${var}" != {value}',
            f"    if set -q {var}; set -gx {OLD}{var} ${var}; else; set -e {OLD}{var}; end",
            f"    set -gx {SET}{var} {value}; set -gx {var} {value}",
            "end",
        ]
    if not var.endswith("PATH"):  # fish joins only *PATH lists with ':' on export
        raise ValueError(f"fish cannot render a list change of {var}")
    mark = bookkeeping(var, op.action)
    new = f"{value} ${var}" if op.action == "prepend" else f"${var} {value}"
    return [
        # An entry already in the list (conda's own <prefix>/bin) is not ours: leave it, record nothing.
        f"if not contains -- {value} ${var}",
        f"    if not set -q {var}; set -a _envlock_c {var}; end",
        f'    if test -n "${var}"; set -gx {var} {new}; else; set -gx {var} {value}; end',
        f"    set -gx {mark} ${mark} {value}",
        "end",
    ]


def _remove_entries(var: str, mark: str, last: bool) -> list[str]:
    if last:
        find = [
            "    set -l _envlock_i",
            f"    for _envlock_j in (seq (count ${var}))",
            f'        if test "${var}[$_envlock_j]" = "$_envlock_e"; set _envlock_i $_envlock_j; end',
            "    end",
        ]
    else:
        find = [f"    set -l _envlock_i (contains -i -- $_envlock_e ${var})"]
    return [
        f"if set -q {mark}; and set -q {var}",
        f"    for _envlock_e in ${mark}",
        *indent(find),
        f'        if test -n "$_envlock_i"; set -e {var}[$_envlock_i]; end',
        "    end",
        f'    if contains -- {var} $_envlock_created; and test -z "${var}"; set -e {var}; end',
        "end",
    ]


def _forget_lines() -> list[str]:
    kinds = undo_kinds(False)
    names = sorted({bookkeeping(v, a) for v, acts in kinds.items() for a in acts})
    names += sorted({OLD + v for v, acts in kinds.items() if "set" in acts})
    return [f"set -e {name}" for name in [*names, CHANGED, CREATED]]


def restore_lines() -> list[str]:
    """Undo whatever envlock's activation recorded (generic: it reads only the bookkeeping variables)."""
    lines = [f'set -l _envlock_created (string split " " -- "${CREATED}")']
    for var, actions in undo_kinds(False).items():
        for action in actions:
            mark = bookkeeping(var, action)
            if action == "set":
                lines += [
                    f'if set -q {mark}; and set -q {var}; and test "${var}" = "${mark}"',
                    f"    if set -q {OLD}{var}; set -gx {var} ${OLD}{var}; else; set -e {var}; end",
                    "end",
                ]
            else:
                lines += _remove_entries(var, mark, last=action == "append")
    return lines + [*_forget_lines(), f"set -e {ACTIVE}"]


#: Runs in bash: $1 = a dir of *.sh scripts, $2 = activate|deactivate. Sources them in conda's order
#: (byte order of the names; reversed for deactivate) and prints fish commands for every exported
#: variable they changed. The scripts' own output goes to stderr.
_BRIDGE = r"""d=$1
__envlock_s=${LC_COLLATE+x}; __envlock_o=${LC_COLLATE-}; LC_COLLATE=C
__envlock_f=()
for f in "$d"/*.sh; do
  [ -f "$f" ] || continue
  case ${f##*/} in HOOK.sh) continue ;; esac
  [ -e "${f%.sh}.fish" ] && continue
  if [ "$2" = deactivate ]; then __envlock_f=("$f" "${__envlock_f[@]}"); else __envlock_f+=("$f"); fi
done
if [ -n "$__envlock_s" ]; then LC_COLLATE=$__envlock_o; else unset LC_COLLATE; fi
declare -A __envlock_b=() __envlock_a=()
while IFS= read -r -d '' kv; do __envlock_b[${kv%%=*}]=${kv#*=}; done < <(env -0)
for f in "${__envlock_f[@]}"; do . "$f" 1>&2; done
while IFS= read -r -d '' kv; do __envlock_a[${kv%%=*}]=${kv#*=}; done < <(env -0)
for k in "${!__envlock_a[@]}"; do
  case $k in _|SHLVL|PWD|OLDPWD) continue ;; esac
  [[ $k =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
  if [[ -z ${__envlock_b[$k]+x} || ${__envlock_b[$k]} != "${__envlock_a[$k]}" ]]; then
    v=${__envlock_a[$k]}; v=${v//\\/\\\\}; v=${v//\'/\\\'}
    printf "set -gx %s '%s'\n" "$k" "$v"
  fi
done
for k in "${!__envlock_b[@]}"; do
  [[ $k =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
  [[ -n ${__envlock_a[$k]+x} ]] || printf 'set -e %s\n' "$k"
done""".replace("HOOK", HOOK_NAME)


def bridge_lines(kind: str) -> list[str]:
    """Source the prefix's `kind`.d/*.sh scripts in bash and apply their changes (see the module docstring)."""
    return [
        # Only inside conda's activation of this prefix (or envlock shell-hook's): the scripts read $CONDA_PREFIX.
        'if test "$CONDA_PREFIX" != "$_envlock_p"',
        "else if command -q bash",
        f"    bash --noprofile --norc -c {fish_quote(_BRIDGE)} envlock-bridge \"$_envlock_p/etc/conda/{kind}.d\" "
        f"{kind} | source",
        "else",
        f'    set -l _envlock_sh "$_envlock_p"/etc/conda/{kind}.d/*.sh',
        f'    set _envlock_sh (string match -v -- "*/{HOOK_NAME}.sh" $_envlock_sh)',
        "    if set -q _envlock_sh[1]",
        f'        echo "envlock: bash not found: the {kind}.d/*.sh scripts of $_envlock_p (compilers, nvcc) '
        'were not applied in fish" >&2',
        "    end",
        "end",
    ]


def _targets(linux: list[str]) -> tuple[list[str], str]:
    if len(linux) == 1:
        return [], TARGETS.get(linux[0], "x86_64-linux")
    lines = ["set -l _envlock_t x86_64-linux", "switch (uname -m 2>/dev/null)"]
    for platform, pattern in (("linux-aarch64", "aarch64 arm64"), ("linux-ppc64le", "ppc64le")):
        if platform in linux:
            # plain `set` updates the outer local (`set -l` would be local to the case arm)
            lines += [f"    case {pattern}", f"        set _envlock_t {TARGETS[platform]}"]
    return [*lines, "end"], "$_envlock_t"


def _prefix_lines(spec: ActivationSpec) -> list[str]:
    if spec.prefix is not None:
        return [f"set -l _envlock_p {fish_quote(norm_prefix(spec.prefix, False))}"]
    return [
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


def render_activate(spec: ActivationSpec) -> str:
    """activate.fish (`source` it)."""
    linux = [p for p in spec.platforms if not is_windows(p)] or ["linux-64"]
    targets_lines, targets = _targets(linux)
    ops = env_ops(linux[0], spec.torch_source, spec.has_cudnn)
    names = changed_vars(ops)
    body = [
        f"if set -q {ACTIVE}",
        *indent(restore_lines()),
        "end",
        *_forget_lines(),
        "set -l _envlock_c",
        *[line for op in ops for line in _op(op, targets)],
        "set -l _envlock_v",
        *[f"if set -q {SET}{v}; or set -q {PREPENDED}{v}; or set -q {APPENDED}{v}; set -a _envlock_v {v}; end"
          for v in names],
        f'if set -q _envlock_v[1]; set -gx {CHANGED} "$_envlock_v"; end',
        f'if set -q _envlock_c[1]; set -gx {CREATED} "$_envlock_c"; end',
        f'set -gx {ACTIVE} "$_envlock_p"',
        *(bridge_lines("activate") if spec.bridge_sh else []),
    ]
    lines = [
        "# envlock: activate the CUDA toolchain of a conda environment (fish: source this file).",
        "# Generated by envlock; do not edit. Undo with the matching deactivate script.",
        prefix_note(spec, "the first argument (source activate.fish PREFIX)"),
        sources_note(spec),
        COMPOSE_NOTE,
        *(["# Also applies the env's other activate.d/*.sh scripts through bash (conda's fish activation skips them)."]
          if spec.bridge_sh else []),
        *_prefix_lines(spec),
        *targets_lines,
        f'if test "${ACTIVE}" != "$_envlock_p"',
        *indent(body),
        "end",
        "set -e _envlock_p" + ("; set -e _envlock_t" if targets_lines else ""),
    ]
    return "\n".join(lines) + "\n"


def render_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.fish."""
    bridge = spec is not None and spec.bridge_sh and spec.prefix is not None
    lines = [
        "# envlock: undo the CUDA toolchain activation (fish: source this file).",
        "# Generated by envlock; do not edit. Restores only what still holds the value the activation set and",
        "# removes only the list entries it added; a variable it found unset is unset again.",
        f"if set -q {ACTIVE}",
        *indent(restore_lines()),
        "end",
    ]
    if bridge:
        assert spec is not None and spec.prefix is not None
        lines += [
            "# The env's other deactivate.d/*.sh scripts, through bash (conda's fish deactivation skips them).",
            f"set -l _envlock_p {fish_quote(norm_prefix(spec.prefix, False))}",
            *bridge_lines("deactivate"),
            "set -e _envlock_p",
        ]
    return "\n".join(lines) + "\n"


def render_step(step: Any) -> str:
    """conda's activation step (envlock.seams.activation.conda.Step) as fish text, in conda's order."""

    def export(key: str, value: str) -> str:
        if key == "PATH":  # conda's fish activator sets PATH as a list
            return "set -gx PATH " + " ".join(fish_quote(p) for p in value.split(":"))
        return f"set -gx {key} {fish_quote(value)}"

    def run(script: Any) -> str:
        if script.text is None:
            return f"source {fish_quote(script.path)}"
        return f"# envlock's own hook ({script.path} is not in this env)\n{script.text.rstrip()}"

    lines = [export(k, v) for k, v in sorted(step.export_path.items())]
    lines += [run(s) for s in step.deactivate_scripts]
    lines += [f"set -e {k} || true" for k in step.unset_vars]
    lines += [export(k, v) for k, v in step.export_vars.items()]
    lines += [run(s) for s in step.activate_scripts]
    return "\n".join(lines) + "\n"


SHELL = Shell("fish", "fish", windows=False, render_activate=render_activate, render_deactivate=render_deactivate,
              in_lock=False, render_step=render_step)
