"""Helpers of docs/gpu-proof/run-seed-job.sh (issues 11 and 17), one subcommand each; stdlib + torch/DeepSpeed.

  facts                          GPU, driver, torch (CUDA, arch list), nvcc on PATH, gcc, DeepSpeed: JSON
  fusedadam                      DeepSpeed FusedAdam: JIT build + one optimizer step on the GPU: JSON
  build-op NAME                  JIT-build one DeepSpeed op (its own TORCH_EXTENSIONS_DIR): JSON
  sweep OUT.json [--parallel N] [--budget S] [--ops a,b]   every op of envlock/data/deepspeed_ops.yaml,
                                 N at a time, MAX_JOBS = cores / N, results written after each op
  remove-package PREFIX NAME     what `conda remove --force NAME` does (files of its conda-meta record)
  record-fusedadam WORK OUT      / record-runtime-only WORK OUT / merge-ops SYSTEM.json ENV.json OUT:
                                 the docs/gpu-proof records from the pieces a phase left in WORK
Every JSON result is the last stdout line, prefixed SEED_JSON=.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

MARK = "SEED_JSON="
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORK = Path(os.environ.get("SEED_WORK", "/tmp/seed-work"))


def emit(doc: dict) -> None:
    sys.stdout.flush()
    print(MARK + json.dumps(doc), flush=True)


def first_error(text: str, limit: int = 2) -> str:
    """The first compiler/runtime error lines of a build log (fatal errors first)."""
    lines = [ln.strip() for ln in text.splitlines() if re.search(r"\berror\b|fatal|undefined reference|Error", ln)]
    picked = [ln for ln in lines if "fatal error" in ln] or [ln for ln in lines if "error:" in ln] or lines
    return " | ".join(picked[:limit])[:600] or (text.strip().splitlines() or ["(no output)"])[-1][:600]


def run_json(cmd: list[str], env: dict | None = None, timeout: float = 900) -> dict:
    """Run a helper subcommand; its SEED_JSON line, or what went wrong."""
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        tail = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return {"ok": False, "seconds": round(time.monotonic() - start, 1), "error": f"timed out after {timeout:.0f} s",
                "log_tail": tail[-2000:]}  # fmt: skip
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    return {"ok": False, "seconds": round(time.monotonic() - start, 1), "error": first_error(p.stderr + p.stdout),
            "log_tail": (p.stdout + p.stderr)[-3000:]}  # fmt: skip


def sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({exc})"


# ------------------------------------------------------------------------------------------- on the GPU


def facts() -> dict:
    doc: dict = {
        "gpu": sh(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total", "--format=csv,noheader"]),
        "nvcc_on_path": sh(["sh", "-c", "command -v nvcc || echo none"]),
        "nvcc_version": sh(["sh", "-c", "nvcc --version 2>/dev/null | tail -2 | head -1"]),
        "gcc": sh(["sh", "-c", "gcc --version | head -1"]),
        "env": {k: os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "LD_LIBRARY_PATH")},
        "python": sys.version.split()[0],
    }
    try:
        import torch

        doc["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "available": torch.cuda.is_available()}
        if torch.cuda.is_available():
            doc["torch"].update(device=torch.cuda.get_device_name(0), capability=list(torch.cuda.get_device_capability(0)),
                                arch_list=torch.cuda.get_arch_list())  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a fact too
        doc["torch_error"] = f"{type(exc).__name__}: {exc}"
    try:
        import importlib.metadata

        doc["deepspeed"] = importlib.metadata.version("deepspeed")
    except Exception as exc:  # noqa: BLE001
        doc["deepspeed"] = f"not installed ({exc})"
    return doc


def fusedadam() -> dict:
    """FusedAdam's JIT build (its constructor loads the op) and one step; the time to a working extension."""
    start = time.monotonic()
    doc: dict = {"ok": False, "torch_extensions_dir": os.environ.get("TORCH_EXTENSIONS_DIR")}
    try:
        import torch
        from deepspeed.ops.adam import FusedAdam

        p = torch.nn.Parameter(torch.ones(1 << 20, device="cuda"))
        opt = FusedAdam([p], lr=0.1)
        doc["build_seconds"] = round(time.monotonic() - start, 1)
        p.grad = torch.ones_like(p)
        opt.step()
        torch.cuda.synchronize()
        moved = float((1 - p.detach()).mean().item())
        doc.update(ok=moved > 0.05, step_moved_params_by=round(moved, 4), device=torch.cuda.get_device_name(0))
    except Exception as exc:  # noqa: BLE001 - the build error is the result
        text = f"{type(exc).__name__}: {exc}"
        doc.update(error=first_error(text), missing_headers=missing_headers(text), error_text=text[-4000:])
    doc["seconds"] = round(time.monotonic() - start, 1)
    return doc


