"""doctor: can this env build for the GPU? TORCH_CUDA_ARCH_LIST, `nvcc --list-gpu-arch`, torch's arch list.

Findings (codes are stable):
  arch_list.deepspeed  TORCH_CUDA_ARCH_LIST entries DeepSpeed's builder cannot parse ("9.0a": its
                       compute_capability_args does int("0a") and every JIT op dies with a ValueError)
  arch_list.nvcc       entries the env's nvcc cannot target (torch's build then fails with "nvcc fatal :
                       Unsupported gpu architecture")
  gpu.arch.nvcc        the GPU's compute capability against the env nvcc's `--list-gpu-arch`
  gpu.arch.torch       the GPU against torch.cuda.get_arch_list() (torch's own kernels)
The verdicts come from the programs' answers; data/gpu_arch.yaml only words the fix (which CUDA a
capability needs). The judge_* functions are pure: tests feed them recorded observations.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any


from envlock.models import Finding
from envlock.tables import gpu_arch_table

if TYPE_CHECKING:
    from envlock.doctor import Context

DS_PARSEABLE = re.compile(r"^\d+\.\d+(\+PTX)?$")  # DeepSpeed 0.19.8 compute_capability_args
ARCH_ENTRY = re.compile(r"^(\d+)\.(\d+)([af]?)(\+PTX)?$")  # what torch's _get_cuda_arch_flags turns into -gencode
DS_FIX_NOTE = "DeepSpeed accepts X.Y and X.Y+PTX only; its ops need no arch-specific (a/f) variant"


def entries(value: str) -> list[str]:
    """TORCH_CUDA_ARCH_LIST split as torch and DeepSpeed split it (';' or whitespace)."""
    return [e for e in value.replace(" ", ";").split(";") if e.strip()]


def parse_nvcc_arches(text: str) -> set[int] | None:
    """`nvcc --list-gpu-arch` → {75, 80, …, 121}; None when it printed no compute_XY."""
    found = {int(n) for n in re.findall(r"\bcompute_(\d+)\b", text)}
    return found or None


def needs_cuda(cc: tuple[int, int]) -> str:
    """One phrase: which CUDA toolkits can build for this capability (from data/gpu_arch.yaml)."""
    row = gpu_arch_table().get(f"{cc[0]}.{cc[1]}")
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
    value: str | None, nvcc_arches: set[int] | None, nvcc_version: str | None, *, deepspeed: bool
) -> list[Finding]:
    """TORCH_CUDA_ARCH_LIST against DeepSpeed's parser and the nvcc's targets."""
    if not value or value.strip() == "native":
        what = "unset" if not value else "native"
        return [Finding("arch_list.deepspeed", "ok", f"TORCH_CUDA_ARCH_LIST {what}: builds target the visible GPU")]
    items = entries(value)
    details: dict[str, Any] = {"value": value, "entries": items}
    bad = [e for e in items if not DS_PARSEABLE.match(e)]
    out: list[Finding] = []
    if bad:
        fixed = ";".join(dict.fromkeys(_ds_form(e) for e in items if _ds_form(e)))
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
        out.append(Finding("arch_list.deepspeed", "ok", f"TORCH_CUDA_ARCH_LIST={value}: DeepSpeed parses it", details=details))
    if nvcc_arches is None:
        return out
    cannot = [e for e in items if (b := _base(e)) and b[0] * 10 + b[1] not in nvcc_arches]
    if cannot:
        first = _base(cannot[0])
        assert first is not None
        out.append(
            Finding(
                "arch_list.nvcc",
                "error",
                f"nvcc {nvcc_version} cannot build TORCH_CUDA_ARCH_LIST entries {', '.join(cannot)} (not in its "
                "--list-gpu-arch): torch's build fails with 'nvcc fatal : Unsupported gpu architecture'",
                hint=f"{needs_cuda(first)}; or drop {', '.join(cannot)} from TORCH_CUDA_ARCH_LIST",
                details={**details, "nvcc_arches": sorted(nvcc_arches)},
            )
        )
    else:
        out.append(Finding("arch_list.nvcc", "ok", f"nvcc {nvcc_version} can build every TORCH_CUDA_ARCH_LIST entry"))
    return out


def judge_nvcc(
    cc: tuple[int, int], gpu: str, nvcc_arches: set[int] | None, nvcc_version: str | None, fix: str
) -> Finding:
    """The GPU's capability against what the env's nvcc lists."""
    sm = f"sm_{cc[0]}{cc[1]}"
    details: dict[str, Any] = {"capability": f"{cc[0]}.{cc[1]}", "gpu": gpu, "nvcc": nvcc_version}
    if nvcc_arches is None:
        return Finding("gpu.arch.nvcc", "skipped", f"{gpu} is {sm}; nvcc did not list its targets", details=details)
    details["nvcc_arches"] = sorted(nvcc_arches)
    if cc[0] * 10 + cc[1] in nvcc_arches:
        return Finding("gpu.arch.nvcc", "ok", f"{gpu} is {sm}: nvcc {nvcc_version} can build for it", details=details)
    return Finding(
        "gpu.arch.nvcc",
        "error",
        f"nvcc {nvcc_version} cannot build for {gpu} ({sm}: compute_{cc[0]}{cc[1]} is not in its --list-gpu-arch); "
        "every extension build for this GPU fails",
        hint=f"{needs_cuda(cc)}: {fix}",
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


def judge_torch(cc: tuple[int, int], gpu: str, torch: dict[str, Any], fix: str) -> Finding:
    """The GPU against torch.cuda.get_arch_list() (torch's own kernels)."""
    sm = f"sm_{cc[0]}{cc[1]}"
    arch_list = list(torch.get("arch_list") or [])
    details = {"capability": f"{cc[0]}.{cc[1]}", "gpu": gpu, "torch": torch.get("version"), "arch_list": arch_list}
    if not arch_list:
        return Finding("gpu.arch.torch", "skipped", f"torch reports no arch list for {gpu}", details=details)
    if torch_runs_on(cc, arch_list):
        return Finding("gpu.arch.torch", "ok", f"torch {torch.get('version')} has kernels for {gpu} ({sm})", details=details)
    return Finding(
        "gpu.arch.torch",
        "error",
        f"torch {torch.get('version')} has no kernels for {gpu} ({sm}; its arch list: {' '.join(arch_list)}): "
        "CUDA ops fail with 'no kernel image is available for execution on the device'",
        hint=f"{needs_cuda(cc)}: {fix}",
        details=details,
    )


# ----------------------------------------------------------------------------------------- gather


def nvcc_arches(ctx: Context) -> set[int] | None:
    """The env nvcc's `--list-gpu-arch` (None: no working nvcc, or one too old to list)."""
    from envlock.doctor import _run

    if ctx.nvcc is None or ctx.nvcc.error:
        return None
    if "nvcc_arches" not in ctx.notes:
        rc, out, err = _run([str(ctx.nvcc.path), "--list-gpu-arch"], ctx.env, timeout=60)
        ctx.notes["nvcc_arches"] = parse_nvcc_arches(out) if rc == 0 else None
    return ctx.notes["nvcc_arches"]


def gpu_capability(ctx: Context) -> tuple[tuple[int, int] | None, str]:
    """(capability, name) of GPU 0: torch's answer, else nvidia-smi's compute_cap; (None, '') without a GPU."""
    from envlock.doctor import _run

    torch = ctx.py.get("torch") or {}
    if torch.get("capability"):
        major, minor = torch["capability"]
        return (int(major), int(minor)), str(torch.get("device") or "GPU 0")
    rc, out, _ = _run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"], ctx.env, timeout=30)
    line = out.strip().splitlines()[0] if rc == 0 and out.strip() else ""
    m = re.match(r"^(.*),\s*(\d+)\.(\d+)\s*$", line)
    return ((int(m.group(2)), int(m.group(3))), m.group(1).strip()) if m else (None, "")


def _fix(ctx: Context, cc: tuple[int, int]) -> str:
    row = gpu_arch_table().get(f"{cc[0]}.{cc[1]}") or {}
    first, last = row.get("first"), row.get("last")
    target = f"CUDA ≤ {last}" if last else f"CUDA ≥ {first}" if first else "a newer CUDA"
    if ctx.meta is not None or ctx.mode == "prefix":
        return f"use a torch built for {target}, then re-plan this env: envlock resolve --torch installed && envlock create"
    return f"install a torch built for {target} and a matching toolkit (envlock resolve --torch installed && envlock create)"


def checks(ctx: Context, *, deepspeed: bool = False) -> list[Finding]:
    """Every finding of this module for a gathered doctor Context."""
    ds = deepspeed or bool(ctx.py.get("deepspeed"))
    arches = nvcc_arches(ctx)
    version = ctx.nvcc.version if ctx.nvcc else None
    out = judge_arch_list(ctx.env.get("TORCH_CUDA_ARCH_LIST"), arches, version, deepspeed=ds)
    cc, gpu = gpu_capability(ctx)
    if cc is None:
        out.append(Finding("gpu.arch.nvcc", "skipped", "no GPU visible (torch, nvidia-smi) to check targets for"))
        return out
    out.append(judge_nvcc(cc, gpu, arches, version, _fix(ctx, cc)))
    torch = ctx.py.get("torch") or {}
    if torch.get("cuda"):
        out.append(judge_torch(cc, gpu, torch, _fix(ctx, cc)))
    return out
