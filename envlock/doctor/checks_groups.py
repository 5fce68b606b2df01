"""The optional CUDA header groups an env has, and (`--for deepspeed`) which DeepSpeed ops would build (pure).

Codes:
  header_group.<name>  one per `--with` group of data/extras.yaml: ok when the host compiler sees all its
                       headers, info otherwise (a group is optional; the fix says how to add it); a group
                       beside the toolkit (NCCL, Eigen, …: `beside: true`) only when the env has it
  deepspeed.op.<op>    with `--for deepspeed`: for each JIT op of data/deepspeed_ops.yaml (DeepSpeed
                       0.19.8's op builders, tools/deepspeed_op_headers.py), ok when every CUDA header its
                       sources include is reachable, warning naming the missing headers and their group
                       otherwise; info for ops that need something no CUDA package gives (CUTLASS, …)
A header counts as present when the host compiler sees it (torch's -I dirs, CPATH, the compiler's own
dirs: what a .cpp of the extension sees); one that only nvcc sees (targets/<arch>/include of a
non-activated conda env) is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from envlock.doctor.data import HEADERS, Tables
from envlock.doctor.hints import Hints
from envlock.doctor.observation import Observation
from envlock.models import Finding

CCCL_DIRS = ("cuda/", "cub/", "thrust/", "nv/")


def find(obs: Observation, name: str) -> tuple[Path | None, Path | None]:
    """(path the host compiler sees, path only nvcc sees) of one header."""
    host = next((d / name for _, d in obs.host_dirs if obs.has_file(d, name)), None)
    other = None if host else next((d / name for d in obs.nvcc_dirs if obs.has_file(d, name)), None)
    return host, other


def missing(obs: Observation, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(absent everywhere, present only where nvcc looks)."""
    absent, hidden = [], []
    for n in names:
        host, other = find(obs, n)
        if host is None:
            (hidden if other else absent).append(n)
    return absent, hidden


def base_fix(names: Sequence[str], package: Callable[[str], str | None], hints: Hints) -> str:
    """The fix for missing headers of the default dev set (no `--with` adds them: the env is incomplete):
    "see the header.* findings above" only when check_headers reported one of these very headers."""
    if any(n in HEADERS for n in names):
        return "see the header.* findings above"
    return hints.package(package(names[0]) or "the package that ships it", names[0])


def check_header_groups(obs: Observation, t: Tables) -> list[Finding]:
    """header_group.<name> for every `--with` group."""
    out: list[Finding] = []
    hints = Hints(obs)
    for name, extra in t.extras.extras.items():
        package = (extra.packages.get("cf-split") or (name,))[0]
        absent, hidden = missing(obs, extra.headers)
        if extra.beside and absent:
            continue  # not a toolkit part: its absence is news only to a build that needs it (source.*)
        where = [str(find(obs, h)[0] or find(obs, h)[1]) for h in extra.headers if h not in absent]
        details: dict[str, Any] = {"headers": list(extra.headers), "found": where, "package": package}
        if not absent and not hidden:
            out.append(
                Finding(f"header_group.{name}", "ok", f"{name}: {', '.join(extra.headers)}", details=details)
            )
            continue
        if absent:
            msg = f"{name}: not in this env ({', '.join(absent)}): {extra.what} — extensions including it will not build"
        else:
            msg = f"{name}: {', '.join(hidden)} only where nvcc looks (targets/<arch>/include): a .cpp including it fails"
        out.append(
            Finding(f"header_group.{name}", "info", msg, hint=hints.group(name, package, hidden=not absent),
                    details=details)
        )
    return out


def check_deepspeed(obs: Observation, t: Tables) -> list[Finding]:
    """deepspeed.op.<op> for every DeepSpeed JIT op (only with `--for deepspeed`)."""
    if "deepspeed" not in obs.for_:
        return []
    table, extras, hints = t.deepspeed, t.extras.extras, Hints(obs)
    groups = {h: name for name, e in extras.items() for h in e.headers}
    if t.sources is not None:  # every header of a group, not only its markers (CUTLASS has hundreds)
        headers = {h for row in table["ops"].values() for h in row["cuda_headers"]}
        groups.update({h: p.group for h in headers if (p := t.sources.header(h)).group and not p.default})
    installed = obs.py.get("deepspeed")
    version = table["deepspeed"]
    about = f"DeepSpeed {version}'s op sources" + (
        f" (DeepSpeed {installed} is installed: its ops may include other headers)"
        if installed and installed.split("+")[0] != version
        else ""
    )
    nvcc_major = int(obs.nvcc.minor.split(".")[0]) if obs.nvcc and obs.nvcc.minor else None
    out: list[Finding] = []
    for op, row in table["ops"].items():
        # what the op needs besides CUDA headers (libaio, CUTLASS, a CUDA 13 template error): said either way
        note = row.get("note") if op != "fp_quantizer" or (nvcc_major or 0) >= 13 else None
        need = list(row["cuda_headers"]) + (list(HEADERS) if row.get("torch_cuda_headers") else [])
        need = list(dict.fromkeys(need))
        absent, hidden = missing(obs, need)
        # CCCL (cuda/std/…, cub/, thrust/, nv/) is included from device code, which nvcc compiles: its own
        # -isystem include/cccl is enough (CUDA 13 keeps CCCL there, off the host compiler's path).
        hidden = [h for h in hidden if not h.startswith(CCCL_DIRS)]
        details: dict[str, Any] = {
            "headers": need,
            "missing": absent,
            "only_nvcc_sees": hidden,
            "source": about,
        }
        if absent or hidden:
            by_group: dict[str, list[str]] = {}
            base: list[str] = []
            for h in absent + hidden:
                (by_group.setdefault(groups[h], []) if h in groups else base).append(h)
            parts = [f"{', '.join(hs[:3])}{f' and {len(hs) - 3} more' if len(hs) > 3 else ''} (--with {g})"
                     for g, hs in by_group.items()]  # fmt: skip
            if base:
                more = ", …" if len(base) > 3 else ""
                told = ": see header.*" if any(h in HEADERS for h in base) else ""
                parts.append(f"{len(base)} header(s) of the default set ({', '.join(base[:3])}{more}{told})")
            seen_by_nvcc = " (some only where nvcc looks: activate the env)" if hidden else ""
            extra = list(by_group)
            packages = ", ".join((extras[g].packages.get("cf-split") or (g,))[0] for g in extra)
            with_ = "deepspeed" if set(extra) <= {"curand", "profiler-api"} else " --with ".join(extra)
            package = (lambda h: t.sources.header(h).package) if t.sources is not None else (lambda h: None)
            hint = hints.group(with_, packages, hidden=not absent) if extra else base_fix(base, package, hints)
            also = f"; it also {note}" if note else ""
            msg = f"{op} would fail to build: missing {'; '.join(parts)}{seen_by_nvcc}{also}"
            out.append(Finding(f"deepspeed.op.{op}", "warning", msg, hint=hint, details=details))
            continue
        if note:
            out.append(
                Finding(
                    f"deepspeed.op.{op}",
                    "info",
                    f"{op}: its CUDA headers are here, but it {note}",
                    details=details,
                )
            )
            continue
        out.append(
            Finding(
                f"deepspeed.op.{op}",
                "ok",
                f"{op}: every CUDA header it includes is here ({len(need)})",
                details=details,
            )
        )
    return out
