"""`envlock resolve` against the real conda-forge snapshot (../shared/channels), warm cache, vs a bare solve.

Issue 2's benchmark: whole-process `envlock resolve` with a warm repodata cache against a bare
py-rattler solve (benchmarks/bare_solve.py, a fresh process) of exactly the specs and virtual packages
envlock solved, plus `envlock --help`. The snapshot serves one anchor on at most two platforms
(torch 2.11.0 → CUDA 13.0 on linux-64 and linux-aarch64; no win-64 CUDA 13.0 dev set is in it), so that
is the request; the conda-forge-scale 3-platform comparison is benchmarks/run.py's.

    python benchmarks/bench_resolve_snapshot.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = REPO.parent / "shared" / "channels" / "conda-forge"
PLATFORMS = ("linux-64", "linux-aarch64")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}{proc.stdout}")
    return wall, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    if not (SNAPSHOT / "linux-64" / "repodata.json").is_file():
        print(f"skipped: the snapshot is absent ({SNAPSHOT})")
        return 0
    work = Path(tempfile.mkdtemp(prefix="envlock-bench-snapshot-"))
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(work / "cache")}
    envlock = [sys.executable, "-m", "envlock"]
    resolve = [*envlock, "resolve", "--torch", "2.11.0", "--toolchain-only", "--mirror", f"conda-forge={SNAPSHOT.as_uri()}",
               "--project-dir", str(work), "--json"]  # fmt: skip
    for p in PLATFORMS:
        resolve += ["--platform", p]
    _, out = timed(resolve, env)  # fills the cache: every timed run below is warm
    doc = json.loads(out)
    request = {
        "channel": SNAPSHOT.as_uri(),
        "cache_dir": str(work / "cache" / "repodata"),
        "platforms": {p: {"specs": v["specs"], "virtual_packages": v["virtual_packages"]} for p, v in doc["platforms"].items()},
    }
    (work / "request.json").write_text(json.dumps(request))
    bare = [sys.executable, str(REPO / "benchmarks" / "bare_solve.py"), str(work / "request.json")]
    samples: dict[str, list[float]] = {"envlock resolve": [], "bare py-rattler solve": [], "envlock --help": []}
    for _ in range(args.runs):  # interleaved, so load drift hits every row alike
        samples["envlock resolve"].append(timed(resolve, env)[0])
        samples["bare py-rattler solve"].append(timed(bare, env)[0])
        samples["envlock --help"].append(timed([*envlock, "--help"], env)[0])
    base = statistics.median(samples["bare py-rattler solve"])
    print(f"torch 2.11.0, {' + '.join(PLATFORMS)}, warm cache, snapshot {SNAPSHOT}, {args.runs} runs")
    print(f"{'measurement':28} {'median':>8} {'min-max':>15} {'ratio':>7}  target")
    targets = {"envlock resolve": "<= 1.5x bare", "envlock --help": "<= 0.25 s"}
    for name, vals in samples.items():
        med = statistics.median(vals)
        ratio = f"{med / base:.2f}x" if name == "envlock resolve" else ""
        print(f"{name:28} {med:7.3f}s {min(vals):6.3f}-{max(vals):.3f}s {ratio:>7}  {targets.get(name, '')}")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
