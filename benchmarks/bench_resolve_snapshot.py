"""`envlock resolve` against the real conda-forge snapshot (../shared/channels), warm cache, vs a bare solve.

Whole-process `envlock resolve --toolchain-only` with a warm repodata cache, paired with a bare py-rattler
solve (benchmarks/bare_solve.py, a fresh process) of exactly the specs and virtual packages envlock
solved, plus `envlock --help` (stdout a pipe, as CI and scripts see it). The toolchain-only form: a full
environment adds uv's compile of the PyPI part, which a bare rattler solve does not do (its own figure
is benchmarks/bench_pypi.py's). The snapshot serves torch 2.11.0 -> CUDA 13.0 on linux-64 and
linux-aarch64, so that is the request.

Every module of the envlock measured is byte-compiled first (as `pip install` leaves it). Pairs run interleaved (envlock, bare, help), so load drift hits both sides of a pair alike; the ratio
is the median of the per-pair ratios. The load average is printed with the figures: two cores shared
with other work skew every number.

    python benchmarks/bench_resolve_snapshot.py [--runs 9]
    PYTHONPATH=/path/to/another/checkout python benchmarks/bench_resolve_snapshot.py   # that envlock
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

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = REPO.parent / "shared" / "channels" / "conda-forge"
PLATFORMS = ("linux-64", "linux-aarch64")
TARGET_RATIO, TARGET_HELP_S = 1.6, 0.12


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}{proc.stdout}")
    return wall, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="pairs to time (>= 9 for the recorded figure)")
    args = parser.parse_args()
    if not (SNAPSHOT / "linux-64" / "repodata.json").is_file():
        print(f"skipped: the snapshot is absent ({SNAPSHOT})")
        return 0
    work = Path(tempfile.mkdtemp(prefix="envlock-bench-snapshot-"))
    try:
        return _measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # its cache, lock and request (it was left behind on every run)


def _measure(args: argparse.Namespace, work: Path) -> int:
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(work / "cache")}
    # Bytecode as an installed envlock has it (pip compiles it; PYTHONDONTWRITEBYTECODE=1 or a fresh
    # checkout would otherwise compile every module from source on every run).
    where = subprocess.run([sys.executable, "-c", "import envlock, os; print(os.path.dirname(envlock.__file__))"],
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], env=env, check=True)
    envlock = [sys.executable, "-m", "envlock"]
    resolve = [*envlock, "resolve", "--torch", "2.11.0", "--toolchain-only", "--mirror", f"conda-forge={SNAPSHOT.as_uri()}",
               "--project-dir", str(work), "--json"]  # fmt: skip
    for p in PLATFORMS:
        resolve += ["--platform", p]
    _, out = timed(resolve, env)  # fills the cache (and writes the lock): every timed run below is warm
    doc = json.loads(out)
    request = {
        "channel": SNAPSHOT.as_uri(),
        "cache_dir": str(work / "cache" / "repodata"),
        "platforms": {p: {"specs": v["specs"], "virtual_packages": v["virtual_packages"]} for p, v in doc["platforms"].items()},
    }
    (work / "request.json").write_text(json.dumps(request))
    bare = [sys.executable, str(REPO / "benchmarks" / "bare_solve.py"), str(work / "request.json")]
    timed(bare, env)
    timed([*envlock, "--help"], env)  # compiled bytecode and a warm page cache for every row
    load_before = os.getloadavg()[0]
    samples: dict[str, list[float]] = {"envlock resolve": [], "bare py-rattler solve": [], "envlock --help": []}
    ratios: list[float] = []
    for _ in range(args.runs):  # interleaved pairs
        e, b = timed(resolve, env)[0], timed(bare, env)[0]
        samples["envlock resolve"].append(e)
        samples["bare py-rattler solve"].append(b)
        ratios.append(e / b)
        samples["envlock --help"].append(timed([*envlock, "--help"], env)[0])
    load_after = os.getloadavg()[0]
    ratio = statistics.median(ratios)
    help_s = statistics.median(samples["envlock --help"])
    print(f"torch 2.11.0 --toolchain-only, {' + '.join(PLATFORMS)}, warm cache, snapshot {SNAPSHOT}")
    print(f"{args.runs} interleaved pairs; {os.cpu_count()} cores, load average {load_before:.2f} before, "
          f"{load_after:.2f} after")
    print(f"{'measurement':28} {'median':>8} {'min-max':>15} {'ratio':>7}  target")
    for name, vals in samples.items():
        med = statistics.median(vals)
        cell = f"{ratio:.2f}x" if name == "envlock resolve" else ""
        target = {"envlock resolve": f"<= {TARGET_RATIO}x bare (median of pair ratios)",
                  "envlock --help": f"<= {TARGET_HELP_S} s"}.get(name, "")
        print(f"{name:28} {med:7.3f}s {min(vals):6.3f}-{max(vals):.3f}s {cell:>7}  {target}")
    print(f"pair ratios: {', '.join(f'{r:.2f}' for r in sorted(ratios))}")
    met = ratio <= TARGET_RATIO and help_s <= TARGET_HELP_S
    print(f"targets {'met' if met else 'missed'}")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
