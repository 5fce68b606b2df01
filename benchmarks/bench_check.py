"""Time `envlock check` over 10 environments × 3 platforms, whole process, against `python -c pass`.

The project is made the way a user makes one: ten `envlock resolve` runs (different torch, python and
--cuda inputs, linux-64 + linux-aarch64 + win-64) against the test channel of tests/channelbuilder.py,
so every spec, lock, @EXPLICIT file and content hash is real. Then the commands run --runs rounds,
interleaved, each as a fresh process; the table shows median and min–max wall time.

    python benchmarks/bench_check.py [--runs 11] [--keep DIR] [--baseline CHECKOUT]

--baseline CHECKOUT adds `python -m envlock check` of another checkout (its PYTHONPATH, same interpreter and
project) paired with this checkout's, and prints the ratios of their wall and CPU times (median of the pair
ratios): what a change costs. Both checkouts are compiled first (no run compiles its modules).

Targets: `envlock check` ≤ 0.3 s, `envlock --help` ≤ 0.12 s (issue 13; it was 0.25 s) (whole process, on the machine at hand).
Exit 0: targets met; 1: a target missed; 2: a command did not exit as expected.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PLATFORMS = ("linux-64", "linux-aarch64", "win-64")
# (torch, python, --cuda override): ten distinct specs the test channel solves on all three platforms.
ENVS = (
    ("2.8.0", "3.10", None),
    ("2.8.0", "3.11", None),
    ("2.8.0", "3.12", None),
    ("2.9.1", "3.11", None),
    ("2.9.1", "3.12", None),
    ("2.10.0", "3.11", None),
    ("2.10.0", "3.12", None),
    ("2.8.0", "3.11", "12.9"),
    ("2.9.1", "3.11", "12.6"),
    ("2.10.0", "3.10", "12.9"),
)


def make_project(root: Path) -> Path:
    """Build the test channel and resolve the ten environments into root/project."""
    from envlock.usecases.resolve import ResolveRequest, resolve
    from tests.channelbuilder import build_channel

    channel = build_channel(root / "channels")
    project = root / "project"
    project.mkdir()
    for torch, python, cuda in ENVS:
        name = f"torch{torch}-py{python}" + (f"-cuda{cuda}" if cuda else "")
        resolve(
            ResolveRequest(
                torch=torch,
                cuda=cuda,
                platforms=PLATFORMS,
                toolchain_only=True,  # win-64's default-index torch is a CPU build (no full env there)
                mirrors={"conda-forge": channel.as_uri()},
                name=name,
                project_dir=project,
            )
        )
    return project


def envlock_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "envlock"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "envlock"]


class BenchError(Exception):
    """A command under test did not exit as expected (the benchmark exits 2)."""


def time_rounds(cmds: list[tuple[list[str], int]], runs: int,
                envs: list[dict[str, str] | None] | None = None,
                cpu: list[list[float]] | None = None) -> list[list[float]]:
    """Wall time of `runs` fresh processes per command, interleaved round by round (load hits all alike).

    One warm-up round first, not counted; a command that exits other than expected stops the benchmark.
    `envs`: each command's environment (None: this one's); `cpu`: filled with each run's CPU time (user +
    system), which a loaded machine stretches less than wall time.
    """
    out: list[list[float]] = [[] for _ in cmds]
    envs = envs or [None] * len(cmds)
    if cpu is not None:
        cpu[:] = [[] for _ in cmds]
    for i in range(runs + 1):
        for j, (cmd, expect) in enumerate(cmds):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=envs[j], cwd="/")
            elapsed = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode != expect:
                raise BenchError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
            if i:
                out[j].append(elapsed)
                if cpu is not None:
                    cpu[j].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--keep", type=Path, help="make the project here and keep it")
    parser.add_argument("--baseline", type=Path, help="another checkout whose `check` is timed paired with this one's")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="envlock-bench-check-"))
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ENVLOCK_CACHE_DIR", str(root / "cache"))
    try:
        t0 = time.perf_counter()
        project = make_project(root)
        made = time.perf_counter() - t0
        locks = sorted(project.glob("locks/*/conda-lock.yml"))
        size = sum(p.stat().st_size for p in locks)
        envlock = envlock_cmd()
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"], None, 0),
            ("envlock --help", [*envlock, "--help"], 0.12, 0),
            (
                f"envlock check ({len(locks)} envs × {len(PLATFORMS)} platforms)",
                [*envlock, "check", "--project-dir", str(project)],
                0.3,
                0,
            ),
        ]
        # A stale project too: one spec edited, so check does its full diagnosis and exits 1.
        stale = root / "stale"
        shutil.copytree(project, stale)
        spec = next(stale.glob("environments/*.yml"))
        spec.write_text(spec.read_text().replace("glibc: '2.28'", "glibc: '2.34'"))
        rows.append(
            (
                "envlock check (1 of 10 stale, exit 1)",
                [*envlock, "check", "--project-dir", str(stale)],
                0.3,
                1,
            )
        )
        print(
            f"project: {project} ({len(locks)} locks, {size / 1024:.0f} KiB of conda-lock.yml; "
            f"made in {made:.1f} s)"
        )
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs each (after one warm-up)\n"
        )
        envs: list[dict[str, str] | None] = [None] * len(rows)
        if args.baseline:  # the same command, `python -m envlock`, from each checkout
            # compiled once, so neither side compiles its modules on every run (PYTHONDONTWRITEBYTECODE)
            for where in (REPO, args.baseline.resolve()):
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(where / "envlock")], check=True,
                               capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
            for label, where in (("this checkout", REPO), (f"baseline {args.baseline}", args.baseline.resolve())):
                rows.append((f"check -m ({label})"[:48], [sys.executable, "-m", "envlock", "check", "--project-dir",
                                                          str(project)], None, 0))
                envs.append({**os.environ, "PYTHONPATH": str(where)})
        print(f"{'command':<48} {'median':>8} {'min–max':>15} {'target':>8}")
        ok = True
        cpu: list[list[float]] = []
        timings = time_rounds([(cmd, expect) for _, cmd, _, expect in rows], args.runs, envs, cpu)
        for (label, _, target, _), times in zip(rows, timings, strict=True):
            med = statistics.median(times)
            verdict = "" if target is None else (f"≤ {target:.2f}" + (" ok" if med <= target else " MISSED"))
            ok &= target is None or med <= target
            print(f"{label:<48} {med:>7.3f}s {min(times):>6.3f}–{max(times):.3f}s {verdict:>8}")
        if args.baseline:
            print()
            for what, times in (("wall", timings), ("CPU", cpu)):
                ratios = [a / b for a, b in zip(times[-2], times[-1], strict=True)]
                print(f"this checkout / baseline, {what} time (median of {len(ratios)} pair ratios): "
                      f"{statistics.median(ratios):.2f}x; medians {statistics.median(times[-2]) * 1000:.0f} / "
                      f"{statistics.median(times[-1]) * 1000:.0f} ms")
        return 0 if ok else 1
    except BenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # rattler was imported by the resolves: skip interpreter teardown (see envlock/cli.py)
