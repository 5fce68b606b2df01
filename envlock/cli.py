"""The command line: parse options, call one function, render. The only module that exits.

Commands live in envlock/commands/<name>.py as short adapters; heavy modules (rattler, requests, rich)
are imported inside them, and a run builds only the command it runs (`envlock check` never imports the
resolve adapter, nor lets typer build the other thirteen commands), so start-up stays short.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import envlock  # its import owns Ctrl-C until main() runs (see envlock/__init__.py)

envlock._take_startup_sigint()  # `python -m envlock`: __main__ is known only now

import json  # noqa: E402 - after the start-up Ctrl-C handler on purpose
from typing import TYPE_CHECKING  # noqa: E402 - after the start-up Ctrl-C handler on purpose

from envlock import __version__  # noqa: E402 - after the start-up Ctrl-C handler on purpose
from envlock.errors import EnvlockError, Interrupted, UsageError  # noqa: E402 - after the start-up Ctrl-C handler on purpose

if TYPE_CHECKING:
    import typer

#: Each command and the module of envlock/commands/ that adds it, in the order `--help` lists them.
COMMANDS = {
    "resolve": "resolve", "create": "create", "run": "create", "shell-hook": "create", "hook": "create",
    "doctor": "doctor",
    "lock": "lifecycle", "check": "lifecycle", "update": "lifecycle", "diff": "lifecycle", "export": "export",
    "config": "config", "mirror": "mirror", "pack": "pack", "unpack": "pack",
}  # fmt: skip
#: Commands whose plain command lines run without typer (envlock/commands/fastargs.py; `FAST` of their module).
FAST_COMMANDS = ("resolve", "check", "create")


def _root_callback() -> Any:
    """The app's own options (`--version`), typer's objects made only when typer is loaded."""
    import typer

    def _version(value: bool) -> None:
        if value:
            typer.echo(f"envlock {__version__}")
            raise typer.Exit(0)

    def _root(
        version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
    ) -> None:
        """envlock: torch → CUDA anchor → skew-ruled toolchain → per-platform locks."""

    return _root


def build_app(command: str | None = None) -> typer.Typer:
    """The app: every command, or only those of `command`'s module when it names one (what a run needs)."""
    import typer

    app = typer.Typer(
        name="envlock",
        help="Lock a CUDA development toolchain (nvcc, headers, cuDNN, host compilers) matched to your torch.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # rich formats --help for a terminal only: on a pipe (CI, scripts, `| less`) click's plain help says
        # the same without importing rich (~60 ms).
        rich_markup_mode="rich" if sys.stdout.isatty() else None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root_callback())
    modules = [COMMANDS[command]] if command in COMMANDS else dict.fromkeys(COMMANDS.values())
    for module in modules:
        importlib.import_module(f"envlock.commands.{module}").register(app)
    return app


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole app (every command), for tools and tests that walk it
        return build_app()
    raise AttributeError(f"module 'envlock.cli' has no attribute {name!r}")


def _command_of(args: list[str]) -> str | None:
    """The command a command line names (its first word), if any."""
    return next((a for a in args if not a.startswith("-")), None)



if not envlock._is_the_program():
    envlock._give_back_sigint()

INTERRUPTED_HINT = "nothing was left half-written; run the command again"
#: main() sets it: the process leaves with os._exit once run() returns.
_EXITS_AFTER_RUN = False


