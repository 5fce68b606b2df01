"""`envlock doctor`: can this environment JIT-compile a CUDA extension? Checks → list[Finding]; no printing.

What is diagnosed (the "toolkit under test"):
  * `-p PREFIX`, else `$CONDA_PREFIX`: that prefix. When it is not the active env, it is activated as
    `conda activate` and `envlock run` do it (envlock.activation.conda: conda's variables, then its
    activate.d scripts in conda's order), so the checks see the same CUDA_HOME, CPATH, CC, CXX,
    NVCC_PREPEND_FLAGS, ... and give the same verdict as `envlock run -p PREFIX -- envlock doctor`.
  * otherwise the system CUDA that torch's `_find_cuda_home()` would pick (CUDA_HOME, CUDA_PATH,
    dirname(dirname(which nvcc)), /usr/local/cuda).
Programs of the environment (nvcc, the host compilers, the env's python, nvidia-smi) run in subprocesses
with that environment; nothing is imported into envlock's own process (no torch, no rattler).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from envlock.doctor_probe import CUDA_LIB_PREFIXES, bundled_nvidia_libs
from envlock.errors import SpecError
from envlock.models import Finding
from envlock.tables import cuda_tables, driver_table

DOCTOR_RESULT_VERSION = 2  # 2: severity "skipped" (a check that could not run here)
PROBE = Path(__file__).with_name("doctor_probe.py")
PROBE_MARK = "ENVLOCK_PROBE_JSON="
ACTIVE_VAR = "_ENVLOCK_PREFIX"  # set by envlock's activation (envlock.activation.ACTIVE)

#: Headers torch's ATen/cuda/CUDAContextLight.h includes (facts §7.3), with the conda-forge package of each.
HEADERS: dict[str, str] = {
    "cuda_runtime.h": "cuda-cudart-dev",
    "cuda_runtime_api.h": "cuda-cudart-dev",
    "cusparse.h": "libcusparse-dev",
    "cublas_v2.h": "libcublas-dev",
    "cublasLt.h": "libcublas-dev",
    "cusolverDn.h": "libcusolver-dev",
}
CUDNN_HEADER = ("cudnn.h", "cudnn")

NVCC_PROBE_CU = r"""#include <cuda_runtime.h>
#include <cusparse.h>
#include <cstdio>
__global__ void add_one(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
int main() {
  int rt = 0;
  cudaError_t err = cudaRuntimeGetVersion(&rt);
  std::printf("cudart=%d cusparse_header=%d err=%d\n", rt, (int)CUSPARSE_VERSION, (int)err);
  return err == cudaSuccess ? 0 : 1;
}
"""


@dataclass(frozen=True, slots=True)
class DoctorOptions:
    """What to diagnose and how."""

    prefix: Path | None = None
    compile: bool = False
    python_exe: str | None = None
    environ: Mapping[str, str] | None = None  # default: os.environ
    proc_driver_version: Path = Path("/proc/driver/nvidia/version")
    timeout_s: float = 900.0
    for_: tuple[str, ...] = ()  # `--for deepspeed`: the ops it would build (envlock.doctor_groups)


@dataclass(slots=True)
class Nvcc:
    """One nvcc: its version and the search paths its nvcc.profile gives it."""

    path: Path
    version: str | None = None  # "13.0.88"
    minor: str | None = None  # "13.0"
    top: Path | None = None  # the toolkit root nvcc itself uses (nvcc.profile TOP)
    includes: tuple[Path, ...] = ()
    error: str | None = None


@dataclass(slots=True)
class Context:
    """Everything the checks look at, gathered once."""

    mode: str  # "prefix" | "system"
    prefix: Path | None
    env: dict[str, str]
    active: bool
    scripts: tuple[str, ...]
    activation_error: str | None
    meta: dict[str, Any] | None
    meta_problem: str | None  # an envlock env whose record cannot be read: why
    torch_home: Path | None  # what torch's _find_cuda_home() picks
    torch_home_source: str
    root: Path | None  # the toolkit under test
    nvcc: Nvcc | None
    path_nvcc: Path | None
    python: str | None
    py: dict[str, Any]
    options: DoctorOptions
    cudart_file: Path | None = None
    cudart_version: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ helpers


def _run(
    cmd: Sequence[str],
    env: Mapping[str, str],
    timeout: float = 60,
    cwd: str | None = None,
    stdin: str | None = None,
) -> tuple[int, str, str]:
    """Run a program; never raise (127 = not runnable, 124 = timed out)."""
    try:
        proc = subprocess.run(
            list(cmd),
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            input=stdin if stdin is not None else "",
            errors="replace",
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError, OSError) as exc:
        return 127, "", f"{type(exc).__name__}: {exc}"
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:.0f} s"
    return proc.returncode, proc.stdout, proc.stderr


def _which(name: str, env: Mapping[str, str]) -> Path | None:
    found = shutil.which(name, path=env.get("PATH", ""))
    return Path(found) if found else None


def _real(path: Path | str | None) -> str | None:
    return os.path.realpath(path) if path else None


def _vtuple(version: str) -> tuple[int, ...]:
    """'525.60.13' -> (525, 60, 13); stops at the first non-numeric part."""
    out: list[int] = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def _minor_of(version: str | None) -> str | None:
    parts = _vtuple(version or "")
    return f"{parts[0]}.{parts[1]}" if len(parts) >= 2 else None


def _error_lines(text: str, limit: int = 3) -> str:
    """The first compiler error lines of a build log (what a user needs to see)."""
    lines = [
        ln.strip() for ln in text.splitlines() if re.search(r"error|fatal|undefined reference", ln, re.I)
    ]
    picked = [ln for ln in lines if "fatal error" in ln] or lines
    return " | ".join(picked[:limit]) or (text.strip().splitlines() or ["(no output)"])[-1]


def _paths(value: str | None) -> list[Path]:
    return [Path(p) for p in (value or "").split(os.pathsep) if p]


# ------------------------------------------------------------------------------------------ target


def _read_meta(prefix: Path) -> tuple[dict[str, Any] | None, str | None]:
    """What `envlock create` recorded, and why an envlock env's record could not be read.

    An envlock env is recognised by its content: its record conda-meta/envlock (or an older
    envlock.json), else envlock's activation hook in etc/conda/activate.d. (None, reason) when it is
    one whose record is unreadable (a 0600 record of another user) or gone; (None, None) when not one.
    """
    reason = None
    for name in ("envlock", "envlock.json"):
        path = prefix / "conda-meta" / name
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except OSError as exc:
            reason = f"its record {path} cannot be read ({exc.strerror or exc})"
            continue
        except ValueError:
            reason = f"its record {path} is not valid JSON"
            continue
        if isinstance(doc, dict):
            return doc, None
    if reason is None and any((prefix / "etc" / "conda" / "activate.d").glob("envlock-cuda.*")):
        reason = "it has envlock's activation hook but no record conda-meta/envlock"
    return None, reason


def _activate(prefix: Path, base: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...], str | None]:
    """The environment `conda activate PREFIX` gives (for an envlock env also `envlock run`'s): conda's
    variables, then the env's activate.d scripts in conda's order (envlock.activation.conda)."""
    from envlock.activation.conda import activated_environ

    return activated_environ(base, prefix, own_hook=False)


def find_cuda_home(env: Mapping[str, str]) -> tuple[Path | None, str]:
    """torch.utils.cpp_extension._find_cuda_home(), evaluated for `env` (facts §7.1)."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            return Path(env[var]), f"${var}"
    nvcc = shutil.which("nvcc", path=env.get("PATH", ""))
    if nvcc:
        return Path(os.path.dirname(os.path.dirname(nvcc))), f"dirname(dirname({nvcc}))"
    if os.path.exists("/usr/local/cuda"):
        return Path("/usr/local/cuda"), "the default /usr/local/cuda"
    return None, "nothing (CUDA_HOME/CUDA_PATH unset, no nvcc on PATH, no /usr/local/cuda)"


def nvcc_info(path: Path, env: Mapping[str, str]) -> Nvcc:
    """`nvcc --version`, and `nvcc --dryrun` for the include dirs and root its nvcc.profile sets."""
    info = Nvcc(path=path)
    rc, out, err = _run([str(path), "--version"], env, timeout=60)
    m = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)", out + err)
    if rc != 0 or not m:
        info.error = (err or out).strip()[-300:] or f"exit {rc}"
        return info
    info.minor, info.version = m.group(1), m.group(2)
    _, out, err = _run(
        [str(path), "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull], env, timeout=60
    )
    values: dict[str, str] = {}
    for line in (out + "\n" + err).splitlines():
        m2 = re.match(r"#\$ (\w+)=(.*)$", line.strip())
        if m2:
            values[m2.group(1)] = m2.group(2)
    if values.get("TOP"):
        info.top = Path(os.path.normpath(values["TOP"]))
    tokens = shlex.split(values.get("INCLUDES", "")) + shlex.split(values.get("SYSTEM_INCLUDES", ""))
    dirs = [t[2:] for t in tokens if t.startswith("-I")]
    dirs += [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t == "-isystem"]
    info.includes = tuple(Path(os.path.normpath(d)) for d in dirs)
    if info.top is None:
        info.top = Path(os.path.realpath(path)).parent.parent
    return info


def _python_for(options: DoctorOptions, prefix: Path | None, env: Mapping[str, str]) -> str | None:
    if options.python_exe:
        exe = shutil.which(options.python_exe, path=env.get("PATH", "")) or options.python_exe
        if not os.path.exists(exe):
            raise SpecError(
                f"--python-exe {options.python_exe} does not exist",
                hint="give the python that has torch, e.g. --python-exe ~/venvs/train/bin/python",
            )
        return exe
    if prefix is not None and (prefix / "bin" / "python").exists():
        return str(prefix / "bin" / "python")
    found = _which("python3", env) or _which("python", env)
    return str(found) if found else None


def run_probe(python: str, args: Sequence[str], env: Mapping[str, str], timeout: float) -> dict[str, Any]:
    """Run doctor_probe.py in `python`; return its JSON (or {'probe_error': ...})."""
    rc, out, err = _run([python, str(PROBE), *args], env, timeout=timeout)
    for line in reversed(out.splitlines()):
        if line.startswith(PROBE_MARK):
            return json.loads(line[len(PROBE_MARK) :])
    return {"probe_error": (err or out).strip()[-600:] or f"exit {rc}"}


def gather(options: DoctorOptions) -> Context:
    """Resolve the target, its environment, torch's view and the nvcc under test."""
    base = dict(options.environ if options.environ is not None else os.environ)
    prefix: Path | None = None
    if options.prefix is not None:
        prefix = Path(options.prefix).expanduser().absolute()
        if not prefix.exists():
            raise SpecError(
                f"prefix {prefix} does not exist",
                hint="give an environment's path (envlock create -p PATH makes one), "
                "or leave -p out to check the active env or the system CUDA",
            )
        if not prefix.is_dir() or not any(prefix.iterdir()):
            raise SpecError(
                f"prefix {prefix} is empty or not a folder: there is nothing to diagnose",
                hint="create the environment first: envlock create --lock locks/<name>/conda-lock.yml -p PATH",
            )
    else:  # `envlock run` / shell-hook mark their prefix in _ENVLOCK_PREFIX; conda in CONDA_PREFIX
        prefix = next(
            (Path(base[v]) for v in (ACTIVE_VAR, "CONDA_PREFIX") if base.get(v) and Path(base[v]).is_dir()),
            None,
        )
    active = prefix is not None and _real(prefix) in (
        _real(base.get(ACTIVE_VAR)),
        _real(base.get("CONDA_PREFIX")),
    )
    env, scripts, act_err = (base, (), None) if prefix is None or active else _activate(prefix, base)
    meta, meta_problem = _read_meta(prefix) if prefix is not None else (None, None)
    torch_home, source = find_cuda_home(env)
    root = prefix if prefix is not None else torch_home
    path_nvcc = _which("nvcc", env)
    nvcc_path = root / "bin" / "nvcc" if root is not None and (root / "bin" / "nvcc").exists() else None
    if nvcc_path is None and prefix is None:
        nvcc_path = path_nvcc
    python = _python_for(options, prefix, env)
    py = run_probe(python, ["torch"], env, timeout=300) if python else {}
    return Context(
        mode="prefix" if prefix is not None else "system",
        prefix=prefix,
        env=env,
        active=active,
        scripts=scripts,
        activation_error=act_err,
        meta=meta,
        meta_problem=meta_problem,
        torch_home=torch_home,
        torch_home_source=source,
        root=root,
        nvcc=nvcc_info(nvcc_path, env) if nvcc_path else None,
        path_nvcc=path_nvcc,
        python=python,
        py=py,
        options=options,
    )


# ------------------------------------------------------------------------------------------ hints


def _anchor(ctx: Context) -> dict[str, Any]:
    anchor = (ctx.meta or {}).get("anchor")
    return anchor if isinstance(anchor, dict) else {}


def _repair(ctx: Context) -> str | None:
    """`envlock create --lock … -p …` for an envlock-made env (None otherwise)."""
    lock = (ctx.meta or {}).get("lock_path")
    return f"envlock create --lock {lock} -p {ctx.prefix}" if lock and ctx.prefix else None


def _replan(ctx: Context) -> str | None:
    torch = _anchor(ctx).get("torch")
    return f"envlock resolve --torch {torch}" if torch else None


def _activation_hint(ctx: Context) -> str:
    p = ctx.prefix
    return f'envlock run -p {p} -- <your build command>  (or: eval "$(envlock shell-hook -p {p})")'


def _package_hint(ctx: Context, package: str, what: str) -> str:
    """How to add a missing piece: the envlock command, or the package for a conda prefix / system CUDA."""
    repair = _repair(ctx)
    if repair:
        return f"{repair}   (the lock has {package}; recreating restores {what})"
    minor = ctx.nvcc.minor if ctx.nvcc and ctx.nvcc.minor else None
    pin = f" cuda-version={minor}" if minor else ""
    if ctx.mode == "prefix":
        return f"add the conda-forge package {package}{pin} to {ctx.prefix}"
    apt = f" (NVIDIA apt repo: {package}-{minor.replace('.', '-')})" if minor and package != "cudnn" else ""
    return f"install {package}{pin} (conda-forge){apt}, or let envlock build a matched env: {_resolve_hint(ctx)}"


def _resolve_hint(ctx: Context) -> str:
    """`envlock resolve … && envlock create`: from the installed torch when there is one to ask."""
    if (ctx.py.get("torch") or {}).get("cuda"):
        return "envlock resolve --torch installed && envlock create"
    return "envlock resolve --torch VERSION (the torch you will use) && envlock create"


# ------------------------------------------------------------------------------------------ checks


def check_target(ctx: Context) -> Finding:
    details: dict[str, Any] = {
        "mode": ctx.mode,
        "prefix": str(ctx.prefix) if ctx.prefix else None,
        "active": ctx.active,
        "activation_scripts": list(ctx.scripts),
        "envlock_env": ctx.meta is not None or ctx.meta_problem is not None,
    }
    if ctx.meta is not None:
        details["envlock"] = {
            k: ctx.meta.get(k) for k in ("env_name", "lock_path", "content_hash", "platform", "anchor")
        }
    if ctx.prefix is None:
        return Finding(
            "env.target",
            "ok",
            "no -p and no active env: checking the system CUDA torch would use",
            details=details,
        )
    how = (
        "active"
        if ctx.active
        else f"not active; evaluated with its {len(ctx.scripts)} activation script(s) applied"
    )
    if ctx.activation_error:
        return Finding(
            "env.target",
            "warning",
            f"{ctx.prefix}: an activation script failed: {ctx.activation_error}",
            hint=f"fix or remove the failing script in {ctx.prefix}/etc/conda/activate.d",
            details=details,
        )
    if not (ctx.prefix / "conda-meta").is_dir():
        return Finding(
            "env.target",
            "warning",
            f"{ctx.prefix} has no conda-meta/: not a conda environment; checked as a CUDA toolkit folder",
            details=details,
        )
    if ctx.meta is not None and ctx.meta.get("state") == "incomplete":
        # create marks the prefix before linking and clears the mark after (a killed create leaves it).
        return Finding(
            "env.target",
            "error",
            f"{ctx.prefix}: an `envlock create` stopped before it finished; the environment is incomplete",
            hint=f"run `envlock create -p {ctx.prefix}` again to repair it",
            details=details,
        )
    if ctx.meta_problem is not None:
        return Finding(
            "env.target",
            "warning",
            f"{ctx.prefix}: envlock environment, but {ctx.meta_problem}: its lock's anchor is unknown here, "
            "so the skew check compares with torch only",
            hint=f"let every user read it: chmod a+r {ctx.prefix}/conda-meta/* (or run `envlock create` again)",
            details=details,
        )
    kind = "envlock environment" if ctx.meta is not None else "conda environment (not made by envlock)"
    return Finding("env.target", "ok", f"{ctx.prefix}: {kind}, {how}", details=details)


def check_torch(ctx: Context) -> Finding:
    py = ctx.py
    details = {
        "python": ctx.python,
        **{k: py.get(k) for k in ("python_version", "torch", "torch_error") if k in py},
    }
    if ctx.python is None:
        return Finding(
            "torch.found", "skipped", "no python found to ask for torch (pass --python-exe)", details=details
        )
    if "probe_error" in py:
        return Finding(
            "torch.found",
            "warning",
            f"{ctx.python} could not run the probe: {py['probe_error'][-200:]}",
            hint="pass the python that has torch with --python-exe",
            details=details,
        )
    torch = py.get("torch")
    if torch:
        cuda = torch.get("cuda") or "none (CPU build)"
        return Finding(
            "torch.found", "ok", f"torch {torch['version']} (CUDA {cuda}) in {ctx.python}", details=details
        )
    err = py.get("torch_error", "")
    if "undefined symbol" in err or "cannot open shared object" in err:
        return Finding(
            "torch.found",
            "error",
            f"import torch fails in {ctx.python}: {err[-300:]}",
            hint="see ld_library_path.shadowing: remove the older CUDA libraries from LD_LIBRARY_PATH",
            details=details,
        )
    anchor = _anchor(ctx).get("cuda")
    ref = f"; nvcc is checked against the lock's anchor CUDA {anchor}" if anchor else ""
    return Finding("torch.found", "ok", f"torch is not installed in {ctx.python}{ref}", details=details)


def _reference(ctx: Context) -> tuple[str, str] | None:
    """The CUDA minor nvcc must match: torch.version.cuda, else the lock's anchor."""
    torch = ctx.py.get("torch") or {}
    if torch.get("cuda"):
        return _minor_of(torch["cuda"]) or torch["cuda"], f"torch {torch['version']}"
    anchor = _anchor(ctx)
    if anchor.get("cuda"):
        return str(anchor["cuda"]), f"the lock's anchor (torch {anchor.get('torch', '?')})"
    return None


def check_nvcc_found(ctx: Context) -> Finding:
    nv = ctx.nvcc
    details: dict[str, Any] = {
        "which_nvcc": str(ctx.path_nvcc) if ctx.path_nvcc else None,
        "toolkit": str(ctx.root) if ctx.root else None,
    }
    if nv is None:
        where = f"{ctx.root}/bin/nvcc" if ctx.root else "CUDA_HOME, PATH or /usr/local/cuda"
        hint = (
            _package_hint(ctx, "cuda-nvcc", "nvcc")
            if ctx.mode == "prefix" or ctx.root
            else f"install a CUDA toolkit and set CUDA_HOME to it, or: {_resolve_hint(ctx)}"
        )
        return Finding("nvcc.found", "error", f"no nvcc at {where}", hint=hint, details=details)
    details.update(
        path=str(nv.path),
        version=nv.version,
        top=str(nv.top) if nv.top else None,
        includes=[str(p) for p in nv.includes],
    )
    if nv.error:
        return Finding(
            "nvcc.found",
            "error",
            f"{nv.path} does not run: {nv.error[-200:]}",
            hint=_package_hint(ctx, "cuda-nvcc", "a working nvcc"),
            details=details,
        )
    real = f" (toolkit root {nv.top})" if nv.top and _real(nv.top) != _real(nv.path.parent.parent) else ""
    return Finding("nvcc.found", "ok", f"nvcc {nv.version} at {nv.path}{real}", details=details)


def check_nvcc_skew(ctx: Context) -> list[Finding]:
    nv, ref = ctx.nvcc, _reference(ctx)
    if nv is None or nv.minor is None or ref is None:
        why = (
            "no working nvcc to compare"
            if nv is None or nv.minor is None
            else "no torch and no envlock anchor to compare with"
        )
        return [
            Finding("nvcc.skew", "skipped", why),
            Finding("nvcc.deepspeed", "skipped", why),
        ]
    want, who = ref
    (nmaj, nmin), (tmaj, tmin) = _vtuple(nv.minor)[:2], _vtuple(want)[:2]
    details = {"nvcc": nv.minor, "reference": want, "reference_from": who}
    fix = (
        _replan(ctx)
        or f"use nvcc {want} (conda-forge: cuda-nvcc with cuda-version={want}) and point CUDA_HOME at it"
    )
    if nmaj != tmaj:
        skew = Finding(
            "nvcc.skew",
            "error",
            f"nvcc {nv.minor} vs {who} built with CUDA {want}: torch's extension "
            "builder refuses a major mismatch",
            hint=fix,
            details=details,
        )
    elif abs(nmin - tmin) > 1:
        skew = Finding(
            "nvcc.skew",
            "warning",
            f"nvcc {nv.minor} is {abs(nmin - tmin)} minors from CUDA {want} of "
            f"{who} (torch only warns; envlock's rule keeps within ±1)",
            hint=fix,
            details=details,
        )
    else:
        same = "matches" if nmin == tmin else "is within ±1 of"
        skew = Finding("nvcc.skew", "ok", f"nvcc {nv.minor} {same} CUDA {want} of {who}", details=details)
    ok_lists = cuda_tables().deepspeed_ok
    accepted = nv.minor == want or (
        nmaj == tmaj and nmaj in ok_lists and nv.minor in ok_lists[nmaj] and want in ok_lists[nmaj]
    )
    if accepted:
        ds = Finding(
            "nvcc.deepspeed",
            "ok",
            f"DeepSpeed accepts nvcc {nv.minor} with torch CUDA {want}",
            details=details,
        )
    else:
        rule = "needs an exact minor for CUDA 13" if nmaj == tmaj and nmaj >= 13 else "refuses this pair"
        ds = Finding(
            "nvcc.deepspeed",
            "warning",
            f"DeepSpeed's op builder {rule}: nvcc {nv.minor} vs torch CUDA {want} "
            "raises CUDAMismatchException",
            hint=f"{fix}; or set DS_SKIP_CUDA_CHECK=1 at your own risk",
            details=details,
        )
    return [skew, ds]


def check_cuda_home(ctx: Context) -> Finding:
    env = ctx.env
    details: dict[str, Any] = {
        "CUDA_HOME": env.get("CUDA_HOME"),
        "CUDA_PATH": env.get("CUDA_PATH"),
        "torch_would_pick": str(ctx.torch_home) if ctx.torch_home else None,
        "picked_from": ctx.torch_home_source,
        "which_nvcc": str(ctx.path_nvcc) if ctx.path_nvcc else None,
    }
    intended = ctx.prefix if ctx.mode == "prefix" else (ctx.nvcc.top if ctx.nvcc else None)
    details["intended"] = str(intended) if intended else None
    if ctx.torch_home is None:
        hint = _activation_hint(ctx) if ctx.prefix else "export CUDA_HOME=<your CUDA toolkit>"
        return Finding(
            "cuda_home.consistent",
            "error",
            f"torch finds no CUDA_HOME: {ctx.torch_home_source}",
            hint=hint,
            details=details,
        )
    if intended is not None and _real(ctx.torch_home) != _real(intended):
        what = (
            f"the environment {ctx.prefix}"
            if ctx.mode == "prefix"
            else f"the toolkit nvcc really runs from ({intended})"
        )
        hint = _activation_hint(ctx) if ctx.mode == "prefix" else f"export CUDA_HOME={intended}"
        return Finding(
            "cuda_home.consistent",
            "error",
            f"torch would use CUDA_HOME={ctx.torch_home} (from {ctx.torch_home_source}), not {what}",
            hint=hint,
            details=details,
        )
    path_top = nvcc_info(ctx.path_nvcc, env).top if ctx.path_nvcc else None
    if path_top is not None and _real(path_top) != _real(ctx.torch_home):
        return Finding(
            "cuda_home.consistent",
            "warning",
            f"`nvcc` on PATH ({ctx.path_nvcc}) belongs to {path_top}, "
            f"not to CUDA_HOME={ctx.torch_home}: a manual nvcc call and a torch build use different toolkits",
            hint=_activation_hint(ctx) if ctx.prefix else f"put {ctx.torch_home}/bin first on PATH",
            details=details,
        )
    paths = {v for v in (env.get("CUDA_HOME"), env.get("CUDA_PATH")) if v}
    if len({_real(p) for p in paths}) > 1:
        return Finding(
            "cuda_home.consistent",
            "warning",
            f"CUDA_HOME={env['CUDA_HOME']} and CUDA_PATH={env['CUDA_PATH']} "
            "differ: tools that read CUDA_PATH use another toolkit",
            hint=f"export CUDA_PATH={env['CUDA_HOME']}",
            details=details,
        )
    return Finding(
        "cuda_home.consistent",
        "ok",
        f"torch picks CUDA_HOME={ctx.torch_home} (from {ctx.torch_home_source}), the same toolkit as nvcc",
        details=details,
    )


def _compiler_cmd(env: Mapping[str, str], var: str, default: str) -> list[str]:
    return shlex.split(env.get(var) or default) or [default]


@functools.cache
def _compiler_search_dirs(
    cmd: tuple[str, ...], env_items: tuple[tuple[str, str], ...]
) -> tuple[Path, ...] | None:
    """The #include <...> search list the host compiler really uses (CPATH included), from `-E -v`."""
    rc, out, err = _run([*cmd, "-xc++", "-E", "-v", "-"], dict(env_items), timeout=60)
    text = err + out
    if "search starts here" not in text:
        return None
    block = text.split("#include <...> search starts here:", 1)[-1].split("End of search list.", 1)[0]
    return tuple(Path(os.path.normpath(ln.strip().split(" (")[0])) for ln in block.splitlines() if ln.strip())


def host_include_dirs(ctx: Context) -> list[tuple[str, Path]]:
    """Where a torch extension's .cpp files find headers: torch's -I dirs, then the host compiler's search."""
    env, dirs = ctx.env, []
    if ctx.root is not None and os.path.normpath(ctx.root / "include") != "/usr/include":
        dirs.append(("$CUDA_HOME/include", ctx.root / "include"))
    for var in ("CUDA_INC_PATH",):
        dirs += [(f"${var}", p) for p in _paths(env.get(var))]
    for var in ("CUDNN_HOME", "CUDNN_PATH"):
        if env.get(var):
            dirs.append((f"${var}/include", Path(env[var]) / "include"))
            break
    searched = _compiler_search_dirs(tuple(_compiler_cmd(env, "CXX", "c++")), tuple(sorted(env.items())))
    if searched is None:  # no working host compiler: what gcc would add from the environment and by default
        searched = tuple(
            _paths(env.get("CPATH"))
            + _paths(env.get("CPLUS_INCLUDE_PATH"))
            + [Path("/usr/local/include"), Path("/usr/include")]
        )
    cpath = {os.path.normpath(p) for p in _paths(env.get("CPATH")) + _paths(env.get("CPLUS_INCLUDE_PATH"))}
    dirs += [
        ("CPATH" if os.path.normpath(p) in cpath else "the host compiler's default", p) for p in searched
    ]
    return dirs


def _other_dirs(ctx: Context) -> list[Path]:
    """Where a header may exist without the host compiler seeing it (nvcc's own dirs, targets/)."""
    out = list(ctx.nvcc.includes) if ctx.nvcc else []
    for base in (ctx.root, ctx.nvcc.top if ctx.nvcc else None):
        if base is not None:
            out += sorted((base / "targets").glob("*/include")) + [base / "include"]
    return out


def _expects_cudnn(ctx: Context) -> bool:
    """cudnn.h is checked when the env locked cuDNN (create's record), else when the anchor names one, or CUDNN_HOME is set."""
    if ctx.env.get("CUDNN_HOME") or ctx.env.get("CUDNN_PATH"):
        return True
    activation = (ctx.meta or {}).get("activation")
    if isinstance(activation, dict) and "has_cudnn" in activation:
        return bool(activation["has_cudnn"])
    return bool(_anchor(ctx).get("cudnn"))


def check_headers(ctx: Context) -> list[Finding]:
    headers = dict(HEADERS)
    if _expects_cudnn(ctx):
        headers[CUDNN_HEADER[0]] = CUDNN_HEADER[1]
    host, others = host_include_dirs(ctx), _other_dirs(ctx)
    findings = []
    for name, package in headers.items():
        hit = next(((via, d / name) for via, d in host if (d / name).is_file()), None)
        details: dict[str, Any] = {"package": package, "searched": [str(d) for _, d in host]}
        if hit:
            details["path"] = str(hit[1])
            findings.append(
                Finding(f"header.{name}", "ok", f"{name}: {hit[1]} (via {hit[0]})", details=details)
            )
            continue
        elsewhere = next((d / name for d in others if (d / name).is_file()), None)
        if elsewhere:
            details["path"] = str(elsewhere)
            hint = (
                (_activation_hint(ctx) + " — it puts this dir on CPATH")
                if ctx.meta is not None
                else f'export CPATH="{elsewhere.parent}${{CPATH:+:$CPATH}}"  (or CUDA_INC_PATH={elsewhere.parent})'
            )
            findings.append(
                Finding(
                    f"header.{name}",
                    "error",
                    f"{name} is in {elsewhere.parent}, which nvcc searches but "
                    "the host compiler does not (torch adds only $CUDA_HOME/include): a .cpp that "
                    f"includes ATen/cuda/CUDAContext.h fails with '{name}: No such file or directory'",
                    hint=hint,
                    details=details,
                )
            )
            continue
        findings.append(
            Finding(
                f"header.{name}",
                "error",
                f"{name} not found (looked in $CUDA_HOME/include, CPATH, "
                f"the host compiler's dirs, nvcc's dirs and targets/*/include of {ctx.root})",
                hint=_package_hint(ctx, package, name),
                details=details,
            )
        )
    return findings


def _cudart_file(ctx: Context) -> Path | None:
    """The libcudart an extension links against: $CUDA_HOME/lib64 or lib (torch), targets/<arch>/lib (nvcc)."""
    bases = [ctx.root, ctx.nvcc.top if ctx.nvcc else None]
    dirs: list[Path] = []
    for base in (b for b in bases if b is not None):
        dirs += [base / "lib64", base / "lib", *sorted((base / "targets").glob("*/lib"))]
    for d in dirs:
        for name in ("libcudart.so", *sorted(p.name for p in d.glob("libcudart.so.*"))):
            if (d / name).exists():
                return d / name
    return None


def check_cudart(ctx: Context) -> Finding:
    lib = _cudart_file(ctx)
    if lib is None:
        return Finding(
            "cudart.loadable",
            "error",
            f"no libcudart.so under {ctx.root} (lib64, lib, targets/*/lib)",
            hint=_package_hint(ctx, "cuda-cudart-dev", "libcudart.so"),
        )
    ctx.cudart_file = lib
    real = Path(os.path.realpath(lib))
    m = re.match(r"libcudart\.so\.(\d+)", real.name)
    soname = f"libcudart.so.{m.group(1)}" if m else "libcudart.so"
    doc = run_probe(sys.executable, ["cudart", soname, str(lib)], ctx.env, timeout=120)
    details = {"file": str(lib), "soname": soname, "LD_LIBRARY_PATH": ctx.env.get("LD_LIBRARY_PATH"), **doc}
    if "loaded_by" not in doc:
        err = doc.get("path_error") or doc.get("probe_error") or "unknown error"
        return Finding(
            "cudart.loadable",
            "error",
            f"{lib} does not load: {err}",
            hint=_package_hint(ctx, "cuda-cudart", "a loadable libcudart"),
            details=details,
        )
    version = doc.get("version") or 0
    ctx.cudart_version = f"{version // 1000}.{(version % 1000) // 10}" if version else None
    shown = (
        f"CUDA runtime {ctx.cudart_version}"
        if ctx.cudart_version
        else f"cudaRuntimeGetVersion rc={doc.get('rc')}"
    )
    nv = ctx.nvcc
    if nv and nv.minor and ctx.cudart_version and _vtuple(nv.minor)[0] != _vtuple(ctx.cudart_version)[0]:
        return Finding(
            "cudart.loadable",
            "error",
            f"{doc.get('file') or lib} is {shown} but nvcc is {nv.minor}: a mixed toolkit",
            hint=_package_hint(ctx, "cuda-cudart-dev", "a matching cudart"),
            details=details,
        )
    if doc["loaded_by"] == "path":
        return Finding(
            "cudart.loadable",
            "warning",
            f"{lib} loads by path ({shown}), but the dynamic loader does not "
            f"find {soname} by name with this LD_LIBRARY_PATH: programs linked against it fail outside torch",
            hint=(
                _activation_hint(ctx)
                if ctx.prefix
                else f"append {lib.parent} to LD_LIBRARY_PATH (append, so torch's own CUDA libraries still win)"
            ),
            details=details,
        )
    return Finding("cudart.loadable", "ok", f"{doc.get('file') or lib} loads ({shown})", details=details)


def compiler_version(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[str, str | None, str]:
    """(kind, version, first line) of a C/C++ compiler from `--version`."""
    rc, out, err = _run([*cmd, "--version"], env, timeout=30)
    first = ((out or err).strip().splitlines() or [""])[0]
    if rc != 0:
        return "missing", None, (err or out).strip()[-200:]
    kind = (
        "clang"
        if "clang" in first.lower()
        else "gcc"
        if re.search(r"gcc|g\+\+|GCC|\bcc\b|c\+\+", first)
        else "unknown"
    )
    versions = re.findall(r"\d+\.\d+(?:\.\d+)?", first)
    return kind, versions[-1] if versions else None, first


def _ccbin(flags: str) -> str | None:
    """The last -ccbin/--compiler-bindir value in an NVCC_*_FLAGS string."""
    tokens, value = shlex.split(flags or ""), None
    for i, tok in enumerate(tokens):
        for opt in ("-ccbin", "--compiler-bindir"):
            if tok == opt and i + 1 < len(tokens):
                value = tokens[i + 1]
            elif tok.startswith(opt + "="):
                value = tok.split("=", 1)[1]
    return value


def nvcc_host_compiler(env: Mapping[str, str]) -> tuple[str, str]:
    """The host compiler nvcc ends up with in a torch build: the last -ccbin wins (APPEND, torch's $CC, PREPEND)."""
    for value, why in (
        (_ccbin(env.get("NVCC_APPEND_FLAGS", "")), "NVCC_APPEND_FLAGS"),
        (env.get("CC"), "torch's -ccbin $CC"),
        (_ccbin(env.get("NVCC_PREPEND_FLAGS", "")), "NVCC_PREPEND_FLAGS"),
    ):
        if value:
            return (os.path.join(value, "gcc") if os.path.isdir(value) else value), why
    return "gcc", "nvcc's default (gcc on PATH)"


def check_host_compiler(ctx: Context) -> Finding:
    nv = ctx.nvcc
    limit = cuda_tables().gcc_max(nv.minor) if nv and nv.minor else None
    nvcc_cc, why = nvcc_host_compiler(ctx.env)
    compilers = {"nvcc's host compiler": [nvcc_cc], "torch's CXX": _compiler_cmd(ctx.env, "CXX", "c++")}
    seen: dict[str, Any] = {}
    problems, notes = [], []
    for role, cmd in compilers.items():
        kind, version, first = compiler_version(cmd, ctx.env)
        seen[role] = {"command": cmd, "kind": kind, "version": version, "banner": first}
        label = f"{role}: {cmd[0]} {version or ''}".rstrip()
        if kind == "missing":
            problems.append(f"{role} {cmd[0]} does not run")
        elif kind == "gcc" and version and limit is not None and _vtuple(version)[0] > limit:
            problems.append(
                f"{label} is newer than gcc {limit}, the newest nvcc {nv.minor if nv else ''} accepts"
            )
        else:
            notes.append(label)
    details = {
        "gcc_max": limit,
        "nvcc": nv.minor if nv else None,
        "compilers": seen,
        "nvcc_host_compiler_from": why,
    }
    if problems:
        hint = (
            f"{_activation_hint(ctx)} — the env's own gcc/g++ (CC/CXX) are within the limit"
            if ctx.meta is not None
            else f"use gcc <= {limit}: export CC=gcc-{limit} CXX=g++-{limit}, or add gcc_linux-64<{(limit or 0) + 1} "
            f"gxx_linux-64<{(limit or 0) + 1} (conda-forge)"
        )
        return Finding("host_compiler.version", "error", "; ".join(problems), hint=hint, details=details)
    if limit is None:
        return Finding(
            "host_compiler.version",
            "warning",
            f"{'; '.join(notes)} (no gcc limit known for nvcc {nv.minor if nv else '?'})",
            details=details,
        )
    return Finding(
        "host_compiler.version",
        "ok",
        f"{'; '.join(notes)} (nvcc {nv.minor if nv else ''} accepts gcc <= {limit})",
        details=details,
    )


def ccbin_probe(nvcc: Path, cc: str, env: Mapping[str, str]) -> tuple[int, str, str]:
    """Ask nvcc itself what it does with torch's `-ccbin $CC` on top of NVCC_*_FLAGS: (rc, its complaint, output)."""
    cmd = [str(nvcc), "-ccbin", cc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull]
    rc, out, err = _run(cmd, env, timeout=60)
    said = next((ln.strip() for ln in (err + out).splitlines() if "compiler-bindir" in ln), "")
    return rc, said, (err or out).strip()[-400:]


def check_ccbin(ctx: Context) -> Finding:
    """NVCC_PREPEND_FLAGS=-ccbin=$CXX (conda-forge cuda-nvcc) plus torch's -ccbin $CC: what nvcc really does."""
    env, pre = (
        ctx.env,
        _ccbin(ctx.env.get("NVCC_PREPEND_FLAGS", "")) or _ccbin(ctx.env.get("NVCC_APPEND_FLAGS", "")),
    )
    details = {
        "NVCC_PREPEND_FLAGS": env.get("NVCC_PREPEND_FLAGS"),
        "NVCC_APPEND_FLAGS": env.get("NVCC_APPEND_FLAGS"),
        "CC": env.get("CC"),
    }
    if not pre or not env.get("CC") or ctx.nvcc is None or ctx.nvcc.error:
        return Finding(
            "host_compiler.ccbin",
            "ok",
            "no -ccbin clash (no -ccbin in NVCC_*_FLAGS, or CC unset)",
            details=details,
        )
    if not ctx.py.get("torch"):  # the second -ccbin is torch's (-ccbin $CC); without torch there is no clash
        return Finding(
            "host_compiler.ccbin",
            "ok",
            f"NVCC_*_FLAGS has -ccbin {pre} and CC is set, but torch is not "
            "importable here, and only torch's builder adds -ccbin $CC",
            details=details,
        )
    rc, said, output = ccbin_probe(ctx.nvcc.path, env["CC"], env)
    details.update(rc=rc, output=output, nvcc_said=said)
    if rc != 0:
        return Finding(
            "host_compiler.ccbin",
            "error",
            f"nvcc {ctx.nvcc.version} refuses two -ccbin options (NVCC_*_FLAGS "
            f"has {pre}, torch adds -ccbin $CC={env['CC']}): {said or output}",
            hint="unset CC for torch builds, or drop -ccbin from NVCC_PREPEND_FLAGS",
            details=details,
        )
    if said:
        from envlock.doctor_compilers import identify, one_gcc_toolchain

        used, dropped = identify(env["CC"], env, _run), identify(pre, env, _run)
        details["same_toolchain"] = one_gcc_toolchain(used, dropped)
        if details["same_toolchain"]:  # conda-forge's -cc and -c++ of one gcc install: nothing changes
            return Finding(
                "host_compiler.ccbin",
                "ok",
                f"nvcc {ctx.nvcc.version} uses torch's -ccbin $CC={env['CC']} (gcc {used.version}, "
                f"{used.target}); NVCC_*_FLAGS' {pre} is the C++ driver of the same gcc install, "
                "so nvcc's 'incompatible redefinition' warning changes nothing",
                details=details,
            )
        return Finding(
            "host_compiler.ccbin",
            "warning",
            f"nvcc {ctx.nvcc.version} warns '{said}' and uses the last one: "
            f"torch's -ccbin $CC={env['CC']} wins over {pre}, a different compiler "
            f"({_compiler_label(used)} vs {_compiler_label(dropped)})",
            hint="point CC and CXX at one gcc install (e.g. the env's own x86_64-conda-linux-gnu-cc/-c++), "
            "or unset CC for torch builds",
            details=details,
        )
    return Finding(
        "host_compiler.ccbin",
        "ok",
        f"nvcc accepts -ccbin {pre} (NVCC_*_FLAGS) with torch's -ccbin {env['CC']} silently",
        details=details,
    )


def _compiler_label(c: object) -> str:
    """`gcc 13.3.0 in /x/bin` for a finding's message."""
    kind = "gcc" if getattr(c, "gcc", False) else "compiler"
    return f"{kind} {getattr(c, 'version', None) or '?'} in {getattr(c, 'install', None) or '?'}"


def driver_version(ctx: Context) -> tuple[str | None, dict[str, Any]]:
    """The NVIDIA driver version from nvidia-smi, else /proc/driver/nvidia/version."""
    details: dict[str, Any] = {}
    smi = _which("nvidia-smi", ctx.env)
    if smi:
        rc, out, err = _run(
            [str(smi), "--query-gpu=driver_version,name", "--format=csv,noheader"], ctx.env, timeout=60
        )
        details["nvidia_smi"] = {"path": str(smi), "rc": rc, "output": (out or err).strip()[-300:]}
        row = out.strip().splitlines()[0].split(",") if rc == 0 and out.strip() else []
        if row and _vtuple(row[0].strip()):
            details["gpu"] = row[1].strip() if len(row) > 1 else None
            return row[0].strip(), details
    try:
        text = ctx.options.proc_driver_version.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, details
    m = re.search(r"Kernel Module.*?\s(\d{3,}\.\d+(?:\.\d+)?)\s", text)
    details["proc"] = text.strip().splitlines()[0] if text.strip() else ""
    return (m.group(1) if m else None), details


def check_driver(ctx: Context) -> list[Finding]:
    version, details = driver_version(ctx)
    if version is None:
        present = Finding(
            "driver.present",
            "warning",
            "no NVIDIA driver (no working nvidia-smi, no "
            f"{ctx.options.proc_driver_version}): extensions can be built here but not run",
            hint="fine for CPU-only CI; on a GPU machine install the NVIDIA driver",
            details=details,
        )
        return [present, Finding("driver.version", "skipped", "no NVIDIA driver to compare with", details=details)]
    gpu = f" ({details['gpu']})" if details.get("gpu") else ""
    present = Finding("driver.present", "ok", f"NVIDIA driver {version}{gpu}", details=details)
    runtimes = {}
    torch_cuda = (ctx.py.get("torch") or {}).get("cuda")
    if torch_cuda:
        runtimes[f"torch's CUDA {torch_cuda}"] = _minor_of(torch_cuda)
    if ctx.cudart_version:
        runtimes[f"the env's cudart {ctx.cudart_version}"] = ctx.cudart_version
    table, worst = driver_table(), []
    for who, minor in runtimes.items():
        if minor is None:
            continue
        floor = table["minor_version_compatibility"].get(minor.split(".")[0])
        full = table["toolkit_driver"].get(minor)
        if floor and _vtuple(version) < _vtuple(floor):
            worst.append(
                (
                    "error",
                    f"{who} needs driver >= {floor} (CUDA {minor.split('.')[0]}.x minor-version "
                    f"compatibility); driver is {version}",
                )
            )
        elif full and _vtuple(version) < _vtuple(full):
            worst.append(
                (
                    "warning",
                    f"{who} runs on driver {version} only through minor-version compatibility "
                    f"(full support from {full}): PTX from a newer toolkit will not JIT",
                )
            )
        elif floor is None:
            worst.append(("warning", f"no driver minimum known for {who}"))
    vdetails = {"driver": version, "runtimes": runtimes}
    for sev in ("error", "warning"):
        msgs = [m for s, m in worst if s == sev]
        if msgs:
            return [
                present,
                Finding(
                    "driver.version",
                    sev,
                    "; ".join(msgs),  # type: ignore[arg-type]
                    hint="update the NVIDIA driver, or use a torch/toolkit of an older CUDA minor",
                    details=vdetails,
                ),
            ]
    what = ", ".join(runtimes) or "no CUDA runtime found to compare"
    return [
        present,
        Finding("driver.version", "ok", f"driver {version} is new enough for {what}", details=vdetails),
    ]


def _file_version(path: Path, soname: str) -> str | None:
    """Version of a CUDA library copy: from its real file name (conda: libnvJitLink.so.12.4.127), else from
    the RECORD of the pip wheel that owns it (site-packages/nvidia/*/lib holds only libnvJitLink.so.12)."""
    real = os.path.basename(os.path.realpath(path))
    base = soname.split(".so")[0] + ".so."
    if real != soname and real.startswith(base) and len(real) > len(base):
        return real[len(base) :]
    parts = Path(os.path.realpath(path)).parts
    if len(parts) > 4 and parts[-4] == "nvidia" and parts[-2] == "lib":
        owned = bundled_nvidia_libs([str(Path(*parts[:-4]))])
        return (owned.get(soname) or {}).get("version")
    return None


def _shadow_entries(ctx: Context, bundled: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """Each CUDA library on LD_LIBRARY_PATH that has the same file name as one torch bundles."""
    loaded: dict[str, str] = ctx.py.get("loaded") or {}
    out = []
    for d in _paths(ctx.env.get("LD_LIBRARY_PATH")):
        for name, own in sorted(bundled.items()):
            f = d / name
            if not name.startswith(CUDA_LIB_PREFIXES) or not f.exists() or _real(f) == _real(own["path"]):
                continue
            theirs, mine = _file_version(f, name), own["version"]
            # Compare only versions of one scheme (libnvtx3interop.so.1.1.0 is not "older" than wheel 13.0.85).
            comparable = theirs is not None and _vtuple(theirs)[:1] == _vtuple(mine)[:1]
            if not comparable:
                grade = "unknown"
            elif _vtuple(theirs)[:2] < _vtuple(mine)[:2]:
                grade = "older-minor"
            elif _vtuple(theirs)[:3] < _vtuple(mine)[:3]:
                grade = "older-patch"
            else:
                grade = "same-or-newer"
            out.append(
                {
                    "file": str(f),
                    "version": theirs,
                    "bundled": own["path"],
                    "bundled_version": mine,
                    "grade": grade,
                    "import_torch_loaded": loaded.get(name),
                }
            )
    return out


def check_ld_library_path(ctx: Context) -> Finding:
    bundled: dict[str, dict[str, str]] = ctx.py.get("nvidia_libs") or {}
    entries = _shadow_entries(ctx, bundled)
    details: dict[str, Any] = {
        "LD_LIBRARY_PATH": ctx.env.get("LD_LIBRARY_PATH"),
        "bundled": len(bundled),
        "shadowing": entries,
    }
    if not bundled:
        return Finding(
            "ld_library_path.shadowing",
            "ok",
            "no pip-bundled CUDA libraries (site-packages/nvidia) to shadow",
            details=details,
        )
    hint = (
        f"{_activation_hint(ctx)} — envlock appends the env's lib dir after torch's"
        if ctx.meta is not None
        else "remove that dir from LD_LIBRARY_PATH, or append it instead of prepending (torch finds its own via RPATH)"
    )
    for grade, severity in (("older-minor", "error"), ("older-patch", "warning"), ("unknown", "warning")):
        hits = [e for e in entries if e["grade"] == grade]
        if not hits:
            continue
        e, more = hits[0], f" (+{len(hits) - 1} more)" if len(hits) > 1 else ""
        took = f"; import torch loaded {e['import_torch_loaded']}" if e["import_torch_loaded"] else ""
        mine = _vtuple(e["bundled_version"]) + (0, 0)
        if grade == "older-minor":
            symbol = (
                f"__nvJitLinkComplete_{mine[0]}_{mine[1]}"
                if e["file"].rsplit("/", 1)[-1].startswith(("libnvJitLink", "libcusparse"))
                else "<a newer CUDA symbol>"
            )
            why = f"import torch can fail with 'undefined symbol: {symbol}'"
        elif grade == "older-patch":
            why = "same minor, so the symbols match, but the loader may use the older copy"
        else:
            why = "its version cannot be read, so envlock cannot tell whether it is older"
        shown = f" ({e['version']})" if e["version"] else ""
        return Finding(
            "ld_library_path.shadowing",
            severity,  # type: ignore[arg-type]
            f"LD_LIBRARY_PATH has {e['file']}{shown} beside torch's bundled {e['bundled_version']}{more}"
            f"{took}: {why}",
            hint=hint,
            details=details,
        )
    return Finding(
        "ld_library_path.shadowing",
        "ok",
        f"nothing on LD_LIBRARY_PATH shadows torch's {len(bundled)} "
        "bundled CUDA libraries with an older copy",
        details=details,
    )


def _compile_hint(ctx: Context, log: str) -> str:
    """The fix for a failed probe build: the header's package (or CPATH when only nvcc's dirs have it), a file
    missing from the toolkit, or the other findings."""
    missing = re.search(r"([\w./+-]+): No such file or directory", log)
    if missing and missing.group(1).endswith(".h"):
        name = os.path.basename(missing.group(1))
        hidden = next((d for d in _other_dirs(ctx) if (d / name).is_file()), None)
        if (
            hidden is not None
        ):  # the conda-forge trap: in targets/<arch>/include, not on the host compiler's path
            return (
                (_activation_hint(ctx) + " — it puts targets/<arch>/include on CPATH")
                if ctx.prefix
                else f'export CPATH="{hidden}${{CPATH:+:$CPATH}}"'
            )
        return _package_hint(ctx, HEADERS.get(name, "the package that ships it"), name)
    if missing and ctx.root is not None and missing.group(1).startswith(str(ctx.root)):
        return _package_hint(ctx, "cuda-nvcc", f"{missing.group(1)} (the toolkit is incomplete)")
    return "see the findings above (host_compiler.*, header.*); rerun the build verbosely for the full log"


def check_compile_nvcc(ctx: Context) -> Finding:
    nv = ctx.nvcc
    if nv is None or nv.error:
        return Finding(
            "compile.nvcc",
            "error",
            "not run: no working nvcc (see nvcc.found)",
            hint=_package_hint(ctx, "cuda-nvcc", "nvcc"),
        )
    with tempfile.TemporaryDirectory(prefix="envlock-doctor-") as tmp:
        src, exe = Path(tmp) / "probe.cu", Path(tmp) / "probe"
        src.write_text(NVCC_PROBE_CU, encoding="utf-8")
        cmd = [str(nv.path), "-cudart", "shared", str(src), "-o", str(exe)]
        if ctx.cudart_file is not None:  # link against (and run with) the environment's own cudart
            libdir = str(ctx.cudart_file.parent)
            cmd += ["-L", libdir, "-Xlinker", "-rpath", "-Xlinker", libdir]
        start = time.monotonic()
        rc, out, err = _run(cmd, ctx.env, timeout=ctx.options.timeout_s, cwd=tmp)
        seconds = round(time.monotonic() - start, 2)
        details: dict[str, Any] = {
            "command": cmd,
            "seconds": seconds,
            "rc": rc,
            "log": (err + out).strip()[-2000:],
        }
        if rc != 0:
            hint = _compile_hint(ctx, err + out)
            return Finding(
                "compile.nvcc",
                "error",
                f"nvcc {nv.version} failed to compile+link probe.cu after {seconds} s: "
                f"{_error_lines(err + out)}",
                hint=hint,
                details=details,
            )
        rc, out, err = _run([str(exe)], ctx.env, timeout=60, cwd=tmp)
        details.update(run_rc=rc, run_output=(out + err).strip()[-400:])
    if rc != 0:
        return Finding(
            "compile.nvcc",
            "error",
            f"probe.cu compiled and linked ({seconds} s) but does not run: {(out + err).strip()[-200:]}",
            hint=_package_hint(ctx, "cuda-cudart", "libcudart"),
            details=details,
        )
    return Finding(
        "compile.nvcc",
        "ok",
        f"nvcc {nv.version} compiled and linked a .cu including cuda_runtime.h and "
        f"cusparse.h in {seconds} s; it runs: {out.strip()}",
        details=details,
    )


def check_compile_torch(ctx: Context) -> Finding:
    if not ctx.python or not ctx.py.get("torch"):
        return Finding(
            "compile.torch_extension", "skipped", "not run: torch is not importable here (see torch.found)"
        )
    if not (ctx.py["torch"].get("cuda")):
        return Finding("compile.torch_extension", "skipped", "not run: torch is a CPU build")
    env = dict(ctx.env)
    if not ctx.py["torch"].get("cuda_available") and not env.get("TORCH_CUDA_ARCH_LIST"):
        env["TORCH_CUDA_ARCH_LIST"] = (
            "8.0"  # no GPU to ask: build one arch rather than every arch torch knows
        )
    with tempfile.TemporaryDirectory(prefix="envlock-doctor-ext-") as tmp:
        doc = run_probe(ctx.python, ["extension", tmp], env, timeout=ctx.options.timeout_s)
    stage = doc.get("stage")
    details = {k: (v[-3000:] if isinstance(v, str) else v) for k, v in doc.items()}
    if stage == "ran" and doc.get("correct"):
        return Finding(
            "compile.torch_extension",
            "ok",
            f"load_inline built a kernel including ATen/cuda/CUDAContext.h "
            f"in {doc['build_seconds']} s and it ran correctly on {doc['device']}",
            details=details,
        )
    if stage == "built":
        return Finding(
            "compile.torch_extension",
            "ok",
            f"load_inline built a kernel including ATen/cuda/CUDAContext.h in "
            f"{doc['build_seconds']} s (no GPU: not run)",
            details=details,
        )
    if stage == "ran":
        return Finding(
            "compile.torch_extension",
            "error",
            f"the kernel built and ran on {doc.get('device')} but returned a wrong result",
            hint="check the driver (driver.version) and TORCH_CUDA_ARCH_LIST",
            details=details,
        )
    text = doc.get("error") or doc.get("probe_error") or "unknown failure"
    hint = _compile_hint(ctx, text)
    took = f" after {doc['seconds']} s" if doc.get("seconds") is not None else ""
    return Finding(
        "compile.torch_extension",
        "error",
        f"load_inline failed{took}: {_error_lines(text)}",
        hint=hint,
        details=details,
    )


# ------------------------------------------------------------------------------------------ entry


def run_doctor(options: DoctorOptions) -> list[Finding]:
    """Run every check (and the compile checks with options.compile); raise SpecError for a bad target."""
    ctx = gather(options)
    findings = [
        check_target(ctx),
        check_torch(ctx),
        check_nvcc_found(ctx),
        *check_nvcc_skew(ctx),
        check_cuda_home(ctx),
        *check_headers(ctx),
        check_cudart(ctx),
        check_host_compiler(ctx),
        check_ccbin(ctx),
        *check_driver(ctx),
        check_ld_library_path(ctx),
    ]
    from envlock import doctor_gpu, doctor_groups  # header groups, --for, GPU targets: modules of their own

    findings += doctor_groups.checks(ctx, options.for_) + doctor_gpu.checks(ctx, deepspeed="deepspeed" in options.for_)
    if options.compile:
        findings += [check_compile_nvcc(ctx), check_compile_torch(ctx)]
    return findings


def exit_code(findings: Sequence[Finding]) -> int:
    """1 if any finding is an error, else 0."""
    return 1 if any(f.severity == "error" for f in findings) else 0


def summary(findings: Sequence[Finding]) -> dict[str, int]:
    counts: dict[str, int] = {"ok": 0, "info": 0, "skipped": 0, "warning": 0, "error": 0}
    for f in findings:
        counts[f.severity] += 1
    return counts


def result_json(findings: Sequence[Finding]) -> dict[str, Any]:
    """The --json document: a versioned object wrapping the findings."""
    return {
        "doctor_result_version": DOCTOR_RESULT_VERSION,
        "exit_code": exit_code(findings),
        "summary": summary(findings),
        "findings": [
            {
                "code": f.code,
                "severity": f.severity,
                "message": f.message,
                "hint": f.hint,
                "details": f.details,
            }
            for f in findings
        ],
    }
