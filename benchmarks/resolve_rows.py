"""The resolve rows of run.py: envlock resolve against bare py-rattler (and bare uv for a full environment).

* toolchain-only, 3 platforms, the generated conda-forge-scale channel: cold/warm x sharded/plain, whole
  process, paired (envlock, bare, envlock, bare, ...); in-process resolve() against bare solve()
* full environment (conda part + PyPI part), linux-64, warm: against bare_full.py (a rattler solve and a
  `uv pip compile` side by side) on a loopback index of torch 2.7.1's real dependency set (bench_pypi.py's;
  uv reads each wheel's PEP 658 metadata, never the wheel)
* toolchain-only, 1 platform, the real snapshot in ../shared (file://), warm
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from measure import HERE, Row, Sample, checked, cpu_note, envlock_cmd, paired_ratio, run_proc

PLATFORMS = ("linux-64", "linux-aarch64", "win-64")
TORCH = "2.7.1"
SECTION = f"resolve --torch {TORCH}, 3 platforms (toolchain-only)"
RSS_MARGIN_MB = 50  # issue 25: resolve's peak RSS <= bare + 50 MB


@dataclass
class Bench:
    """Shared state of one benchmark run."""

    info: Any  # gen_channel.ChannelInfo
    server: Any  # server.CountingServer
    work: Path
    runs: int
    log: Callable[[str], None]
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)  # platform -> {specs, virtual_packages}
    counter: int = 0

    def fresh(self, prefix: str) -> Path:
        self.counter += 1
        path = self.work / f"{prefix}-{self.counter}"
        path.mkdir(parents=True)
        return path

    def env(self, cache: Path) -> dict[str, str]:
        return {**os.environ, "ENVLOCK_CACHE_DIR": str(cache), "NO_COLOR": "1"}

    def resolve_cmd(self, sharded: bool, project: Path, *, name: str | None = None) -> list[str]:
        # The conda side is what this table measures against a bare rattler solve: toolchain only. The full
        # environment (PyPI part too) has its own rows (bench_full).
        cmd = [*envlock_cmd(), "resolve", "--torch", TORCH, "--toolchain-only"]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        cmd += ["--mirror", f"conda-forge={self.server.channel_url(sharded=sharded)}", "--project-dir", str(project),
                "--json"]
        if name:
            cmd += ["--name", name]
        return cmd

    def envlock_resolve(self, sharded: bool, cache: Path) -> Sample:
        sample = checked(run_proc(self.resolve_cmd(sharded, self.fresh("proj")), env=self.env(cache),
                                  server=self.server), "envlock resolve")
        if not self.specs:
            self.specs = reported_specs(json.loads(sample.stdout))
        return sample

    def inproc_resolve(self, sharded: bool, cache: Path) -> dict[str, Any]:
        """envlock's resolve() timed inside its process (inproc_resolve.py)."""
        cmd = [sys.executable, str(HERE / "inproc_resolve.py"), self.server.channel_url(sharded=sharded),
               str(self.fresh("proj"))]
        sample = checked(run_proc(cmd, env=self.env(cache), server=self.server), "in-process resolve")
        doc = json.loads(sample.stdout)
        if "error" in doc:
            raise RuntimeError(f"in-process resolve failed: {doc['error']}")
        return doc

    def bare(self, script: str, request: dict[str, Any], env: dict[str, str]) -> Sample:
        """bare_solve.py / bare_full.py with `request` (a fresh process)."""
        req = self.fresh("bare") / "request.json"
        req.write_text(json.dumps(request))
        sample = checked(run_proc([sys.executable, str(HERE / script), str(req)], env=env, server=self.server),
                         script)
        if "error" in sample.stdout:
            raise RuntimeError(f"{script} failed: {sample.stdout}")
        return sample

    def bare_resolve(self, sharded: bool, cache: Path) -> Sample:
        return self.bare("bare_solve.py", {"channel": self.server.channel_url(sharded=sharded),
                                           "cache_dir": str(cache / "repodata"), "platforms": self.specs},
                         self.env(cache))


def reported_specs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """platform -> the specs and virtual packages envlock solved (its --json), for the bare baseline."""
    return {p: {"specs": v["specs"], "virtual_packages": v["virtual_packages"]} for p, v in doc["platforms"].items()}


def _net(samples: list[Sample], unit: str = "MB") -> str:
    size = statistics.median(s.net["bytes"] for s in samples)
    amount = f"{size / 1e6:.2f} MB" if unit == "MB" else f"{size / 1e3:.1f} kB"
    return f"{amount} in {statistics.median(s.net['requests'] for s in samples):.0f} requests"


def _rss(ours: list[Sample], bare: list[Sample]) -> str:
    return f"peak RSS {statistics.median(s.rss_mb for s in ours):.0f} MB (bare {statistics.median(s.rss_mb for s in bare):.0f})"


