"""Checks of what is diagnosed, torch, nvcc and CUDA_HOME (pure: Observation + Tables -> findings).

Codes: env.target, env.path, env.activation, torch.found, nvcc.found, nvcc.skew, nvcc.deepspeed, cuda_home.consistent.
"""

from __future__ import annotations

import shlex
from typing import Any

from envlock.doctor.data import Tables
from envlock.doctor.hints import Hints, q
from envlock.doctor.observation import NO_RECORD, Observation, minor_of, vtuple
from envlock.models import Finding


def check_target(obs: Observation, t: Tables) -> list[Finding]:
    """env.target: what is diagnosed, and whether it is a (complete) conda/envlock environment."""
    details: dict[str, Any] = {
        "mode": obs.mode,
        "prefix": str(obs.prefix) if obs.prefix else None,
        "active": obs.active,
        "activation_scripts": list(obs.scripts),
        "envlock_env": obs.meta is not None or obs.meta_problem is not None,
    }
    if obs.meta is not None:
        details["envlock"] = {
            k: obs.meta.get(k) for k in ("env_name", "lock_path", "content_hash", "platform", "anchor")
        }
    if obs.prefix is None:
        return [
            Finding(
                "env.target",
                "ok",
                "no -p and no active env: checking the system CUDA torch would use",
                details=details,
            )
        ]
    how = (
        "active"
        if obs.active
        else f"not active; evaluated with its {len(obs.scripts)} activation script(s) applied"
    )
    if obs.activation_error:
        return [
            Finding(
                "env.target",
                "warning",
                f"{obs.prefix}: an activation script failed: {obs.activation_error}",
                hint=f"fix or remove the failing script in {q(str(obs.prefix) + '/etc/conda/activate.d')}",
                details=details,
            )
        ]
    if not obs.conda_meta:
        return [
            Finding(
                "env.target",
                "warning",
                f"{obs.prefix} has no conda-meta/: not a conda environment; checked as a CUDA toolkit folder",
                details=details,
            )
        ]
    if obs.meta is not None and obs.meta.get("state") == "incomplete":
        # create marks the prefix before linking and clears the mark after (a killed create leaves it).
        return [
            Finding(
                "env.target",
                "error",
                f"{obs.prefix}: an `envlock create` stopped before it finished; the environment is incomplete",
                hint=f"run `envlock create -p {q(obs.prefix)}` again to repair it",
                details=details,
            )
        ]
    if obs.meta_problem is not None:
        # hook scripts without a record (the lock's activate.sh copied in): `envlock hook` writes the record
        hint = (f"record it: envlock hook -p {q(obs.prefix)}   (run in the project; --lock NAME|FILE names the lock)"
                if obs.meta_problem == NO_RECORD else
                f"let every user read it: chmod a+r {q(str(obs.prefix) + '/conda-meta')}/* (or run `envlock create` again)")
        return [
            Finding(
                "env.target",
                "warning",
                f"{obs.prefix}: envlock environment, but {obs.meta_problem}: its lock's anchor is unknown here, "
                "so the skew check compares with torch only",
                hint=hint,
                details=details,
            )
        ]
    kind = ("conda environment (not made by envlock)" if obs.meta is None else "envlock environment"
            if obs.meta.get("lock_path") else "conda environment with envlock's activation (envlock hook)")
    if obs.meta is None and obs.pixi is not None:
        details["pixi"] = dict(obs.pixi)
        kind = (f"pixi environment {obs.pixi['environment']} of {obs.pixi['manifest']}"
                + (", envlock's activation in its manifest (as `pixi run` applies it)"
                   if obs.pixi.get("envlock_activation") else ""))
    return [Finding("env.target", "ok", f"{obs.prefix}: {kind}, {how}", details=details)]


def check_path(obs: Observation, t: Tables) -> list[Finding]:
    """env.path: a prefix nvcc cannot build in (whitespace, `"`, `$` or a backquote in its path, envlock.names): said
    only where it is so. conda-forge's nvcc activation puts `-ccbin=PREFIX/bin/…` in NVCC_PREPEND_FLAGS, and nvcc
    splits that variable at whitespace (A single input file is required …) and runs its host compiler through sh."""
    from envlock.names import nvcc_cannot_use, usable_path

    prefix = obs.prefix
    why = nvcc_cannot_use(prefix) if prefix is not None else None
    if prefix is None or why is None:
        return []
    lock = (obs.meta or {}).get("lock_path")
    instead = q(usable_path(prefix))
    hint = (f"re-create it where nvcc can read its path: envlock create --lock {q(lock)} -p {instead}" if lock else
            f"re-create it at a path without {why} (e.g. {instead}); a conda env cannot be moved")
    flags = obs.env.get("NVCC_PREPEND_FLAGS")
    return [Finding(
        "env.path",
        "error",
        f"{prefix} has {why}: nvcc cannot read the `-ccbin=…` path conda-forge's activation puts in "
        "NVCC_PREPEND_FLAGS there (it splits the variable at whitespace, keeps quotes and runs the host compiler "
        "through sh), so every nvcc build in this env fails",
        hint=hint,
        details={"prefix": str(prefix), "why": why, "NVCC_PREPEND_FLAGS": flags},
    )]