def report_error(err: EnvlockError, *, as_json: bool, verbose: bool = False, args: list[str] | None = None,
                 app: typer.Typer | None = None) -> int:
    """Print one `error:` and one `hint:` (folded to the width; or a JSON object) and return the exit code.

    A hint's commands (Retry) are the user's own command line `args` changed (envlock/messages.py). An
    error's `detail` (a solve's every attempt, the channels a fetch tried) goes into the JSON object, and
    above the two lines with --verbose.
    """
    from envlock import messages, wrapping
    from envlock.names import printable, scrub

    if "://" in f"{err.message}{err.hint}{getattr(err, 'detail', '')}":  # only a URL's text can quote a secret
        from envlock.seams.config import remember_configured_secrets

        remember_configured_secrets(args or [])  # the secrets in force, from every source, whatever it quotes

    hint = err.hint
    if args is not None and any(not isinstance(p, str) for p in err.hint_parts):
        try:
            hint = messages.hint_text(err.hint_parts, _retry_renderer(args, app), err.spec)
        except Exception:  # noqa: BLE001 - the plain hint is still right, only less fitted
            hint = err.hint
    # The last gate for what errors quote: no credential of a URL, no control character of a name (and each
    # stays one line).
    message, hint = scrub(err.message), scrub(hint)
    detail = tuple(scrub(str(line)) for line in getattr(err, "detail", ()) or ())
    if as_json:
        doc: dict[str, Any] = {"error": message, "hint": hint, "exit_code": err.exit_code}
        if detail:
            doc["detail"] = list(detail)
        for key in ("platform", "package", "cause", "asked"):  # what it is about, where the error knows it
            if getattr(err, key, None) is not None:
                doc[key] = scrub(str(getattr(err, key)))
        sys.stdout.write(json.dumps(doc) + "\n")
    else:
        width = wrapping.columns(sys.stderr)
        lines = [ln for d in detail for text in d.split("\n")
                 for ln in wrapping.fold("  " + printable(text), width, "    ")] if verbose else []
        lines += wrapping.wrap("error", printable(message), width) + wrapping.wrap("hint", printable(hint), width)
        sys.stderr.write("".join(f"{ln}\n" for ln in lines))
    return err.exit_code


def _options_of(command: Any) -> dict[str, Any]:
    """Every spelling of a click command's options -> messages.Option (canonical long name, takes a value)."""
    from envlock.messages import Option

    out: dict[str, Any] = {}
    for param in getattr(command, "params", ()):
        if type(param).__name__ not in ("TyperOption", "Option"):
            continue
        spellings = [*param.opts, *param.secondary_opts]
        name = max((o for o in param.opts if o.startswith("--")), key=len, default=param.opts[0])
        flag = bool(param.is_flag or param.count)
        for o in spellings:
            out[o] = Option(name, not flag)
    return out


def _leaf(app: typer.Typer, words: list[str]) -> tuple[tuple[str, ...], Any]:
    """The command path the words name (`export dockerfile`) and its click command."""
    import typer.main

    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("envlock", [], resilient_parsing=True)
    path: list[str] = []
    for word in words:
        sub = cmd.get_command(ctx, word) if hasattr(cmd, "get_command") else None
        if sub is None:
            break
        path.append(word)
        cmd, ctx = sub, sub.make_context(word, [], parent=ctx, resilient_parsing=True)
    return tuple(path), cmd


def _retry_renderer(args: list[str], app: typer.Typer | None) -> Any:
    """words_of(retry) for messages.hint_text: the retry made from this command line."""
    from envlock import messages

    own = _own_args(args)
    words = [a for a in own if not a.startswith("-")]
    path, command = _leaf(app or build_app(_command_of(own)), words)
    line = messages.parse(args, path, _options_of(command))

    options = _options_of(command)

    def words_of(retry: Any) -> list[str]:
        target = None
        if retry.command and tuple(retry.command.split()) != path:
            first = retry.command.split()[0]
            target = _options_of(_leaf(build_app(first), retry.command.split())[1])
        elif any(o not in options for o, _ in retry.set) or any(f not in options for f in retry.flags):
            return ["…", *(w for pair in retry.set for w in pair), *retry.flags]  # not this command's options
        return messages.retry_words(line, retry, target)

    return words_of


