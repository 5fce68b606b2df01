"""Measuring whole processes (wall, peak RSS, bytes served) and printing the one table.

Every command is started by benchmarks/launcher.py, a small process that never held the channel, so a
command's peak RSS is its own (see launcher.py for why a harness's own children cannot be measured).
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass
class Sample:
    """One process run: wall seconds, peak RSS, exit code, output, and what it fetched."""

    wall: float
    rss_mb: float
    rc: int
    stdout: str = ""
    stderr: str = ""
    net: dict[str, int] = field(default_factory=dict)
    cpu: float = 0.0  # user + system seconds (the process and the children it waited for)


class Launcher:
    """benchmarks/launcher.py, started once; `run()` has it fork + exec + wait4 one command."""

    def __init__(self) -> None:
        # -I -S: no site, no user paths, so its peak stays below any measured Python program's.
        self._proc = subprocess.Popen([sys.executable, "-I", "-S", str(HERE / "launcher.py")], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env={"PATH": os.environ.get("PATH", "")})
        self._dir = tempfile.TemporaryDirectory(prefix="envlock-bench-io-")

    def run(self, cmd: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
            stdin: str | None = None) -> tuple[float, float, int, str, str, float]:
        """(wall s, peak RSS MB, exit code, stdout, stderr, cpu s) of one command."""
        io = Path(self._dir.name)
        out, err, inp = io / "out", io / "err", io / "in"
        if stdin is not None:
            inp.write_text(stdin)
        env = dict(os.environ if env is None else env)
        fields = [str(cwd or ""), str(out), str(err), str(inp) if stdin is not None else "", *map(str, cmd), "\x01",
                  *(f"{k}={v}" for k, v in env.items())]
        payload = "\0".join(fields).encode("utf-8", "surrogateescape")
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(b"%08d" % len(payload) + payload)
        self._proc.stdin.flush()
        reply = self._proc.stdout.readline().split()
        if len(reply) != 4:
            raise RuntimeError(f"the launcher stopped (reply {reply!r})")
        wall, rss_kb, rc, cpu = float(reply[0]), int(reply[1]), int(reply[2]), float(reply[3])
        return (wall, rss_kb / 1024, rc, out.read_text(errors="replace"), err.read_text(errors="replace"), cpu)

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)
        self._dir.cleanup()

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_LAUNCHER: Launcher | None = None


def launcher() -> Launcher:
    """The process-wide launcher (started on first use)."""
    global _LAUNCHER
    if _LAUNCHER is None:
        _LAUNCHER = Launcher()
    return _LAUNCHER


def run_proc(cmd: Sequence[str], *, env: dict[str, str] | None = None, server: Any = None,
             cwd: Path | None = None, stdin: str | None = None) -> Sample:
    """Run cmd to completion through the launcher; `server` (a CountingServer): the requests it saw meanwhile."""
    from server import summarize

    mark = server.mark() if server else 0
    wall, rss, rc, out, err, cpu = launcher().run(cmd, env=env, cwd=cwd, stdin=stdin)
    net = summarize(server.since(mark)) if server else {}
    return Sample(wall, rss, rc, out, err, net, cpu)


def envlock_cmd() -> list[str]:
    """The installed console script next to this interpreter (what users run), else `-m envlock`."""
    script = Path(sys.executable).with_name("envlock")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "envlock"]


def cpu_note(ours: Sequence[Sample], bare: Sequence[Sample]) -> str:
    """CPU seconds (user + system, the process and the children it waited for) of both sides and their paired
    ratio: on a shared machine a process's CPU time does not grow with the others' load the way its wall time does."""
    ratio = paired_ratio([s.cpu for s in ours], [s.cpu for s in bare])
    return (f"CPU {statistics.median(s.cpu for s in ours):.3f} vs {statistics.median(s.cpu for s in bare):.3f} s "
            f"= {ratio:.2f}x")


def checked(sample: Sample, what: str) -> Sample:
    """Fail loudly (with the process's own words) when a measured command did not succeed."""
    if sample.rc != 0:
        raise RuntimeError(f"{what} exited {sample.rc}:\n{sample.stdout[-2000:]}\n{sample.stderr[-2000:]}")
    return sample


def paired_ratio(ours: Sequence[float], base: Sequence[float]) -> float:
    """The median of the per-pair ratios (runs interleaved: load drift hits both sides of a pair alike)."""
    return statistics.median(a / b for a, b in zip(ours, base))


# ---------------------------------------------------------------------------------------------------
# Rows of the table
# ---------------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table: samples of a measurement and, optionally, its baseline and target.

    With `paired`, `values` and `baseline` were measured in interleaved pairs and the ratio is the median
    of the pair ratios; otherwise the ratio of the medians."""

    section: str
    label: str
    values: list[float]
    unit: str = "s"
    baseline: list[float] | None = None
    baseline_label: str = ""
    target: str = ""
    ok: bool | None = None
    note: str = ""
    n: int | None = None  # runs behind `values` when those are a summary (min, median, max)
    paired: bool = False

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def ratio(self) -> float | None:
        if not self.baseline:
            return None
        if self.paired and len(self.baseline) == len(self.values):
            return paired_ratio(self.values, self.baseline)
        base = statistics.median(self.baseline)
        return self.median / base if base else None


def _fmt(v: float, unit: str) -> str:
    if unit == "s":
        return f"{v:.3f} s"
    if unit == "MB":
        return f"{v:.1f} MB"
    if unit == "%":
        return f"{v:.2f} %"
    return f"{v:g} {unit}".strip()


def render_table(rows: list[Row], header: str) -> str:
    """The one table the run prints."""
    cols = ("measurement", "median", "min-max", "n", "baseline (median)", "ratio", "target", "ok", "notes")
    lines: list[list[str]] = []
    section = None
    for r in rows:
        if r.section != section:
            section = r.section
            lines.append([f"[{section}]", "", "", "", "", "", "", "", ""])
        rng = f"{_fmt(min(r.values), r.unit).split()[0]}-{_fmt(max(r.values), r.unit)}" if r.values else "-"
        base = f"{r.baseline_label} {_fmt(statistics.median(r.baseline), r.unit)}" if r.baseline else ""
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        ok = {True: "yes", False: "NO", None: ""}[r.ok]
        lines.append([r.label, _fmt(r.median, r.unit) if r.values else "n/a", rng, str(r.n or len(r.values)), base, ratio,
                      r.target, ok, r.note])
    widths = [max(len(c), *(len(line[i]) for line in lines)) for i, c in enumerate(cols)]
    out = [header, "  ".join(c.ljust(w) for c, w in zip(cols, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines]
    return "\n".join(out)


def machine() -> str:
    """nproc, RAM, CPU model, Python and py-rattler versions."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        ram = f"{kb / 1024 / 1024:.0f} GiB"
    try:
        from importlib.metadata import version

        rattler_v = version("py-rattler")
    except Exception:  # noqa: BLE001 - informational only
        rattler_v = "?"
    return (f"{os.cpu_count()} CPUs ({cpu}), {ram} RAM, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, py-rattler {rattler_v}")


def load_average() -> str:
    """The 1/5/15-minute load averages (the machine is shared: every figure is read against this)."""
    try:
        return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "load average ?"
