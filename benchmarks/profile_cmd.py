"""Where one envlock command's time goes: cProfile from the first import to the exit, grouped by owner.

    python benchmarks/profile_cmd.py [--runs 5] [--top 15] [--warm 1] -- resolve --project-dir {fresh} ...
    PYTHONPATH=/another/checkout python benchmarks/profile_cmd.py -- check     # that envlock (before/after)

Each run is a fresh process (`python -c` under this script's driver), so imports are counted as a user
pays them; `--warm N` runs the command N times first, unprofiled (a warm cache). The command runs through
`envlock.cli.run` in-process, as `envlock ...` would (the garbage collector set as `main()` sets it).
Printed: per owner (an envlock module, rattler's Rust work as the event loop waits on it, the import
machinery, PyYAML, typer/click, ...) the least own time over the runs (noise only adds), and envlock's heaviest functions by
cumulative time. The profiler's clock is the process's CPU time by default (all threads: rattler's Rust work
shows as the time Python waits on it), so other processes on a shared machine do not count; cProfile inflates
pure-Python work (every call is timed): the unprofiled wall and CPU figures are printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DRIVER = r"""
import cProfile, gc, os, sys, time
out, timer, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
gc.set_threshold(200_000, 30, 30)
prof = (cProfile.Profile(time.process_time) if timer == "cpu" else cProfile.Profile()) if out != "-" else None
t, c = time.perf_counter(), time.process_time()
if prof: prof.enable()
import envlock.cli as cli
cli._EXITS_AFTER_RUN = True
code = cli.run(argv)
if prof: prof.disable()
wall, cpu = time.perf_counter() - t, time.process_time() - c
if prof: prof.dump_stats(out)
sys.stdout.flush(); sys.stderr.write(f"\nPROFILE-WALL {wall:.4f} {cpu:.4f} {code}\n"); sys.stderr.flush()
os._exit(code)
"""


def owner(filename: str, name: str) -> str:
    """The group one profiled function belongs to."""
    f = filename.replace("\\", "/")
    if filename == "~":  # a C function: its name says whose
        if "epoll" in name or "select" in name or "'poll'" in name or "acquire" in name:
            return "rattler's Rust threads (gateway + solve; Python waits)"
        if "rattler" in name:
            return "rattler (Rust, called directly)"
        if "marshal" in name or "_imp." in name or "exec_dynamic" in name or "create_dynamic" in name:
            return "import machinery"
        if "yaml" in name:
            return "PyYAML (C)"
        if "posix." in name or "io." in name or "open" in name or "read" in name or "write" in name:
            return "file system calls"
        return "other C functions (str, re, json, hashlib...)"
    if "/envlock/" in f:
        part = f.rsplit("/envlock/", 1)[1].removesuffix(".py").replace("/", ".")
        return "envlock." + part
    if "importlib" in f or "<frozen" in f:
        return "import machinery"
    for key, label in (("/rattler/", "rattler (Python wrappers)"), ("/yaml/", "PyYAML"), ("/typer/", "typer/click"),
                       ("/click/", "typer/click"), ("/rich/", "rich"), ("/asyncio/", "asyncio (Python)"),
                       ("/re/", "re (compile)"), ("/sre_", "re (compile)"), ("/enum.py", "enum/dataclasses"),
                       ("/dataclasses.py", "enum/dataclasses")):
        if key in f:
            return label
    return "other Python (stdlib, site-packages)"


def one_run(argv: list[str], out: str, env: dict[str, str], cwd: Path, timer: str = "cpu") -> tuple[float, float]:
    """One fresh process; `{fresh}` in the command becomes a new empty folder (a fresh project dir)."""
    fresh = tempfile.mkdtemp(prefix="envlock-prof-")
    argv = [a.replace("{fresh}", fresh) for a in argv]
    proc = subprocess.run([sys.executable, "-c", DRIVER, out, timer, *argv], env=env, cwd=cwd, capture_output=True,
                          text=True)
    shutil.rmtree(fresh, ignore_errors=True)
    for line in proc.stderr.splitlines():
        if line.startswith("PROFILE-WALL "):
            _, wall, cpu, _code = line.split()
            return float(wall), float(cpu)
    raise SystemExit(f"the command did not finish: {proc.stderr[-2000:]}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warm", type=int, default=1)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cwd", type=Path, default=Path.cwd())
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timer", choices=("cpu", "wall"), default="cpu",
                        help="cpu (default): the process's CPU time, all its threads (others' load does not count); "
                             "wall: perf_counter")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    import pstats

    env = dict(os.environ)
    # The envlock this profiles (PYTHONPATH's, else the installed one) compiled first, as `pip install` leaves it:
    # under PYTHONDONTWRITEBYTECODE=1 an editable checkout would compile each module it imports in every run.
    where = subprocess.run([sys.executable, "-c", "import envlock, os; print(os.path.dirname(envlock.__file__))"],
                           env=env, cwd=args.cwd, capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], check=True, stdout=subprocess.DEVNULL)
    for _ in range(args.warm):
        one_run(cmd, "-", env, args.cwd)
    walls, cpus, profiled, groups, funcs = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            wall, cpu = one_run(cmd, "-", env, args.cwd)  # unprofiled, interleaved with the profiled runs
            walls.append(wall)
            cpus.append(cpu)
            out = str(Path(tmp) / f"p{i}.prof")
            profiled.append(one_run(cmd, out, env, args.cwd, args.timer)[args.timer == "cpu"])
            stats = pstats.Stats(out).stats  # type: ignore[attr-defined]
            by: dict[str, float] = {}
            cum: dict[str, float] = {}
            for (filename, line, name), (_cc, _nc, tt, ct, _callers) in stats.items():
                group = owner(filename, name)
                by[group] = by.get(group, 0.0) + tt
                if "/envlock/" in filename.replace("\\", "/"):
                    key = f"{filename.rsplit('/envlock/', 1)[1]}:{line} {name}"
                    cum[key] = max(cum.get(key, 0.0), ct)
            groups.append(by)
            funcs.append(cum)
    # The least of the runs per owner and per function: on a shared machine noise only ever adds time.
    total = min(sum(g.values()) for g in groups)
    print(f"envlock {' '.join(cmd)}")
    print(f"unprofiled, in-process from the first import: wall median {statistics.median(walls) * 1000:.1f} ms "
          f"({min(walls) * 1000:.1f}-{max(walls) * 1000:.1f}), CPU (all threads) median {statistics.median(cpus) * 1000:.1f} ms "
          f"({min(cpus) * 1000:.1f}-{max(cpus) * 1000:.1f}); profiled ({args.timer} timer) "
          f"{statistics.median(profiled) * 1000:.1f} ms; {args.runs} runs; python {sys.version.split()[0]}; "
          f"load {os.getloadavg()[0]:.2f}")
    names = sorted({k for g in groups for k in g}, key=lambda k: -min(g.get(k, 0.0) for g in groups))
    print(f"\n{'own time by owner (cProfile tottime, least of the runs)':60s} {'ms':>8s} {'share':>6s}")
    for k in names[: args.top]:
        v = min(g.get(k, 0.0) for g in groups)
        print(f"{k:60s} {v * 1000:8.1f} {v / total * 100:5.1f}%")
    rest = sum(min(g.get(k, 0.0) for g in groups) for k in names[args.top:])
    print(f"{'(' + str(len(names) - args.top) + ' more owners)':60s} {rest * 1000:8.1f}")
    keys = sorted({k for f in funcs for k in f}, key=lambda k: -min(f.get(k, 0.0) for f in funcs))
    print(f"\n{'envlock functions by cumulative time (min of runs)':80s} {'ms':>8s}")
    for k in keys[: args.top]:
        print(f"{k[:80]:80s} {min(f.get(k, 0.0) for f in funcs) * 1000:8.1f}")
    if args.json:
        args.json.write_text(json.dumps({"cmd": cmd, "walls": walls, "profiled": profiled, "groups": groups}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
