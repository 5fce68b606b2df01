"""The options several commands take, declared once with one help text each, and the rule they follow.

The rule (README, "One rule for names, options and exit codes"):

* an **environment** (a prefix) is `-p/--prefix PATH` or `-n/--name NAME` (NAME under the envs dir), in
  every command that takes one (create, unpack, run, shell-hook, hook, doctor);
* a **lock** is its NAME (`environments/NAME.yml`, `locks/NAME/`): the positional argument of the commands
  that read locks (create, pack, export dockerfile/explicit, lock, check, mirror), else `--lock NAME|FILE`
  (a FILE: a conda-lock.yml or @EXPLICIT file anywhere); `resolve --lock NAME` names the lock it writes and `update
  PKG… --lock NAME` the lock it moves (their old spelling `--name` still works, with a warning);
* a value of the wrong form or not among an option's choices is a usage error (exit 2), like an unknown
  option; a well-formed value envlock cannot serve (a torch release never built for that CUDA) exits 1.

Each factory returns a fresh declaration (envlock/commands/fastargs.py: what typer.Option/Argument take, no
typer imported), so `resolve` and `check` read a plain command line without typer; every command registers
through `typer_command`. A value's choices and form are checked in the command's body (`platforms()`,
`choice()`), which both readers reach.
"""

from __future__ import annotations

import sys
from typing import Any

from envlock.commands.fastargs import arg, opt
from envlock.errors import UsageError

CUDA_PLATFORMS = ("linux-64", "linux-aarch64", "win-64")
LINUX_PLATFORMS = ("linux-64", "linux-aarch64")
_MACOS = ("osx-64", "osx-arm64")

MIRROR_HELP = (
    "NAME=URL or NAME=PATH (repeatable): fetch channel NAME from there (nvidia covers its labels; pypi: the "
    "PyPI part's wheels, by name from a simple index); locks keep the canonical URLs. Comes before "
    "ENVLOCK_MIRRORS and envlock.toml (`envlock config` lists what is in force)."
)
PROJECT_HELP = "Project directory holding environments/ and locks/ (default: the current directory)."
JSON_HELP = "Machine-readable result on stdout (an error as {error, hint, exit_code, detail})."
QUIET_HELP = "No progress and no summary."
VERBOSE_HELP = "Print a failure's detail above the error: every solve attempt in full, every channel tried."
OFFLINE_HELP = "Use only envlock's cache: no network."
INSECURE_HELP = "Allow plain-http channels and package indexes that are not on this machine (loopback is always allowed)."
PREFIX_HELP = "The environment's path."
ENV_NAME_HELP = "The environment's name, under the envs dir ($ENVLOCK_ENVS_DIR; `envlock config` shows it)."
LOCK_ARG_HELP = "The lock's NAME: locks/NAME/ (default: the only lock)."
LOCK_HELP = "A lock by NAME (locks/NAME/) or FILE (a conda-lock.yml or @EXPLICIT file anywhere)."


def mirror() -> Any:
    return opt([], "--mirror", metavar="NAME=URL", help=MIRROR_HELP, show_default=False)


def project_dir() -> Any:
    return opt(".", "--project-dir", metavar="DIR", help=PROJECT_HELP, show_default=False)


def as_json() -> Any:
    return opt(False, "--json", help=JSON_HELP)


def quiet() -> Any:
    return opt(False, "-q", "--quiet", help=QUIET_HELP)


def verbose() -> Any:
    return opt(False, "--verbose", "-v", help=VERBOSE_HELP)


def offline() -> Any:
    return opt(False, "--offline", help=OFFLINE_HELP)


def allow_insecure() -> Any:
    return opt(False, "--allow-insecure", help=INSECURE_HELP)


def prefix() -> Any:
    return opt(None, "-p", "--prefix", metavar="PATH", help=PREFIX_HELP)


def env_name() -> Any:
    return opt(None, "-n", "--name", metavar="NAME", help=ENV_NAME_HELP)


