"""Solve failures in plain words: the root cause first, each said once, short; every attempt kept in full.

rattler answers an unsatisfiable request with a tree ("libcurand-dev * cannot be installed because …
├─ libcurand-dev 10.4.3.29 would require └─ cuda-version >=13.3,<13.4.0a0, for which no candidates
were found"), the same tree for every cuDNN variant of a CUDA minor, and wording that points the wrong
way (the missing thing is libcurand-dev for CUDA 12.8, not cuda-version 13.3). Here each attempt's
tree becomes one sentence ("libcurand-dev has no build for CUDA 12.8 in conda-forge for linux-64 (its
builds are for CUDA 12.6, 12.9, 13.0)"), attempts that say the same are said once, and the message
stays under ~500 characters; the trees themselves go to `detail` (--verbose, --json).

Pure: no rattler, no I/O (envlock/conda/why.py asks the channel what these need to know).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envlock.errors import HintPart, Retry, SolveError
from envlock.names import match_spec_name

#: The default form of an error stays under this (the detail is under --verbose and in --json).
MESSAGE_LIMIT = 500
_NO_CANDIDATES = re.compile(r"No candidates were found for (.+?)\.?$")
_LEAF = re.compile(r"^(.*?), for which no candidates were found\.?$")
_ROOT = re.compile(r"^(?:because of: )?(.+?) cannot be installed because there are no viable options:?$")
_LOWER = re.compile(r">=\s*(\d+(?:\.\d+)?)")
_EXCLUDED = re.compile(r"^(\S+) (\S+) is excluded because the package is uploaded after the cutoff date(?: of (.+))?$")
_VIRTUAL = {"__cuda": "a driver for CUDA {v}", "__glibc": "glibc {v}", "__osx": "macOS {v}", "__linux": "Linux {v}",
            "__win": "Windows", "__unix": "a Unix", "__archspec": "CPU {v}"}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One candidate that did not solve."""

    platform: str
    cuda: str
    variant: str  # "with cudnn 9.7.*", "without cuDNN", or "" (no cuDNN asked for)
    reason: str  # plain words, deterministic (what a lock records)
    raw: str = ""  # the solver's own text
    lacking_extra: bool = False  # a `--with` extra has no build for this CUDA minor

    @property
    def recorded(self) -> tuple[str, str]:
        """(cuda, why) as a lock's plan metadata records it."""
        return self.cuda, f"{self.variant}: {self.reason}" if self.variant else self.reason

    def detail(self) -> str:
        head = f"{self.platform}, CUDA {self.cuda}" + (f" ({self.variant})" if self.variant else "") + f": {self.reason}"
        raw = "\n".join(f"    {ln}" for ln in self.raw.strip().splitlines())
        return head + (f"\n{raw}" if raw else "")


@dataclass(frozen=True, slots=True)
class Blocker:
    """A requirement no CUDA minor can change (python, a spec's extra dependency, conda-forge's pytorch)."""

    kind: str  # "python" | "extra" | "pytorch"
    spec: str
    reason: str
    hint: str


# --------------------------------------------------------------------------- one attempt


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _lower_bounds(specs: Iterable[str]) -> list[str]:
    found = {m.group(1) for s in specs for m in [_LOWER.search(s)] if m}
    return sorted(found, key=_version_key)


