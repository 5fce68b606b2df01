"""envlock benchmarks at conda-forge scale, in one run, printed as one table.

    python benchmarks/run.py                 # full: ~450k-record linux-64 channel, 5 runs per row
    python benchmarks/run.py --small --runs 1   # CI: a few thousand records, seconds
    python benchmarks/run.py --json out.json    # also write every sample

Every figure is a whole process (`envlock ...` or the bare baseline) timed from spawn to exit by
benchmarks/launcher.py, a small process that never held the channel, with peak RSS from its wait4()
and bytes counted by the channel server on 127.0.0.1. Cold = an empty ENVLOCK_CACHE_DIR; warm = the
cache a previous run filled (rattler revalidates with 304s). envlock and its baseline run in pairs,
interleaved; a ratio is the median of the pair ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_channel import ChannelInfo, GenConfig, default_cache_dir, default_snapshot, generate  # noqa: E402
from measure import Row, Sample, checked, cpu_note, envlock_cmd, launcher, load_average, machine, render_table, run_proc  # noqa: E402
from resolve_rows import Bench, bench_full, bench_resolve, bench_snapshot  # noqa: E402
from server import CountingServer  # noqa: E402


# ---------------------------------------------------------------------------------------------------
# Start-up, scaling, check, create
# ---------------------------------------------------------------------------------------------------


#: What a bare `python -c pass` reads as its own peak RSS (/proc/self/status VmHWM), printed by itself.
OWN_PEAK = "import sys; sys.stdout.write(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"


def bench_help(b: Bench) -> list[Row]:
    """`envlock --help` (whole process, paired with `python -c pass`), and the RSS column's own check."""
    b.log("envlock --help, python -c pass")
    run_proc([*envlock_cmd(), "--help"])  # page the files in once, like any second invocation
    samples, py = [], []
    for _ in range(max(b.runs, 7)):
        samples.append(checked(run_proc([*envlock_cmd(), "--help"]), "envlock --help"))
        py.append(checked(run_proc([sys.executable, "-c", "pass"]), "python -c pass"))
    med = statistics.median(s.wall for s in samples)
    own = [checked(run_proc([sys.executable, "-c", OWN_PEAK]), "python -c (VmHWM)") for _ in range(3)]
    own_mb = statistics.median(int(s.stdout) / 1024 for s in own)
    return [
        Row("start-up", "envlock --help", [s.wall for s in samples], baseline=[s.wall for s in py], paired=True,
            baseline_label="python -c pass", target="<= 0.12 s", ok=med <= 0.12,
            note=f"peak RSS {statistics.median(s.rss_mb for s in samples):.0f} MB; {cpu_note(samples, py)}"),
        Row("start-up", "peak RSS of a bare `python -c pass`", [s.rss_mb for s in py], unit="MB",
            target="its own few MB", ok=abs(statistics.median(s.rss_mb for s in py) - own_mb) < 2,
            note=(f"the process's own VmHWM reads {own_mb:.1f} MB: the RSS column is each command's own "
                  "(launcher.py), not the harness's")),
    ]


def make_project(b: Bench, n: int, cache: Path) -> tuple[Path, list[Sample]]:
    """A project with n locked environments (3 platforms each), made by n `envlock resolve` runs."""
    project = b.fresh(f"project{n}")
    samples = [checked(run_proc(b.resolve_cmd(True, project, name=f"env{i:02d}"),
                                env=b.env(cache), server=b.server), "envlock resolve") for i in range(n)]
    return project, samples


def bench_scaling(b: Bench, cache: Path) -> tuple[list[Row], Path]:
    """Time per environment for 1, 5 and 10 environments (warm sharded cache)."""
    rows: list[Row] = []
    project10 = None
    per_env_1 = None
    for n in (1, 5, 10):
        b.log(f"scaling: {n} environment(s)")
        project, _ = make_project(b, n, cache)
        if n == 10:
            project10 = project
        cmd = [*envlock_cmd(), "lock", "--all", "--mirror", f"conda-forge={b.server.channel_url(sharded=True)}",
               "--project-dir", str(project)]
        samples = [checked(run_proc(cmd, env=b.env(cache), server=b.server), "envlock lock --all")
                   for _ in range(b.runs)]
        per_env = [s.wall / n for s in samples]
        how = "envlock lock --all: n specs re-solved in one process"
        per_env_1 = per_env_1 or statistics.median(per_env)
        flat = statistics.median(per_env) <= per_env_1 * 1.15
        rows.append(Row("scaling (warm, sharded)", f"time per environment, {n} env(s)", per_env,
                        baseline=None if n == 1 else [per_env_1], baseline_label="1 env",
                        target="flat or falling" if n > 1 else "", ok=flat if n > 1 else None, note=how))
    assert project10 is not None
    return rows, project10


