"""The baseline: a bare py-rattler solve of the specs envlock solved, in a fresh process.

Same Gateway settings as envlock (cache dir, rattler's default SourceConfig for http channels, none of
the probes for file:// ones), same virtual packages, platforms solved concurrently as envlock does.
Prints one JSON line: {"import_s", "solve_s", "solve_cpu" (all threads), "packages": {platform: count}}.

    python benchmarks/bare_solve.py REQUEST.json
    REQUEST = {"channel": URL, "cache_dir": DIR,
               "platforms": {"linux-64": {"specs": [...], "virtual_packages": ["__cuda=12.6=0", ...]}}}
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

T0 = time.perf_counter()
import asyncio  # noqa: E402

import rattler  # noqa: E402
from rattler import BuildString, Channel, GenericVirtualPackage, PackageName, SourceConfig, Version  # noqa: E402

T_IMPORT = time.perf_counter() - T0

#: The Gateway is held until os._exit, as envlock's CLI holds its own (envlock.seams.conda.one_command): neither
#: side times rattler freeing its in-memory repodata on the way out of a process that is about to exit.
KEPT: list[Any] = []


def virtual(strings: list[str]) -> list[GenericVirtualPackage]:
    """`__cuda=12.6=0` -> GenericVirtualPackage."""
    out = []
    for s in strings:
        name, version, build = (s.split("=") + ["0"])[:3]
        out.append(GenericVirtualPackage(PackageName(name), Version(version), BuildString(build)))
    return out


def source_config(channel: str) -> SourceConfig:
    """What envlock's solver picks for this channel URL."""
    if channel.startswith("file://"):
        return SourceConfig(zstd_enabled=False, bz2_enabled=False, sharded_enabled=False)
    return SourceConfig()


async def solve_all(req: dict[str, Any]) -> dict[str, int]:
    channel = req["channel"].rstrip("/") + "/"
    gateway = rattler.Gateway(cache_dir=req["cache_dir"], default_config=SourceConfig(),
                              per_channel_config={channel: source_config(channel)})
    KEPT.append(gateway)
    chans = [Channel(channel)]

    async def one(platform: str, p: dict[str, Any]) -> tuple[str, int]:
        records = await rattler.solve(chans, p["specs"], gateway=gateway, platforms=[platform, "noarch"],
                                      virtual_packages=virtual(p["virtual_packages"]))
        return platform, len(records)

    results = await asyncio.gather(*(one(k, v) for k, v in req["platforms"].items()))
    return dict(results)


def main(argv: list[str]) -> int:
    with open(argv[0]) as fh:
        req = json.load(fh)
    t, c = time.perf_counter(), time.process_time()
    packages = asyncio.run(solve_all(req))
    print(json.dumps({"import_s": round(T_IMPORT, 4), "solve_s": round(time.perf_counter() - t, 4),
                      "solve_cpu": round(time.process_time() - c, 4), "packages": packages}))
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as exc:  # the harness shows this line; a traceback would hide the table
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        code = 1
    sys.stdout.flush()
    os._exit(code)  # py-rattler can segfault at interpreter exit (DESIGN.md, Known traps)
