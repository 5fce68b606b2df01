"""The full-environment baseline: a bare py-rattler solve and a bare `uv pip compile`, side by side.

What envlock does for a full environment (conda part and PyPI part at once) with nothing of envlock:
uv is started first, then rattler solves the specs envlock reported (as bare_solve.py), then uv is
waited for. Prints one JSON line: {"import_s", "solve_s", "uv_s", "packages"}.

    python benchmarks/bare_full.py REQUEST.json
    REQUEST = bare_solve.py's request + {"uv": {"argv": [...], "stdin": "torch==2.7.1\\nninja\\n", "env": {...}}}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

T0 = time.perf_counter()
import asyncio  # noqa: E402

from bare_solve import solve_all  # noqa: E402 - imports rattler

T_IMPORT = time.perf_counter() - T0


def main(argv: list[str]) -> int:
    with open(argv[0]) as fh:
        req = json.load(fh)
    uv = req["uv"]
    stdin = tempfile.TemporaryFile()
    stdin.write(uv["stdin"].encode())
    stdin.seek(0)
    t = time.perf_counter()
    proc = subprocess.Popen(uv["argv"], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **uv["env"]}, text=True)
    packages = asyncio.run(solve_all(req))
    solve_s = time.perf_counter() - t
    out, err = proc.communicate()
    uv_s = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"uv exited {proc.returncode}: {err.strip()[-500:]}")
    print(json.dumps({"import_s": round(T_IMPORT, 4), "solve_s": round(solve_s, 4), "uv_s": round(uv_s, 4),
                      "packages": packages, "pypi": sum(1 for ln in out.splitlines() if "==" in ln)}))
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as exc:  # the harness shows this line
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        code = 1
    sys.stdout.flush()
    os._exit(code)  # py-rattler can segfault at interpreter exit (DESIGN.md, Known traps)
