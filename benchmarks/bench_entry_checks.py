"""What checking cache entries when they are used costs a warm `envlock create` (issue 22, Build 4).

Every create checks each package cache entry it links (and each cached wheel it installs) before using it: the
entry must still be the sealed one this user verified (envlock/seams/trust.py: one record read and one lstat per
entry), else it is extracted again from its kept archive. This script measures, in one process and in pairs
(A, B, C, A, B, C … so load on a shared machine hits all three alike):

  checks   envlock.seams.conda.cache.fill() over the warm cache: the entry checks alone (and nothing else)
  envlock  create_env() into a fresh prefix: the checks + everything else envlock does around the install
  bare     rattler.install() of the same records, nothing else

and reports the median of the per-pair ratios envlock/bare and checks/bare. Target (issue 22): envlock with the
checks ≤ 1.3 × bare. The lock is bench_create.py's realistic one (a toolchain-only CUDA 12.1 lock of 28 packages,
~3,300 files); `--keep DIR` reuses a dir bench_create.py (or this script) kept.

    python benchmarks/bench_entry_checks.py [--pairs 15] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="measured triples (≥ 5)")
    parser.add_argument("--keep", type=Path, default=None, help="bench_create.py's realistic dir to reuse or keep")
    args = parser.parse_args(argv)
    from rattler import Subdir, install

    from benchmarks.bench_create import make_lock
    from envlock.seams.conda import cache as pkgcache
    from envlock.seams.conda.install import records as rattler_records
    from envlock.usecases.create import CreateRequest, create_env
    from envlock.formats import read_lock
    from envlock.progress import NoProgress

    root = args.keep or Path(tempfile.mkdtemp(prefix="envlock-bench-checks-"))
    locks = list((root / "project" / "locks").glob("*/conda-lock.yml")) if root.is_dir() else []
    if locks:
        os.environ["ENVLOCK_CACHE_DIR"] = str(root / "cache")
        lock_path, channel = locks[0], (root / "channels" / "conda-forge").as_uri()
    else:
        root.mkdir(parents=True, exist_ok=True)
        lock_path, channel = make_lock(root, 3200, 64)
    cache, mirrors = root / "pkgs", {"conda-forge": (root / "channels" / "conda-forge").as_uri()}
    packages = read_lock(lock_path).packages_for("linux-64")

    def checks(_: Path) -> None:
        pkgcache.fill(packages, cache, mirrors=mirrors, offline=True, jobs=4, progress=NoProgress())

    def envlock(prefix: Path) -> None:
        create_env(CreateRequest(lock_path, prefix, "linux-64", cache_dir=cache, mirrors=mirrors))

    envlock(root / "warmup")  # fills (and seals) the package cache once
    records = rattler_records(pkgcache.fill(packages, cache, mirrors=mirrors, offline=True, jobs=4,
                                            progress=NoProgress()), cache)
    linked_from = pkgcache.entries(cache) if hasattr(pkgcache, "entries") else cache  # the store (issue 33.1)

    def bare(prefix: Path) -> None:
        asyncio.run(install(records, target_prefix=prefix, cache_dir=linked_from, platform=Subdir("linux-64"),
                            show_progress=False, execute_link_scripts=False))

    sides = {"checks": checks, "envlock": envlock, "bare": bare}
    times: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}  # process_time: all threads (rattler's linking too)
    for i in range(max(5, args.pairs)):
        for label, fn in sides.items():
            prefix = root / f"{label}-{i}"
            t0, c0 = time.perf_counter(), time.process_time()
            fn(prefix)
            times[label].append(time.perf_counter() - t0)
            cpu[label].append(time.process_time() - c0)
            shutil.rmtree(prefix, ignore_errors=True)
    pairs = len(times["bare"])
    nfiles = sum(1 for p in (root / "warmup").rglob("*") if not p.is_dir())
    print(f"{len(packages)} packages, {nfiles} files in the prefix, warm cache, {pairs} interleaved triples, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'':10} {'median':>9} {'min':>9} {'max':>9}")
    for label, values in times.items():
        print(f"{label:10} {statistics.median(values):9.4f} {min(values):9.4f} {max(values):9.4f}   (seconds)")
    for label in ("envlock", "checks"):
        ratios = [a / b for a, b in zip(times[label], times["bare"])]
        print(f"{label}/bare  median of pair ratios {statistics.median(ratios):.2f}×  "
              f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.2f}–{statistics.quantiles(ratios, n=4)[2]:.2f})"
              + ("   target ≤ 1.3×" if label == "envlock" else ""))
    ratios = [a / b for a, b in zip(cpu["envlock"], cpu["bare"])]
    print(f"CPU (all threads): envlock {statistics.median(cpu['envlock']):.4f} s, bare {statistics.median(cpu['bare']):.4f} s, "
          f"checks {statistics.median(cpu['checks']):.4f} s; envlock/bare median of pair ratios {statistics.median(ratios):.2f}× "
          f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.2f}–{statistics.quantiles(ratios, n=4)[2]:.2f}); "
          f"load average {os.getloadavg()[0]:.1f} after")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # py-rattler can crash at interpreter exit (DESIGN.md traps)