def lock_arg() -> Any:
    return arg(None, metavar="[NAME]", help=LOCK_ARG_HELP, show_default=False)


def lock(many: bool = False) -> Any:
    return opt([] if many else None, "--lock", metavar="NAME|FILE",
                        help=LOCK_HELP + (" Repeatable." if many else ""), show_default=False)


def platform(choices: tuple[str, ...] = CUDA_PLATFORMS, *, many: bool = False, default: str) -> Any:
    """--platform P, one of `choices` (checked by `platforms()`); `default` says what none means."""
    return opt([] if many else None, "--platform", show_default=False, metavar=f"[{'|'.join(choices)}]",
               help=f"Platform{' (repeatable)' if many else ''}; default: {default}.")


def many(values: list[str] | None) -> list[str]:
    """A repeatable option's values, each of which may be a comma list: `--with curand,nvtx` is `--with curand
    --with nvtx` (README: one rule for options). For options whose values hold no comma (--with, --platform)."""
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def platforms(values: Any, choices: tuple[str, ...] = CUDA_PLATFORMS) -> Any:
    """--platform's value(s) when each is one of `choices` (a repeatable one's comma lists split: `many`); else
    the usage error naming them (and why for macOS: torch there has no CUDA)."""
    if isinstance(values, list):
        values = many(values)
    for value in [values] if isinstance(values, str) else (values or ()):
        if value not in choices:
            why = ": torch on macOS has no CUDA, so there is no CUDA toolchain to lock" if value in _MACOS else ""
            raise UsageError(f"--platform {value!r} is not a platform this command takes{why}",
                             hint=f"one of: {', '.join(f'--platform {c}' for c in choices)}")
    return values


def choice(option: str, value: str | None, choices: tuple[str, ...], what: str) -> str | None:
    """`value` if it is one of `choices` (None passes); else a usage error naming them."""
    if value is None or value in choices:
        return value
    raise UsageError(f"{option} {value!r} is not {what} ({', '.join(choices)})",
                     hint=f"one of: {', '.join(f'{option} {c}' for c in choices)}")


def deprecated(old: str, new: str, command: str) -> None:
    """The one warning for an old spelling that still works."""
    from envlock.wrapping import columns, wrap

    text = (f"`envlock {command} {old}` is now `envlock {command} {new}` (the old spelling still works; "
            "-n/--name names an environment, README: one rule for names)")
    sys.stderr.write("".join(f"{ln}\n" for ln in wrap("warning", text, columns(sys.stderr))))


# --------------------------------------------------------------------------- which lock


def is_lock_name(value: str) -> bool:
    """A --lock value that names a lock (locks/NAME/) rather than a file: no folder, no file suffix, no file."""
    from pathlib import Path

    return ("/" not in value and "\\" not in value and not value.endswith((".yml", ".yaml", ".lock", ".txt"))
            and not Path(value).is_file())


def chosen_lock(project_dir: str, name: str | None, lock: str | None) -> Any:
    """The lock a command reads: the NAME argument, --lock NAME|FILE, else the project's only lock (a Path)."""
    from pathlib import Path

    from envlock.usecases.create import find_lock
    from envlock.errors import again

    if lock is not None and name:
        raise UsageError("give either a lock NAME or --lock NAME|FILE, not both",
                         hint=("the NAME alone: ", again(args=(name,), drop=("--lock",))))
    if lock is not None:
        return find_lock(Path(project_dir), lock) if is_lock_name(lock) else lock_file(lock)
    return find_lock(Path(project_dir), name)


def lock_file(value: str) -> Any:
    """The Path of a --lock FILE; one in a folder under `locks/` is named by that folder, which must be a lock
    name (envlock/envname.py) like every other."""
    from pathlib import Path

    from envlock.envname import validate_name

    path = Path(value)
    folder = path if path.is_dir() else path.parent
    if folder.parent.name == "locks":
        validate_name(folder.name, "lock folder name", hint="a lock's folder is its name: rename the folder")
    return path
