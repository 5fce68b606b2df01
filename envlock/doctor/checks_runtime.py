"""Checks of what a built extension runs with: the NVIDIA driver and LD_LIBRARY_PATH (pure).

Codes: driver.present, driver.version, ld_library_path.shadowing.
"""

from __future__ import annotations

import re
from typing import Any

from envlock.doctor.data import Tables
from envlock.doctor.hints import Hints
from envlock.doctor.observation import Observation, minor_of, vtuple
from envlock.models import Finding


def driver_version(obs: Observation) -> tuple[str | None, dict[str, Any]]:
    """The NVIDIA driver version from nvidia-smi's answer, else from /proc/driver/nvidia/version."""
    details: dict[str, Any] = {}
    drv = obs.driver
    if drv.smi_path is not None and drv.smi is not None:
        rc, out, err = drv.smi.rc, drv.smi.out, drv.smi.err
        details["nvidia_smi"] = {"path": str(drv.smi_path), "rc": rc, "output": (out or err).strip()[-300:]}
        row = out.strip().splitlines()[0].split(",") if rc == 0 and out.strip() else []
        if row and vtuple(row[0].strip()):
            details["gpu"] = row[1].strip() if len(row) > 1 else None
            return row[0].strip(), details
    text = drv.proc_text
    if text is None:
        return None, details
    m = re.search(r"Kernel Module.*?\s(\d{3,}\.\d+(?:\.\d+)?)\s", text)
    details["proc"] = text.strip().splitlines()[0] if text.strip() else ""
    return (m.group(1) if m else None), details


def check_driver(obs: Observation, t: Tables) -> list[Finding]:
    """driver.present and driver.version (against torch's CUDA and the env's cudart)."""
    version, details = driver_version(obs)
    if version is None:
        present = Finding(
            "driver.present",
            "warning",
            "no NVIDIA driver (no working nvidia-smi, no "
            f"{obs.proc_driver_version}): extensions can be built here but not run",
            hint="fine for CPU-only CI; on a GPU machine install the NVIDIA driver",
            details=details,
        )
        return [
            present,
            Finding("driver.version", "skipped", "no NVIDIA driver to compare with", details=details),
        ]
    gpu = f" ({details['gpu']})" if details.get("gpu") else ""
    present = Finding("driver.present", "ok", f"NVIDIA driver {version}{gpu}", details=details)
    runtimes = {}
    torch_cuda = obs.torch.get("cuda")
    if torch_cuda:
        runtimes[f"torch's CUDA {torch_cuda}"] = minor_of(torch_cuda)
    cudart = obs.cudart.runtime if obs.cudart else None
    if cudart:
        runtimes[f"the env's cudart {cudart}"] = cudart
    worst = []
    for who, minor in runtimes.items():
        if minor is None:
            continue
        floor = t.driver["minor_version_compatibility"].get(minor.split(".")[0])
        full = t.driver["toolkit_driver"].get(minor)
        if floor and vtuple(version) < vtuple(floor):
            worst.append(
                (
                    "error",
                    (
                        f"{who} needs driver >= {floor} (CUDA {minor.split('.')[0]}.x minor-version "
                        f"compatibility); driver is {version}"
                    ),
                )
            )
        elif full and vtuple(version) < vtuple(full):
            worst.append(
                (
                    "warning",
                    (
                        f"{who} runs on driver {version} only through minor-version compatibility "
                        f"(full support from {full}): PTX from a newer toolkit will not JIT"
                    ),
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
                    sev,  # type: ignore[arg-type]  # sev is one of the Literal severities the loop names
                    "; ".join(msgs),
                    hint="update the NVIDIA driver, or use a torch/toolkit of an older CUDA minor",
                    details=vdetails,
                ),
            ]
    what = ", ".join(runtimes) or "no CUDA runtime found to compare"
    return [
        present,
        Finding("driver.version", "ok", f"driver {version} is new enough for {what}", details=vdetails),
    ]


def shadow_entries(obs: Observation) -> list[dict[str, Any]]:
    """Each CUDA library copy on LD_LIBRARY_PATH beside torch's own, graded against torch's version."""
    bundled: dict[str, Any] = obs.py.get("nvidia_libs") or {}
    loaded: dict[str, str] = obs.py.get("loaded") or {}
    out = []
    for copy in obs.lib_copies:
        own = bundled.get(copy.name)
        if own is None:
            continue
        theirs, mine = copy.version, own["version"]
        # Compare only versions of one scheme (libnvtx3interop.so.1.1.0 is not "older" than wheel 13.0.85).
        comparable = theirs is not None and vtuple(theirs)[:1] == vtuple(mine)[:1]
        if not comparable:
            grade = "unknown"
        elif vtuple(theirs)[:2] < vtuple(mine)[:2]:  # type: ignore[arg-type]  # theirs is not None when comparable
            grade = "older-minor"
        elif vtuple(theirs)[:3] < vtuple(mine)[:3]:  # type: ignore[arg-type]  # theirs is not None when comparable
            grade = "older-patch"
        else:
            grade = "same-or-newer"
        out.append(
            {
                "file": str(copy.file),
                "version": theirs,
                "bundled": own["path"],
                "bundled_version": mine,
                "grade": grade,
                "import_torch_loaded": loaded.get(copy.name),
            }
        )
    return out


def check_ld_library_path(obs: Observation, t: Tables) -> list[Finding]:
    """ld_library_path.shadowing: older copies of torch's bundled CUDA libraries on LD_LIBRARY_PATH."""
    bundled = obs.py.get("nvidia_libs") or {}
    entries = shadow_entries(obs)
    details: dict[str, Any] = {
        "LD_LIBRARY_PATH": obs.env.get("LD_LIBRARY_PATH"),
        "bundled": len(bundled),
        "shadowing": entries,
    }
    if not bundled:
        return [
            Finding(
                "ld_library_path.shadowing",
                "ok",
                "no pip-bundled CUDA libraries (site-packages/nvidia) to shadow",
                details=details,
            )
        ]
    hint = (
        f"{Hints(obs).activation()} — envlock appends the env's lib dir after torch's"
        if obs.meta is not None
        else "remove that dir from LD_LIBRARY_PATH, or append it instead of prepending (torch finds its own via RPATH)"
    )
    for grade, severity in (("older-minor", "error"), ("older-patch", "warning"), ("unknown", "warning")):
        hits = [e for e in entries if e["grade"] == grade]
        if not hits:
            continue
        e, more = hits[0], f" (+{len(hits) - 1} more)" if len(hits) > 1 else ""
        took = f"; import torch loaded {e['import_torch_loaded']}" if e["import_torch_loaded"] else ""
        mine = vtuple(e["bundled_version"]) + (0, 0)
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
        return [
            Finding(
                "ld_library_path.shadowing",
                severity,  # type: ignore[arg-type]  # severity is one of the Literal severities set above
                f"LD_LIBRARY_PATH has {e['file']}{shown} beside torch's bundled {e['bundled_version']}{more}"
                f"{took}: {why}",
                hint=hint,
                details=details,
            )
        ]
    return [
        Finding(
            "ld_library_path.shadowing",
            "ok",
            f"nothing on LD_LIBRARY_PATH shadows torch's {len(bundled)} "
            "bundled CUDA libraries with an older copy",
            details=details,
        )
    ]
