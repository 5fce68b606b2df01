"""envlock benchmarks at conda-forge scale, in one run, printed as one table.

    python benchmarks/run.py                 # full: ~450k-record linux-64 channel, 5 runs per row
    python benchmarks/run.py --small --runs 1   # CI: a few thousand records, seconds
    python benchmarks/run.py --json out.json    # also write every sample

Every figure is a whole process (`envlock ...` or the bare py-rattler script) timed from spawn to
exit, with peak RSS from wait4() and bytes counted by the channel server on 127.0.0.1. Cold = an
empty ENVLOCK_CACHE_DIR; warm = the cache a previous run filled (rattler revalidates with 304s).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_channel import ChannelInfo, GenConfig, default_cache_dir, generate  # noqa: E402
from server import CountingServer, summarize  # noqa: E402

PLATFORMS = ("linux-64", "linux-aarch64", "win-64")
TORCH = "2.7.1"


# ---------------------------------------------------------------------------------------------------
# Measuring one process
# ---------------------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One process run: wall seconds, peak RSS, exit code, output, and what it fetched."""

    wall: float
    rss_mb: float
    rc: int
    stdout: str = ""
    stderr: str = ""
    net: dict[str, int] = field(default_factory=dict)


def run_proc(cmd: Sequence[str], *, env: dict[str, str] | None = None, server: CountingServer | None = None,
             cwd: Path | None = None) -> Sample:
    """Run cmd to completion; wall from spawn to reap, ru_maxrss of exactly this child (wait4)."""
    mark = server.mark() if server else 0
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4; keep Popen consistent
        proc.stdout.close()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    net = summarize(server.since(mark)) if server else {}
    return Sample(wall, usage.ru_maxrss / 1024, proc.returncode, out.decode(errors="replace"), stderr, net)


def envlock_cmd() -> list[str]:
    """The installed console script next to this interpreter (what users run), else `-m envlock`."""
    script = Path(sys.executable).with_name("envlock")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "envlock"]


def checked(sample: Sample, what: str) -> Sample:
    """Fail loudly (with the process's own words) when a measured command did not succeed."""
    if sample.rc != 0:
        raise RuntimeError(f"{what} exited {sample.rc}:\n{sample.stdout[-2000:]}\n{sample.stderr[-2000:]}")
    return sample


# ---------------------------------------------------------------------------------------------------
# Rows of the table
# ---------------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table: samples of a measurement and, optionally, its baseline and target."""

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

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def ratio(self) -> float | None:
        if not self.baseline:
            return None
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


# ---------------------------------------------------------------------------------------------------
# Resolve: cold/warm x sharded/plain, envlock vs bare py-rattler
# ---------------------------------------------------------------------------------------------------


