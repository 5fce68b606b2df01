"""Issue 27 on a GPU machine: real projects' CUDA extensions built in three setups, each against
`envlock doctor --for SDIST`'s prediction (run by docs/gpu-proof/run-extensions.sh; stdlib + the machine's torch).

  (a) system  the machine's full CUDA toolkit
  (b) base    an env envlock made with the default dev set (toolchain-only lock of a channel repackaged from
              the machine's own toolkit, tests/toolkit_channel.py), the system toolkit moved away
  (c) with    that env plus the --with groups doctor recommended in (b) for the units that fail there

Per setup: `envlock doctor --json --for <every sdist>` first (in (b)/(c) through `envlock run -p ENV`), then
every project's build at the same time (MAX_JOBS split over the cores), each in its own site folder and
TORCH_EXTENSIONS_DIR; a build's outcome is its exit, the first error line of its log and the headers /
libraries the compiler or linker could not find. Records: OUT/<date>-extensions.json and OUT/extensions.md.

    python docs/gpu-proof/extensions_job.py run OUT ASSETS [--setups system,base,with] [--skip-builds]
    python docs/gpu-proof/extensions_job.py restore       # put back a toolkit a killed run left moved away
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
from seed_job import facts, first_error, missing_headers  # noqa: E402

WORK = Path(os.environ.get("EXT_WORK", "/tmp/ext-work"))
SITE = WORK / "site"
PY = os.environ.get("EXT_PYTHON", sys.executable)
HIDDEN = WORK / "hidden.list"
DEADLINE = time.monotonic() + float(os.environ.get("EXT_BUDGET_S", "560"))
#: project -> how it builds; `unit` is the doctor finding (source.<unit>) that predicts this build.
PROJECTS = {
    "chamferdist": {"sdist": "chamferdist-1.0.3.tar.gz", "how": "setup.py", "unit": "chamferdist._C",
                    "check": "import chamferdist._C", "env": {"FORCE_CUDA": "1"}},
    "warp-rnnt": {"sdist": "warp_rnnt-0.7.0.tar.gz", "how": "setup.py", "unit": "warp_rnnt._C",
                  "check": "import warp_rnnt._C"},
    "nerfacc": {"sdist": "nerfacc-0.5.3.tar.gz", "how": "jit", "unit": "nerfacc_cuda",
                "check": "import nerfacc.cuda._backend as b; assert b._C is not None, 'no _C'"},
    "deepspeed": {"sdist": "deepspeed-0.19.8.tar.gz", "how": "jit", "unit": "transformer_inference",
                  "op": "transformer_inference"},
}  # fmt: skip


def log(msg: str) -> None:
    print(f"== {time.strftime('%H:%M:%S', time.gmtime())} {msg}", flush=True)


def left() -> float:
    return DEADLINE - time.monotonic()


def sh(cmd: list[str], env: dict | None = None, timeout: float = 600, cwd: str | None = None) -> tuple[int, str, float]:
    start = time.monotonic()
    timeout = max(5.0, min(timeout, left() - 10))
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout + p.stderr, round(time.monotonic() - start, 1)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out + f"\n(timed out after {timeout:.0f} s)", round(time.monotonic() - start, 1)


def base_env(**extra: str) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCH_CUDA_ARCH_LIST": "9.0", "DS_BUILD_OPS": "0",
           "ENVLOCK_CACHE_DIR": str(WORK / "envlock-cache")}  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(SITE)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env.update(extra)
    return env


def envlock(*args: str, env: dict | None = None, timeout: float = 600) -> tuple[int, str, float]:
    return sh([PY, "-m", "envlock", *args], env or base_env(), timeout)


# ------------------------------------------------------------------------------------------- set-up


def setup(assets: Path) -> dict:
    """Wheels (py-rattler, ...) and DeepSpeed into SITE; the sdists unpacked where a JIT build reads them."""
    done = WORK / "setup.json"
    if done.exists():
        return json.loads(done.read_text())
    WORK.mkdir(parents=True, exist_ok=True)
    src = WORK / "src"
    with tarfile.open(assets / PROJECTS["nerfacc"]["sdist"]) as tf:
        tf.extractall(src, filter="data")
    if os.environ.get("EXT_SKIP_INSTALL"):  # a rehearsal: this python has the wheels, and no torch for DeepSpeed
        return {"skipped_install": True}
    wheels = sorted(str(p) for p in assets.glob("*.whl"))
    rc, out, s1 = sh([PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
                      "--upgrade", "--target", str(SITE), *wheels])  # fmt: skip
    if rc:
        raise SystemExit(f"wheels: {out[-1500:]}")
    rc, out, s2 = sh([PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation", "--no-compile",
                      "--no-cache-dir", "--target", str(SITE), str(assets / PROJECTS["deepspeed"]["sdist"])],
                     base_env())  # fmt: skip
    if rc:
        raise SystemExit(f"deepspeed: {out[-1500:]}")
    doc = {"wheels_s": s1, "deepspeed_install_s": s2, "facts": facts()}
    done.write_text(json.dumps(doc))
    return doc


def make_env(name: str, groups: list[str]) -> tuple[Path, dict]:
    """An env from the machine's toolkit repackaged as a channel: toolchain-only, `--with` each group."""
    prefix = WORK / f"env-{name}"
    if (prefix / "conda-meta").is_dir():
        return prefix, {"reused": True}
    channel = WORK / "channel"
    toolkit = os.path.realpath(os.environ.get("EXT_TOOLKIT", "/usr/local/cuda"))
    doc: dict = {"groups": groups}
    if not (channel / "envlock-repack.json").exists():
        rc, out, doc["channel_s"] = sh([PY, "-m", "tests.toolkit_channel", "--toolkit", toolkit, "--out", str(channel),
                                        "--libs", "all"], base_env(), cwd=str(REPO))  # fmt: skip
        if rc:
            raise SystemExit(f"channel: {out[-1500:]}")
    proj = WORK / "project"
    withs = [a for g in groups for a in ("--with", g)]
    torch = os.environ.get("EXT_TORCH", "installed")  # a version: a rehearsal where python has no torch
    rc, out, doc["resolve_s"] = envlock("resolve", "--torch", torch, "--python-exe", PY, "--toolchain-only",
                                        "--channel", f"file://{channel}", "--project-dir", str(proj), "--name", name,
                                        *withs)  # fmt: skip
    if rc:
        raise SystemExit(f"resolve {name}: {out[-1500:]}")
    rc, out, doc["create_s"] = envlock("create", "--lock", str(proj / "locks" / name / "conda-lock.yml"), "-p", str(prefix), "-q")
    if rc:
        raise SystemExit(f"create {name}: {out[-1500:]}")
    lock = (proj / "locks" / name / "conda-lock.yml").read_text()
    doc["packages"] = sorted(set(re.findall(r"^- name: (\S+)", lock, re.M)))
    return prefix, doc


