"""Start-up observer for the Ctrl-C-at-start-up tests (tests/test_cli_usage.py); envlock never imports it.

The tests put this folder on PYTHONPATH, so the interpreter's `site` runs it in the envlock process before the
console script or `python -m envlock` starts. With ENVLOCK_PROBE_STARTUP set it watches the interpreter's own
audit events: at the first `import` after SIGINT's handler became a function other than Python's
default_int_handler (envlock's start-up handler, installed by envlock/__init__.py, is in place; an inherited SIG_IGN
is no handler) it writes `envlock-probe: start-up` to stderr; with ENVLOCK_PROBE_STARTUP=pause it then holds that
import for 10 s, so the test's SIGINT lands in envlock's
start-up whatever the machine's load (the handler ends the process). What the test sees is the real signal
disposition of the real program, not a line envlock writes for it.
"""

import os
import sys

import _signal

_MODE = os.environ.get("ENVLOCK_PROBE_STARTUP")
_seen: list[bool] = []


def _watch(event: str, args: tuple[object, ...]) -> None:
    handler = _signal.getsignal(_signal.SIGINT)  # SIG_IGN / SIG_DFL (ints) are no handler of envlock's
    if _seen or event != "import" or not callable(handler) or handler is _signal.default_int_handler:
        return
    _seen.append(True)
    os.write(2, b"envlock-probe: start-up\n")
    if _MODE == "pause":
        import time

        time.sleep(10)


if _MODE:
    sys.addaudithook(_watch)