@dataclass
class Bench:
    """Shared state of one benchmark run."""

    info: ChannelInfo
    server: CountingServer
    work: Path
    runs: int
    log: Callable[[str], None]
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)  # platform -> {specs, virtual_packages}
    counter: int = 0

    def fresh(self, prefix: str) -> Path:
        self.counter += 1
        path = self.work / f"{prefix}-{self.counter}"
        path.mkdir(parents=True)
        return path

    def env(self, cache: Path) -> dict[str, str]:
        return {**os.environ, "ENVLOCK_CACHE_DIR": str(cache), "NO_COLOR": "1"}

    def resolve_cmd(self, sharded: bool, project: Path, *, name: str | None = None,
                    python: str | None = None) -> list[str]:
        # The conda side is what this table measures (against a bare rattler solve): toolchain only. The
        # PyPI part has its own benchmark (bench_pypi.py).
        cmd = [*envlock_cmd(), "resolve", "--torch", TORCH, "--toolchain-only"]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        cmd += ["--mirror", f"conda-forge={self.server.channel_url(sharded=sharded)}", "--project-dir", str(project),
                "--json"]
        if name:
            cmd += ["--name", name]
        if python:  # toolchain-only has no python: the name alone keeps the environments apart
            pass
        return cmd

    def envlock_resolve(self, sharded: bool, cache: Path) -> Sample:
        sample = checked(run_proc(self.resolve_cmd(sharded, self.fresh("proj")), env=self.env(cache),
                                  server=self.server), "envlock resolve")
        if not self.specs:
            doc = json.loads(sample.stdout)
            self.specs = {p: {"specs": v["specs"], "virtual_packages": v["virtual_packages"]}
                          for p, v in doc["platforms"].items()}
        return sample

    def inproc_resolve(self, sharded: bool, cache: Path) -> dict[str, Any]:
        """envlock's resolve() timed inside its process (inproc_resolve.py)."""
        cmd = [sys.executable, str(HERE / "inproc_resolve.py"), self.server.channel_url(sharded=sharded),
               str(self.fresh("proj"))]
        sample = checked(run_proc(cmd, env=self.env(cache), server=self.server), "in-process resolve")
        doc = json.loads(sample.stdout)
        if "error" in doc:
            raise RuntimeError(f"in-process resolve failed: {doc['error']}")
        return doc

    def bare_resolve(self, sharded: bool, cache: Path) -> Sample:
        req = self.fresh("bare") / "request.json"
        req.write_text(json.dumps({"channel": self.server.channel_url(sharded=sharded),
                                   "cache_dir": str(cache / "repodata"), "platforms": self.specs}))
        sample = checked(run_proc([sys.executable, str(HERE / "bare_solve.py"), str(req)], env=self.env(cache),
                                  server=self.server), "bare py-rattler solve")
        if "error" in sample.stdout:
            raise RuntimeError(f"bare solve failed: {sample.stdout}")
        return sample


def bench_resolve(b: Bench) -> list[Row]:
    """envlock resolve (3 platforms) cold and warm, sharded and plain, against bare py-rattler."""
    rows: list[Row] = []
    plain_cold_bytes: list[float] = []
    sharded_cold_bytes: list[float] = []
    rss: dict[str, tuple[list[float], list[float]]] = {}
    for sharded in (True, False):
        layout = "sharded" if sharded else "plain"
        cold, warm, bare_cold, bare_warm = [], [], [], []
        warm_cache = b.fresh("cache")
        b.log(f"resolve {layout}: {b.runs} cold + {b.runs} warm runs, envlock and bare")
        for i in range(b.runs):
            cache = warm_cache if i == 0 else b.fresh("cache")  # run 0 fills the cache the warm runs use
            cold.append(b.envlock_resolve(sharded, cache))
            bare_cold.append(b.bare_resolve(sharded, b.fresh("cache")))
        bare_warm_cache = b.fresh("cache")
        b.bare_resolve(sharded, bare_warm_cache)
        for _ in range(b.runs):
            warm.append(b.envlock_resolve(sharded, warm_cache))
            bare_warm.append(b.bare_resolve(sharded, bare_warm_cache))
        (sharded_cold_bytes if sharded else plain_cold_bytes).extend(s.net["bytes"] for s in cold)
        rss[layout] = ([s.rss_mb for s in cold + warm], [s.rss_mb for s in bare_cold + bare_warm])
        note_cold = (f"{statistics.median(s.net['bytes'] for s in cold) / 1e6:.2f} MB in "
                     f"{statistics.median(s.net['requests'] for s in cold):.0f} requests; "
                     f"peak RSS {max(s.rss_mb for s in cold):.0f} MB (bare {max(s.rss_mb for s in bare_cold):.0f})")
        note_warm = (f"{statistics.median(s.net['bytes'] for s in warm) / 1e3:.1f} kB in "
                     f"{statistics.median(s.net['requests'] for s in warm):.0f} requests; "
                     f"peak RSS {max(s.rss_mb for s in warm):.0f} MB (bare {max(s.rss_mb for s in bare_warm):.0f})")
        rows.append(Row("resolve --torch 2.7.1, 3 platforms", f"cold, {layout}", [s.wall for s in cold],
                        baseline=[s.wall for s in bare_cold], baseline_label="bare", note=note_cold))
        ratio_warm = statistics.median(s.wall for s in warm) / statistics.median(s.wall for s in bare_warm)
        rows.append(Row("resolve --torch 2.7.1, 3 platforms", f"warm, {layout}", [s.wall for s in warm],
                        baseline=[s.wall for s in bare_warm], baseline_label="bare", target="<= 1.5x bare",
                        ok=ratio_warm <= 1.5, note=note_warm))
        solve_in = [json.loads(s.stdout)["solve_s"] for s in bare_warm]
        inproc = [b.inproc_resolve(sharded, warm_cache) for _ in range(b.runs)]
        rows.append(Row("resolve --torch 2.7.1, 3 platforms", f"  in-process, warm, {layout}: envlock resolve()",
                        [d["resolve_s"] for d in inproc], baseline=solve_in, baseline_label="bare solve()",
                        note=(f"no start-up; imports apart: envlock {statistics.median(d['import_s'] for d in inproc):.3f} s"
                              f", bare (rattler) {statistics.median(json.loads(s.stdout)['import_s'] for s in bare_warm):.3f} s")))
    pct = [100 * s / statistics.median(plain_cold_bytes) for s in sharded_cold_bytes]
    json_bytes = sum(v["json"] for k, v in b.info.bytes.items())
    rows.append(Row("resolve --torch 2.7.1, 3 platforms", "sharded cold bytes / plain cold bytes", pct, unit="%",
                    target="<= 5 %", ok=statistics.median(pct) <= 5,
                    note=(f"{statistics.median(sharded_cold_bytes) / 1e6:.2f} MB vs "
                          f"{statistics.median(plain_cold_bytes) / 1e6:.1f} MB (.zst); "
                          f"{100 * statistics.median(sharded_cold_bytes) / json_bytes:.2f} % of the "
                          f"{json_bytes / 1e6:.0f} MB of repodata.json")))
    for layout, (ours, bare) in rss.items():
        rows.append(Row("resolve --torch 2.7.1, 3 platforms", f"peak RSS, {layout} (cold + warm runs)", ours, unit="MB",
                        baseline=bare, baseline_label="bare", target="<= 500 MB", ok=max(ours) <= 500,
                        note=f"max {max(ours):.0f} MB (bare max {max(bare):.0f}); whole process, wait4 ru_maxrss"))
    return rows