def hide_toolkit() -> list[str]:
    if os.environ.get("EXT_NO_HIDE"):  # a rehearsal on a shared machine: leave its toolkit where it is
        return []
    toolkit = os.path.realpath("/usr/local/cuda")
    moved = []
    for p in dict.fromkeys(["/usr/local/cuda", toolkit]):
        if os.path.lexists(p):
            os.rename(p, p + ".ext-hidden")
            moved.append(p)
            with HIDDEN.open("a") as fh:
                fh.write(p + "\n")
    return moved


def restore_toolkit() -> None:
    if not HIDDEN.exists():
        return
    for p in reversed(HIDDEN.read_text().split()):
        if os.path.lexists(p + ".ext-hidden") and not os.path.lexists(p):
            os.rename(p + ".ext-hidden", p)
            log(f"restored {p}")
    HIDDEN.unlink()


# ------------------------------------------------------------------------------------------- one setup


def predict(doc: dict, unit: str) -> dict:
    """doctor's finding for one unit: what it says will happen to the build."""
    code = "source." + re.sub(r"[^\w.*-]+", "_", unit)
    f = next((f for f in doc.get("findings", []) if f["code"] == code), None)
    if f is None:
        return {"verdict": "no finding", "code": code}
    d = f.get("details", {})
    missing = list(d.get("missing", [])) + list(d.get("missing_libraries", []))
    if f["severity"] == "warning" and missing:
        verdict = "fails: missing " + ", ".join(missing)
    elif f["severity"] == "warning":
        verdict = "fails whatever the toolkit"
    else:
        verdict = "builds" if f["severity"] == "ok" else "builds as far as the toolkit goes"
    return {"verdict": verdict, "severity": f["severity"], "message": f["message"], "hint": f.get("hint"),
            "missing": missing, "groups": d.get("groups", []), "code": code}  # fmt: skip


