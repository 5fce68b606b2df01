"""envlock's resolve() timed inside the process (no interpreter start-up, imports timed apart).

The counterpart of bare_solve.py's `solve_s`: what envlock's own work (anchor, plan, solve, render,
write) costs once the interpreter is up, run as the CLI runs it (inside envlock.seams.conda.one_command). Uses
$ENVLOCK_CACHE_DIR like the CLI. Prints one JSON line.

    python benchmarks/inproc_resolve.py CHANNEL_URL PROJECT_DIR
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
from envlock.seams.conda import one_command  # noqa: E402
from envlock.usecases.resolve import ResolveRequest, resolve  # noqa: E402

import asyncio  # noqa: E402,F401 - bare_solve.py's import time holds asyncio and rattler: so does this one's
import rattler  # noqa: E402,F401 - the CLI imports it before solving too; time it with the imports

T_IMPORT = time.perf_counter() - T0


def main(argv: list[str]) -> int:
    channel, project = argv
    req = ResolveRequest(torch="2.7.1", platforms=("linux-64", "linux-aarch64", "win-64"),
                         mirrors={"conda-forge": channel}, project_dir=Path(project), toolchain_only=True)
    t, c = time.perf_counter(), time.process_time()
    # As `envlock resolve` runs it (envlock.cli.run): the command's Gateway is kept until os._exit, not freed on
    # the way out (~5-8 ms of freeing repodata a process about to exit never pays). bare_solve.py keeps its own.
    with one_command(process_exits=True):
        result = resolve(req)
    print(json.dumps({"import_s": round(T_IMPORT, 4), "resolve_s": round(time.perf_counter() - t, 4),
                      "resolve_cpu": round(time.process_time() - c, 4),  # all threads: rattler's too
                      "packages": {r.platform: len(r.packages) for r in result.results}}))
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as exc:  # the harness reports this line
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        code = 1
    sys.stdout.flush()
    os._exit(code)  # py-rattler can segfault at interpreter exit (DESIGN.md, Known traps)
