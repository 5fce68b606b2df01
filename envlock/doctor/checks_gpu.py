"""Can this env build for the GPU? TORCH_CUDA_ARCH_LIST, `nvcc --list-gpu-arch`, torch's arch list (pure).

Codes:
  arch_list.deepspeed  TORCH_CUDA_ARCH_LIST entries DeepSpeed's builder cannot parse ("9.0a": its
                       compute_capability_args does int("0a") and every JIT op dies with a ValueError)
  arch_list.nvcc       entries the env's nvcc cannot target (torch's build then fails with "nvcc fatal :
                       Unsupported gpu architecture")
  gpu.arch.nvcc        the GPU's compute capability against the env nvcc's `--list-gpu-arch`
  gpu.arch.torch       the GPU against torch.cuda.get_arch_list() (torch's own kernels)
The verdicts come from the programs' answers; data/gpu_arch.yaml only words the fix (which CUDA a
capability needs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envlock.doctor.data import Tables
from envlock.doctor.hints import Hints
from envlock.doctor.observation import Observation
from envlock.models import Finding

DS_PARSEABLE = re.compile(r"^\d+\.\d+(\+PTX)?$")  # DeepSpeed 0.19.8 compute_capability_args
ARCH_ENTRY = re.compile(
    r"^(\d+)\.(\d+)([af]?)(\+PTX)?$"
)  # what torch's _get_cuda_arch_flags turns into -gencode
DS_FIX_NOTE = "DeepSpeed accepts X.Y and X.Y+PTX only; its ops need no arch-specific (a/f) variant"
Arches = Mapping[str, Mapping[str, Any]]


def entries(value: str) -> list[str]:
    """TORCH_CUDA_ARCH_LIST split as torch and DeepSpeed split it (';' or whitespace)."""
    return [e for e in value.replace(" ", ";").split(";") if e.strip()]


def parse_nvcc_arches(text: str) -> set[int] | None:
    """`nvcc --list-gpu-arch` → {75, 80, …, 121}; None when it printed no compute_XY."""
    found = {int(n) for n in re.findall(r"\bcompute_(\d+)\b", text)}
    return found or None


def needs_cuda(cc: tuple[int, int], arches: Arches) -> str:
    """One phrase: which CUDA toolkits can build for this capability (from data/gpu_arch.yaml)."""
    row = arches.get(f"{cc[0]}.{cc[1]}")
    sm = f"sm_{cc[0]}{cc[1]}"
    if row is None:
        return f"{sm} is not in envlock's table (data/gpu_arch.yaml): use the newest CUDA"
    if row.get("last"):
        return f"{sm} ({row['name']}) builds with CUDA {row['first']} to {row['last']} only"
    return f"{sm} ({row['name']}) needs CUDA ≥ {row['first']}"


def _base(entry: str) -> tuple[int, int] | None:
    m = ARCH_ENTRY.match(entry)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _ds_form(entry: str) -> str | None:
    """The entry as DeepSpeed parses it: X.Ya / X.Yf -> X.Y (+PTX kept); a named arch -> None."""
    if DS_PARSEABLE.match(entry):
        return entry
    m = ARCH_ENTRY.match(entry)
    return f"{m.group(1)}.{m.group(2)}{m.group(4) or ''}" if m else None


# ----------------------------------------------------------------------------------------- judges


def judge_arch_list(
    value: str | None,
    nvcc_arches: set[int] | None,
    nvcc_version: str | None,
    arches: Arches,
    *,
    deepspeed: bool,
) -> list[Finding]:
    """TORCH_CUDA_ARCH_LIST against DeepSpeed's parser and the nvcc's targets."""
    if not value or value.strip() == "native":
        what = "unset" if not value else "native"
        return [
            Finding(
                "arch_list.deepspeed", "ok", f"TORCH_CUDA_ARCH_LIST {what}: builds target the visible GPU"
            )
        ]
    items = entries(value)
    details: dict[str, Any] = {"value": value, "entries": items}
    bad = [e for e in items if not DS_PARSEABLE.match(e)]
    out: list[Finding] = []
    if bad:
        fixed = ";".join(dict.fromkeys(f for e in items if (f := _ds_form(e))))
        suffixed = next((e for e in bad if _base(e)), None)
        why = (
            f"ValueError: invalid literal for int() with base 10: '{suffixed.split('.', 1)[1].split('+')[0]}' "
            "in compute_capability_args"
            if suffixed
            else "it expects X.Y or X.Y+PTX"
        )
        msg = (
            f"TORCH_CUDA_ARCH_LIST={value}: DeepSpeed's op builder cannot parse {', '.join(repr(b) for b in bad)} "
            f"({why}), so every DeepSpeed JIT op (FusedAdam, …) fails before compiling"
        )
        severity = "warning" if deepspeed else "info"
        hint = f"export TORCH_CUDA_ARCH_LIST={fixed or 'X.Y'}  ({DS_FIX_NOTE}; X.Y = the GPU's compute capability)"
        out.append(Finding("arch_list.deepspeed", severity, msg, hint=hint, details=details))
    else:
        out.append(
            Finding(
                "arch_list.deepspeed",
                "ok",
                f"TORCH_CUDA_ARCH_LIST={value}: DeepSpeed parses it",
                details=details,
            )
        )
    if nvcc_arches is None:
        return out
    cannot = [(e, b) for e in items if (b := _base(e)) and b[0] * 10 + b[1] not in nvcc_arches]
    if cannot:
        names = ", ".join(e for e, _ in cannot)
        out.append(
            Finding(
                "arch_list.nvcc",
                "error",
                f"nvcc {nvcc_version} cannot build TORCH_CUDA_ARCH_LIST entries {names} (not in its "
                "--list-gpu-arch): torch's build fails with 'nvcc fatal : Unsupported gpu architecture'",
                hint=f"{needs_cuda(cannot[0][1], arches)}; or drop {names} from TORCH_CUDA_ARCH_LIST",
                details={**details, "nvcc_arches": sorted(nvcc_arches)},
            )
        )
    else:
        out.append(
            Finding("arch_list.nvcc", "ok", f"nvcc {nvcc_version} can build every TORCH_CUDA_ARCH_LIST entry")
        )
    return out


def judge_nvcc(
    cc: tuple[int, int],
    gpu: str,
    nvcc_arches: set[int] | None,
    nvcc_version: str | None,
    fix: str,
    arches: Arches,
) -> Finding:
    """The GPU's capability against what the env's nvcc lists."""
    sm = f"sm_{cc[0]}{cc[1]}"
    details: dict[str, Any] = {"capability": f"{cc[0]}.{cc[1]}", "gpu": gpu, "nvcc": nvcc_version}
    if nvcc_arches is None:
        return Finding(
            "gpu.arch.nvcc", "skipped", f"{gpu} is {sm}; nvcc did not list its targets", details=details
        )
    details["nvcc_arches"] = sorted(nvcc_arches)
    if cc[0] * 10 + cc[1] in nvcc_arches:
        return Finding(
            "gpu.arch.nvcc", "ok", f"{gpu} is {sm}: nvcc {nvcc_version} can build for it", details=details
        )
    return Finding(
        "gpu.arch.nvcc",
        "error",
        f"nvcc {nvcc_version} cannot build for {gpu} ({sm}: compute_{cc[0]}{cc[1]} is not in its --list-gpu-arch); "
        "every extension build for this GPU fails",
        hint=f"{needs_cuda(cc, arches)}: {fix}",
        details=details,
    )


def torch_runs_on(cc: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether a torch built for `arch_list` has kernels this GPU can run.

    A cubin sm_XY runs on the same major at an equal or higher minor (sm_XYa only on exactly XY); PTX
    compute_XY is JIT-compiled by the driver for any newer GPU.
    """
    num = cc[0] * 10 + cc[1]
    for arch in arch_list:
        m = re.match(r"^(sm|compute)_(\d+)([af]?)$", arch)
        if not m:
            continue
        n = int(m.group(2))
        if m.group(1) == "compute" and n <= num:
            return True
        if m.group(1) == "sm" and n // 10 == cc[0] and (n == num or (m.group(3) != "a" and n % 10 <= cc[1])):
            return True
    return False


