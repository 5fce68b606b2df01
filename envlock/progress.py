"""Progress while envlock works: a status line per platform (resolve, lock, update) and byte bars (create).

The work reports through this module and never prints: `report(key, text)` sets the status line of
`key` (a platform, "PyPI part", "anchor") on whatever `reporting()` installed, like build's injected
logger; create, pack and mirror report through the Progress protocol below. The commands install a rich
renderer only when stderr is a terminal and --json is off: on a pipe, in CI logs, with --json there is
nothing (rich, imported here lazily, is never loaded then).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator
from typing import Any, ClassVar, Protocol


class Reporter(Protocol):
    def status(self, key: str, text: str) -> None: ...

    def done(self, key: str) -> None: ...


_current: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("envlock_reporter", default=None)


def report(key: str, text: str) -> None:
    """Set the status line of `key` (nothing happens when no renderer is installed)."""
    reporter = _current.get()
    if reporter is not None:
        reporter.status(key, text)


def active() -> bool:
    """Whether status lines are shown (work done only to tell the user what is happening can be skipped)."""
    return _current.get() is not None


def done(key: str) -> None:
    """`key` has finished: its line goes."""
    reporter = _current.get()
    if reporter is not None:
        reporter.done(key)


def wanted(*, as_json: bool = False, quiet: bool = False) -> bool:
    """Progress only for a person at a terminal: stderr is a tty, no --json, no -q, TERM is not dumb."""
    return not (as_json or quiet) and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


@contextlib.contextmanager
def reporting(on: bool) -> Iterator[None]:
    """Status lines on stderr while the block runs (`on`: see wanted()); gone when it ends."""
    if not on:
        yield
        return
    lines = _StatusLines()
    token = _current.set(lines)
    try:
        yield
    finally:
        _current.reset(token)
        lines.close()


class _StatusLines:
    """One spinner line per key (rich Progress, transient: the summary replaces it)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                  console=Console(stderr=True), transient=True)
        self._tasks: dict[str, Any] = {}
        self._progress.start()

    def status(self, key: str, text: str) -> None:
        line = f"{key}: {text}"
        if key in self._tasks:
            self._progress.update(self._tasks[key], description=line)
        else:
            self._tasks[key] = self._progress.add_task(line, total=None)
        self._progress.refresh()  # a state that lasts less than a refresh period is still shown

    def done(self, key: str) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            self._progress.remove_task(task)

    def close(self) -> None:
        self._progress.stop()


# --------------------------------------------------------------------------- create


class Progress(Protocol):
    """What create, pack and mirror report while they work (CreateBars renders it; tests may record it)."""

    def start(self, phase: str, total: int) -> None: ...

    def advance(self, phase: str, item: str) -> None: ...

    def finish(self, phase: str) -> None: ...

    def expect(self, phase: str, nbytes: int) -> None: ...  # bytes about to be downloaded in `phase`

    def transfer(self, phase: str, nbytes: int) -> None: ...  # bytes received (negative: a retry starts over)


class NoProgress:
    """Progress that shows nothing (a pipe, --json, -q)."""

    wants_sizes = False
    shows_items = False  # nothing to hear per package: linking runs without rattler's Python callbacks

    def start(self, phase: str, total: int) -> None:
        pass

    def advance(self, phase: str, item: str) -> None:
        pass

    def finish(self, phase: str) -> None:
        pass

    def expect(self, phase: str, nbytes: int) -> None:
        pass

    def transfer(self, phase: str, nbytes: int) -> None:
        pass


class CreateBars:
    """create's Progress protocol as rich bars on stderr: packages counted, downloads in bytes with speed and ETA."""

    _LABELS: ClassVar[dict[str, str]] = {"fetch": "download + verify", "link": "link", "wheels": "wheels + verify", "pypi": "install wheels"}
    wants_sizes = True  # create asks the server for sizes first, so the byte bars have a total (and an ETA)

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        self._progress = Progress(TextColumn("{task.description:<18}"), BarColumn(), _amount_column(),
                                  TextColumn("{task.fields[item]}"), console=Console(stderr=True), transient=False)
        self._tasks: dict[str, Any] = {}
        self._started = False

    def _start(self) -> None:
        if not self._started:
            self._progress.start()
            self._started = True

    def start(self, phase: str, total: int) -> None:
        self._start()
        self._tasks[phase] = self._progress.add_task(self._LABELS.get(phase, phase), total=total, item="", unit="")

    def advance(self, phase: str, item: str) -> None:
        if phase in self._tasks:
            self._progress.update(self._tasks[phase], advance=1, item=item)

    def expect(self, phase: str, nbytes: int) -> None:
        """`nbytes` more to download in `phase` (its byte bar appears with the first)."""
        self._start()
        key = f"{phase}:bytes"
        if key not in self._tasks:
            what = "conda archives" if phase == "fetch" else phase
            self._tasks[key] = self._progress.add_task(f"  ↓ {what}", total=0, item="", unit="bytes")
        task = self._tasks[key]
        self._progress.update(task, total=(self._progress.tasks[_index(self._progress, task)].total or 0) + nbytes)

    def transfer(self, phase: str, nbytes: int) -> None:
        key = f"{phase}:bytes"
        if key in self._tasks:
            self._progress.update(self._tasks[key], advance=nbytes)

    def finish(self, phase: str) -> None:
        if phase in self._tasks:
            self._progress.update(self._tasks[phase], item="")

    def close(self) -> None:
        if self._started:
            self._progress.stop()


def _index(progress: Any, task_id: Any) -> int:
    return next(i for i, t in enumerate(progress.tasks) if t.id == task_id)


def _amount_column() -> Any:
    from rich.progress import DownloadColumn, ProgressColumn, TimeRemainingColumn, TransferSpeedColumn
    from rich.text import Text

    class Amount(ProgressColumn):
        """`12/28` for counted phases; bytes, speed and time left for a download."""

        def __init__(self) -> None:
            super().__init__()
            self._bytes, self._speed, self._eta = DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn()

        def render(self, task: Any) -> Any:
            if task.fields.get("unit") != "bytes":
                return Text(f"{int(task.completed)}/{int(task.total or 0)}")
            return Text.assemble(self._bytes.render(task), " ", self._speed.render(task), " ", self._eta.render(task))

    return Amount()