def build(project: str, setup_name: str, prefix: Path | None, assets: Path, jobs: int) -> dict:
    spec = PROJECTS[project]
    tag = f"{setup_name}-{project}"
    env = base_env(MAX_JOBS=str(jobs), TORCH_EXTENSIONS_DIR=str(WORK / "ext" / tag), **spec.get("env", {}))
    wrap = [PY, "-m", "envlock", "run", "-p", str(prefix), "--"] if prefix else []
    if os.environ.get("EXT_SKIP_BUILDS"):
        return {"ok": None, "skipped": "EXT_SKIP_BUILDS"}
    if spec["how"] == "setup.py":
        target = WORK / "sites" / tag
        rc, out, secs = sh(wrap + [PY, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                                   "--no-cache-dir", "--target", str(target), str(assets / spec["sdist"])], env)  # fmt: skip
        if rc == 0:
            env["PYTHONPATH"] = f"{target}{os.pathsep}{env['PYTHONPATH']}"
            rc, out2, _ = sh(wrap + [PY, "-c", spec["check"]], env, timeout=300)
            out += out2
    elif "op" in spec:
        rc, out, secs = sh(wrap + [PY, str(HERE / "seed_job.py"), "build-op", spec["op"]], env)
        m = re.search(r"SEED_JSON=(.*)", out)
        if m:
            got = json.loads(m.group(1))  # its 'error' (the first fatal error) leads: error_text is only a tail
            rc, out = (0 if got.get("ok") else 1), f"{got.get('error', '')}\n{out}\n{got.get('error_text', '')}"
    else:
        env["PYTHONPATH"] = f"{WORK / 'src' / spec['sdist'][: -len('.tar.gz')]}{os.pathsep}{env['PYTHONPATH']}"
        rc, out, secs = sh(wrap + [PY, "-c", spec["check"]], env)
    out = "\n".join(ln for ln in out.splitlines() if not ln.startswith("SEED_JSON="))  # the helper's own JSON line
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    (WORK / "logs" / f"{tag}.log").write_text(out)
    libs = list(dict.fromkeys(re.findall(r"cannot find -l([\w+.-]+)", out)))
    return {"ok": rc == 0, "exit": rc, "seconds": secs, "first_error": None if rc == 0 else first_error(out),
            "missing_headers": missing_headers(out), "missing_libraries": libs, "max_jobs": jobs}  # fmt: skip


def judge(pred: dict, out: dict) -> dict:
    """Whether the prediction held for what the toolchain decides (headers and libraries)."""
    if out.get("ok") is None:
        return {"match": None, "why": "not built"}
    toolchain = out["missing_headers"] + out["missing_libraries"]
    predicted = pred.get("missing", [])
    if pred["verdict"].startswith("fails: missing"):
        ok = not out["ok"] and bool(set(toolchain) & set(predicted))
        return {"match": ok, "why": "failed on a header/library doctor named" if ok else "doctor said it fails; it did not (or not on that)"}
    if out["ok"]:
        return {"match": True, "why": "built, as predicted"}
    if toolchain:
        return {"match": False, "why": f"failed on {', '.join(toolchain)}, which doctor did not name"}
    return {"match": True, "why": "failed, not about the toolchain (no missing header or library)"}