def usage_error(exc: Any, args: list[str], app: typer.Typer | None = None) -> EnvlockError:
    """A click/typer usage error as envlock's one-line form (exit 2)."""
    text = " ".join(str(exc.format_message()).split()).rstrip(".")
    text = text[:1].lower() + text[1:]
    ctx = getattr(exc, "ctx", None)
    if ctx is None:  # an option's value error comes without a context: find the command in argv

        words = [a for a in args if not a.startswith("-")]
        try:
            import typer.main

            root = typer.main.get_command(app or build_app(_command_of(args)))
            ctx = root.make_context("envlock", [], resilient_parsing=True)
            for word in words:
                sub = ctx.command.get_command(ctx, word) if hasattr(ctx.command, "get_command") else None
                if sub is None:
                    break
                ctx = sub.make_context(word, [], parent=ctx, resilient_parsing=True)
        except Exception:  # noqa: BLE001 - a better hint is all this is for
            ctx = None
    command = ctx.command_path if ctx is not None else "envlock"
    usage = " ".join(ctx.get_usage().split()).removeprefix("Usage: ") if ctx is not None else ""
    hint = f"usage: {usage}; `{command} --help` lists the options" if usage else f"see `{command} --help`"
    return _lock_given_as_name(text, args, command) or UsageError(text, hint=hint)


#: The commands whose lock is their NAME argument and that name no environment (so no -n/--name).
_LOCK_BY_ARGUMENT = ("envlock lock", "envlock check", "envlock pack", "envlock export dockerfile",
                     "envlock export explicit", "envlock export pixi")


def _lock_given_as_name(text: str, args: list[str], command: str) -> EnvlockError | None:
    """`envlock lock --name X`: the rule names a lock by its NAME argument (docs/reference.md: one rule for names); the hint
    is the same command with X as that argument."""
    if command not in _LOCK_BY_ARGUMENT or not text.startswith(("no such option: --name", "no such option: -n")):
        return None
    value = next((a.partition("=")[2] for a in args if a.startswith("--name=")), None)
    for i, word in enumerate(args[:-1]):
        if word in ("--name", "-n"):
            value = args[i + 1]
    if not value or value.startswith("-"):
        return None
    from envlock.errors import again

    return UsageError(f"{text}: `{command.removeprefix('envlock ')}` takes the lock's NAME as its argument (-n/--name "
                      "names an environment)", hint=("name the lock so: ", again(args=(value,))))


def _own_args(args: list[str]) -> list[str]:
    """The arguments envlock itself reads (those after `--` belong to `envlock run`'s command)."""
    return args[: args.index("--")] if "--" in args else args


class _SigintSeen:
    """A SIGINT handler that notes the signal, then raises KeyboardInterrupt as Python's own does.

    typer turns a KeyboardInterrupt inside a command into a silent `return 130` (no exception reaches
    run()); the note is how run() knows to say `interrupted`.
    """

    def __init__(self) -> None:
        self.seen = False
        self.previous: Any = None

    def __call__(self, signum: int, frame: Any) -> None:
        self.seen = True
        signal.default_int_handler(signum, frame)

    def __enter__(self) -> _SigintSeen:
        try:
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                self.previous = signal.signal(signal.SIGINT, self)
        except ValueError:  # not the main thread: no signal reaches this run
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _fast(own: list[str], args: list[str]) -> Any:
    """The command function and its arguments when the line is a plain `resolve`/`check`/`create` one, else None."""
    if own != args or not own or own[0] not in FAST_COMMANDS:
        return None
    from envlock.commands.fastargs import parse

    func = importlib.import_module(f"envlock.commands.{COMMANDS[own[0]]}").FAST[own[0]]
    kwargs = parse(func, own[1:])
    return None if kwargs is None else (func, kwargs)