def check_activation(obs: Observation, t: Tables) -> list[Finding]:
    """env.activation: a CUDA env made by another tool (conda, conda-lock, conda-pack…) without envlock's hook:
    `conda activate` leaves CUDA_HOME and CPATH as they were. Said only where it matters: a prefix with nvcc."""
    prefix = obs.prefix
    if prefix is None or not obs.conda_meta or obs.hook or obs.nvcc is None or obs.nvcc.path.parent != prefix / "bin":
        return []
    home = obs.env.get("CUDA_HOME")
    if home and obs.real(home) == obs.real(prefix):
        return []  # the env's own activation (not envlock's) already points torch at it
    if obs.pixi is not None:  # pixi activates from its manifest: a hook in the env would not be run by it
        manifest = shlex.quote(str(obs.pixi["manifest"]))
        return [Finding(
            "env.activation", "error",
            f"{prefix} is pixi environment {obs.pixi['environment']}, and {obs.pixi['manifest']} does not apply "
            f"envlock's activation to it: `pixi run` leaves CUDA_HOME={home or '(unset)'} and the env's CUDA "
            "headers off CPATH, so torch would build with another toolkit",
            hint=f"add it from the lock: envlock export pixi --feature cuda --manifest {manifest}",
            details={"pixi": dict(obs.pixi), "cuda_home": home})]
    quoted = shlex.quote(str(prefix))
    return [
        Finding(
            "env.activation",
            "error",
            f"{prefix} has no envlock activation hook: `conda activate` leaves CUDA_HOME="
            f"{home or '(unset)'} and the env's CUDA headers off CPATH, so torch would build with another toolkit",
            hint=f"add it once: envlock hook -p {quoted}   (then `conda activate` sets what `envlock run` sets)",
            details={"hook": f"{prefix}/etc/conda/activate.d/envlock-cuda.sh", "cuda_home": home},
        )
    ]


def check_torch(obs: Observation, t: Tables) -> list[Finding]:
    """torch.found: the torch of the env's python (missing is fine; an import that dies is not)."""
    py = obs.py
    details = {
        "python": obs.python,
        "python_why": obs.python_why,
        **{k: py.get(k) for k in ("python_version", "torch", "torch_error") if k in py},
    }
    if obs.python is None:
        return [
            Finding(
                "torch.found",
                "skipped",
                "no python found to ask for torch: no --python-exe, no active venv or conda env, no python3 on PATH",
                details=details,
            )
        ]
    if "probe_error" in py:
        return [
            Finding(
                "torch.found",
                "warning",
                f"{obs.python} could not run the probe: {py['probe_error'][-200:]}",
                hint="pass the python that has torch with --python-exe",
                details=details,
            )
        ]
    torch = py.get("torch")
    if torch:
        cuda = torch.get("cuda") or "none (CPU build)"
        return [
            Finding(
                "torch.found",
                "ok",
                f"torch {torch['version']} (CUDA {cuda}) in {obs.python}" + (f" ({obs.python_why})" if obs.python_why else ""),
                details=details,
            )
        ]
    err = py.get("torch_error", "")
    if "undefined symbol" in err or "cannot open shared object" in err:
        return [
            Finding(
                "torch.found",
                "error",
                f"import torch fails in {obs.python}: {err[-300:]}",
                hint="see ld_library_path.shadowing: remove the older CUDA libraries from LD_LIBRARY_PATH",
                details=details,
            )
        ]
    anchor = obs.anchor.get("cuda")
    ref = f"; nvcc is checked against the lock's anchor CUDA {anchor}" if anchor else ""
    return [Finding("torch.found", "ok", f"torch is not installed in {obs.python}{ref}", details=details)]


def check_nvcc_found(obs: Observation, t: Tables) -> list[Finding]:
    """nvcc.found: the nvcc torch would use, its version and its own root."""
    nv = obs.nvcc
    details: dict[str, Any] = {
        "which_nvcc": str(obs.path_nvcc) if obs.path_nvcc else None,
        "toolkit": str(obs.root) if obs.root else None,
    }
    hints = Hints(obs)
    if nv is None:
        where = f"{obs.root}/bin/nvcc" if obs.root else "CUDA_HOME, PATH or /usr/local/cuda"
        hint = (
            hints.package("cuda-nvcc", "nvcc")
            if obs.mode == "prefix" or obs.root
            else f"install a CUDA toolkit and set CUDA_HOME to it, or: {hints.resolve()}"
        )
        return [Finding("nvcc.found", "error", f"no nvcc at {where}", hint=hint, details=details)]
    details.update(
        path=str(nv.path),
        version=nv.version,
        top=str(nv.top) if nv.top else None,
        includes=[str(p) for p in nv.includes],
    )
    if nv.error:
        return [
            Finding(
                "nvcc.found",
                "error",
                f"{nv.path} does not run: {nv.error[-200:]}",
                hint=hints.package("cuda-nvcc", "a working nvcc"),
                details=details,
            )
        ]
    real = (
        f" (toolkit root {nv.top})" if nv.top and obs.real(nv.top) != obs.real(nv.path.parent.parent) else ""
    )
    return [Finding("nvcc.found", "ok", f"nvcc {nv.version} at {nv.path}{real}", details=details)]


