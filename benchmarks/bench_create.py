"""Time `envlock create` from a warm package cache against a bare `rattler.install` of the same records.

The lock is made the way a user makes one (`envlock resolve --torch 2.3.0` against the test channel of
tests/channelbuilder.py, linux-64); one `envlock create` fills envlock's package cache. Then, in one
process and interleaved (A, B, A, B …) so drift hits both alike, each side installs into a fresh
prefix --runs times. Two scenarios:

  toy        the test channel as it is: 27 packages of a few files each (worst case for envlock's
             fixed per-create cost, since linking is almost free)
  realistic  the same, with --files extra files in the python package (a real CUDA dev env links a
             few thousand files; linking cost is per file, as the cache is hardlinked)

  envlock  create_env(): read + check the lock, check every cache entry against the lock's sha256,
           build the records, rattler.install, write the activation hooks and conda-meta/envlock
  bare     rattler.install() of the records envlock built (same cache dir, same platform), nothing else

    python benchmarks/bench_create.py [--runs 7] [--keep DIR]

Target: envlock ≤ 1.2 × bare (median).
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


def make_lock(root: Path, extra_files: int = 0) -> tuple[Path, str]:
    """Build the test channel and resolve torch 2.3.0 for linux-64; return (lock path, channel URL)."""
    from envlock.resolve import ResolveRequest, resolve
    from tests.channelbuilder import conda_forge_catalog, index_channel, write_packages

    specs = [s for _, s in conda_forge_catalog(cuda_minors=["12.1"], subdirs=("linux-64",), pythons=("3.11",))]
    for spec in specs:
        if spec.name == "python" and extra_files:
            body = "# envlock benchmark filler\n" + "x = 1\n" * 300  # ~2 KB, a typical small module
            spec.files.update({f"lib/python3.11/site-packages/filler/m{i:05d}.py": body for i in range(extra_files)})
            spec.build = ""
            spec.__post_init__()  # the build hash covers the file list
    channel = root / "channels" / "conda-forge"
    write_packages(specs, channel)
    index_channel(channel)
    project = root / "project"
    project.mkdir()
    os.environ["ENVLOCK_CACHE_DIR"] = str(root / "cache")
    resolve(ResolveRequest(torch="2.3.0", platforms=("linux-64",), mirrors={"conda-forge": channel.as_uri()},
                           project_dir=project, toolchain_only=True))  # the conda part (bench_pypi.py: the PyPI part)
    return next((project / "locks").glob("*/conda-lock.yml")), channel.as_uri()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="installs per side (≥ 5)")
    parser.add_argument("--files", type=int, default=3000, help="extra files in the realistic scenario")
    parser.add_argument("--keep", type=Path, default=None, help="work dir to keep (default: a temp dir)")
    args = parser.parse_args(argv)
    runs = max(5, args.runs)
    base = args.keep or Path(tempfile.mkdtemp(prefix="envlock-bench-create-"))
    worst = 0.0
    for scenario, files in (("toy", 0), ("realistic", args.files)):
        worst = max(worst, bench(base / scenario, runs, scenario, files))
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def bench(root: Path, runs: int, scenario: str, files: int) -> float:
    """One scenario: print its table, return the median ratio."""
    from rattler import Subdir, install

    from envlock.conda import cache as pkgcache
    from envlock.conda.install import records as rattler_records
    from envlock.create import CreateRequest, create_env
    from envlock.formats import read_lock
    from envlock.progress import NoProgress

    root.mkdir(parents=True, exist_ok=True)
    lock_path, channel = make_lock(root, files)
    cache = root / "pkgs"
    mirrors = {"conda-forge": channel}

    def envlock_once(prefix: Path) -> None:
        create_env(CreateRequest(lock_path, prefix, "linux-64", cache_dir=cache, mirrors=mirrors))

    envlock_once(root / "warmup")  # fills the package cache (downloads + verifies once)
    packages = read_lock(lock_path).packages_for("linux-64")
    fetched = pkgcache.fill(packages, cache, mirrors=mirrors, offline=False, jobs=4, progress=NoProgress())
    records = rattler_records(fetched, cache)

    def bare_once(prefix: Path) -> None:
        asyncio.run(install(records, target_prefix=prefix, cache_dir=cache, platform=Subdir("linux-64"),
                            show_progress=False, execute_link_scripts=False))

    times: dict[str, list[float]] = {"envlock create": [], "bare rattler.install": []}
    for i in range(runs):
        for label, fn in (("envlock create", envlock_once), ("bare rattler.install", bare_once)):
            prefix = root / f"{label.split()[0]}-{i}"
            t0 = time.perf_counter()
            fn(prefix)
            times[label].append(time.perf_counter() - t0)
            shutil.rmtree(prefix)

    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["envlock create"] / med["bare rattler.install"]
    nfiles = sum(1 for p in (root / "warmup").rglob("*") if not p.is_dir())
    print(f"\n[{scenario}] {len(packages)} packages, {nfiles} files in the prefix (linux-64, torch 2.3.0 → "
          f"CUDA 12.1), warm cache, {runs} runs each, interleaved")
    print(f"{'':24} {'median':>9} {'min':>9} {'max':>9}")
    for label, values in times.items():
        print(f"{label:24} {med[label]:9.3f} {min(values):9.3f} {max(values):9.3f}   (seconds)")
    overhead_ms = (med["envlock create"] - med["bare rattler.install"]) * 1000
    verdict = "ok" if ratio <= 1.2 else "over target"
    print(f"{'ratio (median)':24} {ratio:9.2f}×   (+{overhead_ms:.0f} ms)   target ≤ 1.2× → {verdict}")
    return ratio


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # py-rattler can crash at interpreter exit (DESIGN.md traps)