class _Scrubbed:
    """sys.stdout or sys.stderr while a command runs: every text written passes envlock.names.scrub (credentials
    of URLs, and every secret in force wherever it appears). Anything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        from envlock.names import scrub

        self._stream.write(scrub(text) if text else text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _scrubbed_output(args: list[str]) -> Iterator[None]:
    """The secrets in force for this run (its command line and environment now; envlock.toml and pip's
    configuration as they are read), and the process's output scrubbed of them until it returns."""
    from envlock.names import forget_secrets, remember_secrets

    forget_secrets()
    remember_secrets(*args, *(v for v in os.environ.values() if "://" in v))
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Scrubbed(out), _Scrubbed(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises, never prints a traceback)."""
    args = sys.argv[1:] if argv is None else argv
    own = _own_args(args)
    as_json, verbose = "--json" in own, "--verbose" in own or "-v" in own
    interrupted = Interrupted("interrupted", hint=INTERRUPTED_HINT)
    sigint = _SigintSeen()
    app = None
    from envlock.seams.conda import one_command  # no rattler: what the command's solves share

    try:
        with sigint, one_command(process_exits=_EXITS_AFTER_RUN), _scrubbed_output(args):
            from envlock import environ

            try:
                unknown = environ.check()  # every ENVLOCK_* setting's form: a bad one is a usage error (exit 2)
            except environ.BadSetting as bad:
                raise UsageError(bad.message, hint=bad.hint) from None
            if unknown:
                from envlock.wrapping import say

                for line in unknown:
                    say("warning", line)
            fast = _fast(own, args)
            if fast is not None:  # the same function typer would call, with the same arguments
                result = fast[0](**fast[1])
                return result if isinstance(result, int) else 0
            app = build_app(_command_of(own))
            result = app(args=args, prog_name="envlock", standalone_mode=False)
        if sigint.seen and result == 130:  # typer's silent Exit(130) for a KeyboardInterrupt
            return report_error(interrupted, as_json=as_json)
        return result if isinstance(result, int) else 0
    except EnvlockError as err:
        return report_error(err, as_json=as_json, verbose=verbose, args=args, app=app)
    except KeyboardInterrupt:
        return report_error(interrupted, as_json=as_json)
    except Exception as exc:  # typer's Exit/Abort, click usage errors and anything unforeseen
        if app is not None:  # typer read the line (the fast path raises none of typer's exceptions)
            import typer

            if isinstance(exc, typer.Exit):
                if exc.exit_code == 130 and (sigint.seen or isinstance(exc.__cause__, KeyboardInterrupt)):
                    return report_error(interrupted, as_json=as_json)
                return int(exc.exit_code)
            if isinstance(exc, typer.Abort):
                return report_error(interrupted, as_json=as_json)
        # typer >= 0.28 raises its vendored click's exceptions, older typer plain click's: match by name.
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "NoArgsIsHelpError" in kinds and getattr(exc, "ctx", None) is not None:
            # `envlock` (or `envlock export`) alone: its help on stdout, exit 0, as `envlock --help` (click >= 8.2
            # made it a usage error, which printed the whole help as one `error:` paragraph)
            sys.stdout.write(exc.ctx.get_help() + "\n")  # type: ignore[attr-defined]  # a click exception, matched by class name
            return 0
        if "UsageError" in kinds:
            return report_error(usage_error(exc, own, app), as_json=as_json, args=args, app=app)
        if "ClickException" in kinds:
            err = EnvlockError(" ".join(str(exc.format_message()).split()), hint="see `envlock --help`")  # type: ignore[attr-defined]  # a click exception, matched by class name (typer may vendor its own click)
            report_error(err, as_json=as_json)
            return int(exc.exit_code)  # type: ignore[attr-defined]  # a click exception, matched by class name (typer may vendor its own click)
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
    try:
        envlock._give_back_sigint()
        # A command allocates some 35,000 long-lived objects (modules, classes, rattler's records) and frees
        # nearly all it drops by reference counting; with the default gen-0 threshold (700) the collector ran
        # ~50 times per resolve (~10-20 ms here) finding next to nothing. One collection per 200,000 objects,
        # as mypy sets it, bounds what cyclic garbage a long `lock --all` or `create` can hold.
        gc.set_threshold(200_000, 30, 30)
        global _EXITS_AFTER_RUN
        _EXITS_AFTER_RUN = True  # what the command built is left to os._exit, not freed piece by piece
        code = run()
    except KeyboardInterrupt:  # between two statements of run(), outside its own handlers
        code = report_error(Interrupted("interrupted", hint=INTERRUPTED_HINT), as_json="--json" in sys.argv[1:])
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    main()