def missing_headers(text: str) -> list[str]:
    """Every `fatal error: X: No such file or directory` header of a build log, once each, in order."""
    return list(dict.fromkeys(re.findall(r"fatal error: ([\w./+-]+): No such file or directory", text)))


def build_op(name: str) -> dict:
    start = time.monotonic()
    doc: dict = {"op": name, "ok": False}
    try:
        from deepspeed.ops.op_builder.all_ops import ALL_OPS

        ALL_OPS[name].load(verbose=False)
        doc["ok"] = True
    except Exception as exc:  # noqa: BLE001
        text = f"{type(exc).__name__}: {exc}"
        doc.update(error=first_error(text), missing_headers=missing_headers(text), error_text=text[-2500:])
    doc["seconds"] = round(time.monotonic() - start, 1)
    return doc


def sweep(out: Path, parallel: int, budget: float, only: list[str] | None) -> dict:
    """Every op of the table, `parallel` at a time; each its own TORCH_EXTENSIONS_DIR; MAX_JOBS split."""
    import yaml  # the GPU machine has PyYAML (envlock needs it too)

    table = yaml.safe_load((REPO / "envlock" / "data" / "deepspeed_ops.yaml").read_text())
    # longest first, so the slow ones are not left for the end (rough order from their source sizes)
    order = ["transformer_inference", "inference_core_ops", "transformer", "stochastic_transformer", "fp_quantizer",
             "ragged_device_ops", "ragged_ops", "quantizer", "random_ltd", "evoformer_attn", "spatial_inference"]  # fmt: skip
    ops = sorted(only or table["ops"], key=lambda o: (order.index(o) if o in order else len(order), o))
    cores = os.cpu_count() or 16
    jobs = max(1, cores // parallel)
    base = Path(os.environ.get("SEED_EXT_ROOT", "/tmp/seed-ext")) / out.stem
    results: dict[str, dict] = {}
    deadline = time.monotonic() + budget
    where = {"CUDA_HOME": os.environ.get("CUDA_HOME"), "nvcc": sh(["sh", "-c", "command -v nvcc || echo none"]),
             "nvcc_version": sh(["sh", "-c", "nvcc --version 2>/dev/null | tail -2 | head -1"]),
             "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST")}  # fmt: skip
    # what the phase moved away before this sweep (none for the system sweep): the table shows it, not a claim
    hidden = _load(WORK / "hidden.json") if (WORK / "hidden.json").exists() else {"hidden": []}
    doc = {"stamp": _stamp(WORK), "where": where, "hidden": hidden, "parallel": parallel, "max_jobs": jobs,
           "cores": cores, "budget_s": budget, "ops": results}  # fmt: skip

    def one(op: str) -> dict:
        left = deadline - time.monotonic()
        if left < 20:
            return {"op": op, "ok": False, "seconds": 0, "error": "not started: the phase's time budget was used up"}
        env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(base / op), "MAX_JOBS": str(jobs)}
        got = run_json([sys.executable, str(Path(__file__)), "build-op", op], env=env, timeout=left)
        got.setdefault("op", op)
        return got

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        for got in pool.map(one, ops):
            results[got["op"]] = {k: got.get(k) for k in ("ok", "seconds", "error", "missing_headers") if k in got}
            doc["wall_seconds"] = round(time.monotonic() - start, 1)
            out.write_text(json.dumps(doc, indent=1))
    return doc