def bench_resolve(b: Bench) -> list[Row]:
    """envlock resolve (3 platforms) cold and warm, sharded and plain, against bare py-rattler, in pairs."""
    rows: list[Row] = []
    cold_bytes: dict[str, list[float]] = {}
    rss: dict[str, tuple[list[float], list[float]]] = {}
    for sharded in (True, False):
        layout = "sharded" if sharded else "plain"
        cold, warm, bare_cold, bare_warm = [], [], [], []
        warm_cache = b.fresh("cache")
        b.log(f"resolve {layout}: {b.runs} cold + {b.runs} warm pairs, envlock and bare")
        for i in range(b.runs):
            cache = warm_cache if i == 0 else b.fresh("cache")  # run 0 fills the cache the warm runs use
            cold.append(b.envlock_resolve(sharded, cache))
            bare_cold.append(b.bare_resolve(sharded, b.fresh("cache")))
        bare_warm_cache = b.fresh("cache")
        b.bare_resolve(sharded, bare_warm_cache)
        for _ in range(b.runs):
            warm.append(b.envlock_resolve(sharded, warm_cache))
            bare_warm.append(b.bare_resolve(sharded, bare_warm_cache))
        cold_bytes[layout] = [s.net["bytes"] for s in cold]
        rss[layout] = ([s.rss_mb for s in cold + warm], [s.rss_mb for s in bare_cold + bare_warm])
        rows.append(Row(SECTION, f"cold, {layout}", [s.wall for s in cold], baseline=[s.wall for s in bare_cold],
                        baseline_label="bare", paired=True,
                        note=f"{_net(cold)}; {_rss(cold, bare_cold)}; {cpu_note(cold, bare_cold)}"))
        ratio = paired_ratio([s.wall for s in warm], [s.wall for s in bare_warm])
        rows.append(Row(SECTION, f"warm, {layout}", [s.wall for s in warm], baseline=[s.wall for s in bare_warm],
                        baseline_label="bare", target="<= 1.5x bare", ok=ratio <= 1.5, paired=True,
                        note=f"{_net(warm, 'kB')}; {_rss(warm, bare_warm)}; {cpu_note(warm, bare_warm)}"))
        inproc, solve_s = [], []
        for _ in range(b.runs):  # pairs again: resolve() in its process, solve() in the bare one
            inproc.append(b.inproc_resolve(sharded, warm_cache))
            solve_s.append(json.loads(b.bare_resolve(sharded, bare_warm_cache).stdout))
        ratio = paired_ratio([d["resolve_s"] for d in inproc], [d["solve_s"] for d in solve_s])
        rows.append(Row(SECTION, f"  in-process, warm, {layout}: envlock resolve()", [d["resolve_s"] for d in inproc],
                        baseline=[d["solve_s"] for d in solve_s], baseline_label="bare solve()", paired=True,
                        target="<= 1.25x bare" if sharded else "", ok=(ratio <= 1.25) if sharded else None,
                        note=(f"no start-up; imports apart: envlock {statistics.median(d['import_s'] for d in inproc):.3f} s"
                              f", bare (rattler) {statistics.median(d['import_s'] for d in solve_s):.3f} s; CPU "
                              f"{statistics.median(d['resolve_cpu'] for d in inproc):.3f} vs "
                              f"{statistics.median(d['solve_cpu'] for d in solve_s):.3f} s = "
                              f"{paired_ratio([d['resolve_cpu'] for d in inproc], [d['solve_cpu'] for d in solve_s]):.2f}x")))
    pct = [100 * s / statistics.median(cold_bytes["plain"]) for s in cold_bytes["sharded"]]
    json_bytes = sum(v["json"] for v in b.info.bytes.values())
    rows.append(Row(SECTION, "sharded cold bytes / plain cold bytes", pct, unit="%", target="<= 5 %",
                    ok=statistics.median(pct) <= 5,
                    note=(f"{statistics.median(cold_bytes['sharded']) / 1e6:.2f} MB vs "
                          f"{statistics.median(cold_bytes['plain']) / 1e6:.1f} MB (.zst); "
                          f"{100 * statistics.median(cold_bytes['sharded']) / json_bytes:.2f} % of the "
                          f"{json_bytes / 1e6:.0f} MB of repodata.json")))
    for layout, (ours, bare) in rss.items():
        rows.append(Row(SECTION, f"peak RSS, {layout} (cold + warm runs)", ours, unit="MB", baseline=bare,
                        baseline_label="bare", target=f"<= bare + {RSS_MARGIN_MB} MB",
                        ok=statistics.median(ours) <= statistics.median(bare) + RSS_MARGIN_MB,
                        note=f"max {max(ours):.0f} MB (bare max {max(bare):.0f}); from launcher.py, wait4 ru_maxrss"))
    return rows


# ---------------------------------------------------------------------------------------------------
# The full environment: conda part + PyPI part
# ---------------------------------------------------------------------------------------------------


