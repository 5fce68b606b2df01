"""envlock: lock a CUDA development toolchain that matches a torch build."""

# The whole module runs inside one try: a Ctrl-C that lands while it runs, before envlock's start-up handler is
# in place, is reported like one after it (`interrupted`, 130) instead of a traceback through envlock's code.
# (No `from __future__` import here: it would run before the try. Python 3.11+ enters a try without an
# instruction, so no signal check stands between this module's first instruction and the protected range.)
try:
    import os as _os
    import _signal  # the C module: `signal` builds enums first (~2 ms more of a window)
    import sys as _sys

    # First, so that the `except` below can use them (a Ctrl-C before this point re-raises: microseconds).
    def _interrupted_at_startup(signum: int, frame: object) -> None:
        if "--json" in _sys.argv[1:]:
            _os.write(1, b'{"error": "interrupted", "hint": "nothing was started; run the command again", '
                         b'"exit_code": 130}\n')
        else:
            _os.write(2, b"error: interrupted\nhint: nothing was started; run the command again\n")
        _os._exit(130)


    def _is_the_program() -> bool:
        """Whether this process is the `envlock` console script or `python -m envlock` (not an importer)."""
        main = _sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None:
            return bool(spec.name == "envlock.__main__")
        return _os.path.basename(getattr(main, "__file__", "") or "").lower() in ("envlock", "envlock.exe")


    __version__ = "0.1.0"
    #: The name on the package index (`envlock` there is an unrelated project); the command stays `envlock`.
    DISTRIBUTION = "envlock-cuda"
    UPGRADE_HINT = f"upgrade envlock (`pip install -U {DISTRIBUTION}`)"
    REINSTALL_HINT = f"reinstall envlock (`pip install --force-reinstall {DISTRIBUTION}`)"
    __all__ = ["DISTRIBUTION", "EnvlockError", "__version__"]


    def __getattr__(name: str) -> object:
        # Lazy: the console script imports this package first, before envlock.cli has its imports done.
        if name == "EnvlockError":
            from envlock.errors import EnvlockError

            return EnvlockError
        raise AttributeError(f"module 'envlock' has no attribute {name!r}")


    def lazy_names(package: str, where: dict[str, tuple[str, ...]]) -> tuple[list[str], object, object]:
        """A package's `__all__`, `__getattr__` and `__dir__` (PEP 562) that load each name of `where` (submodule ->
        its names) from its submodule on first use, so a command pays only for the modules it uses. No submodule may
        be named like a name it exports (importing package.X sets the package's attribute X to the module)."""
        module_of = {name: module for module, names in where.items() for name in names}
        names = sorted(module_of)

        def __getattr__(name: str) -> object:
            module = module_of.get(name)
            if module is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            from importlib import import_module

            value = getattr(import_module(f"{package}.{module}"), name)
            setattr(_sys.modules[package], name, value)  # the next lookup is a plain attribute
            return value

        def __dir__() -> list[str]:
            return names

        return names, __getattr__, __dir__


    # --------------------------------------------------------------------------- Ctrl-C during start-up
    # The console script imports this package, then envlock.cli (typer, rich: ~70 ms). A Ctrl-C in that
    # window would print a traceback from the import machinery; envlock's own handler says `interrupted`
    # and exits 130 instead (nothing has started). envlock.cli.main gives Ctrl-C back to Python first thing.

    _startup_previous: object = None


    def _take_startup_sigint() -> None:
        """Own SIGINT until envlock.cli.main runs, when this process is envlock itself."""
        global _startup_previous
        if _startup_previous is not None or not _is_the_program():
            return
        try:
            if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
                _startup_previous = _signal.signal(_signal.SIGINT, _interrupted_at_startup)
        except ValueError:  # not the main thread
            return


    def _give_back_sigint() -> None:
        """From here on Ctrl-C is a KeyboardInterrupt again (envlock.cli.run reports it as `interrupted`)."""
        global _startup_previous
        if _startup_previous is not None:
            _signal.signal(_signal.SIGINT, _startup_previous)  # type: ignore[arg-type]  # the handler signal.signal returned before (kept as object: no typing import at start-up)
            _startup_previous = None


    _take_startup_sigint()
except KeyboardInterrupt:
    if "_is_the_program" not in globals() or not _is_the_program():
        raise  # a program importing envlock keeps its own Ctrl-C
    _interrupted_at_startup(2, None)
