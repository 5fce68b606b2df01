"""doctor: the optional CUDA header groups an env has, and (`--for deepspeed`) which DeepSpeed ops would build.

Findings (codes are stable):
  header_group.<name>  one per `--with` group of data/extras.yaml: ok when the host compiler sees all its
                       headers, info otherwise (a group is optional; the fix says how to add it)
  deepspeed.op.<op>    with `--for deepspeed`: for each JIT op of data/deepspeed_ops.yaml (DeepSpeed
                       0.19.8's op builders, tools/deepspeed_op_headers.py), ok when every CUDA header its
                       sources include is reachable, warning naming the missing headers and their group
                       otherwise; info for ops that need something no CUDA package gives (CUTLASS, …)
A header counts as present when the host compiler sees it (torch's -I dirs, CPATH, the compiler's own
dirs: what a .cpp of the extension sees); one that only nvcc sees (targets/<arch>/include of a
non-activated conda env) is reported as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any


from envlock.models import Finding
from envlock.tables import deepspeed_ops_table

if TYPE_CHECKING:
    from envlock.doctor import Context

FOR_CHOICES = ("deepspeed",)
CCCL_DIRS = ("cuda/", "cub/", "thrust/", "nv/")


class Headers:
    """Where each header is, as the host compiler and as nvcc see it (searched once per name)."""

    def __init__(self, ctx: Context) -> None:
        from envlock.doctor import _other_dirs, host_include_dirs

        self.host = [d for _, d in host_include_dirs(ctx)]
        self.nvcc_only = _other_dirs(ctx)
        self._seen: dict[str, tuple[Path | None, Path | None]] = {}

    def find(self, name: str) -> tuple[Path | None, Path | None]:
        """(path the host compiler sees, path only nvcc sees)."""
        if name not in self._seen:
            host = next((d / name for d in self.host if (d / name).is_file()), None)
            other = None if host else next((d / name for d in self.nvcc_only if (d / name).is_file()), None)
            self._seen[name] = (host, other)
        return self._seen[name]

    def missing(self, names: Sequence[str]) -> tuple[list[str], list[str]]:
        """(absent everywhere, present only where nvcc looks)."""
        absent, hidden = [], []
        for n in names:
            host, other = self.find(n)
            if host is None:
                (hidden if other else absent).append(n)
        return absent, hidden


def _add_hint(ctx: Context, group: str, package: str) -> str:
    """How to get a group: re-plan with --with for an envlock env, else the conda-forge package."""
    from envlock.doctor import _activation_hint, _anchor

    torch = _anchor(ctx).get("torch")
    meta = ctx.meta or {}
    if meta.get("env_name") and meta.get("lock_path") and ctx.prefix is not None:
        # the spec keeps its other `with:` entries: add this one there and re-lock (a fresh resolve would drop them)
        return (
            f"add {group} to `with:` in environments/{meta['env_name']}.yml, then: envlock lock && "
            f"envlock create --lock {meta['lock_path']} -p {ctx.prefix}  (adds {package})"
        )
    if ctx.meta is not None and torch:
        return f"envlock resolve --torch {torch} --with {group} && envlock create  (adds {package})"
    if ctx.prefix is not None:
        return f"add the conda-forge package {package} to {ctx.prefix}" + (
            f", or activate it: {_activation_hint(ctx)}" if not ctx.active else ""
        )
    installed = "installed" if (ctx.py.get("torch") or {}).get("cuda") else "VERSION"  # no torch here to ask
    return f"install {package} (conda-forge, or the CUDA toolkit's component), or: envlock resolve --torch {installed} --with {group}"


def check_header_groups(ctx: Context, headers: Headers) -> list[Finding]:
    from envlock.tables import extras_tables

    out: list[Finding] = []
    for name, extra in extras_tables().extras.items():
        package = (extra.packages.get("cf-split") or (name,))[0]
        absent, hidden = headers.missing(extra.headers)
        where = [str(headers.find(h)[0] or headers.find(h)[1]) for h in extra.headers if h not in absent]
        details: dict[str, Any] = {"headers": list(extra.headers), "found": where, "package": package}
        if not absent and not hidden:
            out.append(Finding(f"header_group.{name}", "ok", f"{name}: {', '.join(extra.headers)}", details=details))
            continue
        if absent:
            msg = f"{name}: not in this env ({', '.join(absent)}): {extra.what} — extensions including it will not build"
        else:
            msg = f"{name}: {', '.join(hidden)} only where nvcc looks (targets/<arch>/include): a .cpp including it fails"
        out.append(Finding(f"header_group.{name}", "info", msg, hint=_add_hint(ctx, name, package), details=details))
    return out


def check_deepspeed(ctx: Context, headers: Headers) -> list[Finding]:
    from envlock.doctor import HEADERS
    from envlock.tables import extras_tables

    table = deepspeed_ops_table()
    groups = {h: name for name, e in extras_tables().extras.items() for h in e.headers}
    installed = ctx.py.get("deepspeed")
    version = table["deepspeed"]
    about = f"DeepSpeed {version}'s op sources" + (
        f" (DeepSpeed {installed} is installed: its ops may include other headers)"
        if installed and installed.split("+")[0] != version
        else ""
    )
    nvcc_major = int(ctx.nvcc.minor.split(".")[0]) if ctx.nvcc and ctx.nvcc.minor else None
    out: list[Finding] = []
    for op, row in table["ops"].items():
        need = list(row["cuda_headers"]) + (list(HEADERS) if row.get("torch_cuda_headers") else [])
        need = list(dict.fromkeys(need))
        absent, hidden = headers.missing(need)
        # CCCL (cuda/std/…, cub/, thrust/, nv/) is included from device code, which nvcc compiles: its own
        # -isystem include/cccl is enough (CUDA 13 keeps CCCL there, off the host compiler's path).
        hidden = [h for h in hidden if not h.startswith(CCCL_DIRS)]
        details: dict[str, Any] = {"headers": need, "missing": absent, "only_nvcc_sees": hidden, "source": about}
        if absent or hidden:
            by_group: dict[str, list[str]] = {}
            base: list[str] = []
            for h in absent + hidden:
                (by_group.setdefault(groups[h], []) if h in groups else base).append(h)
            parts = [f"{', '.join(hs)} (--with {g})" for g, hs in by_group.items()]
            if base:
                more = ", …" if len(base) > 3 else ""
                parts.append(f"{len(base)} header(s) of the default set ({', '.join(base[:3])}{more}: see header.*)")
            seen_by_nvcc = " (some only where nvcc looks: activate the env)" if hidden else ""
            extra = list(by_group)
            packages = ", ".join((extras_tables().extras[g].packages.get("cf-split") or (g,))[0] for g in extra)
            with_ = "deepspeed" if set(extra) <= {"curand", "profiler-api"} else " --with ".join(extra)
            hint = _add_hint(ctx, with_, packages) if extra else "see the header.* findings above"
            msg = f"{op} would fail to build: missing {'; '.join(parts)}{seen_by_nvcc}"
            out.append(Finding(f"deepspeed.op.{op}", "warning", msg, hint=hint, details=details))
            continue
        note = row.get("note")
        if note and (op != "fp_quantizer" or (nvcc_major or 0) >= 13):
            out.append(Finding(f"deepspeed.op.{op}", "info", f"{op}: its CUDA headers are here, but it {note}", details=details))
            continue
        out.append(Finding(f"deepspeed.op.{op}", "ok", f"{op}: every CUDA header it includes is here ({len(need)})", details=details))
    return out


def checks(ctx: Context, for_: Sequence[str] = ()) -> list[Finding]:
    """Every finding of this module for a gathered doctor Context."""
    headers = Headers(ctx)
    out = check_header_groups(ctx, headers)
    if "deepspeed" in for_:
        out += check_deepspeed(ctx, headers)
    return out