def pip_env(index_url: str) -> dict[str, str]:
    """This process's environment with pip pointed at `index_url` alone (no config file, no other PIP_*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index_url}


def bare_uv_request(doc: dict[str, Any], index_url: str, uv_cache: Path) -> dict[str, Any]:
    """The bare `uv pip compile` of the PyPI part envlock locked (same requirements, platform, python, cutoff)."""
    from envlock.seams.pypi import uv

    argv = [uv.uv_binary(), "pip", "compile", "-", "--no-config", "--quiet", "--generate-hashes",
            "--python", sys.executable, "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28",
            "--only-binary", ":all:", "--index-url", index_url, "--exclude-newer", doc["exclude_newer"]]
    return {"argv": argv, "stdin": f"torch=={TORCH}\nninja\n", "env": {"UV_CACHE_DIR": str(uv_cache)}}


def bench_full(b: Bench) -> list[Row]:
    """`envlock resolve --torch 2.7.1` (python + the PyPI part), linux-64, warm, against bare rattler + bare uv."""
    sys.path.insert(0, str(HERE.parent))
    from bench_pypi import loopback_index

    idx = loopback_index()
    try:
        env_cache, bare_cache = b.fresh("cache"), b.fresh("cache")
        env = {**pip_env(idx.url), "ENVLOCK_CACHE_DIR": str(env_cache), "NO_COLOR": "1"}
        url = b.server.channel_url(sharded=True)

        def envlock_full() -> Sample:
            cmd = [*envlock_cmd(), "resolve", "--torch", TORCH, "--platform", "linux-64", "--mirror",
                   f"conda-forge={url}", "--project-dir", str(b.fresh("proj")), "--json"]
            return checked(run_proc(cmd, env=env, server=b.server), "envlock resolve (full)")

        b.log(f"full env: {b.runs} warm pairs (envlock; bare rattler + bare uv)")
        doc = json.loads(envlock_full().stdout)  # fills the caches
        request = {"channel": url, "cache_dir": str(bare_cache / "repodata"), "platforms": reported_specs(doc),
                   "uv": bare_uv_request(doc, idx.url, bare_cache / "uv")}
        bare_env = {**pip_env(idx.url), "NO_COLOR": "1"}
        b.bare("bare_full.py", request, bare_env)
        ours, bare = [], []
        for _ in range(b.runs):
            ours.append(envlock_full())
            bare.append(b.bare("bare_full.py", request, bare_env))
        wheels = len(doc["platforms"]["linux-64"]["pypi"])
        ratio = paired_ratio([s.wall for s in ours], [s.wall for s in bare])
        return [Row("full env: resolve --torch 2.7.1, linux-64 (conda part + PyPI part, loopback index)", "warm",
                    [s.wall for s in ours], baseline=[s.wall for s in bare], baseline_label="bare rattler+uv",
                    target="<= 1.5x bare", ok=ratio <= 1.5, paired=True,
                    note=(f"{doc['platforms']['linux-64']['packages']} conda packages + {wheels} wheels; "
                          f"bare uv alone {statistics.median(json.loads(s.stdout)['uv_s'] for s in bare):.3f} s; "
                          f"{_rss(ours, bare)}; {cpu_note(ours, bare)}"))]
    finally:
        idx.stop()


# ---------------------------------------------------------------------------------------------------
# The real snapshot (../shared/channels/conda-forge), one platform
# ---------------------------------------------------------------------------------------------------


def bench_snapshot(b: Bench, snapshot: Path) -> list[Row]:
    """`envlock resolve --toolchain-only --platform linux-64` on the real snapshot (file://), warm, in pairs."""
    if not (snapshot / "linux-64" / "repodata.json").is_file():
        return [Row("snapshot", "skipped", [], note=f"the snapshot is absent ({snapshot})")]
    rows = []
    for torch, why in (("2.7.1", "CUDA 12.6, solves at once"),
                       ("2.11.0", "CUDA 13.0: no cuDNN for it in the snapshot, so the plan's cuDNN fallbacks run")):
        cache = b.fresh("cache")
        env = b.env(cache)
        cmd = [*envlock_cmd(), "resolve", "--torch", torch, "--toolchain-only", "--platform", "linux-64", "--mirror",
               f"conda-forge={snapshot.as_uri()}", "--json"]
        b.log(f"snapshot, torch {torch}: {max(b.runs, 7)} warm pairs")
        doc = json.loads(checked(run_proc([*cmd, "--project-dir", str(b.fresh("proj"))], env=env), "snapshot").stdout)
        request = {"channel": snapshot.as_uri(), "cache_dir": str(cache / "repodata"), "platforms": reported_specs(doc)}
        b.bare("bare_solve.py", request, env)
        ours, bare = [], []
        for _ in range(max(b.runs, 7)):
            ours.append(checked(run_proc([*cmd, "--project-dir", str(b.fresh("proj"))], env=env), "snapshot"))
            bare.append(b.bare("bare_solve.py", request, env))
        ratio = paired_ratio([s.wall for s in ours], [s.wall for s in bare])
        attempts = len(doc["platforms"]["linux-64"]["attempts"])
        rows.append(Row("snapshot: resolve --toolchain-only, linux-64, warm (../shared, file://)", f"torch {torch}",
                        [s.wall for s in ours], baseline=[s.wall for s in bare], baseline_label="bare",
                        target="<= 1.5x bare", ok=ratio <= 1.5, paired=True,
                        note=f"{why}; {attempts} failed attempt(s) before the lock; {_rss(ours, bare)}; "
                             f"{cpu_note(ours, bare)}"))
    return rows
