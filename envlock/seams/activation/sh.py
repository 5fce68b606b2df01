"""activate.sh / deactivate.sh for bash, zsh and dash (the rules: envlock/seams/activation/model.py).

The prefix lives in `$_envlock_p` and is never re-parsed as code; values go inside double quotes,
and every test quotes them, so a prefix with spaces, quotes, `$` or glob characters stays literal.
"""

from __future__ import annotations

from typing import Any

from envlock.seams.activation.model import (
    ACTIVE,
    APPENDED,
    CHANGED,
    CREATED,
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


def sh_quote(text: str) -> str:
    """Single-quote for POSIX sh: nothing inside is expanded."""
    return "'" + text.replace("'", "'\\''") + "'"


def indent(lines: list[str], n: int = 4) -> list[str]:
    return [(" " * n + line) if line else line for line in lines]


def _path(rel: str, targets: str) -> str:
    rel = rel.replace(TARGETS_TOKEN, targets)
    return "$_envlock_p" if not rel else f"$_envlock_p/{rel}"


def _op(op: EnvOp, targets: str) -> list[str]:
    value, var = _path(op.rel, targets), op.var
    if op.action == "set":
        return [
            f'if [ "${{{var}-}}" != "{value}" ]; then',
            f'    if [ -n "${{{var}+x}}" ]; then export {OLD}{var}="${var}"; else unset {OLD}{var}; fi',
            f'    export {SET}{var}="{value}" {var}="{value}"',
            "fi",
        ]
    mark = bookkeeping(var, op.action)
    new = f"{value}${{{var}:+:${var}}}" if op.action == "prepend" else f"${{{var}:+${var}:}}{value}"
    return [
        # An entry already in the list (conda's own <prefix>/bin) is not ours: leave it, record nothing.
        f'case ":${{{var}-}}:" in *:"{value}":*) ;; *)',
        f'    if [ -z "${{{var}+x}}" ]; then _envlock_c="$_envlock_c {var}"; fi',
        f'    export {var}="{new}" {mark}="${{{mark}:+${mark}:}}{value}" ;;',
        "esac",
    ]


def _remove_entries(var: str, mark: str, last: bool) -> list[str]:
    """Remove each entry listed in $mark from $var once (the first occurrence, or the last)."""
    if last:
        cut = '_envlock_l="${_envlock_l%":$_envlock_e:"*}:${_envlock_l##*":$_envlock_e:"}"'
    else:
        cut = '_envlock_l="${_envlock_l%%":$_envlock_e:"*}:${_envlock_l#*":$_envlock_e:"}"'
    return [
        f'if [ -n "${{{mark}+x}}" ] && [ -n "${{{var}+x}}" ]; then',
        f'    _envlock_r="${mark}:"',
        '    while [ -n "$_envlock_r" ]; do',
        '        _envlock_e="${_envlock_r%%:*}"; _envlock_r="${_envlock_r#*:}"',
        f'        _envlock_l=":${var}:"',
        '        case "$_envlock_l" in *":$_envlock_e:"*)',
        f"            {cut}",
        f'            _envlock_l="${{_envlock_l#:}}"; export {var}="${{_envlock_l%:}}" ;;',
        "        esac",
        "    done",
        f'    case " ${{{CREATED}-}} " in *" {var} "*) if [ -z "${var}" ]; then unset {var}; fi ;; esac',
        "fi",
    ]


def _forget_lines() -> list[str]:
    marks = sorted({bookkeeping(v, a) for v, acts in undo_kinds(False).items() for a in acts})
    olds = sorted({OLD + v for v, acts in undo_kinds(False).items() if "set" in acts})
    return [f"unset {' '.join(marks)}", f"unset {' '.join(olds)}", f"unset {CHANGED} {CREATED}"]


def restore_lines() -> list[str]:
    """Undo whatever envlock's activation recorded (generic: it reads only the bookkeeping variables)."""
    lines: list[str] = []
    for var, actions in undo_kinds(False).items():
        for action in actions:
            mark = bookkeeping(var, action)
            if action == "set":
                lines += [
                    # Restore only what still holds the value the activation set: a newer one is the user's.
                    f'if [ -n "${{{mark}+x}}" ] && [ -n "${{{var}+x}}" ] && [ "${var}" = "${mark}" ]; then',
                    f'    if [ -n "${{{OLD}{var}+x}}" ]; then export {var}="${OLD}{var}"; else unset {var}; fi',
                    "fi",
                ]
                continue
            lines += _remove_entries(var, mark, last=action == "append")
    return lines + [*_forget_lines(), f"unset {ACTIVE} _envlock_r _envlock_e _envlock_l"]


def _prefix_lines(spec: ActivationSpec, script: str) -> list[str]:
    if spec.prefix is not None:
        return [f"_envlock_p={sh_quote(norm_prefix(spec.prefix, False))}"]
    if spec.conda_prefix_only:
        return [
            '_envlock_p="${CONDA_PREFIX:-}"',
            'case "$_envlock_p" in */) _envlock_p="${_envlock_p%/}" ;; esac',
            'if [ -z "$_envlock_p" ] || [ ! -d "$_envlock_p/conda-meta" ]; then',
            f'    echo "envlock: {script}: no conda environment at \'$_envlock_p\' (CONDA_PREFIX): pixi sets it'
            ' before it runs this script" >&2',
            "    unset _envlock_p",
            "    return 1 2>/dev/null || exit 1",
            "fi",
        ]
    return [
        # conda and micromamba source etc/conda/activate.d/ scripts inside their shell function, whose first
        # argument is their own command word: there the environment is $CONDA_PREFIX, set before.
        'case "${1:-}" in',
        '    activate|reactivate) _envlock_p="${CONDA_PREFIX:-}" ;;',
        '    "") _envlock_p="${ENVLOCK_PREFIX:-${CONDA_PREFIX:-}}" ;;',
        '    *) _envlock_p="$1" ;;',
        "esac",
        'case "$_envlock_p" in */) _envlock_p="${_envlock_p%/}" ;; esac',
        'if [ -z "$_envlock_p" ] || [ ! -d "$_envlock_p/conda-meta" ]; then',
        f'    echo "envlock: {script}: no conda environment at \'$_envlock_p\'; pass the prefix:'
        f' . {script} PREFIX (or set ENVLOCK_PREFIX, or activate the env with conda first)" >&2',
        "    unset _envlock_p",
        "    return 1 2>/dev/null || exit 1",
        "fi",
    ]


def _targets_lines(linux: list[str]) -> tuple[list[str], str]:
    if len(linux) == 1:
        return [], TARGETS.get(linux[0], "x86_64-linux")
    # A lock for several linux platforms: the machine that activates decides.
    arms = [f"    {pat}) _envlock_t={TARGETS[p]} ;;" for p, pat in (
        ("linux-aarch64", "aarch64|arm64"), ("linux-ppc64le", "ppc64le")) if p in linux]
    return ['case "$(uname -m 2>/dev/null)" in', *arms, "    *) _envlock_t=x86_64-linux ;;", "esac"], "$_envlock_t"


def sources_note(spec: ActivationSpec) -> str:
    if spec.torch_source == "conda-forge":
        return "# torch from conda-forge: the env's lib dirs are PREPENDED to LD_LIBRARY_PATH and LIBRARY_PATH."
    return ("# torch from pip: the env's lib dirs are APPENDED to LD_LIBRARY_PATH and LIBRARY_PATH, so torch's own\n"
            "# bundled CUDA libraries keep winning (an older libnvJitLink first breaks `import torch`).")


def prefix_note(spec: ActivationSpec, how: str, hook: str = "") -> str:
    if spec.prefix is not None:
        return "# Prefix: fixed (the environment this file was made for)."
    if spec.conda_prefix_only:
        return "# Prefix: $CONDA_PREFIX (pixi sets it to the environment before it runs a manifest's activation scripts)."
    return f"# Prefix: {how}, else $ENVLOCK_PREFIX, else $CONDA_PREFIX.{hook}"


#: How the scripts in locks/<name>/ work as conda hooks (docs/consumers.md).
HOOK_NOTE = ("\n# As a conda hook (copied into PREFIX/etc/conda/activate.d/): conda and micromamba source it with their"
             "\n# own arguments (activate, reactivate), and the prefix is $CONDA_PREFIX.")


COMPOSE_NOTE = (
    "# Changes only what differs and records it; deactivation restores a variable only if it still holds\n"
    "# the value set here, and removes exactly the list entries added here (conda's own <prefix>/bin stays\n"
    "# conda's; entries you add meanwhile stay yours)."
)


def render_activate(spec: ActivationSpec) -> str:
    """activate.sh for bash, zsh and dash (`source` / `.` it; safe under `set -u`)."""
    linux = [p for p in spec.platforms if not is_windows(p)] or ["linux-64"]
    targets_lines, targets = _targets_lines(linux)
    ops = env_ops(linux[0], spec.torch_source, spec.has_cudnn)
    names = changed_vars(ops)
    body = [
        f'if [ -n "${{{ACTIVE}+x}}" ]; then',
        *indent(restore_lines()),
        "fi",
        *_forget_lines(),
        "_envlock_c=",
        *[line for op in ops for line in _op(op, targets)],
        "_envlock_v=",
        *[f'if [ -n "${{{SET}{v}+x}}${{{PREPENDED}{v}+x}}${{{APPENDED}{v}+x}}" ]; then _envlock_v="$_envlock_v {v}"; fi'
          for v in names],
        f'if [ -n "$_envlock_v" ]; then export {CHANGED}="${{_envlock_v# }}"; fi',
        f'if [ -n "$_envlock_c" ]; then export {CREATED}="${{_envlock_c# }}"; fi',
        f'export {ACTIVE}="$_envlock_p"',
        "unset _envlock_v _envlock_c",
    ]
    lines = [
        "# envlock: activate the CUDA toolchain of a conda environment (bash, zsh, sh: source this file).",
        "# Generated by envlock; do not edit. Undo with the matching deactivate script.",
        prefix_note(spec, "the first argument (. activate.sh PREFIX in bash and zsh; POSIX sh's `.` takes none)",
                    HOOK_NOTE),
        sources_note(spec),
        COMPOSE_NOTE,
        *_prefix_lines(spec, "activate.sh"),
        *targets_lines,
        "# Already active for this prefix: sourcing again changes nothing.",
        f'if [ "${{{ACTIVE}:-}}" != "$_envlock_p" ]; then',
        *indent(body),
        "fi",
        "unset _envlock_p" + (" _envlock_t" if targets_lines else ""),
    ]
    return "\n".join(lines) + "\n"


def render_deactivate(spec: ActivationSpec | None = None) -> str:
    """deactivate.sh: undo what the activation recorded (no-op when none is active)."""
    lines = [
        "# envlock: undo the CUDA toolchain activation (bash, zsh, sh: source this file).",
        "# Generated by envlock; do not edit. Restores only what still holds the value the activation set and",
        "# removes only the list entries it added; a variable it found unset is unset again.",
        f'if [ -n "${{{ACTIVE}+x}}" ]; then',
        *indent(restore_lines()),
        "fi",
    ]
    return "\n".join(lines) + "\n"


def render_step(step: Any) -> str:
    """conda's activation step (envlock.seams.activation.conda.Step) as sh text, in conda's order."""

    def run(script: Any) -> str:
        if script.text is None:
            return f". {sh_quote(script.path)}"
        return f"# envlock's own hook ({script.path} is not in this env)\n{script.text.rstrip()}"

    lines = [f"export {k}={sh_quote(v)}" for k, v in sorted(step.export_path.items())]
    lines += [run(s) for s in step.deactivate_scripts]
    lines += [f"export {k}=''" for k in step.unset_vars]
    lines += [f"export {k}={sh_quote(v)}" for k, v in step.export_vars.items()]
    lines += [run(s) for s in step.activate_scripts]
    return "\n".join(lines) + "\n"


SHELL = Shell("sh", "sh", windows=False, render_activate=render_activate, render_deactivate=render_deactivate,
              aliases=("bash", "zsh"), render_step=render_step)