def plain_reason(raw: str, *, cuda: str, channel: str, platform: str, absent: Iterable[str] = ()) -> str:
    """One deterministic sentence out of rattler's unsatisfiability report for one candidate.

    `absent`: package names the channel has no record of at all for the platform (asked by the caller).
    """
    text = raw.strip().removeprefix("Cannot solve the request because of:").strip()
    lines = [ln.strip(" │├└─\t") for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    absent = set(absent)
    if not lines:
        return "the solver gave no reason"
    first = _NO_CANDIDATES.search(lines[0])
    if first and len(lines) == 1:
        spec = first.group(1).strip()
        name = match_spec_name(spec)
        if name in absent:
            return f"there is no package {name!r} in {channel} for {platform}"
        return f"no {spec} in {channel} for {platform}"
    conflicts = sorted({_conflict(lines, i) for i, ln in enumerate(lines) if "conflicts with" in ln})
    if conflicts:
        return "; ".join(conflicts)
    roots = [m.group(1) for ln in lines for m in [_ROOT.match(ln)] if m]
    leaves = sorted({m.group(1).strip() for ln in lines for m in [_LEAF.match(ln)] if m})
    excluded = sorted({(m.group(1), m.group(2)) for ln in lines for m in [_EXCLUDED.match(ln)] if m})
    if not roots and not leaves and not excluded:
        return " / ".join(lines[:2])
    root = match_spec_name(roots[0]) if roots else "the request"
    by_name: dict[str, list[str]] = {}
    for leaf in leaves:
        by_name.setdefault(match_spec_name(leaf), []).append(leaf)
    if excluded and not by_name:  # every build of it came after the spec's resolution cutoff
        names = ", ".join(f"{n} {v}" for n, v in excluded[:3]) + (f" (+{len(excluded) - 3} more)" if len(excluded) > 3 else "")
        return (f"{root} cannot be installed: {names} came into {channel} after the spec's resolution cutoff "
                "(envlock.exclude_newer; `envlock lock --refresh` moves it to now)")
    if set(by_name) == {"cuda-version"}:
        builds = ", ".join(_lower_bounds(by_name["cuda-version"]))
        return f"{root} has no build for CUDA {cuda} in {channel} for {platform} (its builds are for CUDA {builds})"
    if set(by_name) == {"python"}:
        pythons = ", ".join(_lower_bounds(by_name["python"]))
        return f"{roots[0] if roots else root} needs python {pythons}, which is not what the spec asks for"
    virtual = sorted(n for n in by_name if n.startswith("__"))
    if virtual and set(by_name) <= {*virtual, "cuda-version"}:
        needs = "; ".join(_virtual_words(leaf) for n in virtual for leaf in by_name[n])
        return (f"{root} cannot be installed on {platform} as envlock solves it (CUDA {cuda}): it needs {needs}, "
                "a virtual package of the machine that the plan does not give")
    names = [by_name[n][0] for n in by_name if n != "cuda-version"] or [f"{n} {v}" for n, v in excluded]
    if not names:
        return " / ".join(lines[:2])
    missing = ", ".join(sorted(names)[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
    return f"{root} cannot be installed: {channel} has no {missing} that fits it for {platform}"


def _virtual_words(leaf: str) -> str:
    """`__cuda >=12.8` as `__cuda >=12.8 (a driver for CUDA 12.8)`."""
    name, _, rest = leaf.partition(" ")
    version = next(iter(_lower_bounds([rest])), rest.strip() or "")
    what = _VIRTUAL.get(name, "")
    return f"{leaf} ({what.format(v=version).strip()})" if what else leaf


def _conflict(lines: Sequence[str], i: int) -> str:
    """`A would constrain B, which conflicts with …` as `A conflicts with B`."""
    what = lines[i].split(", which conflicts", 1)[0]
    parent = lines[i - 1] if i and lines[i - 1].endswith(("would constrain", "would require")) else ""
    parent = parent.removesuffix(" would constrain").removesuffix(" would require")
    return f"{parent} needs {what}, which conflicts with the rest" if parent else f"{what} conflicts with the rest"


# --------------------------------------------------------------------------- one platform


def _groups(attempts: Sequence[Attempt]) -> list[tuple[str, list[str]]]:
    """(reason, CUDA minors) with the same reason once, in the order tried (cuDNN variants fold in)."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for a in attempts:
        key = a.reason.replace(f"CUDA {a.cuda}", "CUDA <minor>")
        _, minors = groups.setdefault(key, (a.reason, []))
        if a.cuda not in minors:
            minors.append(a.cuda)
    return list(groups.values())


def cap(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """The default form of a message: at most `limit` characters (the rest is in the detail)."""
    return text if len(text) <= limit else text[: limit - 40].rstrip(" ,;") + " … (--verbose: every attempt)"


def platform_failure(platform: str, attempts: Sequence[Attempt], *, lacking: bool) -> SolveError:
    """Every candidate of one platform failed: the reasons once each, root cause first."""
    parts = []
    # a missing cuDNN is what widening/dropping cuDNN answers: the reason that remained without it goes first
    for reason, minors in sorted(_groups(attempts), key=lambda g: g[0].lower().startswith("no cudnn")):
        others = [m for m in minors if f"CUDA {m}" not in reason]
        if len(others) == len(minors):  # the reason names no minor: say which it is for
            parts.append(f"{reason} (CUDA {', '.join(minors)})")
        else:
            parts.append(reason + (f" (the same for CUDA {', '.join(others)})" if others else ""))
    message = cap(f"no CUDA toolchain solves on {platform}: " + "; ".join(parts))
    if lacking:
        hint = (
            "the channel lacks an extra asked for with --with (or the spec's `with:`) for these CUDA minors: "
            "drop it, or pin a CUDA minor that has it (envlock resolve --cuda X.Y) or use a --channel that has it"
        )
    else:
        hint = (
            f"use a channel that has what these CUDA minors need on {platform} (--channel, --mirror), "
            "or pin another CUDA minor (envlock resolve --cuda X.Y)"
        )
    return SolveError(message, hint=hint, detail=tuple(a.detail() for a in attempts))


def blocked(platform: str, attempt: Attempt, blocker: Blocker) -> SolveError:
    """The first candidate failed on something no CUDA minor changes: say it now, with a hint about it."""
    where = "" if platform in blocker.reason else f" on {platform}"
    message = cap(f"{blocker.reason} (no CUDA minor can change that: envlock stopped after CUDA {attempt.cuda}{where})")
    return SolveError(message, hint=blocker.hint, detail=(attempt.detail(),))


# --------------------------------------------------------------------------- several platforms


def combined(failed: Sequence[tuple[str, SolveError]], solved: Sequence[str], all_platforms: Sequence[str]) -> SolveError:
    """One error for a multi-platform solve: the failing platform(s) first; a hint without them."""
    names = [p for p, _ in failed]
    reasons: dict[str, list[str]] = {}
    for platform, err in failed:
        text = err.message.replace(f" on {platform}", "").replace(f" for {platform}", "")
        reasons.setdefault(text.removeprefix("no CUDA toolchain solves: "), []).append(platform)
    if len(reasons) == 1:
        body = next(iter(reasons))
    else:
        body = "; ".join(f"{' and '.join(ps)}: {text}" for text, ps in reasons.items())
    ok = f" ({', '.join(solved)} solved; nothing was written)" if solved else " (nothing was written)"
    lead = f"{' and '.join(names)} cannot be solved"
    message = cap(f"{lead}: {body}{ok}")
    # each failing platform's own advice, said once (one platform's hint alone left the others' unsaid)
    hints: dict[str, list[str]] = {}
    for platform, err in failed:
        if err.hint:  # the platform's name in its own hint is said by the grouping
            hints.setdefault(err.hint.replace(f" on {platform}", "").replace(f" for {platform}", ""), []).append(platform)
    advice = next(iter(hints)) if len(hints) == 1 else "; ".join(f"{' and '.join(ps)}: {h}" for h, ps in hints.items())
    rest = [p for p in all_platforms if p not in names]
    hint: tuple[HintPart, ...] = (advice,)
    if rest:
        them = "it" if len(names) == 1 else "them"
        hint = (f"lock the others without {them}: ", Retry(set=tuple(("--platform", p) for p in rest)),
                f" (or drop {them} from the spec's platforms){'; ' + advice if advice else ''}")
    detail = tuple(d for _, err in failed for d in err.detail)
    return SolveError(message, hint=hint, detail=detail)
