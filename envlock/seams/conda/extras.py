"""Why a candidate with `--with` extras failed: which extra has no build for its CUDA minor (solver seam).

Used by envlock.seams.conda.solve after a failed solve only. rattler's own answer ("nothing provides cuda-version
>=13.3,<13.4.0a0 …") names version ranges, not the extra the user asked for; this asks the channel for
each extra's records and reads their `cuda-version` pins, so the message says "--with deepspeed
(profiler-api): cuda-profiler-api has no build for CUDA 12.6 on the channel (it has 12.9, 13.0)".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import rattler
from rattler import Version, VersionSpec

from envlock.models import Candidate
from envlock.names import match_spec_name
from envlock.core.solve_explain import Cause, Slot
from envlock.core.tables import minor_key

_LOWER = re.compile(r">=\s*(\d+\.\d+)")


def _fits(record: rattler.RepoDataRecord, cuda: str) -> tuple[bool, set[str]]:
    """Whether the record's cuda-version pins admit `cuda` (no pin: yes), and the minors they name."""
    pins = [d for d in record.depends if match_spec_name(d) == "cuda-version"]
    if not pins:
        return True, set()
    minors: set[str] = set()
    ok = True
    for dep in pins:
        rng = dep.strip()[len("cuda-version") :].strip()
        minors.update(_LOWER.findall(rng))
        try:
            ok = ok and (not rng or VersionSpec(rng).matches(Version(cuda)))
        except Exception:  # noqa: BLE001, S112 - an odd pin on a record: no verdict from it
            continue
    return ok, minors


async def missing_extras(
    gateway: rattler.Gateway, channels: Sequence[rattler.Channel], platform: str, cand: Candidate
) -> list[Cause]:
    """One cause per extra of `cand` that the channels cannot serve for its CUDA minor (`asked`: the extra's
    name as the user gave it, `package`: the channel's name)."""
    out: list[Cause] = []
    for label, spec in cand.extras:
        res = await gateway.query(list(channels), [platform, "noarch"], [spec], recursive=False)
        records = [r for recs in res for r in recs]
        name = match_spec_name(spec)
        if not records:
            out.append(Cause("lacking-extra", name, (f"--with {label}: {name} is not on the channel", Slot.FOR), label))
            continue
        verdicts = [_fits(r, cand.cuda) for r in records]
        if any(ok for ok, _ in verdicts):
            continue
        have = sorted({m for _, ms in verdicts for m in ms}, key=minor_key)
        tail = f" (it has builds for CUDA {', '.join(have)})" if have else ""
        out.append(Cause("lacking-extra", name, (f"--with {label}: {name} has no build for CUDA ", Slot.CUDA,
                                                 f" on the channel{tail}"), label))
    return out