def remove_package(prefix: Path, name: str) -> dict:
    record = next((prefix / "conda-meta").glob(f"{name}-[0-9]*.json"))
    files = json.loads(record.read_text())["files"]
    for rel in files:
        (prefix / rel).unlink(missing_ok=True)
    record.unlink()
    return {"removed": name, "files": len(files)}


# ------------------------------------------------------------------------------------------- records


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"missing": f"{path}: {exc}"}


def _doctor_summary(doc: dict) -> dict:
    findings = doc.get("findings", [])
    return {
        "exit_code": doc.get("exit_code"),
        "summary": doc.get("summary"),
        "not_ok": [{k: f.get(k) for k in ("code", "severity", "message", "hint")} for f in findings if f.get("severity") in ("warning", "error")],
        "info": [f["code"] for f in findings if f.get("severity") == "info"],
        "compile": {f["code"]: {"severity": f["severity"], "message": f["message"]} for f in findings if f["code"].startswith("compile.")},
    }  # fmt: skip


def _stamp(work: Path) -> dict:
    f = _load(work / "facts.json")
    t = f.get("torch", {})
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": f.get("gpu"), "torch": t.get("version"), "torch_cuda": t.get("cuda"),
        "torch_arch_list": t.get("arch_list"), "deepspeed": f.get("deepspeed"), "python": f.get("python"),
        "system_nvcc": f.get("nvcc_version"), "machine_env": f.get("env"),
    }  # fmt: skip


def _timings(work: Path) -> dict:
    """`name seconds` lines the script appended to timings.txt."""
    out: dict = {}
    if (work / "timings.txt").exists():
        for line in (work / "timings.txt").read_text().splitlines():
            name, _, secs = line.rpartition(" ")
            try:
                out[name] = float(secs)
            except ValueError:
                continue
    return out


def record_fusedadam(work: Path) -> dict:
    env_run, sys_run = _load(work / "fusedadam-env.json"), _load(work / "fusedadam-system.json")
    doctor = _load(work / "doctor-env.json")
    hidden = _load(work / "hidden.json")
    load_inline = next((f["details"].get("build_seconds") for f in doctor.get("findings", []) if f["code"] == "compile.torch_extension"), None)
    nvcc = next((f["details"].get("version") for f in doctor.get("findings", []) if f["code"] == "nvcc.found"), None)
    return {
        "ok": bool(env_run.get("ok")) and doctor.get("exit_code") == 0 and bool(hidden.get("hidden")),
        "what": "DeepSpeed FusedAdam JIT build + one optimizer step on the GPU, in an env made by envlock, system CUDA moved away",
        "seconds": env_run.get("seconds"),
        "system_cuda_hidden": bool(hidden.get("hidden")) and hidden.get("nvcc_outside_env") == "none",
        "made_by_envlock": True,
        **_stamp(work),
        "nvcc": nvcc,
        "fusedadam_env": env_run,
        "fusedadam_system_toolkit": sys_run,
        "load_inline_seconds": load_inline,
        "doctor": _doctor_summary(doctor),
        "doctor_for_deepspeed": _doctor_summary(_load(work / "doctor-env-deepspeed.json")),
        "hidden": hidden,
        "channel": {k: v for k, v in _load(work / "channel.json").items() if k in ("source", "libs", "packages", "bytes", "seconds", "unclaimed")},
        "lock": (work / "lock-summary.txt").read_text() if (work / "lock-summary.txt").exists() else None,
        "timings": _timings(work),
        "commands": (work / "commands.txt").read_text().splitlines() if (work / "commands.txt").exists() else [],
    }  # fmt: skip


