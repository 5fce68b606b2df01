"""What per-file identity costs a warm create (issue 33.1): inode + size + mtime + ctime (one lstat per file) against
hashing every file, over bench_create.py's realistic lock (28 packages, ~3,300 files, 64 MB of libraries).

  lstat    envlock.seams.trust.drifted() over every entry the lock links: the check each create makes at use
           (inode, size, mtime, ctime, link count: one stat per file)
  sha256   every file of those entries hashed (what checking by hashes would cost at each use, page cache warm)

    python benchmarks/bench_file_identity.py [--reps 15] [--keep DIR]   (DIR: bench_entry_checks.py's --keep)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--keep", type=Path, default=None, help="a dir bench_entry_checks.py (or this script) kept")
    args = parser.parse_args(argv)

    from benchmarks.bench_create import make_lock
    from envlock.formats import read_lock
    from envlock.progress import NoProgress
    from envlock.seams.conda import cache as pkgcache
    from envlock.seams.trust import drifted, file_sha256
    from envlock.usecases.create import CreateRequest, create_env

    root = args.keep or Path(tempfile.mkdtemp(prefix="envlock-bench-identity-"))
    locks = list((root / "project" / "locks").glob("*/conda-lock.yml")) if root.is_dir() else []
    if locks:
        os.environ["ENVLOCK_CACHE_DIR"] = str(root / "cache")
        lock_path = locks[0]
    else:
        root.mkdir(parents=True, exist_ok=True)
        lock_path, _ = make_lock(root, 3200, 64)
    cache, mirrors = root / "pkgs", {"conda-forge": (root / "channels" / "conda-forge").as_uri()}
    packages = read_lock(lock_path).packages_for("linux-64")
    if not (root / "warmup").exists():
        create_env(CreateRequest(lock_path, root / "warmup", "linux-64", cache_dir=cache, mirrors=mirrors))
    fetched = pkgcache.fill(packages, cache, mirrors=mirrors, offline=True, jobs=4, progress=NoProgress())
    tables = []
    for f in fetched:
        rec = pkgcache.store(cache).get(pkgcache.dist(f.pkg))
        assert f.path is not None and isinstance(rec, dict)
        tables.append((f.path, rec["extra"]["files"]))
    nfiles = sum(len(t) for _, t in tables)
    nbytes = sum(os.lstat(os.path.join(p, rel)).st_size for p, t in tables for rel in t)

    def timed(fn: object, reps: int) -> list[float]:
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()  # type: ignore[operator]
            out.append((time.perf_counter() - t0) * 1000)
        return out

    def lstat() -> None:
        for path, table in tables:
            drifted(path, table)

    def sha256() -> None:
        for path, table in tables:
            for rel in table:
                full = os.path.join(path, rel)
                if not os.path.islink(full):
                    file_sha256(full)

    print(f"{len(tables)} entries, {nfiles} files, {nbytes / 1e6:.0f} MB; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    for label, fn, reps in (("lstat (check at use)", lstat, args.reps),
                            ("sha256 of every file", sha256, max(3, args.reps // 3))):
        ms = timed(fn, reps)
        print(f"{label:24} median {statistics.median(ms):8.1f} ms   min {min(ms):8.1f}   max {max(ms):8.1f}   ({reps} reps)")
    print(f"load average {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
