"""The command line: parse options, call one function, render. The only module that exits.

Commands live in envlock/commands/<name>.py as short adapters; heavy modules (rattler,
conda-lock, requests) are imported inside them, so `envlock --help` and `envlock check` stay fast.
"""

from __future__ import annotations

import json
import os
import sys

import typer

from envlock import __version__
from envlock.commands import config as _config
from envlock.commands import create as _create
from envlock.commands import doctor as _doctor
from envlock.commands import export as _export
from envlock.commands import lifecycle as _lifecycle
from envlock.commands import mirror as _mirror
from envlock.commands import pack as _pack
from envlock.commands import resolve as _resolve
from envlock.errors import EnvlockError, Interrupted

app = typer.Typer(
    name="envlock",
    help="Lock a CUDA development toolchain (nvcc, headers, cuDNN, host compilers) matched to your torch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envlock {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """envlock: torch → CUDA anchor → skew-ruled toolchain → per-platform locks."""


for _module in (_resolve, _create, _doctor, _lifecycle, _export, _config, _mirror, _pack):
    _module.register(app)


def report_error(err: EnvlockError, *, as_json: bool) -> int:
    """Print one `error:` line and one `hint:` line (or a JSON object) and return the exit code."""
    if as_json:
        sys.stdout.write(json.dumps({"error": err.message, "hint": err.hint, "exit_code": err.exit_code}) + "\n")
    else:
        sys.stderr.write(f"error: {err.message}\nhint: {err.hint}\n")
    return err.exit_code


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises, never prints a traceback)."""
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args
    try:
        result = app(args=args, prog_name="envlock", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except EnvlockError as err:
        return report_error(err, as_json=as_json)
    except KeyboardInterrupt:
        return report_error(
            Interrupted("interrupted", hint="nothing was left half-written; run the command again"),
            as_json=as_json,
        )
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return report_error(Interrupted("aborted", hint="run the command again"), as_json=as_json)
    except Exception as exc:  # click usage errors and anything unforeseen
        # typer >= 0.29 raises its vendored click's exceptions, older typer plain click's: match by name.
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "ClickException" in kinds:
            exc.show()  # type: ignore[attr-defined]
            return 2 if "UsageError" in kinds else int(exc.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("ENVLOCK_DEBUG"):
            raise
        err = EnvlockError(
            f"internal error: {type(exc).__name__}: {exc}",
            hint="set ENVLOCK_DEBUG=1 for the traceback and report it",
        )
        return report_error(err, as_json=as_json)


def main() -> None:
    """Console entry point: flush and leave with os._exit.

    py-rattler 0.28 can segfault at interpreter exit (a tokio worker racing finalisation), so the
    process never runs interpreter teardown once a command has finished.
    """
    code = run()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    main()
