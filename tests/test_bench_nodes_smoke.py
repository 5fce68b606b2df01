"""benchmarks/bench_nodes.py keeps working (slow tier, small N): no timing is asserted, only function."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_bench_nodes_small(tmp_path: Path) -> None:
    out = tmp_path / "nodes.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_nodes.py"), "--nodes", "1,3", "--runs", "1",
                           "--payload-mb", "2", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(out.read_text())
    rounds = {(r["n"], r["mode"]): r for r in doc["rounds"]}
    assert set(rounds) == {(1, "shared"), (1, "separate"), (3, "shared"), (3, "separate")}
    assert all(r["failures"] == 0 for r in rounds.values())
    assert rounds[(3, "shared")]["max_fetches_per_package"] == 1
    assert rounds[(3, "separate")]["max_fetches_per_package"] == 3
    assert rounds[(3, "separate")]["bytes"] == 3 * rounds[(3, "shared")]["bytes"] == 3 * doc["bytes"]
    assert "wall (median)" in done.stdout