# ---------------------------------------------------------------------------------------------------
# Start-up, scaling, check, create
# ---------------------------------------------------------------------------------------------------


def bench_help(b: Bench) -> list[Row]:
    """`envlock --help`: whole-process wall."""
    b.log("envlock --help")
    run_proc([*envlock_cmd(), "--help"])  # page the files in once, like any second invocation
    samples = [checked(run_proc([*envlock_cmd(), "--help"]), "envlock --help") for _ in range(max(b.runs, 5))]
    med = statistics.median(s.wall for s in samples)
    py = [run_proc([sys.executable, "-c", "pass"]).wall for _ in range(max(b.runs, 5))]
    return [Row("start-up", "envlock --help", [s.wall for s in samples], baseline=py, baseline_label="python -c pass",
                target="<= 0.12 s", ok=med <= 0.12, note=f"peak RSS {max(s.rss_mb for s in samples):.0f} MB")]


def has_command(name: str) -> bool:
    """Whether this envlock has `envlock <name>` (other engineers' commands land over time)."""
    return run_proc([*envlock_cmd(), name, "--help"]).rc == 0


PYTHONS = ("3.10", "3.11", "3.12", "3.13")  # distinct specs; each solves on all three platforms


def make_project(b: Bench, n: int, cache: Path) -> tuple[Path, list[Sample]]:
    """A project with n locked environments (3 platforms each), made by n `envlock resolve` runs."""
    project = b.fresh(f"project{n}")
    samples = [checked(run_proc(b.resolve_cmd(True, project, name=f"env{i:02d}", python=PYTHONS[i % len(PYTHONS)]),
                                env=b.env(cache), server=b.server), "envlock resolve") for i in range(n)]
    return project, samples


