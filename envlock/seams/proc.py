"""The one runner of other programs: every program envlock starts or execs goes through here (uv, git, bash, the
torch probe, doctor's programs, `envlock run`'s command; tests/test_owners.py checks that no other module imports
subprocess or calls os.exec*/os.spawn*/os.system).

One policy for all of them:

* a timeout (seconds; None only for `envlock run`'s exec, which is the user's own command);
* Ctrl-C stops the child (subprocess.run kills it) and leaves as Interrupted naming what was running;
* a program that cannot be started or runs past its timeout is a `Failure` (kind + words): `run` hands it to the
  caller's `failed` to word the EnvlockError, `attempt` answers 127 (not runnable) / 124 (timed out) instead;
* messages name the program (argv[0]), never the rest of its command line (secrets may be in it), and the
  child's environment is the one the caller passes (uv's scrubbed one, the env under test, ...).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from envlock.errors import EnvlockError, Interrupted

Kind = Literal["missing", "denied", "oserror", "timeout"]


@dataclass(frozen=True)
class Failure:
    """Why a program did not run to its end: `kind`, the program, the OS's reason (strerror) or the timeout;
    str() of it is the sentence ("cannot run git: No such file or directory", "took longer than 60 s")."""

    kind: Kind
    program: str
    reason: str
    timeout: float | None = None

    def __str__(self) -> str:
        if self.kind == "timeout":
            return f"took longer than {self.timeout:.0f} s"
        return f"cannot run {self.program}: {self.reason}"


class Answer(NamedTuple):
    """What a program said (`attempt`): exit status (127: not runnable, 124: timed out), stdout, stderr."""

    rc: int
    out: str
    err: str


def _failure(exc: BaseException, program: str, timeout: float | None) -> Failure:
    if isinstance(exc, subprocess.TimeoutExpired):
        return Failure("timeout", program, "timed out", timeout)
    assert isinstance(exc, OSError)
    kind: Kind = ("missing" if isinstance(exc, FileNotFoundError)
                  else "denied" if isinstance(exc, PermissionError) else "oserror")
    return Failure(kind, program, str(exc.strerror or exc))


def _interrupted(what: str) -> Interrupted:
    return Interrupted(f"interrupted while {what}", hint="run the command again")


@contextlib.contextmanager
def _sigint_held() -> Iterator[list[int]]:
    """Ctrl-C during the start of a child is held until Popen has returned (the list says whether one came).

    A KeyboardInterrupt inside Popen() after the fork leaves a child nobody kills or waits for (subprocess.run
    binds the Popen only once it has returned); measured with tests/test_proc.py on a busy machine. Signal
    handlers belong to the main thread: elsewhere nothing is held (no Ctrl-C is delivered there either).
    """
    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield came
    finally:
        signal.signal(signal.SIGINT, previous)


def _communicate(args: Sequence[str], *, input: bytes | str | None, env: Mapping[str, str] | None,
                 cwd: str | os.PathLike[str] | None, timeout: float | None, text: bool,
                 started: Callable[[], None] | None = None) -> tuple[int, Any, Any]:
    """(exit status, stdout, stderr) of `args` run to its end; the child is killed on a timeout (TimeoutExpired)
    and on Ctrl-C (KeyboardInterrupt), and waited for either way. `started()` is called once the child runs."""
    with _sigint_held() as came:
        child = subprocess.Popen(list(args), stdin=subprocess.PIPE if input is not None else None,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text,
                                 env=dict(env) if env is not None else None, cwd=cwd)
    with child:
        try:
            if came:
                raise KeyboardInterrupt
            if started is not None:
                started()
            out, err = child.communicate(input, timeout=timeout)
        except BaseException:  # TimeoutExpired, KeyboardInterrupt, anything: the child does not outlive the call
            child.kill()
            raise
    return child.returncode, out, err


def run(args: Sequence[str], *, what: str, timeout: float | None, failed: Callable[[Failure], EnvlockError],
        input: str | None = None, env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, started: Callable[[], None] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """Run `args` to its end (text output captured); its exit status is the caller's to judge.

    `failed(failure)` builds the error for a program that cannot start or exceeds `timeout` seconds;
    Ctrl-C kills the child and raises Interrupted naming `what`. `started()` is called once the child runs
    (from the thread that runs it), before its output is read.
    """
    try:
        rc, out, err = _communicate(args, input=input, env=env, cwd=cwd, timeout=timeout, text=True, started=started)
        return subprocess.CompletedProcess(list(args), rc, out, err)
    except (subprocess.TimeoutExpired, OSError) as exc:
        raise failed(_failure(exc, args[0], timeout)) from None
    except KeyboardInterrupt:
        raise _interrupted(what) from None


def attempt(args: Sequence[str], *, what: str, timeout: float, env: Mapping[str, str] | None = None,
            cwd: str | os.PathLike[str] | None = None, input: str = "", out_errors: str = "replace") -> Answer:
    """Run `args` and answer what it said; never raises but Interrupted (127: not runnable, 124: timed out, the
    reason in `err`). Output bytes that are not UTF-8 are decoded with `out_errors` (stdout) / replaced (stderr)."""
    try:
        rc, out, err = _communicate(args, input=input.encode(), env=env, cwd=cwd, timeout=timeout, text=False)
    except subprocess.TimeoutExpired:
        return Answer(124, "", f"timed out after {timeout:.0f} s")
    except OSError as exc:
        return Answer(127, "", f"{type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        raise _interrupted(what) from None
    return Answer(rc, out.decode(errors=out_errors), err.decode(errors="replace"))


def replace_with(args: Sequence[str], env: Mapping[str, str], failed: Callable[[Failure], EnvlockError]) -> int:
    """`envlock run`'s command: on POSIX this process becomes it (its exit status is the command's, signals reach
    it directly); elsewhere it runs as a child and its exit status is returned. No timeout: it is the user's."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if os.name != "posix":
            return subprocess.call(list(args), env=dict(env))
        os.execvpe(args[0], list(args), dict(env))
    except OSError as exc:
        raise failed(_failure(exc, args[0], None)) from None
    except KeyboardInterrupt:  # only on the child path: the user stopped their own command
        return 130
    return 0  # not reached: execvpe does not return
