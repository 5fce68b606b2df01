"""`--for SOURCE`: would each extension / JIT op of a project's sources build in this env? (pure)

Codes:
  source.<unit>  one per build unit the scan found (a setup.py extension, a JIT load(), an op builder):
                 ok when every CUDA header it includes (through the project's own headers and the torch
                 headers of data/sources.yaml's through_torch) is where the host compiler looks and every
                 CUDA library it links comes with a group the env has; warning naming what is missing and
                 the `--with` group that adds it ("may fail" when only includes under an undecided #if are
                 missing); warning when it includes a header torch no longer ships (fails whatever the
                 toolkit); info when it needs something no `--with` group gives (saying where it comes
                 from, or that the project must carry it), or a header its group puts in a folder of its
                 own (Eigen's include/eigen3) that the build has to add to its include dirs; warning when its project refuses
                 the env's nvcc (envlock/sources/facts.py: an nvcc floor or ceiling the build checks).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from envlock.doctor.checks_groups import CCCL_DIRS, base_fix, find, missing
from envlock.doctor.data import Tables
from envlock.doctor.hints import Hints
from envlock.doctor.observation import Observation
from envlock.models import Finding

_OUTSIDE = ("not_cuda", "unknown", "driver")


def code_of(name: str) -> str:
    """A unit name as a finding code's tail (letters, digits, `._-*`)."""
    return "source." + (re.sub(r"[^\w.*-]+", "_", name) or "_")


def check_sources(obs: Observation, t: Tables) -> list[Finding]:
    """source.<unit> for each unit of each `--for SOURCE` scan."""
    out: list[Finding] = []
    extras, hints = t.extras.extras, Hints(obs)
    group_headers = {g: list(e.headers) for g, e in extras.items()}
    for scan in obs.scans:
        for unit in scan.units:
            out.append(_unit_finding(obs, scan, unit, group_headers, extras, hints))
    return out


def in_subdir(obs: Observation, extras: Any, need: Any) -> str | None:
    """Where a header its group keeps in a folder of its own is (Eigen/Core in <dir>/eigen3), if there."""
    sub = getattr(extras.get(need.provider.group or ""), "include_dir", None)
    if not sub:
        return None
    host, other = find(obs, f"{sub}/{need.name}")
    hit = host or other
    return str(hit)[: -len(need.name) - 1] if hit else None  # <dir>/eigen3/Eigen/Core -> <dir>/eigen3


