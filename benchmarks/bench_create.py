"""Time `envlock create` from a warm package cache against a bare `rattler.install` of the same records.

The lock is made the way a user makes one (`envlock resolve --torch 2.3.0` against the test channel of
tests/channelbuilder.py, linux-64); one `envlock create` fills envlock's package cache. Then, in one
process and interleaved (A, B, A, B …) so drift hits both alike, each side installs into a fresh
prefix --runs times. Two scenarios:

  toy        the test channel as it is: 28 packages of a few files each (worst case for envlock's
             fixed per-create cost, since linking is almost free)
  realistic  the same toolchain-only lock shaped like a real CUDA dev env (cuda_shaped): --files headers
             where a real one has them (cuda-cccl's cub/thrust/libcu++ in targets/x86_64-linux/include,
             g++'s libstdc++ headers, the sysroot's glibc headers, cudart/cublas/cusparse/cusolver -dev
             headers, nvvm) and --lib-mb of incompressible shared libraries in targets/x86_64-linux/lib
             with lib/ symlinks (real ones are ~100x larger: what scales with bytes is said apart)

  envlock  create_env(): read + check the lock, check every cache entry against the lock's sha256,
           build the records, rattler.install, write the activation hooks and conda-meta/envlock
  bare     rattler.install() of the records envlock built (same cache dir, same platform), nothing else

    python benchmarks/bench_create.py [--runs 7] [--files 3200] [--lib-mb 64] [--keep DIR]

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


#: Where a real CUDA 12 dev toolchain env (nvcc, cudart/cublas/cusparse/cusolver/curand -dev, cuDNN, gcc/g++
#: 12) keeps its files, and the share of them each package holds: cuda-cccl's headers (cub, thrust,
#: libcu++) are most of them, then g++'s libstdc++ headers and the sysroot's glibc headers.
SHAPE = (
    ("cuda-cccl_linux-64", "targets/x86_64-linux/include", ("cub", "thrust", "cuda/std/detail/libcxx/include", "nv"), 0.46),
    ("gxx_impl_linux-64", "x86_64-conda-linux-gnu/include/c++/12.4.0", ("bits", "ext", "tr1", "debug", ""), 0.20),
    ("sysroot_linux-64", "x86_64-conda-linux-gnu/sysroot/usr/include", ("linux", "asm-generic", "sys", "bits", ""), 0.16),
    ("gcc_impl_linux-64", "lib/gcc/x86_64-conda-linux-gnu/12.4.0/include", ("", "sanitizer", "ssp"), 0.06),
    ("cuda-cudart-dev_linux-64", "targets/x86_64-linux/include", ("", "crt", "cooperative_groups"), 0.04),
    ("libcublas-dev", "targets/x86_64-linux/include", ("",), 0.02),
    ("libcusparse-dev", "targets/x86_64-linux/include", ("",), 0.01),
    ("libcusolver-dev", "targets/x86_64-linux/include", ("",), 0.01),
    ("cuda-nvcc-impl", "nvvm", ("include", "libdevice", "lib64", "bin"), 0.04),
)  # fmt: skip
#: The shared libraries (real sizes: libcublasLt alone is ~500 MB; here a few MB each, incompressible).
LIBS = (("libcublas", "libcublas", 8), ("libcublas", "libcublasLt", 16), ("libcusparse", "libcusparse", 8),
        ("libcusolver", "libcusolver", 8), ("libcurand", "libcurand", 4), ("cudnn", "libcudnn", 4),
        ("cudnn", "libcudnn_ops", 8), ("cudnn", "libcudnn_cnn", 8), ("libnvjitlink", "libnvJitLink", 4))


def cuda_shaped(specs: list, files: int, lib_mb: float) -> None:  # type: ignore[type-arg]
    """Give the toolchain packages `files` headers (and the libraries `lib_mb` MB) where a real CUDA env has them.

    Build strings stay as they are (other packages pin them); each file's bytes differ, as real headers do.
    """
    import random

    rng = random.Random(25)
    by_name: dict[str, list] = {}  # type: ignore[type-arg]
    for s in specs:  # every build of a name (the gcc the lock picks is one of several)
        if s.subdir in ("linux-64", "noarch"):
            by_name.setdefault(s.name, []).append(s)
    for name, root, subdirs, share in SHAPE:
        headers = {}
        for i in range(round(files * share)):
            sub = subdirs[i % len(subdirs)]
            stem = name.split("_")[0].replace("-", "_")  # packages sharing an include dir hold different headers
            rel = f"{root}/{sub}/{stem}_{i:05d}.h".replace("//", "/")
            lines = rng.randint(20, 400)  # real headers: a few hundred bytes to tens of KB
            headers[rel] = f"/* {name} {i} */\n" + "".join(f"#define ENVLOCK_{i}_{j} {rng.random()}\n" for j in range(lines))
        for spec in by_name[name]:
            spec.files.update(headers)
    if lib_mb:
        total = sum(mb for *_, mb in LIBS)
        for owner, lib, mb in LIBS:
            real = f"targets/x86_64-linux/lib/{lib}.so.12.1.0" if owner != "cudnn" else f"lib/{lib}.so.8.9.7"
            data = rng.randbytes(int(mb / total * lib_mb * 1e6))
            for spec in by_name[owner]:
                spec.files[real] = data
                if owner != "cudnn":
                    spec.symlinks[f"lib/{lib}.so.12"] = f"../{real}"


def make_lock(root: Path, extra_files: int = 0, lib_mb: float = 0) -> tuple[Path, str]:
    """Build the test channel and resolve torch 2.3.0 for linux-64 (toolchain only); return (lock path, channel URL)."""
    from envlock.usecases.resolve import ResolveRequest, resolve
    from tests.channelbuilder import conda_forge_catalog, index_channel, write_packages

    specs = [s for _, s in conda_forge_catalog(cuda_minors=["12.1"], subdirs=("linux-64",), pythons=("3.11",))]
    if extra_files:
        cuda_shaped(specs, extra_files, lib_mb)
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
    parser.add_argument("--files", type=int, default=3200, help="headers added in the realistic scenario")
    parser.add_argument("--lib-mb", type=float, default=64, help="MB of shared libraries in the realistic scenario")
    parser.add_argument("--keep", type=Path, default=None, help="work dir to keep (default: a temp dir)")
    args = parser.parse_args(argv)
    runs = max(5, args.runs)
    base = args.keep or Path(tempfile.mkdtemp(prefix="envlock-bench-create-"))
    worst = 0.0
    for scenario, files, lib_mb in (("toy", 0, 0), ("realistic", args.files, args.lib_mb)):
        worst = max(worst, bench(base / scenario, runs, scenario, files, lib_mb))
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def bench(root: Path, runs: int, scenario: str, files: int, lib_mb: float) -> float:
    """One scenario: print its table, return the median ratio."""
    from rattler import Subdir, install

    from envlock.seams.conda import cache as pkgcache
    from envlock.seams.conda.install import records as rattler_records
    from envlock.usecases.create import CreateRequest, create_env
    from envlock.formats import read_lock
    from envlock.progress import NoProgress

    root.mkdir(parents=True, exist_ok=True)
    lock_path, channel = make_lock(root, files, lib_mb)
    cache = root / "pkgs"
    mirrors = {"conda-forge": channel}

    def envlock_once(prefix: Path) -> None:
        create_env(CreateRequest(lock_path, prefix, "linux-64", cache_dir=cache, mirrors=mirrors))

    envlock_once(root / "warmup")  # fills the package cache (downloads + verifies once)
    packages = read_lock(lock_path).packages_for("linux-64")
    fetched = pkgcache.fill(packages, cache, mirrors=mirrors, offline=False, jobs=4, progress=NoProgress())
    records = rattler_records(fetched, cache)
    # where rattler links from: this user's private store (issue 33.1), the cache dir itself before it
    linked_from = pkgcache.entries(cache) if hasattr(pkgcache, "entries") else cache

    def bare_once(prefix: Path) -> None:
        asyncio.run(install(records, target_prefix=prefix, cache_dir=linked_from, platform=Subdir("linux-64"),
                            show_progress=False, execute_link_scripts=False))

    times: dict[str, list[float]] = {"envlock create": [], "bare rattler.install": []}
    cpu: dict[str, list[float]] = {"envlock create": [], "bare rattler.install": []}
    for i in range(runs):
        for label, fn in (("envlock create", envlock_once), ("bare rattler.install", bare_once)):
            prefix = root / f"{label.split()[0]}-{i}"
            t0, c0 = time.perf_counter(), time.process_time()
            fn(prefix)
            times[label].append(time.perf_counter() - t0)
            cpu[label].append(time.process_time() - c0)  # all threads (rattler's linking too)
            shutil.rmtree(prefix)

    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["envlock create"] / med["bare rattler.install"]
    nfiles = sum(1 for p in (root / "warmup").rglob("*") if not p.is_dir())
    mb = sum(p.stat().st_size for p in (root / "warmup").rglob("*") if p.is_file() and not p.is_symlink()) / 1e6
    print(f"\n[{scenario}] {len(packages)} packages, {nfiles} files in the prefix ({mb:.0f} MB; linux-64, torch 2.3.0 → "
          f"CUDA 12.1), warm cache, {runs} runs each, interleaved")
    cpu_ratio = statistics.median(a / b for a, b in zip(cpu["envlock create"], cpu["bare rattler.install"]))
    print(f"CPU (median, s)          {statistics.median(cpu['envlock create']):9.3f} "
          f"{statistics.median(cpu['bare rattler.install']):9.3f}   paired ratio {cpu_ratio:.2f}x")
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