CHECK_TARGET_S = 0.15


def bench_check(b: Bench, project: Path, cache: Path, label: str = "envlock check, 10 envs x 3 platforms") -> list[Row]:
    """`envlock check` over a project (whole process, paired with `python -c pass`)."""
    b.log(label)
    cmd = [*envlock_cmd(), "check", "--project-dir", str(project)]
    run_proc(cmd, env=b.env(cache))
    samples, py = [], []
    for _ in range(max(b.runs, 7)):
        samples.append(run_proc(cmd, env=b.env(cache), server=b.server))
        py.append(run_proc([sys.executable, "-c", "pass"]))
    bad = [s for s in samples if s.rc != 0]
    med = statistics.median(s.wall for s in samples)
    note = (f"exit {samples[0].rc}; {sum(s.net.get('requests', 0) for s in samples)} requests in all runs; "
            f"peak RSS {statistics.median(s.rss_mb for s in samples):.0f} MB; {cpu_note(samples, py)}")
    if bad:
        note += f"; stderr: {bad[0].stderr.strip().splitlines()[-1:] if bad[0].stderr.strip() else ''}"
    return [Row("lifecycle", label, [s.wall for s in samples], baseline=[s.wall for s in py], paired=True,
                baseline_label="python -c pass", target=f"<= {CHECK_TARGET_S} s", ok=med <= CHECK_TARGET_S and not bad,
                note=note)]


CREATE_LINE = re.compile(r"^(envlock create|bare rattler.install)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
CREATE_HEAD = re.compile(r"^\[(\w+)\] (\d+) packages, (\d+) files in the prefix \((\d+) MB.*?(\d+) runs each")
CREATE_CPU = re.compile(r"^CPU \(median, s\)\s+([\d.]+)\s+([\d.]+)\s+paired ratio ([\d.]+)x")


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
            scenario = f"{m.group(1)}: {m.group(2)} packages, {m.group(3)} files, {m.group(4)} MB"
            figures = {"n": int(m.group(5))}
        elif m := CREATE_CPU.match(line):
            figures["cpu"] = f"CPU {m.group(1)} vs {m.group(2)} s = {m.group(3)}x"
        elif m := CREATE_LINE.match(line):
            figures[m.group(1)] = [float(m.group(3)), float(m.group(2)), float(m.group(4))]  # min, median, max
            if "envlock create" in figures and "bare rattler.install" in figures:
                env, bare = figures["envlock create"], figures["bare rattler.install"]
                rows.append(Row("create (warm package cache)", f"envlock create, {scenario}", env, baseline=bare,
                                baseline_label="rattler.install", target="<= 1.2x bare", ok=env[1] / bare[1] <= 1.2,
                                n=figures["n"], note=f"in-process, interleaved (bench_create.py); {figures.get('cpu', '')}"))
                figures = {"n": figures["n"]}
    if not rows:
        raise RuntimeError(f"could not read bench_create.py's table:\n{sample.stdout[-1500:]}")
    return rows


# ---------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------


SECTIONS = ("resolve", "full", "snapshot", "help", "scaling", "check", "create")


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

        if "help" in sections:
            section("start-up", lambda: bench_help(b))
        if "resolve" in sections:
            section("resolve", lambda: bench_resolve(b))
        if "full" in sections:
            section("full env", lambda: bench_full(b))
        if "snapshot" in sections:
            section("snapshot", lambda: bench_snapshot(b, default_snapshot()))
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


def compiled() -> None:
    """envlock's bytecode written before anything is timed, as `pip install` writes it for a user: an editable
    checkout under PYTHONDONTWRITEBYTECODE=1 (this machine's setting) would otherwise compile every module it
    imports in every timed process (~90 ms of a `create`, measured with benchmarks/profile_cmd.py)."""
    import envlock

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(envlock.__file__).parent)], check=True,
                   stdout=subprocess.DEVNULL)


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
    compiled()
    launcher()  # started before the channel is generated or loaded (its peak is a bare interpreter's either way)
    config = GenConfig.small(args.seed) if args.small else GenConfig(seed=args.seed)
    info = generate(args.cache_dir or default_cache_dir(), config, log=log)
    log(channel_summary(info))
    load_before = load_average()
    rows = run_all(info, runs, sections, log)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"envlock benchmarks, {stamp}{' (small mode)' if args.small else ''}\nmachine: {machine()}; "
              f"{load_before} before, {load_average()} after\n"
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
