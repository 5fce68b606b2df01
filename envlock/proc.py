"""Running another program: one runner with a timeout, and Ctrl-C that stops the child and says so.

`run` captures the program's output; a program that cannot be started, that runs past its timeout, or that
is interrupted leaves as an EnvlockError the caller words (`failed`), never as a traceback.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence

from envlock.errors import EnvlockError, Interrupted


def run(args: Sequence[str], *, what: str, timeout: float | None, failed: Callable[[str], EnvlockError],
        input: str | None = None, env: Mapping[str, str] | None = None,
        cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `args` to its end (text output captured); its exit status is the caller's to judge.

    `failed(reason)` builds the error for a program that cannot start or exceeds `timeout` seconds;
    Ctrl-C kills the child (subprocess.run does) and raises Interrupted naming `what`.
    """
    try:
        return subprocess.run(list(args), input=input, env=dict(env) if env is not None else None, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise failed(f"took longer than {timeout:.0f} s") from None
    except OSError as exc:
        raise failed(f"cannot run {args[0]}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while {what}", hint="run the command again") from None