def judge_torch(cc: tuple[int, int], gpu: str, torch: Mapping[str, Any], fix: str, arches: Arches) -> Finding:
    """The GPU against torch.cuda.get_arch_list() (torch's own kernels)."""
    sm = f"sm_{cc[0]}{cc[1]}"
    arch_list = list(torch.get("arch_list") or [])
    details = {
        "capability": f"{cc[0]}.{cc[1]}",
        "gpu": gpu,
        "torch": torch.get("version"),
        "arch_list": arch_list,
    }
    if not arch_list:
        return Finding("gpu.arch.torch", "skipped", f"torch reports no arch list for {gpu}", details=details)
    if torch_runs_on(cc, arch_list):
        return Finding(
            "gpu.arch.torch",
            "ok",
            f"torch {torch.get('version')} has kernels for {gpu} ({sm})",
            details=details,
        )
    return Finding(
        "gpu.arch.torch",
        "error",
        f"torch {torch.get('version')} has no kernels for {gpu} ({sm}; its arch list: {' '.join(arch_list)}): "
        "CUDA ops fail with 'no kernel image is available for execution on the device'",
        hint=f"{needs_cuda(cc, arches)}: {fix}",
        details=details,
    )


# ---------------------------------------------------------------------------- from the Observation


def gpu_capability(obs: Observation) -> tuple[tuple[int, int] | None, str]:
    """(capability, name) of GPU 0: torch's answer, else nvidia-smi's compute_cap; (None, '') without a GPU."""
    torch = obs.torch
    if torch.get("capability"):
        major, minor = torch["capability"]
        return (int(major), int(minor)), str(torch.get("device") or "GPU 0")
    smi = obs.smi_gpu
    line = smi.out.strip().splitlines()[0] if smi is not None and smi.rc == 0 and smi.out.strip() else ""
    m = re.match(r"^(.*),\s*(\d+)\.(\d+)\s*$", line)
    return ((int(m.group(2)), int(m.group(3))), m.group(1).strip()) if m else (None, "")


def check_gpu(obs: Observation, t: Tables) -> list[Finding]:
    """arch_list.*, gpu.arch.nvcc and gpu.arch.torch."""
    ds = "deepspeed" in obs.for_ or bool(obs.py.get("deepspeed"))
    listed = obs.gpu_arch_list
    nvcc_arches = parse_nvcc_arches(listed.out) if listed is not None and listed.rc == 0 else None
    version = obs.nvcc.version if obs.nvcc else None
    out = judge_arch_list(obs.env.get("TORCH_CUDA_ARCH_LIST"), nvcc_arches, version, t.arches, deepspeed=ds)
    cc, gpu = gpu_capability(obs)
    if cc is None:
        out.append(
            Finding("gpu.arch.nvcc", "skipped", "no GPU visible (torch, nvidia-smi) to check targets for")
        )
        return out
    fix = Hints(obs).gpu(cc, t.arches)
    out.append(judge_nvcc(cc, gpu, nvcc_arches, version, fix, t.arches))
    if obs.torch.get("cuda"):
        out.append(judge_torch(cc, gpu, obs.torch, fix, t.arches))
    return out
