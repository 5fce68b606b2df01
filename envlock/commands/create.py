"""`envlock create`, `envlock run`, `envlock shell-hook`, `envlock hook` (adapters: options → one call → render).

A plain `create` command line runs this module without importing typer (envlock/commands/fastargs.py): every
parameter is declared with opt()/arg(), and typer is imported only when the app is built (`register`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from envlock.commands import options, with_bars
from envlock.commands.fastargs import opt, typer_command
from envlock.errors import EnvlockError, SpecError, UsageError, again
from envlock.names import printable

if TYPE_CHECKING:
    import typer

    from envlock.usecases.create import CreateResult



def create_cmd(
    name: Optional[str] = options.lock_arg(),
    lock: Optional[str] = options.lock(),
    prefix: Optional[str] = options.prefix(),
    env_name: Optional[str] = options.env_name(),
    platform: Optional[str] = options.platform(default="this machine's"),
    offline: bool = options.offline(),
    mirror: list[str] = options.mirror(),
    project_dir: str = options.project_dir(),
    quiet: bool = options.quiet(),
    as_json: bool = options.as_json(),
    locked: bool = opt(False, "--locked", help="Refuse a lock that no longer matches its spec (envlock check)."),
    frozen: bool = opt(False, "--frozen", help="Install the lock as it is, without comparing it with its spec."),
    allow_insecure: bool = options.allow_insecure(),
) -> int:
    """Create (or update) an environment from a lock, verifying every package's sha256.

    The environment: -p PATH, -n NAME, else the lock's own name under the envs dir; a path nvcc cannot read
    (whitespace, ", $ or a backquote: cuda-nvcc's activation puts it in NVCC_PREPEND_FLAGS) is refused.
    """
    from envlock.commands.resolve import parse_mirrors
    from envlock.models import host_platform
    from envlock.usecases.create import CreateRequest, create_env, default_prefix
    from envlock.formats import read_to_install

    options.platforms(platform)
    if locked and frozen:
        raise UsageError("--locked and --frozen contradict each other",
                         hint=("--locked checks the lock, --frozen skips it: ", again(drop=("--frozen",))))
    project = Path(project_dir)
    lock_path = options.chosen_lock(project_dir, name, lock)
    lock_file = read_to_install(lock_path)  # read once: create_env takes it as read
    target = default_prefix(lock_file, prefix, env_name)
    from envlock.commands.lifecycle import freshness_check  # lock lifecycle: check the lock against its spec

    req = CreateRequest(lock_path=lock_path, prefix=target, platform=platform or host_platform(),
                        offline=offline, mirrors=parse_mirrors(mirror, project), allow_insecure=allow_insecure,
                        freshness_check=None if frozen else freshness_check(project, lock_path, locked=locked),
                        lock=lock_file)

    result = with_bars(lambda p: create_env(req, p), as_json=as_json, quiet=quiet)
    if not as_json and not quiet:
        render_create(result)
    return 0


def render_create(result: CreateResult) -> None:
    """The summary on stderr (stdout stays free for --json), folded to the width; paths quoted for a shell,
    paths and names with control characters escaped."""
    from envlock.errors import quote_word
    from envlock.wrapping import columns, fold, fold_command

    width = columns(sys.stderr)
    quoted = printable(quote_word(str(result.prefix)))
    prefix, lock, platform = printable(str(result.prefix)), printable(str(result.lock_path)), printable(result.platform)
    if result.action == "unchanged":
        lines = fold(f"{prefix} is already up to date with {lock} (nothing to do)", width)
    else:
        fetched = f"{result.downloaded} from {result.source}" if result.source else f"{result.downloaded} downloaded"
        lines = fold(
            f"{result.action} {prefix} from {lock} ({platform}): {result.packages} packages"
            f"{f' + {result.wheels} wheels (PyPI part)' if result.wheels else ''}, "
            f"{fetched}, {result.cached} from the package cache, every hash verified", width)
        if result.platform.startswith("win-"):
            lines += [*fold_command("activate: ", f"conda activate {quoted}", width),
                      "  (runs the Visual Studio compiler activation too)",
                      *fold_command("run one command: ", f"envlock run -p {quoted} -- CMD", width),
                      "  (CUDA variables only: no .bat scripts)"]
        else:
            lines += [*fold_command("activate: ", f"conda activate {quoted}", width),
                      *fold_command("      or, without conda: ", f'eval "$(envlock shell-hook -p {quoted})"', width),
                      *fold_command("run one command: ", f"envlock run -p {quoted} -- CMD", width),
                      *fold("(all three run the env's activation scripts: the same CUDA_HOME, PATH, CC, CXX and "
                            "NVCC_PREPEND_FLAGS)", width)]
    sys.stderr.write("".join(f"{ln}\n" for ln in lines))


# --------------------------------------------------------------------------- run / shell-hook


def _target_prefix(prefix: Optional[str], env_name: Optional[str]) -> Path:
    from envlock.seams.dirs import named_env

    if prefix and env_name:
        raise UsageError("give either -p/--prefix or -n/--name, not both", hint="-p takes a path, -n a name")
    if not prefix and not env_name:
        raise UsageError("which environment? pass -p PREFIX or -n NAME", hint="e.g. -p ~/envs/train")
    path = Path(prefix).expanduser().absolute() if prefix else named_env(str(env_name))
    if not (path / "conda-meta").is_dir():
        raise SpecError(f"{path} is not a conda environment (no conda-meta/)",
                        hint=("create it first: ", again("-p", str(path), command="create"),
                              " (from the project's lock; --lock NAME|FILE for another)"))
    return path


def run_cmd(
    ctx: typer.Context,
    prefix: Optional[str] = options.prefix(),
    env_name: Optional[str] = options.env_name(),
) -> int:
    """Run a command in the environment as `conda activate` sets it up (no conda needed): run -p P -- CMD…"""
    from envlock.seams.activation.conda import activated_environ, prefix_activation
    from envlock.models import host_platform

    command = list(ctx.args)
    if command and command[0].startswith("-") and command[0] != "--":  # an option of run's that it lacks
        raise UsageError(f"no such option: {command[0]}",
                         hint="usage: envlock run [-p PREFIX | -n NAME] -- CMD [ARGS…]; `envlock run --help` lists the options")
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command given", hint="envlock run -p PREFIX -- CMD [ARGS…]")
    path = _target_prefix(prefix, env_name)
    platform = prefix_activation(path)[0]
    if platform != host_platform():
        raise SpecError(f"{path} is a {platform} environment; this machine is {host_platform()}",
                        hint="run it on a matching machine (or create one for this platform)")
    env, _, error = activated_environ(os.environ, path)
    if error is not None:
        from envlock.wrapping import say

        say("envlock: warning", f"{printable(error)}; running with conda's variables and envlock's own activation")
    from envlock.seams import proc

    # On POSIX this process becomes the command (its exit code is the command's).
    return proc.replace_with(command, env, failed=lambda why: EnvlockError(
        f"cannot run {command[0]!r}: {why.reason}", hint=f"is it installed in {path}/bin or on PATH?"))


def shell_hook_cmd(
    prefix: Optional[str] = options.prefix(),
    env_name: Optional[str] = options.env_name(),
    shell: Optional[str] = opt(
        None, "--shell", metavar="[bash|zsh|sh|fish|powershell|cmd]",
        help="The shell to print for (default: from $SHELL, else bash).", show_default=False,
    ),
    deactivate: bool = opt(
        False, "--deactivate", help="Print the deactivation of the active env instead (like `conda deactivate`)."
    ),
) -> int:
    """Print what `conda activate` would run: eval "$(envlock shell-hook -p PREFIX)"."""
    from envlock.seams.activation import shell_hook, shell_named, shell_names
    from envlock.seams.activation.conda import deactivation_step, prefix_activation, prefix_step, render_step

    chosen = shell or Path(os.environ.get("SHELL", "bash")).name
    found = shell_named(chosen)
    if found is None:
        if shell:
            options.choice("--shell", shell, tuple(shell_names()), "a shell envlock writes for")
        chosen, found = "bash", shell_named("bash")
    conda_step = found is not None and found.render_step is not None  # sh, fish: conda's activation replicated
    if deactivate and conda_step:
        if prefix or env_name:
            raise UsageError("--deactivate takes no -p/-n: it deactivates the active env ($CONDA_PREFIX)",
                            hint='eval "$(envlock shell-hook --deactivate)"')
        sys.stdout.write(render_step(deactivation_step(os.environ, chosen), chosen))
        return 0
    path = _target_prefix(prefix, env_name)
    platform, torch_source, has_cudnn = prefix_activation(path)
    try:
        # PowerShell and cmd get envlock's own hook only (conda's activation is replicated for sh and fish).
        text = shell_hook(chosen, platform, str(path), torch_source, has_cudnn, deactivate=deactivate)
    except ValueError:
        raise SpecError(f"no {chosen} hook for a {platform} environment",
                        hint="sh/bash/zsh/fish for linux envs, powershell/cmd for win-64 envs") from None
    if conda_step:
        text = render_step(prefix_step(os.environ, path, chosen), chosen)
    sys.stdout.write(text)
    return 0


def hook_cmd(
    prefix: Optional[str] = options.prefix(),
    env_name: Optional[str] = options.env_name(),
    torch_source: Optional[str] = opt(
        None, "--torch-source", metavar="[pip|conda-forge]", help="Where the env's torch comes from: pip (its CUDA "
        "libraries before the env's) or conda-forge (default: the lock's anchor, else conda-forge when the env has "
        "conda's pytorch, else pip)."
    ),
    lock: Optional[str] = opt(
        None, "--lock", metavar="NAME|FILE", show_default=False,
        help="The lock the env was installed from (its anchor is recorded for doctor). Default: the project's one "
        "lock whose packages are exactly the env's; none matching records no anchor."),
    project_dir: str = options.project_dir(),
    quiet: bool = opt(False, "-q", "--quiet", help="No `wrote` lines and no summary."),
) -> int:
    """Add envlock's activation to an env another tool made (conda create --file, conda env create, conda-lock
    install, conda-pack): `conda activate` then sets what `envlock run` sets, and doctor knows the lock's anchor."""
    import shlex

    from envlock.formats.spec import check_torch_source
    from envlock.usecases.hook import hook

    source = check_torch_source(torch_source, "--torch-source", UsageError) if torch_source is not None else None
    path = _target_prefix(prefix, env_name)
    done = hook(path, source, Path(project_dir), lock)
    if quiet:
        return 0
    from envlock.wrapping import columns, fold

    width = columns(sys.stderr)
    quoted = shlex.quote(str(path))
    lines = [f"wrote {printable(str(path / rel))}" for rel in done.written]
    lines += [f"{done.platform} env, torch from {done.torch_source}: `conda activate {printable(quoted)}` now sets "
              f"what `envlock run -p {printable(quoted)}` sets (CUDA_HOME, CUDA_PATH, CPATH, ...)"]
    if done.lock is not None:
        lines.append(f"anchor recorded from {printable(str(done.lock))} (doctor compares nvcc with it)")
    else:
        lines.append(f"no anchor recorded: {printable(done.why_no_lock)}; doctor compares nvcc with the env's torch "
                     "only (pass --lock NAME|FILE to name the lock it was installed from)")
    sys.stderr.write("".join(f"{ln}\n" for line in lines for ln in fold(line, width)))
    return 0


#: The commands a plain command line runs without typer (envlock/commands/fastargs.py): a warm `create` is
#: ~0.1 s of linking, and typer's import and app were a third of what envlock added to it.
FAST = {"create": create_cmd}


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    import typer

    app.command("create")(typer_command(create_cmd))
    run = typer_command(run_cmd)
    run.__annotations__["ctx"] = typer.Context  # the module imports typer only here
    app.command(
        "run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}
    )(run)
    app.command("shell-hook")(typer_command(shell_hook_cmd))
    app.command("hook")(typer_command(hook_cmd))
