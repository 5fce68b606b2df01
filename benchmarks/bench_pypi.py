"""The PyPI part of a full environment, paired against bare uv in one run (issue 16's figures).

    python benchmarks/bench_pypi.py [--runs 7] [--index loopback|configured]

* lock: envlock's `compile_part` (what resolve/lock run for the PyPI part: one uv compile, and a
  second for the dependency edges the first time a resolved set is seen,
  wheel choice, dependency edges, the variant check) against a bare `uv pip compile --generate-hashes`
  of the same requirements, same platform/python/cutoff/index flags, warm uv cache. Target ≤ 1.3×.
* install: envlock's `fetch_wheels` (warm cache) + `install_wheels` into a fresh prefix against a bare
  `uv pip install --no-deps --target` of the same wheel files into a fresh dir, warm uv cache. Target ≤ 1.2×.

Runs are interleaved (envlock, bare, envlock, …); the table shows medians and the median of the paired
ratios. `--index loopback` (default) serves a torch 2.7.1 shaped like the real one (the same 25 packages
and pins, small wheels) from tests/wheelindex.py on 127.0.0.1; `--index configured` locks the real torch
2.7.1 from the index pip is configured with (metadata only; the install row then uses the loopback wheels,
never the 3 GB of real CUDA wheels). Targets are printed, never asserted; exit 0 always.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: torch 2.7.1's real Linux x86_64 dependency set (uv pip compile against the default index, 2026-11-30).
REAL_271 = {
    "filelock": "4.3.1", "fsspec": "2026.9.0", "jinja2": "3.1.6", "markupsafe": "3.0.4", "mpmath": "1.3.0",
    "networkx": "3.6.1", "nvidia-cublas-cu12": "12.6.4.1", "nvidia-cuda-cupti-cu12": "12.6.80",
    "nvidia-cuda-nvrtc-cu12": "12.6.77", "nvidia-cuda-runtime-cu12": "12.6.77", "nvidia-cudnn-cu12": "9.5.1.17",
    "nvidia-cufft-cu12": "11.3.0.4", "nvidia-cufile-cu12": "1.11.1.6", "nvidia-curand-cu12": "10.3.7.77",
    "nvidia-cusolver-cu12": "11.7.1.2", "nvidia-cusparse-cu12": "12.5.4.2", "nvidia-cusparselt-cu12": "0.6.3",
    "nvidia-nccl-cu12": "2.26.2", "nvidia-nvjitlink-cu12": "12.6.85", "nvidia-nvtx-cu12": "12.6.77",
    "setuptools": "84.2.1", "sympy": "1.14.0", "triton": "3.3.1", "typing-extensions": "4.16.0",
}  # fmt: skip
CUTOFF = "2026-11-30T00:00:00Z"
LINUX = 'platform_system == "Linux" and platform_machine == "x86_64"'


def loopback_index():  # type: ignore[no-untyped-def]
    """torch 2.7.1 with its real 24 dependencies (tiny wheels), plus ninja, on 127.0.0.1."""
    from tests.wheelindex import WheelIndex, build_wheel

    plat = "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64"
    wheels = [build_wheel(n, v, plat if n.startswith("nvidia") else "py3-none-any",
                          requires=["mpmath>=1.1.0"] if n == "sympy" else ["markupsafe>=2.0"] if n == "jinja2" else [])
              for n, v in REAL_271.items() if n not in ("mpmath", "markupsafe")]
    wheels += [build_wheel("mpmath", REAL_271["mpmath"]), build_wheel("markupsafe", REAL_271["markupsafe"])]
    torch_reqs = [f"{n}=={v}; {LINUX}" if n.startswith(("nvidia", "triton")) else n
                  for n, v in REAL_271.items() if n not in ("mpmath", "markupsafe")]
    wheels.append(build_wheel("torch", "2.7.1", "cp311-cp311-manylinux_2_28_x86_64", requires=torch_reqs))
    wheels.append(build_wheel("ninja", "1.13.2", plat, scripts={"ninja": "#!/bin/sh\necho 1.13.2\n"}))
    return WheelIndex().add(wheels).start()


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--index", choices=("loopback", "configured"), default="loopback")
    args = ap.parse_args()

    from envlock.seams.pypi import compile as pypi_compile
    from envlock.seams.pypi import configured_index_url, uv
    from envlock.seams.pypi import part as pypi_part
    from envlock.seams.pypi import wheels as pypi_install

    work = Path(tempfile.mkdtemp(prefix="envlock-bench-pypi-"))
    os.environ["ENVLOCK_CACHE_DIR"] = str(work / "cache")
    cache = work / "cache"
    idx = loopback_index()
    lock_url = idx.url if args.index == "loopback" else configured_index_url()[0]
    reqs = ("torch==2.7.1", "ninja")
    req = pypi_compile.CompileRequest(requirements=reqs, python="3.11", platforms=("linux-64",), glibc="2.28",
                                   index=pypi_part.Index(lock_url, lock_url), exclude_newer=CUTOFF)
    bare_compile = [uv.uv_binary(), "pip", "compile", "-", "--no-config", "--quiet", "--generate-hashes",
                    "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28", "--only-binary", ":all:",
                    "--index-url", lock_url, "--exclude-newer", CUTOFF]
    env = uv.uv_environ(cache)

    def envlock_lock() -> None:
        pypi_compile.compile_part(req)

    def bare_lock() -> None:
        subprocess.run(bare_compile, input="\n".join(reqs) + "\n", env=env, capture_output=True, check=True, text=True)

    # Install: the loopback wheels (never the real 3 GB of CUDA wheels).
    ireq = pypi_compile.CompileRequest(requirements=reqs, python="3.11", platforms=("linux-64",), glibc="2.28",
                                    index=pypi_part.Index(idx.url, idx.url), exclude_newer=CUTOFF)
    wheels = pypi_compile.compile_part(ireq).packages["linux-64"]
    paths, _ = pypi_install.fetch_wheels(wheels, cache, offline=False)

    def envlock_install() -> None:
        prefix = Path(tempfile.mkdtemp(dir=work))
        paths2, _ = pypi_install.fetch_wheels(wheels, cache, offline=True)
        pypi_install.install_wheels(prefix, paths2, platform="linux-64", python="3.11", glibc="2.28", cache=cache)

    def bare_install() -> None:
        target = Path(tempfile.mkdtemp(dir=work)) / "lib" / "python3.11" / "site-packages"
        subprocess.run([uv.uv_binary(), "pip", "install", "--no-config", "--no-deps", "--offline", "--no-index",
                        "--quiet", "--target", str(target), "--python", sys.executable, "--python-version", "3.11",
                        "--python-platform", "x86_64-manylinux_2_28", *map(str, paths)], env=env, check=True,
                       capture_output=True)

    rows = []
    for label, ours, bare, target in (("lock the PyPI part (warm)", envlock_lock, bare_lock, 1.3),
                                      ("install it from a warm cache", envlock_install, bare_install, 1.2)):
        ours(), bare()  # warm-up: uv's cache, envlock's wheel cache
        a, b = [], []
        for _ in range(args.runs):
            a.append(timed(ours))
            b.append(timed(bare))
        ratios = [x / y for x, y in zip(a, b)]
        rows.append((label, statistics.median(a), statistics.median(b), statistics.median(ratios), target))
    idx.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(f"index: {args.index} ({'torch 2.7.1, ' + str(len(wheels)) + ' wheels'}), {args.runs} paired runs, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print("| what | envlock (median) | bare uv (median) | paired ratio (median) | target |")
    print("| --- | --- | --- | --- | --- |")
    for label, x, y, r, t in rows:
        print(f"| {label} | {x * 1000:.0f} ms | {y * 1000:.0f} ms | {r:.2f}× | ≤ {t}× {'met' if r <= t else 'MISSED'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
