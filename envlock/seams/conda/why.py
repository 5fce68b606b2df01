"""Why a candidate did not solve, asked of the channel (solver seam; runs after a failed solve only).

Two questions envlock/seams/conda/solve.py asks when a candidate fails:

* what the failure is, in plain words (envlock/core/solve_explain.py), knowing which names the channel has no
  record of at all ("there is no package 'nonexistent' in conda-forge" beats "no candidates were found");
* whether any CUDA minor could change it: the requirements that are not the CUDA toolchain's (python,
  the spec's own extra dependencies, conda-forge's pytorch release) are solved on their own; if they fail
  alone, every other candidate fails the same way, so envlock says so after the first attempt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import rattler
import rattler.exceptions

from envlock.models import Candidate
from envlock.seams.conda.extras import missing_extras
from envlock.names import match_spec_name, strip_credentials
from envlock.core.solve_explain import Attempt, Blocker, Cause, Slot, cause_of

_NO_CANDIDATES = re.compile(r"No candidates were found for (\S+)")
_ROOT = re.compile(r"because of: (\S+)")


def channel_label(channels: Sequence[str]) -> str:
    """conda-forge / `conda-forge, nvidia/label/cuda-11.8.0` / a URL without credentials."""
    return ", ".join(strip_credentials(c).rstrip("/") for c in channels)


async def _absent(gateway: Any, chans: list[Any], platform: str, names: Sequence[str]) -> list[str]:
    """The names among `names` the channels have no record of at all for the platform (or noarch)."""
    if not names:
        return []
    res = await gateway.query(chans, [platform, "noarch"], list(names), recursive=False)
    found = {r.name.normalized for recs in res for r in recs}
    return [n for n in names if n not in found]


async def attempt_of(gateway: Any, chans: list[Any], platform: str, cand: Candidate, raw: str) -> Attempt:
    """The plain-words record of one failed candidate."""
    blamed = await missing_extras(gateway, chans, platform, cand) if cand.extras else []
    if blamed:
        words = tuple(w for i, c in enumerate(blamed) for w in (("; ",) if i else ()) + c.words)
        return Attempt(platform, cand.cuda, "", Cause("lacking-extra", blamed[0].package, words, blamed[0].asked), raw,
                       lacking_extra=True)
    variant = f"with {cand.cudnn}" if cand.cudnn else ("without cuDNN" if cand.relaxed else "")
    absent = await _absent(gateway, chans, platform, sorted({m.group(1) for m in _NO_CANDIDATES.finditer(raw)}))
    return Attempt(platform, cand.cuda, variant, cause_of(raw, channel=channel_label(cand.channels), absent=absent), raw)


def independent_specs(cand: Candidate, extras: Sequence[str]) -> list[str]:
    """The candidate's requirements that no CUDA minor changes: python, the spec's extras, pytorch==X."""
    out = [s for s in cand.specs if match_spec_name(s) == "python"]
    out += [s for s in extras if s not in out]
    torch = next((s for s in cand.specs if match_spec_name(s) == "pytorch"), None)
    if torch is not None:
        out.append(" ".join(torch.split()[:2]))  # the release, any build: its CUDA part is the candidate's
    return out


async def blocker(
    gateway: Any, chans: list[Any], platform: str, cand: Candidate, extras: Sequence[str], *,
    virtual: list[Any], exclude_newer: Any, torch: str | None = None,
) -> Blocker | None:
    """A Blocker when the CUDA-independent requirements do not solve even on their own, else None."""
    specs = independent_specs(cand, extras)
    if not specs:
        return None
    try:
        await rattler.solve(chans, specs, gateway=gateway, platforms=[platform, "noarch"], virtual_packages=virtual,
                            exclude_newer=exclude_newer, timestamp_policy="allow-missing")
    except rattler.exceptions.SolverError as exc:
        raw = str(exc)
    else:
        return None
    channel = channel_label(cand.channels)
    named = [m.group(1) for m in _NO_CANDIDATES.finditer(raw)] or [m.group(1) for m in _ROOT.finditer(raw)]
    culprit = next((s for s in specs if match_spec_name(s) in named), specs[0])
    absent = await _absent(gateway, chans, platform, sorted(set(named)))
    reason = cause_of(raw, channel=channel, absent=absent).words
    name = match_spec_name(culprit)
    if name == "python":
        have = await _pythons(gateway, chans, platform)
        newest = _newest_for(torch, have) or (have[-1] if have else "3.11")
        span = f" (it has {have[0]} to {have[-1]})" if have else ""
        hint = (f"pick a python {channel} builds", Slot.FOR, f"{span}: envlock resolve --python {newest}, "
                "or `python:` in the spec's envlock block")
        return Blocker("python", culprit, reason, hint)
    if name == "pytorch":
        pythons = sorted({m.group(1) for m in re.finditer(r"python >=(\d+\.\d+)", raw)},
                         key=lambda v: tuple(int(p) for p in v.split(".")))
        asked = next((s.split()[1].removesuffix(".*") for s in specs if match_spec_name(s) == "python"), None)
        release = culprit.split()[1].lstrip("=") if len(culprit.split()) > 1 else ""
        if pythons and asked:
            reason = (f"{channel}'s pytorch {release} is built for python {', '.join(pythons)}", Slot.ON,
                      f", not for python {asked}")
        hint = (f"pass --python {pythons[-1]}, or --torch-source pip",) if pythons else (
            f"pick a torch release {channel} builds, or --torch-source pip",)
        return Blocker("pytorch", culprit, reason, hint)
    hint = (f"the spec's dependency `{culprit}` cannot be met from {channel}", Slot.FOR, ": change or drop it in "
            "the spec's dependencies (environments/NAME.yml), or use a --channel that has it")
    return Blocker("extra", culprit, reason, hint)


async def _pythons(gateway: Any, chans: list[Any], platform: str) -> list[str]:
    """CPython X.Y the channels have for the platform, oldest first."""
    res = await gateway.query(chans, [platform, "noarch"], ["python"], recursive=False)
    minors = {".".join(str(r.version).split(".")[:2]) for recs in res for r in recs if r.name.normalized == "python"}
    return sorted((m for m in minors if re.fullmatch(r"3\.\d+", m)), key=lambda v: int(v.split(".")[1]))


def _newest_for(torch: str | None, have: Sequence[str]) -> str | None:
    """The newest of the channel's pythons that the torch release has wheels for (envlock's torch table)."""
    if not torch:
        return None
    from envlock.core.tables import torch_table
    from envlock.core.torch_support import newest_python

    return newest_python(torch_table().python_span(torch), have)