def bench_scaling(b: Bench, cache: Path) -> tuple[list[Row], Path]:
    """Time per environment for 1, 5 and 10 environments (warm sharded cache)."""
    rows: list[Row] = []
    lock_cmd = has_command("lock")
    project10 = None
    per_env_1 = None
    for n in (1, 5, 10):
        b.log(f"scaling: {n} environment(s)")
        project, made = make_project(b, n, cache)
        if n == 10:
            project10 = project
        if lock_cmd:
            cmd = [*envlock_cmd(), "lock", "--all", "--mirror", f"conda-forge={b.server.channel_url(sharded=True)}",
                   "--project-dir", str(project)]
            samples = [checked(run_proc(cmd, env=b.env(cache), server=b.server), "envlock lock --all")
                       for _ in range(b.runs)]
            per_env = [s.wall / n for s in samples]
            how = "envlock lock --all: n specs re-solved in one process"
        else:
            per_env = [s.wall for s in made]
            for _ in range(b.runs - 1):
                _, more = make_project(b, n, cache)
                per_env += [s.wall for s in more]
            how = "n envlock resolve processes (`envlock lock` not available yet)"
        per_env_1 = per_env_1 or statistics.median(per_env)
        flat = statistics.median(per_env) <= per_env_1 * 1.15
        rows.append(Row("scaling (warm, sharded)", f"time per environment, {n} env(s)", per_env,
                        baseline=None if n == 1 else [per_env_1], baseline_label="1 env",
                        target="flat or falling" if n > 1 else "", ok=flat if n > 1 else None, note=how))
    assert project10 is not None
    return rows, project10


def bench_check(b: Bench, project: Path, cache: Path) -> list[Row]:
    """`envlock check` over the 10-environment project (30 platform locks)."""
    if not has_command("check"):
        return [Row("lifecycle", "envlock check, 10 envs x 3 platforms", [], target="<= 0.3 s",
                    note="`envlock check` not available in this envlock yet")]
    b.log("envlock check")
    cmd = [*envlock_cmd(), "check", "--project-dir", str(project)]
    run_proc(cmd, env=b.env(cache))
    samples = [run_proc(cmd, env=b.env(cache), server=b.server) for _ in range(max(b.runs, 5))]
    bad = [s for s in samples if s.rc != 0]
    med = statistics.median(s.wall for s in samples)
    note = f"exit {samples[0].rc}; {sum(s.net.get('requests', 0) for s in samples)} requests in all runs"
    if bad:
        note += f"; stderr: {bad[0].stderr.strip().splitlines()[-1:] if bad[0].stderr.strip() else ''}"
    return [Row("lifecycle", "envlock check, 10 envs x 3 platforms", [s.wall for s in samples], target="<= 0.3 s",
                ok=med <= 0.3 and not bad, note=note)]


