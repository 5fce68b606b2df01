"""docs/gpu-proof/run-seed-job.sh and its helper seed_job.py, off the GPU: the parts that need no GPU.

The GPU phases themselves run on the lent H200 (issue 11/17); here: the build-error reader against the real
H200 build log recorded in docs/gpu-proof, the records made from a phase's pieces, the ops table, the
toolkit's move-away/restore bookkeeping, and the script's usage errors.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GPU_PROOF = Path(__file__).resolve().parent.parent / "docs" / "gpu-proof"
SCRIPT = GPU_PROOF / "run-seed-job.sh"


@pytest.fixture(scope="module")
def seed():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("seed_job", GPU_PROOF / "seed_job.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_first_error_finds_the_seed_failure_in_the_real_h200_build_log(seed) -> None:
    doc = json.loads((GPU_PROOF / "2026-11-30-nvidia-h200-doctor-no-cusparse.json").read_text())
    ext = next(f for f in doc["result"]["findings"] if f["code"] == "compile.torch_extension")
    line = seed.first_error(ext["details"]["error"])
    assert "fatal error: cusparse.h: No such file or directory" in line
    assert seed.first_error("all good\nnothing failed") == "nothing failed"
    assert seed.missing_headers(ext["details"]["error"]) == ["cusparse.h"]


def test_the_ops_table_names_what_built_on_the_system_but_not_in_the_env(seed) -> None:
    system = {"ops": {"fused_adam": {"ok": True, "seconds": 38.0}, "transformer": {"ok": True, "seconds": 90.0},
                      "evoformer_attn": {"ok": False, "error": "Unable to JIT load"}}}  # fmt: skip
    env = {"ops": {"fused_adam": {"ok": True, "seconds": 37.0}, "transformer": {"ok": False, "error": "curand.h"},
                   "evoformer_attn": {"ok": False, "error": "Unable to JIT load"}}}  # fmt: skip
    doc = seed.merge_ops(system, env)
    assert doc["built_on_system_but_not_in_env"] == ["transformer"] and not doc["every_system_op_builds_in_env"]
    env["ops"]["transformer"] = {"ok": True, "seconds": 91.0}
    assert seed.merge_ops(system, env)["every_system_op_builds_in_env"]
    nothing = {"ops": {"fused_adam": {"ok": False}}}
    assert not seed.merge_ops(nothing, nothing)["every_system_op_builds_in_env"]  # not true by default


def test_the_ops_table_shows_where_each_sweeps_nvcc_came_from_and_what_was_moved_away(seed) -> None:
    system = {"where": {"nvcc": "/usr/local/cuda/bin/nvcc"}, "hidden": {"hidden": []},
              "ops": {"fused_adam": {"ok": True, "seconds": 38.0}}}  # fmt: skip
    env = {"where": {"nvcc": "/tmp/seed-work/env/bin/nvcc"},
           "hidden": {"hidden": ["/usr/local/cuda"], "nvcc_outside_env": "none"},
           "ops": {"fused_adam": {"ok": True, "seconds": 40.0}}}  # fmt: skip
    doc = seed.merge_ops(system, env)
    assert doc["where"]["env"]["nvcc"] == "/tmp/seed-work/env/bin/nvcc" and doc["system_cuda_hidden_in_env"]
    env["hidden"] = {"hidden": ["/usr/local/cuda"], "nvcc_outside_env": "/usr/bin/nvcc"}  # another nvcc was left
    assert not seed.merge_ops(system, env)["system_cuda_hidden_in_env"]
    assert not seed.merge_ops(system, {"ops": env["ops"]})["system_cuda_hidden_in_env"]  # no record: no claim


def test_the_log_line_stays_out_of_a_steps_result(tmp_path: Path) -> None:
    """`timed channel … > channel.json`: the log line went into the channel builder's JSON, and every record's
    "channel" came out {} (the 2026-12-01 runs). The script's own log() now writes to stderr."""
    log_def = next(line for line in SCRIPT.read_text().splitlines() if line.startswith("log()"))
    r = subprocess.run(["bash", "-c", f'{log_def}\nwork="$1"; log "channel: exit 0" > "$1/result.json"', "-", str(tmp_path)],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0 and (tmp_path / "result.json").read_text() == ""
    assert "channel: exit 0" in r.stderr and "channel: exit 0" in (tmp_path / "log.txt").read_text()


def test_the_fusedadam_record_carries_the_channel_builders_summary(seed, tmp_path: Path) -> None:
    built = {"channel": "/tmp/c", "source": "/usr/local/cuda-13.0", "libs": "all", "bytes": 70434570, "seconds": 2.7,
             "packages": {"cuda-nvcc": "13.0.88"}, "unclaimed": [], "components": {"nvcc": {"files": 11}}}  # fmt: skip
    work = _work(tmp_path, channel=built)
    assert seed.record_fusedadam(work)["channel"] == {k: built[k] for k in ("source", "libs", "packages", "bytes",
                                                                            "seconds", "unclaimed")}


def _work(tmp_path: Path, **pieces: dict) -> Path:
    for name, doc in pieces.items():
        (tmp_path / f"{name.replace('_', '-')}.json").write_text(json.dumps(doc))
    (tmp_path / "commands.txt").write_text("python3 -m envlock resolve ...\n")
    (tmp_path / "timings.txt").write_text("fusedadam-env 41.250\nchannel 55.000\n")
    return tmp_path


def test_the_fusedadam_record_is_ok_only_with_a_green_doctor_and_the_toolkit_away(seed, tmp_path: Path) -> None:
    doctor = {"exit_code": 0, "summary": {"ok": 30, "info": 9, "warning": 0, "error": 0},
              "findings": [{"code": "compile.torch_extension", "severity": "ok", "message": "built", "details": {"build_seconds": 44.1}},
                           {"code": "nvcc.found", "severity": "ok", "message": "nvcc", "details": {"version": "13.0.88"}}]}  # fmt: skip
    work = _work(tmp_path, fusedadam_env={"ok": True, "seconds": 41.2}, fusedadam_system={"ok": True, "seconds": 38.0},
                 doctor_env=doctor, hidden={"hidden": ["/usr/local/cuda"], "nvcc_outside_env": "none"})  # fmt: skip
    doc = seed.record_fusedadam(work)
    assert doc["ok"] and doc["system_cuda_hidden"] and doc["made_by_envlock"]
    assert doc["seconds"] == 41.2 and doc["load_inline_seconds"] == 44.1 and doc["nvcc"] == "13.0.88"
    assert doc["timings"] == {"fusedadam-env": 41.25, "channel": 55.0} and doc["commands"]
    (work / "hidden.json").write_text(json.dumps({"hidden": [], "nvcc_outside_env": "/usr/bin/nvcc"}))
    assert not seed.record_fusedadam(work)["ok"]


def test_the_runtime_only_record_says_whether_doctor_and_the_build_named_cusparse(seed, tmp_path: Path) -> None:
    doctor = {"exit_code": 1, "findings": [{"code": "header.cusparse.h", "severity": "error", "message": "cusparse.h not found", "hint": "x"}]}
    log = "RuntimeError: Error building extension 'fused_adam': ... CUDAContextLight.h:10:10: fatal error: cusparse.h: No such file or directory"
    work = _work(tmp_path, doctor_runtime_only=doctor, fusedadam_runtime_only={"ok": False, "seconds": 9.5, "error": "x", "error_text": log})
    doc = seed.record_runtime_only(work)
    assert doc["ok"] is False and doc["doctor_names_cusparse"] and doc["build_fails_on_cusparse_h"]
    assert doc["doctor"]["not_ok"][0]["code"] == "header.cusparse.h"


def _script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def test_merge_phase_writes_the_ops_table(tmp_path: Path) -> None:
    a, b = tmp_path / "s.json", tmp_path / "e.json"
    a.write_text(json.dumps({"ops": {"fused_adam": {"ok": True, "seconds": 38}}}))
    b.write_text(json.dumps({"ops": {"fused_adam": {"ok": True, "seconds": 40}}}))
    r = _script("merge", str(a), str(b), str(tmp_path / "ops.json"), env={"SEED_PYTHON": sys.executable})
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "ops.json").read_text())["every_system_op_builds_in_env"] is True


def test_restore_puts_back_what_a_killed_phase_left_moved_away(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda-13.0"
    (tmp_path / "cuda-13.0.seed-hidden" / "bin").mkdir(parents=True)  # what hide_toolkit did before the kill
    work = tmp_path / "work"
    work.mkdir()
    (work / "hidden.list").write_text(f"{toolkit}\n")
    env = {"SEED_WORK": str(work), "OUT": str(tmp_path / "out"), "SEED_PYTHON": sys.executable}
    r = _script("restore", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (toolkit / "bin").is_dir() and not (tmp_path / "cuda-13.0.seed-hidden").exists()
    assert not (work / "hidden.list").exists()


def test_an_unknown_phase_is_a_usage_error(tmp_path: Path) -> None:
    r = _script("everything", env={"SEED_WORK": str(tmp_path / "w"), "OUT": str(tmp_path / "o"), "SEED_PYTHON": sys.executable})
    assert r.returncode == 2 and "usage:" in r.stdout + r.stderr