def reference(obs: Observation) -> tuple[str, str] | None:
    """The CUDA minor nvcc must match: torch.version.cuda, else the lock's anchor."""
    torch = obs.torch
    if torch.get("cuda"):
        return minor_of(torch["cuda"]) or torch["cuda"], f"torch {torch['version']}"
    anchor = obs.anchor
    if anchor.get("torch_cuda"):  # an override set the toolchain's CUDA elsewhere: measured from torch's, as resolve
        return str(anchor["torch_cuda"]), (f"the lock's torch {anchor.get('torch', '?')} (its toolchain set to CUDA "
                                           f"{anchor.get('cuda')} by --cuda)")
    if anchor.get("cuda"):
        return str(anchor["cuda"]), f"the lock's anchor (torch {anchor.get('torch', '?')})"
    return None


def check_nvcc_skew(obs: Observation, t: Tables) -> list[Finding]:
    """nvcc.skew (torch's rule, envlock's ±1) and nvcc.deepspeed (DeepSpeed's cuda_minor_mismatch_ok)."""
    nv, ref = obs.nvcc, reference(obs)
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
    (nmaj, nmin), (tmaj, tmin) = vtuple(nv.minor)[:2], vtuple(want)[:2]
    details = {"nvcc": nv.minor, "reference": want, "reference_from": who}
    fix = (
        Hints(obs).replan()
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
    ok_lists = t.cuda.deepspeed_ok
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


def check_cuda_home(obs: Observation, t: Tables) -> list[Finding]:
    """cuda_home.consistent: torch's CUDA_HOME, the env, the nvcc that runs and `nvcc` on PATH agree."""
    env, hints = obs.env, Hints(obs)
    details: dict[str, Any] = {
        "CUDA_HOME": env.get("CUDA_HOME"),
        "CUDA_PATH": env.get("CUDA_PATH"),
        "torch_would_pick": str(obs.torch_home) if obs.torch_home else None,
        "picked_from": obs.torch_home_source,
        "which_nvcc": str(obs.path_nvcc) if obs.path_nvcc else None,
    }
    intended = obs.prefix if obs.mode == "prefix" else (obs.nvcc.top if obs.nvcc else None)
    details["intended"] = str(intended) if intended else None
    if obs.torch_home is None:
        hint = hints.activation() if obs.prefix else "export CUDA_HOME=<your CUDA toolkit>"
        return [
            Finding(
                "cuda_home.consistent",
                "error",
                f"torch finds no CUDA_HOME: {obs.torch_home_source}",
                hint=hint,
                details=details,
            )
        ]
    if intended is not None and obs.real(obs.torch_home) != obs.real(intended):
        what = (
            f"the environment {obs.prefix}"
            if obs.mode == "prefix"
            else f"the toolkit nvcc really runs from ({intended})"
        )
        hint = hints.activation() if obs.mode == "prefix" else f"export CUDA_HOME={intended}"
        return [
            Finding(
                "cuda_home.consistent",
                "error",
                f"torch would use CUDA_HOME={obs.torch_home} (from {obs.torch_home_source}), not {what}",
                hint=hint,
                details=details,
            )
        ]
    path_top = obs.path_nvcc_top if obs.path_nvcc else None
    if path_top is not None and obs.real(path_top) != obs.real(obs.torch_home):
        return [
            Finding(
                "cuda_home.consistent",
                "warning",
                f"`nvcc` on PATH ({obs.path_nvcc}) belongs to {path_top}, "
                f"not to CUDA_HOME={obs.torch_home}: a manual nvcc call and a torch build use different toolkits",
                hint=hints.activation() if obs.prefix else f"put {obs.torch_home}/bin first on PATH",
                details=details,
            )
        ]
    given = {v for v in (env.get("CUDA_HOME"), env.get("CUDA_PATH")) if v}
    if len({obs.real(p) for p in given}) > 1:
        return [
            Finding(
                "cuda_home.consistent",
                "warning",
                f"CUDA_HOME={env['CUDA_HOME']} and CUDA_PATH={env['CUDA_PATH']} "
                "differ: tools that read CUDA_PATH use another toolkit",
                hint=f"export CUDA_PATH={q(env['CUDA_HOME'])}",
                details=details,
            )
        ]
    return [
        Finding(
            "cuda_home.consistent",
            "ok",
            f"torch picks CUDA_HOME={obs.torch_home} (from {obs.torch_home_source}), the same toolkit as nvcc",
            details=details,
        )
    ]