CREATE_LINE = re.compile(r"^(envlock create|bare rattler.install)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
CREATE_HEAD = re.compile(r"^\[(\w+)\] (\d+) packages, (\d+) files.*?(\d+) runs each")


def bench_create(b: Bench) -> list[Row]:
    """`envlock create` (warm package cache) vs bare rattler.install: benchmarks/bench_create.py's figures.

    bench_create.py (the create engineer's) times both sides in one process, interleaved, on the test
    channel's real packages; it prints median/min/max per scenario, which become rows here.
    """
    path = HERE / "bench_create.py"
    if not path.is_file():
        return [Row("create (warm package cache)", "envlock create vs rattler.install", [], target="<= 1.2x bare",
                    note="benchmarks/bench_create.py not there yet")]
    b.log("create: benchmarks/bench_create.py")
    sample = checked(run_proc([sys.executable, str(path), "--runs", str(max(5, b.runs))]), "bench_create.py")
    rows: list[Row] = []
    scenario, figures = "", {}
    for line in sample.stdout.splitlines():
        if m := CREATE_HEAD.match(line):
            scenario, figures = f"{m.group(1)}: {m.group(2)} packages, {m.group(3)} files", {"n": int(m.group(4))}
        elif m := CREATE_LINE.match(line):
            figures[m.group(1)] = [float(m.group(3)), float(m.group(2)), float(m.group(4))]  # min, median, max
            if "envlock create" in figures and "bare rattler.install" in figures:
                env, bare = figures["envlock create"], figures["bare rattler.install"]
                rows.append(Row("create (warm package cache)", f"envlock create, {scenario}", env, baseline=bare,
                                baseline_label="rattler.install", target="<= 1.2x bare", ok=env[1] / bare[1] <= 1.2,
                                n=figures["n"], note="in-process, interleaved (bench_create.py)"))
                figures = {"n": figures["n"]}
    if not rows:
        raise RuntimeError(f"could not read bench_create.py's table:\n{sample.stdout[-1500:]}")
    return rows


# ---------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------


SECTIONS = ("resolve", "help", "scaling", "check", "create")


def run_all(info: ChannelInfo, runs: int, sections: Sequence[str], log: Callable[[str], None]) -> list[Row]:
    rows: list[Row] = []
    with CountingServer(info.root) as server, tempfile.TemporaryDirectory(prefix="envlock-bench-") as tmp:
        b = Bench(info, server, Path(tmp), runs, log)

        def section(name: str, fn: Callable[[], list[Row]]) -> None:
            try:
                rows.extend(fn())
            except Exception as exc:  # noqa: BLE001 - one broken section must not hide the others' figures
                log(f"{name} failed: {exc}")
                rows.append(Row(name, "FAILED", [], note=_first_line(str(exc))))

        if "resolve" in sections:
            section("resolve", lambda: bench_resolve(b))
        if "help" in sections:
            section("start-up", lambda: bench_help(b))
        if "scaling" in sections or "check" in sections:
            cache = b.fresh("cache")
            made: dict[str, Path] = {}

            def scaling() -> list[Row]:
                checked(run_proc(b.resolve_cmd(True, b.fresh("proj")), env=b.env(cache), server=server), "warm-up")
                got, made["project"] = bench_scaling(b, cache)
                return got if "scaling" in sections else []

            section("scaling", scaling)
            if "check" in sections and "project" in made:
                section("lifecycle", lambda: bench_check(b, made["project"], cache))
        if "create" in sections:
            section("create", lambda: bench_create(b))
    return rows


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[0] + (f" ... {lines[-1]}" if len(lines) > 1 else ""))[:300] if lines else ""


def channel_summary(info: ChannelInfo) -> str:
    recs = ", ".join(f"{k} {v:,}" for k, v in info.records.items())
    names = sum(info.names.values())
    json_mb = sum(v["json"] for v in info.bytes.values()) / 1e6
    zst_mb = sum(v["zst"] for v in info.bytes.values()) / 1e6
    return (f"channel: {recs} records; {names:,} names (per-subdir sum); repodata.json {json_mb:.0f} MB, .zst "
            f"{zst_mb:.1f} MB; generated in {info.gen_seconds:.0f} s, {info.disk_bytes / 1e6:.0f} MB on disk")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="envlock benchmarks (one table)")
    parser.add_argument("--small", action="store_true", help="a few thousand records (CI)")
    parser.add_argument("--runs", type=int, default=None, help="runs per row (default 5; --small: 1)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="where generated channels are kept")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {','.join(SECTIONS)}")
    parser.add_argument("--json", type=Path, default=None, help="write rows + machine + channel as JSON")
    args = parser.parse_args(argv)
    runs = args.runs or (1 if args.small else 5)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]

    def log(msg: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    config = GenConfig.small(args.seed) if args.small else GenConfig(seed=args.seed)
    info = generate(args.cache_dir or default_cache_dir(), config, log=log)
    log(channel_summary(info))
    rows = run_all(info, runs, sections, log)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"envlock benchmarks, {stamp}{' (small mode)' if args.small else ''}\nmachine: {machine()}\n"
              f"{channel_summary(info)}\nruns per row: {runs}; total wall {time.perf_counter() - t0:.0f} s\n")
    print(render_table(rows, header), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "date": stamp, "channel": info.to_json(),
                                         "rows": [asdict(r) | {"median": r.median, "ratio": r.ratio} for r in rows]},
                                        indent=1, default=str))
    return 0  # targets are reported, never asserted: a slow machine must not fail CI


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # gen_channel may have imported rattler, which can segfault at interpreter exit
