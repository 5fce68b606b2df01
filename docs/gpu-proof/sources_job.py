"""Issue 35.5 on a GPU machine (run by docs/gpu-proof/run-sources.sh; stdlib + the machine's torch): builds that
need a group beside the toolkit (35.1: NCCL, cuSPARSELt), predicted by `envlock doctor --for`, in two envlock
envs with the system toolkit moved away, and a large project built in an envlock env.

  channel   the machine's CUDA toolkit repackaged as a conda channel (tests/toolkit_channel.py), with conda-forge's
            nccl, cusparselt and cusparselt-dev repackaged from the NVIDIA wheels pip torch installed
            (tests/beside_repack.py: the machine reaches no conda channel)
  base      an env of the default dev set (`envlock resolve --torch installed --toolchain-only`)
  for       the env `envlock resolve --for SOURCE …` makes: the groups the sources need, added by resolve
Per env (toolkit moved away, every step through `envlock run -p ENV`): `envlock doctor --json --for` every
project is the prediction; then every build, at the same time. A JIT project is built by torch's load() and
runs its op on the GPU; a setup.py project is `pip install --no-build-isolation` of its sdist, then its op.
A build's outcome is its exit, its first error and the headers / libraries the compiler or linker could not
find; the prediction held when doctor's verdict (builds / fails: missing X) is what happened.
Records: OUT/<date>-sources.json and OUT/sources.md (the table docs/gpu.md shows).

    python docs/gpu-proof/sources_job.py run OUT ASSETS      # ASSETS: the carried wheels and sdists
    python docs/gpu-proof/sources_job.py restore             # put back a toolkit a killed run left moved away
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import re
import shutil
import sys
import tarfile
import time
from pathlib import Path

os.environ.setdefault("EXT_WORK", "/tmp/src35-work")
os.environ.setdefault("EXT_BUDGET_S", "560")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import extensions_job as ej  # noqa: E402  (its WORK is EXT_WORK: set above)
from seed_job import first_error, missing_headers  # noqa: E402

ej.PY = os.path.abspath(shutil.which(ej.PY) or ej.PY)  # inside `envlock run`, a bare `python3` is the env's
WORK, PY = ej.WORK, ej.PY
PROBE = HERE / "sources35_probe"  # a JIT source of the tests' own that includes nccl.h and cusparseLt.h
#: project -> how it builds, what doctor's finding is, what runs on the GPU. `for`: the --for value resolve and
#: doctor read; `envs`: the envs it is built in (its prediction decides the outcome expected in each).
PROJECTS = {
    "probe35": {"how": "jit", "for": str(PROBE), "unit": "probe35", "envs": ("base", "for"),
                "run": "import torch, sys; sys.path.insert(0, {probe}); import probe_op; print(probe_op.run())"},
    "causal-conv1d": {"how": "setup.py", "sdist": "causal_conv1d-1.7.0.tar.gz", "for": "causal-conv1d",
                      "unit": "causal_conv1d_cuda", "envs": ("base",), "jobs": 6,
                      "env": {"CAUSAL_CONV1D_FORCE_BUILD": "TRUE"},
                      # one arch (sm_90) instead of its nine: one device call can finish (said in the record)
                      "patch": ["    # HACK: The compiler flag", '    cc_flag = ["-gencode", "arch=compute_90,code=sm_90"]'
                                "  # envlock GPU proof: one arch\n    # HACK: The compiler flag"],
                      "run": "import torch; from causal_conv1d import causal_conv1d_fn; "
                             "x = torch.randn(2, 64, 128, device='cuda', dtype=torch.float16); "
                             "w = torch.randn(64, 4, device='cuda', dtype=torch.float16); "
                             "y = causal_conv1d_fn(x, w, None, activation='silu'); "
                             "ref = torch.nn.functional.conv1d(torch.nn.functional.pad(x.float(), (3, 0)), w.float().unsqueeze(1), groups=64); "
                             "ref = torch.nn.functional.silu(ref); err = (y.float() - ref).abs().max().item(); "
                             "assert err < 2e-2, err; print('causal-conv1d causal_conv1d_fn max error', err)"},
    # NVIDIA Apex at the commit of its profile (a `git archive`: no sdist on the index), only its NCCL allocator
    # (APEX_NCCL_ALLOCATOR=1): setup.py JIT-builds _nccl_version_getter (nccl.h) and builds _apex_nccl_allocator
    # (nccl.h, -lnccl): NCCL is group `nccl` (35.1), not in the default dev set
    "apex": {"how": "setup.py", "sdist": "apex-6424da3b.tar.gz", "for": "{assets}/apex-6424da3b.tar.gz",
             "unit": "_apex_nccl_allocator", "envs": ("base", "for"), "env": {"APEX_NCCL_ALLOCATOR": "1"},
             "run": "import torch, _apex_nccl_allocator as a; pool = torch.cuda.MemPool(a.get_nccl_allocator()); "
                    "ctx = torch.cuda.use_mem_pool(pool); ctx.__enter__(); x = torch.ones(1 << 20, device='cuda'); "
                    "s = (x * 2).sum().item(); ctx.__exit__(None, None, None); assert s == 2 * (1 << 20), s; "
                    "print('apex ncclMemAlloc pool: 4 MiB tensor, sum', s)"},
    # torch-sparse 0.6.18: its metis.h/-lmetis sit behind WITH_METIS, an environment switch setup.py reads and
    # leaves off (35.2: a macro the build decides); built for CUDA only (FORCE_ONLY_CUDA=1) and only its spmm
    # extension (of 13: one device call can finish), its op called through torch.ops (the package imports
    # torch_scatter, which is not here)
    "torch-sparse": {"how": "setup.py", "sdist": "torch_sparse-0.6.18.tar.gz", "for": "{assets}/torch_sparse-0.6.18.tar.gz",
                     "unit": "torch_sparse._*_*", "envs": ("base",), "env": {"FORCE_ONLY_CUDA": "1"},
                     "patch": ["main_files = [path for path in main_files if 'hip' not in path]",
                               "main_files = [path for path in main_files if 'hip' not in path and "
                               "osp.basename(path) == 'spmm.cpp']  # envlock GPU proof: spmm only"],
                     "run": "import glob, importlib.util, torch; d = importlib.util.find_spec('torch_sparse').submodule_search_locations[0]; "
                            "torch.ops.load_library(glob.glob(d + '/_spmm_cuda*.so')[0]); "
                            "rowptr = torch.tensor([0, 2, 3, 4], device='cuda'); col = torch.tensor([0, 2, 1, 0], device='cuda'); "
                            "val = torch.tensor([1.0, 2.0, 3.0, 4.0], device='cuda'); mat = torch.randn(3, 8, device='cuda'); "
                            "out = torch.ops.torch_sparse.spmm_sum(None, rowptr, col, val, None, None, mat); "
                            "dense = torch.zeros(3, 3, device='cuda'); dense[0, 0], dense[0, 2], dense[1, 1], dense[2, 0] = 1, 2, 3, 4; "
                            "err = (out - dense @ mat).abs().max().item(); assert err < 1e-4, err; "
                            "print('torch-sparse spmm_sum on the GPU, max error', err)"},
}  # fmt: skip


def for_of(project: str, assets: Path) -> str:
    """The --for value doctor and resolve read for a project (a carried sdist, a profile name, the probe's tree)."""
    return PROJECTS[project]["for"].replace("{assets}", str(assets))


def setup(assets: Path) -> dict:
    done = WORK / "setup.json"
    if done.exists():
        return json.loads(done.read_text())
    WORK.mkdir(parents=True, exist_ok=True)
    wheels = sorted(str(p) for p in assets.glob("*.whl"))
    if not wheels:  # a rehearsal whose python has them
        return {"wheels": [], "facts": ej.facts()}
    rc, out, secs = ej.sh([PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
                           "--upgrade", "--target", str(ej.SITE), *wheels])  # fmt: skip
    if rc:
        raise SystemExit(f"wheels: {out[-1500:]}")
    doc = {"wheels_s": secs, "wheels": [Path(w).name for w in wheels], "facts": ej.facts()}
    done.write_text(json.dumps(doc))
    return doc


def channel() -> dict:
    ch = WORK / "channel"
    if (ch / "envlock-repack.json").exists():
        return {"reused": True}
    toolkit = os.path.realpath(os.environ.get("EXT_TOOLKIT", "/usr/local/cuda"))
    rc, out, secs = ej.sh([PY, "-m", "tests.toolkit_channel", "--toolkit", toolkit, "--out", str(ch), "--libs", "linked",
                           "--beside", PY], ej.base_env(), cwd=str(ej.REPO))  # fmt: skip
    if rc:
        raise SystemExit(f"channel: {out[-2000:]}")
    report = json.loads(out[out.index("{"): out.rindex("}") + 1])
    return {"seconds": secs, "packages": report.get("packages"), "bytes": report.get("bytes")}


def make_env(name: str, fors: list[str]) -> tuple[Path, dict]:
    """The default-set env (no --for), or the one `resolve --for` makes."""
    prefix, proj = WORK / f"env-{name}", WORK / f"project-{name}"
    if (prefix / "conda-meta").is_dir():
        return prefix, {"reused": True}
    args = [a for f in fors for a in ("--for", f)]
    rc, out, resolve_s = ej.envlock("resolve", "--torch", os.environ.get("EXT_TORCH", "installed"), "--python-exe", PY,
                                    "--toolchain-only", "--channel", f"file://{WORK / 'channel'}", "--project-dir", str(proj),
                                    "--lock", name, *args)  # fmt: skip
    if rc:
        raise SystemExit(f"resolve {name}: {out[-2000:]}")
    said = [ln for ln in out.splitlines() if "--for " in ln]
    lock = proj / "locks" / name / "conda-lock.yml"
    rc, out2, create_s = ej.envlock("create", "--lock", str(lock), "-p", str(prefix), "-q")
    if rc:
        raise SystemExit(f"create {name}: {out2[-2000:]}")
    packages = sorted(set(re.findall(r"^- name: (\S+)", lock.read_text(), re.M)))
    spec = next(iter(sorted((proj / "environments").glob("*.yml"))), None)
    m = re.search(r"^\s*with: \[(.*?)\]", spec.read_text(), re.M) if spec else None
    groups = [g.strip() for g in m.group(1).split(",")] if m else []
    return prefix, {"resolve_s": resolve_s, "create_s": create_s, "resolve_said": said, "with": groups, "packages": packages}


def build(project: str, env_name: str, prefix: Path, assets: Path, jobs: int) -> dict:
    spec, tag = PROJECTS[project], f"{env_name}-{project}"
    env = ej.base_env(MAX_JOBS=str(jobs), TORCH_EXTENSIONS_DIR=str(WORK / "ext" / tag), **spec.get("env", {}))
    wrap = [PY, "-m", "envlock", "run", "-p", str(prefix), "--"]
    if spec["how"] == "setup.py":
        src = WORK / "src" / tag
        with tarfile.open(assets / spec["sdist"]) as tf:
            tf.extractall(src, filter="data")
        root = next(src.iterdir())
        if spec.get("patch"):
            setup_py = root / "setup.py"
            text = setup_py.read_text()
            if spec["patch"][0] not in text:
                raise SystemExit(f"{project}: its setup.py has no {spec['patch'][0]!r} to patch")
            setup_py.write_text(text.replace(spec["patch"][0], spec["patch"][1], 1))
        target = WORK / "sites" / tag
        rc, out, secs = ej.sh(wrap + [PY, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                                      "--no-cache-dir", "--target", str(target), str(root)], env)  # fmt: skip
        if rc == 0:
            env["PYTHONPATH"] = f"{target}{os.pathsep}{env['PYTHONPATH']}"
    else:
        target = WORK / "jit" / tag
        target.mkdir(parents=True, exist_ok=True)
        rc, out, secs = 0, "", 0.0
    if rc == 0:
        rc, out2, secs2 = ej.sh(wrap + [PY, "-c", spec["run"].replace("{probe}", repr(str(PROBE)))], env, timeout=420)
        out, secs = out + out2, round(secs + secs2, 1)
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    (WORK / "logs" / f"{tag}.log").write_text(out)
    libs = list(dict.fromkeys(re.findall(r"cannot find -l([\w+.-]+)", out)))
    ran = [ln for ln in out.splitlines() if ln.startswith(tuple(f"{p} " for p in PROJECTS))]
    return {"ok": rc == 0, "exit": rc, "seconds": secs, "first_error": None if rc == 0 else first_error(out),
            "missing_headers": missing_headers(out), "missing_libraries": libs, "ran": ran, "max_jobs": jobs}  # fmt: skip


def judge(pred: dict, out: dict) -> dict:
    """Strict: "builds" holds when it built and its op ran on the GPU; "fails: missing X" when it failed on a
    header or library doctor named (a failure about anything else is a prediction that did not hold)."""
    toolchain = out["missing_headers"] + out["missing_libraries"]
    if pred["verdict"].startswith("fails: missing"):
        ok = not out["ok"] and bool(set(toolchain) & set(pred.get("missing", [])))
        return {"match": ok, "why": "failed on what doctor named" if ok else "did not fail on what doctor named"}
    if pred["verdict"] == "builds":
        return {"match": bool(out["ok"]), "why": "built and ran" if out["ok"] else f"failed: {out.get('first_error')}"}
    return {"match": False, "why": f"doctor said {pred['verdict']!r}"}


def run_env(name: str, prefix: Path, assets: Path) -> dict:
    projects = [p for p, s in PROJECTS.items() if name in s["envs"]]
    fors = [a for p in PROJECTS for a in ("--for", for_of(p, assets))]
    rc, out, secs = ej.envlock("run", "-p", str(prefix), "--", PY, "-m", "envlock", "doctor", "--json", *fors, timeout=300)
    try:
        doc = json.loads(out[out.index("{"): out.rindex("}") + 1])
    except ValueError:
        doc = {"error": out[-2000:]}
    (WORK / f"doctor-{name}.json").write_text(json.dumps(doc, indent=1))
    ej.log(f"{name}: doctor exit {rc} in {secs} s: {doc.get('summary')}")
    preds = {p: ej.predict(doc, PROJECTS[p]["unit"]) for p in PROJECTS}
    every = sum(PROJECTS[p].get("jobs", 2) for s in ("base", "for") for p in PROJECTS if s in PROJECTS[p]["envs"])
    share = max(1.0, (os.cpu_count() or 16) / every)
    with concurrent.futures.ThreadPoolExecutor(len(projects)) as pool:
        futs = {p: pool.submit(build, p, name, prefix, assets, max(2, int(PROJECTS[p].get("jobs", 2) * share)))
                for p in projects}  # fmt: skip
        outs = {p: f.result() for p, f in futs.items()}
    rows = {p: {"prediction": preds[p], "outcome": outs[p], "judge": judge(preds[p], outs[p])} for p in projects}
    for p, r in rows.items():
        ej.log(f"{name} {p}: predicted {r['prediction']['verdict']!r}; ok={r['outcome']['ok']} {r['outcome']['seconds']} s "
               f"{r['outcome'].get('first_error') or ''} {r['outcome'].get('ran')}"[:500])  # fmt: skip
    return {"doctor_seconds": secs, "doctor_exit": rc, "doctor_summary": doc.get("summary"),
            "predictions": preds, "projects": rows}  # fmt: skip


def run(out: Path, assets: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    ej.restore_toolkit()
    record: dict = {"envs": {}, "setups": {}, "arch_list": "9.0", "cores": os.cpu_count(),
                    "projects": {p: {k: v for k, v in s.items() if k not in ("run",)} for p, s in PROJECTS.items()}}  # fmt: skip
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")

    def save() -> None:
        (out / f"{day}-sources.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        (out / "sources.md").write_text(table(record))
        for f in WORK.glob("doctor-*.json"):
            (out / f.name).write_text(f.read_text())
        if (WORK / "logs").is_dir():
            with tarfile.open(out / "build-logs.tar.gz", "w:gz") as tf:
                tf.add(WORK / "logs", arcname="build-logs")

    try:
        record["setup"] = setup(assets)
        start = time.monotonic()
        record["channel"] = channel()
        prefixes = {}
        for name, fors in (("base", []), ("for", [for_of(p, assets) for p in PROJECTS if "for" in PROJECTS[p]["envs"]])):
            try:
                prefixes[name], record["envs"][name] = make_env(name, fors)
            except SystemExit as exc:  # the other env's builds still run and are recorded
                record["envs"][name] = {"error": str(exc)[-3000:]}
                ej.log(f"env {name} failed: {str(exc)[-1500:]}")
        record["prepare_s"] = round(time.monotonic() - start, 1)
        save()
        record["hidden"] = ej.hide_toolkit()
        ej.log(f"toolkit moved away: {record['hidden']}")
        # both envs' builds at the same time (one device call): each build's MAX_JOBS is its share of the cores
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futs = {name: pool.submit(run_env, name, prefix, assets) for name, prefix in prefixes.items()}
            for name, fut in futs.items():
                record["setups"][name] = fut.result()
                save()
    finally:
        ej.restore_toolkit()
        save()
    return record


def table(record: dict) -> str:
    """docs/gpu.md's table: one row per project and env."""
    lines = ["| project | how | env (toolkit moved away) | doctor's prediction | outcome | seconds | ran on the GPU / first error | held |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    names = {"base": "default dev set",
             "for": "`resolve --for` (--with " + ", ".join(record.get("envs", {}).get("for", {}).get("with", [])) + ")"}
    for name in ("base", "for"):
        for p, row in record.get("setups", {}).get(name, {}).get("projects", {}).items():
            o, pr, j = row["outcome"], row["prediction"], row["judge"]
            what = "; ".join(o.get("ran") or []) if o.get("ok") else (o.get("first_error") or "")
            lines.append(f"| {p} | {PROJECTS[p]['how']} | {names[name]} | {pr['verdict']} | "
                         f"{'built, ran' if o.get('ok') else 'failed'} | {o.get('seconds', '')} | {what.replace('|', '/')[:160]} | "
                         f"{'yes' if j['match'] else ('—' if j['match'] is None else 'NO')} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["restore"]:
        ej.restore_toolkit()
    elif sys.argv[1:2] == ["run"]:
        run(Path(sys.argv[2]), Path(sys.argv[3]).resolve())
    elif sys.argv[1:2] == ["table"]:
        sys.stdout.write(table(json.loads(Path(sys.argv[2]).read_text())))
    else:
        sys.exit(__doc__)