def _unit_finding(obs: Observation, scan: Any, unit: Any, group_headers: dict[str, list[str]], extras: Any,
                  hints: Hints) -> Finding:  # fmt: skip
    cuda = [n for n in unit.needs if n.provider.kind == "cuda" and n.what == "header"]
    absent, hidden = missing(obs, [n.name for n in cuda])
    hidden = [h for h in hidden if not h.startswith(CCCL_DIRS)]  # nvcc's own -isystem include/cccl is enough
    # a header its group keeps in a folder of its own (Eigen): there, but only a build that adds it finds it
    aside = {n.name: d for n in cuda if n.name in absent for d in [in_subdir(obs, extras, n)] if d}
    lacking = set(absent + hidden) - set(aside)
    libs = []
    for n in unit.needs:
        if n.what == "library" and n.provider.kind == "cuda" and n.provider.group and not n.provider.default:
            if missing(obs, group_headers.get(n.provider.group, []))[0]:
                libs.append(n)  # its group's -dev package (which has libNAME.so) is not in the env
    short = [n for n in cuda if n.name in lacking] + libs
    gone = [n for n in unit.needs if n.provider.kind == "gone"]
    outside = [n for n in unit.needs if n.provider.kind in _OUTSIDE and not n.conditional]
    details: dict[str, Any] = {
        "source": scan.origin, "kind": unit.kind, "where": unit.where, "sources": len(unit.sources),
        "cuda_headers": sorted(n.name for n in cuda), "missing": sorted(lacking),
        "missing_libraries": [n.name for n in libs], "only_nvcc_sees": hidden,
        "groups": unit.groups(), "outside": {n.name: n.provider.why or n.provider.kind for n in outside},
        "gone": {n.name: n.provider.why for n in gone}, "computed_includes": list(unit.computed),
        "in_include_subdir": aside,
        "not_needed": {n.name: n.because for n in unit.skipped},
        "because": {n.name: n.because for n in unit.needs if n.because},
    }  # fmt: skip
    code = code_of(unit.name)
    bound = _nvcc_bound(obs, unit)
    if bound:
        details["nvcc_bound"] = bound
    fetched = [f for f in getattr(unit, "facts", ()) if f.key == "downloads"]
    if fetched:  # a CMake configure step that downloads (FetchContent, CPM): an offline build cannot
        details["downloads"] = [f"{f.value} ({f.where})" for f in fetched]
        unit = dataclasses.replace(unit, note="; ".join(filter(None, [unit.note, "downloads " + ", ".join(
            f"{f.value} ({f.where})" for f in fetched) + " at configure time: an offline build needs them in place"])))
    note = f"; it also {unit.note}" if unit.note else ""
    spared = [n for n in unit.skipped if n.name in set(missing(obs, [s.name for s in unit.skipped])[0])]
    # a group's header the env lacks, but the build's own macros leave out: said, so nobody adds it for nothing
    spared_txt = "; not needed by this build: " + "; ".join(f"{n.name} ({n.because})" for n in spared[:3]) if spared else ""
    note += spared_txt
    note += f"; and {bound}" if bound else ""
    if short:
        # a group of the default dev set (curand) is not a --with to add: the env lacks what every env has
        groups = sorted({n.provider.group for n in short if n.provider.group and not n.provider.default})
        base = any(n.provider.default or not n.provider.group for n in short)
        parts = [f"{n.name}{' (lib)' if n.what == 'library' else ''}" for n in short[:4]]
        more = f" and {len(short) - 4} more" if len(short) > 4 else ""
        sure = all(n.conditional for n in short)
        undecided = f": {short[0].because}" if sure and short[0].because else ""
        verb = f"may fail to build (only under an #if envlock cannot decide{undecided})" if sure else "would fail to build"
        needed = f", needed: {short[0].because}" if short[0].because and not short[0].conditional else ""
        where = f" ({short[0].via}{needed})"
        with_ = " ".join(f"--with {g}" for g in groups)
        msg = f"{unit.name} {verb}: missing {', '.join(parts)}{more}{where}{' → ' + with_ if with_ else ''}{note}"
        packages = ", ".join(dict.fromkeys(n.provider.package or n.name for n in short
                                           if n.provider.group and not n.provider.default))  # fmt: skip
        hint = hints.group(" --with ".join(groups), packages) if groups else _base_fix(short, hints)
        if groups and base:
            hint += "; the default dev set is incomplete too: " + _base_fix(short, hints)
        return Finding(code, "warning", msg, hint=hint, details=details)
    if gone:
        msg = f"{unit.name} fails whatever the toolkit: {gone[0].name} ({gone[0].via}): {gone[0].provider.why}"
        return Finding(code, "warning", msg, details=details)
    if bound:
        return Finding(code, "warning", f"{unit.name} would fail to build: it {bound}", hint=hints.nvcc_for(bound),
                       details=details)  # fmt: skip
    if outside or unit.note or aside:
        what = "; ".join(dict.fromkeys([*(_outside(n) for n in outside),
                                        *(f"{h} from {d}, a folder the build must add to its include dirs "
                                          f"(-I{d}, or CPATH)" for h, d in aside.items())]))  # fmt: skip
        reason = unit.note or f"needs {what}"
        return Finding(code, "info", f"{unit.name}: its CUDA headers are here, but it {reason}{spared_txt}", details=details)
    return Finding(code, "ok", f"{unit.name}: every CUDA header it includes is here ({len(cuda)}){spared_txt}", details=details)


def _base_fix(short: list[Any], hints: Hints) -> str:
    """The fix for missing headers of the default dev set (no `--with` adds them: the env is incomplete)."""
    base = [n for n in short if n.provider.default or not n.provider.group] or short
    packages = {n.name: n.provider.package for n in base}
    return base_fix([n.name for n in base], packages.get, hints)


def _outside(need: Any) -> str:
    """What an outside need is and where it comes from; for a header nothing gives, what to do instead."""
    if need.provider.kind == "driver":
        return f"the NVIDIA driver's lib{need.name} ({need.via})"
    if need.provider.why:
        return f"{need.provider.why} ({need.name}, {need.via})"
    what = "header" if need.what == "header" else "library"
    return (f"{need.name}, a {what} that is not in these sources and that no package envlock knows gives "
            f"({need.via}): if the project carries it (a vendored folder, a git submodule — an sdist may leave "
            "it out), the build must find that folder; else install it where the compiler looks")  # fmt: skip


def _nvcc_bound(obs: Observation, unit: Any) -> str:
    """'needs nvcc >= 11.7 (setup.py:173); this env's is 11.4' when the env's nvcc is outside the versions the
    unit's build accepts (facts.py: the project's own checks), else ''."""
    from envlock.doctor.observation import vtuple

    have = obs.nvcc.version if obs.nvcc else None
    if not have:
        return ""
    for f in getattr(unit, "facts", ()):
        want = vtuple(f.value)
        if f.key == "nvcc_min" and vtuple(have)[: len(want)] < want:
            return f"needs nvcc >= {f.value} ({f.where}); this env's is {have}"
        if f.key == "nvcc_below" and vtuple(have)[: len(want)] >= want:
            return f"needs nvcc < {f.value} ({f.where}); this env's is {have}"
    return ""