def record_runtime_only(work: Path) -> dict:
    build, doctor = _load(work / "fusedadam-runtime-only.json"), _load(work / "doctor-runtime-only.json")
    codes = {f["code"]: f for f in doctor.get("findings", [])}
    text = build.get("error_text", "") or ""
    return {
        "ok": False,
        "what": "the same env without libcusparse-dev (runtime-only headers): doctor before any build, then the FusedAdam build",
        **_stamp(work),
        "removed": _load(work / "removed.json"),
        "doctor_names_cusparse": codes.get("header.cusparse.h", {}).get("severity") == "error",
        "doctor": _doctor_summary(doctor),
        "build_ok": build.get("ok"),
        "build_seconds": build.get("seconds"),
        "build_error": build.get("error"),
        "build_missing_headers": build.get("missing_headers"),
        "build_fails_on_cusparse_h": "cusparse.h" in (build.get("missing_headers") or [])
        or "cusparse.h: No such file or directory" in text,
        "build_error_text": text[-2500:],
        "system_cuda_hidden": bool(_load(work / "hidden.json").get("hidden")),
        "commands": (work / "commands.txt").read_text().splitlines() if (work / "commands.txt").exists() else [],
    }  # fmt: skip


def merge_ops(system: dict, env: dict) -> dict:
    rows = []
    names = sorted(set(system.get("ops", {})) | set(env.get("ops", {})))
    for op in names:
        s, e = system.get("ops", {}).get(op, {}), env.get("ops", {}).get(op, {})
        rows.append({"op": op, "system": s, "envlock_env": e})
    regressions = [r["op"] for r in rows if r["system"].get("ok") and not r["envlock_env"].get("ok")]
    return {
        "what": "every DeepSpeed JIT op: built against the machine's full system toolkit, and in an env made by "
        "envlock with --with deepspeed and the system toolkit moved away",
        "stamp_system": system.get("stamp"), "stamp_env": env.get("stamp"),
        "every_system_op_builds_in_env": not regressions and any(r["system"].get("ok") for r in rows),
        # where each sweep's nvcc came from, and what was moved away for the env's: the env sweep's nvcc must be
        # the env's, with no nvcc left outside it
        "where": {"system": system.get("where"), "env": env.get("where")},
        "system_cuda_hidden_in_env": bool(env.get("hidden", {}).get("hidden"))
        and env.get("hidden", {}).get("nvcc_outside_env") == "none",
        "hidden_in_env": env.get("hidden"),
        "built_on_system_but_not_in_env": regressions,
        "ops": rows,
        "sweep": {k: {x: d.get(x) for x in ("parallel", "max_jobs", "wall_seconds", "budget_s")} for k, d in (("system", system), ("env", env))},
    }  # fmt: skip


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "facts":
        emit(facts())
    elif what == "fusedadam":
        doc = fusedadam()
        emit(doc)
        return 0 if doc["ok"] else 1
    elif what == "build-op":
        doc = build_op(argv[1])
        emit(doc)
        return 0 if doc["ok"] else 1
    elif what == "sweep":
        args = {argv[i]: argv[i + 1] for i in range(2, len(argv) - 1, 2)}
        only = args.get("--ops", "").split(",") if args.get("--ops") else None
        doc = sweep(Path(argv[1]), int(args.get("--parallel", "4")), float(args.get("--budget", "330")), only)
        emit({"ops": len(doc["ops"]), "ok": sum(1 for r in doc["ops"].values() if r.get("ok")), "wall_seconds": doc.get("wall_seconds")})
    elif what == "remove-package":
        emit(remove_package(Path(argv[1]), argv[2]))
    elif what in ("record-fusedadam", "record-runtime-only"):
        doc = (record_fusedadam if what == "record-fusedadam" else record_runtime_only)(Path(argv[1]))
        Path(argv[2]).write_text(json.dumps(doc, indent=2) + "\n")
        emit({"wrote": argv[2], "ok": doc["ok"]})
    elif what == "merge-ops":
        doc = merge_ops(_load(Path(argv[1])), _load(Path(argv[2])))
        Path(argv[3]).write_text(json.dumps(doc, indent=2) + "\n")
        emit({"wrote": argv[3], "every_system_op_builds_in_env": doc["every_system_op_builds_in_env"]})
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