def run_setup(name: str, prefix: Path | None, assets: Path, projects: list[str]) -> dict:
    sdists = [str(assets / PROJECTS[p]["sdist"]) for p in projects]
    fors = [a for s in sdists for a in ("--for", s)]
    wrap = ["run", "-p", str(prefix), "--", PY, "-m", "envlock"] if prefix else []
    rc, out, secs = envlock(*wrap, "doctor", "--json", *fors, timeout=300)
    try:
        doc = json.loads(out[out.index("{"): out.rindex("}") + 1])
    except ValueError:
        doc = {"error": out[-2000:]}
    (WORK / f"doctor-{name}.json").write_text(json.dumps(doc, indent=1))
    log(f"{name}: doctor exit {rc} in {secs} s: {doc.get('summary')}")
    preds = {p: predict(doc, PROJECTS[p]["unit"]) for p in projects}
    jobs = max(2, (os.cpu_count() or 16) // len(projects))
    with concurrent.futures.ThreadPoolExecutor(len(projects)) as pool:
        futs = {p: pool.submit(build, p, name, prefix, assets, jobs) for p in projects}
        outs = {p: f.result() for p, f in futs.items()}
    rows = {}
    for p in projects:
        rows[p] = {"prediction": preds[p], "outcome": outs[p], "judge": judge(preds[p], outs[p])}
        log(f"{name} {p}: predicted {preds[p]['verdict']!r}; outcome ok={outs[p].get('ok')} "
            f"{outs[p].get('seconds')} s {outs[p].get('first_error') or ''}"[:400])
    return {"doctor_seconds": secs, "doctor_exit": rc, "doctor_summary": doc.get("summary"), "projects": rows}


# ------------------------------------------------------------------------------------------- the run


def run(out: Path, assets: Path, setups: list[str]) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    restore_toolkit()
    record_path = WORK / "record.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {"setups": {}, "envs": {}}
    record["setup"] = setup(assets)
    projects = [p for p in PROJECTS if not os.environ.get("EXT_PROJECTS") or p in os.environ["EXT_PROJECTS"].split(",")]
    record["projects"] = {p: {k: v for k, v in PROJECTS[p].items() if k != "env"} for p in projects}
    record["arch_list"], record["cores"] = "9.0", os.cpu_count()
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")

    def save() -> None:  # after every setup: what a run killed at its limit had done still comes back
        record_path.write_text(json.dumps(record, indent=1))
        (out / f"{day}-extensions.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        (out / "extensions.md").write_text(table(record))
        for f in WORK.glob("doctor-*.json"):
            (out / f.name).write_text(f.read_text())
        if (WORK / "logs").is_dir():
            with tarfile.open(out / "build-logs.tar.gz", "w:gz") as tf:
                tf.add(WORK / "logs", arcname="build-logs")

    try:
        if "system" in setups and "system" not in record["setups"]:
            log("(a) the system toolkit")
            record["setups"]["system"] = run_setup("system", None, assets, projects)
            save()
        base, record["envs"]["base"] = make_env("base", []) if "base" in setups or "with" in setups else (None, {})
        if "base" in setups and "base" not in record["setups"]:
            record["hidden"] = hide_toolkit()
            log(f"(b) the envlock env (default dev set), moved away: {record['hidden']}")
            record["setups"]["base"] = run_setup("base", base, assets, projects)
            restore_toolkit()
            save()
        if "with" in setups and "with" not in record["setups"] and "base" in record["setups"]:
            rows = record["setups"]["base"]["projects"]
            groups = sorted({g for r in rows.values() if r["prediction"].get("verdict", "").startswith("fails: missing")
                             for g in r["prediction"].get("groups", [])})  # fmt: skip
            prefix, record["envs"]["with"] = make_env("with", groups) if groups else (base, {"groups": [], "same_as": "base"})
            record["hidden"] = hide_toolkit()
            log(f"(c) the env plus --with {groups or '(none recommended: the (b) env)'}")
            record["setups"]["with"] = run_setup("with", prefix, assets, projects)
            record["setups"]["with"]["groups"] = groups
            restore_toolkit()
    finally:
        restore_toolkit()
        save()
    return record


def table(record: dict) -> str:
    """The README table: one row per project and setup."""
    lines = ["| project | how | setup | doctor's prediction | outcome | seconds | first error | held |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    names = {"system": "(a) system toolkit", "base": "(b) env, default dev set", "with": "(c) env + --with"}
    for p, spec in record.get("projects", {}).items():
        for s in ("system", "base", "with"):
            row = record["setups"].get(s, {}).get("projects", {}).get(p)
            if not row:
                continue
            o, pr, j = row["outcome"], row["prediction"], row["judge"]
            setup_name = names[s] + (f" ({', '.join(record['setups'][s].get('groups', [])) or 'none'})" if s == "with" else "")
            outcome = "built" if o.get("ok") else ("not built" if o.get("ok") is None else "failed")
            err = (o.get("first_error") or "").replace("|", "/")[:160]
            lines.append(f"| {p} `{spec['unit']}` | {spec['how']} | {setup_name} | {pr['verdict']} | {outcome} | "
                         f"{o.get('seconds', '')} | {err} | {'yes' if j['match'] else ('—' if j['match'] is None else 'NO')} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["restore"]:
        restore_toolkit()
    elif sys.argv[1:2] == ["run"]:
        chosen = ["system", "base", "with"]
        if "--setups" in sys.argv:
            chosen = sys.argv[sys.argv.index("--setups") + 1].split(",")
        if "--skip-builds" in sys.argv:
            os.environ["EXT_SKIP_BUILDS"] = "1"
        run(Path(sys.argv[2]), Path(sys.argv[3]).resolve(), chosen)
    elif sys.argv[1:2] == ["table"]:
        sys.stdout.write(table(json.loads(Path(sys.argv[2]).read_text())))
    else:
        sys.exit(__doc__)
