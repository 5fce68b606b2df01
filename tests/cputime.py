"""Per-test wall and CPU time, for comparing the suite on a shared machine (opt-in plugin, asserts nothing).

    pytest -p tests.cputime --cputime-out=times.jsonl ...     # one JSON line per test phase
    python -m tests.cputime times.jsonl [other.jsonl]          # totals, the waiting tests; or a comparison

On a machine others use, wall time says how busy it was; CPU time (this process + the children it waited for,
getrusage) says what a test costs. A test whose wall time is far above its CPU time waits: on sleeps,
retries' backoff, timeouts, a server or a process it did not wait for.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cputime-out", default=None, help="append per-test wall/CPU seconds to this JSONL file")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(item: pytest.Item, phase: str) -> Iterator[None]:
    out = item.config.getoption("--cputime-out")
    if not out:
        yield
        return
    wall, cpu = time.perf_counter(), _cpu()
    try:
        yield
    finally:  # a failing test is timed too
        _write(out, item, phase, time.perf_counter() - wall, _cpu() - cpu)


def _write(out: str, item: pytest.Item, phase: str, wall: float, cpu: float) -> None:
    rec = {"test": item.nodeid, "phase": phase, "wall": round(wall, 4), "cpu": round(cpu, 4),
           "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "setup")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "call")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "teardown")


def load(path: str) -> dict[str, dict[str, float]]:
    tests: dict[str, dict[str, float]] = {}
    with open(path) as f:
        for line in f:
            rec: dict[str, Any] = json.loads(line)
            t = tests.setdefault(rec["test"], {"wall": 0.0, "cpu": 0.0})
            t["wall"] += rec["wall"]
            t["cpu"] += rec["cpu"]
    return tests


def main(argv: list[str]) -> int:
    runs = [load(p) for p in argv]
    for path, tests in zip(argv, runs):
        wall, cpu = sum(t["wall"] for t in tests.values()), sum(t["cpu"] for t in tests.values())
        print(f"{path}: {len(tests)} tests, wall {wall:.1f} s, CPU {cpu:.1f} s")
    tests = runs[0]
    waiting = sorted(tests.items(), key=lambda kv: -(kv[1]["wall"] - kv[1]["cpu"]))[:20]
    print("\nwaiting most (wall - CPU), first file:")
    for name, t in waiting:
        print(f"  {t['wall'] - t['cpu']:6.2f} s  wall {t['wall']:6.2f}  CPU {t['cpu']:6.2f}  {name}")
    print("\nmost CPU, first file:")
    for name, t in sorted(tests.items(), key=lambda kv: -kv[1]["cpu"])[:20]:
        print(f"  {t['cpu']:6.2f} s  wall {t['wall']:6.2f}  {name}")
    if len(runs) == 2:
        common = set(runs[0]) & set(runs[1])
        a, b = (sum(r[n]["cpu"] for n in common) for r in runs)
        print(f"\nCPU of the {len(common)} tests in both: {a:.1f} s -> {b:.1f} s")
        moved = sorted(common, key=lambda n: runs[1][n]["cpu"] - runs[0][n]["cpu"])
        for n in moved[:15]:
            print(f"  {runs[0][n]['cpu']:6.2f} -> {runs[1][n]['cpu']:6.2f} s CPU  {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
