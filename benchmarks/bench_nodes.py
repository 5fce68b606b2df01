"""Many nodes, one lock: N `envlock create` processes at once against one mirror served over loopback.

The lock is made as a user makes one (`envlock resolve --torch 2.3.0 --toolchain-only`, linux-64, against the
test channel of tests/channelbuilder.py, every package a `.conda`), with --payload-mb of incompressible bytes
spread over the CUDA libraries so downloads and extraction weigh something (a real torch 2.9 env is ~1.8 GB).
`envlock mirror` copies exactly that lock into a directory, which benchmarks/server.py serves on 127.0.0.1
(counting every request and byte). Then, for each N, N processes start together:

  shared     one ENVLOCK_CACHE_DIR for all (a cluster's shared filesystem): each package should be fetched once
  separate   one cache per process (node-local disks): N fetches of everything

and the wall time from the first spawn to the last exit is taken, with the slowest process, the requests per
package file and the bytes served. Nothing is asserted; the table goes to benchmarks/README.md.

    python benchmarks/bench_nodes.py [--nodes 1,5,10,20] [--runs 3] [--payload-mb 200] [--json out.json] [--keep DIR]
    python benchmarks/bench_nodes.py --envlock-src DIR   # the creates from another source tree (before a fix)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from server import CountingServer  # noqa: E402

HEAVY = ("libcublas", "libcusparse", "libcusolver", "cudnn", "cuda-nvcc-impl", "libcurand", "cuda-nvrtc")


def make_mirror(root: Path, payload_mb: int) -> tuple[Path, Path, int]:
    """Channel → lock → `envlock mirror`; returns (lock, mirror dir, bytes of the lock's packages)."""
    from tests.channelbuilder import conda_forge_catalog, index_channel, write_packages

    rng = random.Random(14)
    specs = [s for _, s in conda_forge_catalog(cuda_minors=["12.1"], subdirs=("linux-64",), pythons=("3.11",))]
    heavy = [s for s in specs if s.name in HEAVY]
    for spec in specs:
        spec.fmt = ".conda"
        if spec in heavy and payload_mb:
            size = payload_mb * (1 << 20) // len(heavy)
            # The build string stays: other packages pin it exactly (the archive's sha256 changes, as it should).
            spec.files[f"lib/lib{spec.name.replace('-', '_')}_payload.so"] = rng.randbytes(size)
    channel = root / "channels" / "conda-forge"
    write_packages(specs, channel)
    index_channel(channel, write_zst=False, write_shards=False)
    project = root / "project"
    project.mkdir()
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(root / "setup-cache")}
    env.pop("ENVLOCK_MIRRORS", None)
    run([sys.executable, "-m", "envlock", "resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64",
         "--mirror", f"conda-forge={channel.as_uri()}", "--project-dir", str(project), "--json"], env)
    lock = next((project / "locks").glob("*/conda-lock.yml"))
    mirror = root / "mirror"
    run([sys.executable, "-m", "envlock", "mirror", "--lock", str(lock), str(mirror), "-q",
         "--mirror", f"conda-forge={channel.as_uri()}"], env)
    size = sum(p.stat().st_size for p in (mirror / "conda-forge").glob("*/*.conda"))
    return lock, mirror, size


def run(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:5])} … failed:\n{done.stderr}{done.stdout[-2000:]}")


def one_round(lock: Path, server: CountingServer, work: Path, n: int, mode: str, src: Path | None = None) -> dict:
    """N creates at once; wall time, per-process times, requests per package, bytes.

    `src`: run another envlock source tree's create (PYTHONPATH), e.g. before a change, for comparison.
    """
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    mark = server.mark()
    base = {k: v for k, v in os.environ.items() if k not in ("ENVLOCK_MIRRORS",)}
    if src is not None:
        base["PYTHONPATH"] = str(src)
    procs = []
    started = time.perf_counter()
    for i in range(n):
        cache = work / ("cache" if mode == "shared" else f"cache{i}")
        env = {**base, "ENVLOCK_CACHE_DIR": str(cache)}
        procs.append((time.perf_counter(), subprocess.Popen(
            [sys.executable, "-m", "envlock", "create", "--lock", str(lock), "-p", str(work / f"env{i}"),
             "--platform", "linux-64", "--frozen", "-q", "--mirror", f"conda-forge={server.url}/plain/conda-forge"], env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
    times, failures = [], []
    for t0, proc in procs:
        _, err = proc.communicate()
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            failures.append(err.decode(errors="replace").strip().splitlines()[-2:])
    wall = time.perf_counter() - started
    reqs = [r for r in server.since(mark) if r.path.endswith(".conda")]
    per_file = Counter(r.path for r in reqs)
    return {"n": n, "mode": mode, "wall_s": wall, "slowest_s": max(times), "median_s": statistics.median(times),
            "failures": len(failures), "failure_tail": failures[:2], "package_requests": len(reqs),
            "max_fetches_per_package": max(per_file.values(), default=0), "bytes": sum(r.bytes_sent for r in reqs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1,5,10,20", help="comma-separated N values")
    parser.add_argument("--runs", type=int, default=3, help="rounds per (N, mode); the median wall is reported")
    parser.add_argument("--payload-mb", type=int, default=200, help="incompressible MB spread over the CUDA libraries")
    parser.add_argument("--json", type=Path, default=None, help="write every round here")
    parser.add_argument("--keep", type=Path, default=None, help="work dir to keep (default: a temp dir)")
    parser.add_argument("--envlock-src", type=Path, default=None,
                        help="run the creates from this envlock source tree (e.g. `git archive` of an older commit)")
    args = parser.parse_args(argv)
    nodes = [int(x) for x in args.nodes.split(",") if x.strip()]
    root = args.keep or Path(tempfile.mkdtemp(prefix="envlock-bench-nodes-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        return measure(args, nodes, root)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def measure(args: argparse.Namespace, nodes: list[int], root: Path) -> int:
    lock, mirror, size = make_mirror(root, args.payload_mb)
    packages = len(list((mirror / "conda-forge").glob("*/*.conda")))
    print(f"lock: {packages} packages, {size / 1e6:.1f} MB; mirror {mirror} on 127.0.0.1; {os.cpu_count()} CPUs", flush=True)
    rounds = []
    with CountingServer(mirror) as server:
        for n in nodes:
            for mode in ("shared", "separate"):
                for _ in range(max(1, args.runs)):
                    rounds.append(one_round(lock, server, root / "work", n, mode, args.envlock_src))
    shutil.rmtree(root / "work", ignore_errors=True)
    print(f"\n{'N':>3}  {'cache':<9} {'wall (median)':>13} {'per env':>8} {'slowest':>8} {'fetches/pkg':>11} "
          f"{'MB served':>9} {'failed':>6}")
    for n in nodes:
        for mode in ("shared", "separate"):
            sel = [r for r in rounds if r["n"] == n and r["mode"] == mode]
            wall = statistics.median(r["wall_s"] for r in sel)
            print(f"{n:>3}  {mode:<9} {wall:>11.2f} s {wall / n:>6.2f} s {max(r['slowest_s'] for r in sel):>6.2f} s "
                  f"{max(r['max_fetches_per_package'] for r in sel):>11} {statistics.median(r['bytes'] for r in sel) / 1e6:>9.1f} "
                  f"{sum(r['failures'] for r in sel):>6}")
    if args.json:
        args.json.write_text(json.dumps({"packages": packages, "bytes": size, "cpus": os.cpu_count(),
                                         "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
