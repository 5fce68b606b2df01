"""Solve failures in plain words: the root cause first, each said once, short; every attempt kept in full.

rattler answers an unsatisfiable request with a tree ("libcurand-dev * cannot be installed because …
├─ libcurand-dev 10.4.3.29 would require └─ cuda-version >=13.3,<13.4.0a0, for which no candidates
were found"), the same tree for every cuDNN variant of a CUDA minor, and wording that points the wrong
way (the missing thing is libcurand-dev for CUDA 12.8, not cuda-version 13.3). Here each attempt's
tree becomes one sentence ("libcurand-dev has no build for CUDA 12.8 in conda-forge for linux-64 (its
builds are for CUDA 12.6, 12.9, 13.0)"), attempts that say the same are said once, and the message
stays under ~500 characters; the trees themselves go to `detail` (--verbose, --json).

Each sentence is data first (`Cause`: its kind, the package, its words with the platform and the CUDA minor as
slots), and the errors carry their record (`Failure`), so a solve of several platforms says each platform's
reason and hint again without the platform from that record, never by editing the words said for one platform.

Pure: no rattler, no I/O (envlock/seams/conda/why.py asks the channel what these need to know).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Union

from envlock.errors import HintPart, Retry, SolveError
from envlock.names import match_spec_name

#: The default form of an error stays under this (the detail is under --verbose and in --json).
MESSAGE_LIMIT = 500
_NO_CANDIDATES = re.compile(r"No candidates were found for (.+?)\.?$")
_LEAF = re.compile(r"^(.*?), for which no candidates were found\.?$")
_ROOT = re.compile(r"^(?:because of: )?(.+?) cannot be installed because there are no viable options:?$")
_LOWER = re.compile(r">=\s*(\d+(?:\.\d+)?)")
_BUILDS_FOR = re.compile(r"builds for CUDA ([\d., ]+)\)")  # "(it has builds for CUDA 12.6, 12.9)" (seams/conda/extras.py)
_EXCLUDED = re.compile(r"^(\S+) (\S+) is excluded because the package is uploaded after the cutoff date(?: of (.+))?$")
class Slot(Enum):
    """A place in a sentence that the platform or the CUDA minor fills when it is said."""

    CUDA = "cuda"  # the candidate's CUDA minor
    FOR = "for"  # " for linux-64" (nothing when the platform goes without saying)
    ON = "on"  # " on linux-64" (the same)


Words = tuple[Union[str, Slot], ...]


def say(words: Words, platform: str | None, cuda: str = "") -> str:
    """The sentence, its slots filled (platform None: said without the platform)."""
    fill = {Slot.CUDA: cuda, Slot.FOR: f" for {platform}" if platform else "", Slot.ON: f" on {platform}" if platform else ""}
    return "".join(fill[w] if isinstance(w, Slot) else w for w in words)


@dataclass(frozen=True, slots=True)
class Cause:
    """Why one candidate did not solve, as data. `kind`: missing (the channel has no such name), no-match, conflict,
    cutoff, no-build (not for this CUDA minor), python, virtual, no-fit, lacking-extra, other; `package`: the
    package it is about as the channel names it; `asked`: the user's own words for it (a --with extra's name)."""

    kind: str
    package: str | None
    words: Words
    asked: str | None = None

    def said(self, platform: str | None, cuda: str) -> str:
        return say(self.words, platform, cuda)


_VIRTUAL = {"__cuda": "a driver for CUDA {v}", "__glibc": "glibc {v}", "__osx": "macOS {v}", "__linux": "Linux {v}",
            "__win": "Windows", "__unix": "a Unix", "__archspec": "CPU {v}"}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One candidate that did not solve. `why`: its Cause (or a reason already in words)."""

    platform: str
    cuda: str
    variant: str  # "with cudnn 9.7.*", "without cuDNN", or "" (no cuDNN asked for)
    why: Cause | str
    raw: str = ""  # the solver's own text
    lacking_extra: bool = False  # a `--with` extra has no build for this CUDA minor

    @property
    def reason(self) -> str:
        """Plain words, deterministic (what a lock records)."""
        return self.said(self.platform)

    def said(self, platform: str | None) -> str:
        """The reason; `platform` None: without naming the platform (a solve of several says it once)."""
        return self.why.said(platform, self.cuda) if isinstance(self.why, Cause) else self.why

    @property
    def recorded(self) -> tuple[str, str]:
        """(cuda, why) as a lock's plan metadata records it."""
        return self.cuda, f"{self.variant}: {self.reason}" if self.variant else self.reason

    def detail(self) -> str:
        head = f"{self.platform}, CUDA {self.cuda}" + (f" ({self.variant})" if self.variant else "") + f": {self.reason}"
        raw = "\n".join(f"    {ln}" for ln in self.raw.strip().splitlines())
        return head + (f"\n{raw}" if raw else "")

    def key(self) -> str:
        """What it says with its CUDA minor left open: attempts of several minors with one key say the same."""
        return self.why.said(self.platform, "<minor>") if isinstance(self.why, Cause) else self.why

    def names_cuda(self) -> bool:
        """Whether its words name its CUDA minor."""
        return Slot.CUDA in self.why.words if isinstance(self.why, Cause) else f"CUDA {self.cuda}" in self.why


@dataclass(frozen=True, slots=True)
class Blocker:
    """A requirement no CUDA minor can change (python, a spec's extra dependency, conda-forge's pytorch)."""

    kind: str  # "python" | "extra" | "pytorch"
    spec: str
    reason: Words
    hint: Words

    def names_platform(self) -> bool:
        return Slot.FOR in self.reason or Slot.ON in self.reason


@dataclass(frozen=True, slots=True)
class Failure:
    """One platform's failed solve as data, what its error's words are made from (said with or without the
    platform). `blocker`: the first attempt failed on something no CUDA minor changes."""

    platform: str
    attempts: tuple[Attempt, ...]
    lacking: bool = False
    blocker: Blocker | None = None

    def reasons(self, platform: str | None) -> str:
        if self.blocker is not None:
            where = Slot.ON if not self.blocker.names_platform() else ""
            cuda = self.attempts[0].cuda
            return say((*self.blocker.reason, f" (no CUDA minor can change that: envlock stopped after CUDA {cuda}",
                        where, ")"), platform, cuda)
        return _reasons(self.attempts, platform)

    def hint(self, platform: str | None) -> str:
        if self.blocker is not None:
            return say(self.blocker.hint, platform)
        tried = list(dict.fromkeys(a.cuda for a in self.attempts))
        if self.lacking:
            lacking = [a for a in self.attempts if a.lacking_extra and isinstance(a.why, Cause)]
            labels = list(dict.fromkeys(a.why.asked or a.why.package or "" for a in lacking if isinstance(a.why, Cause)))
            have = sorted({m.strip() for a in lacking for ms in _BUILDS_FOR.findall(a.said(None))
                           for m in ms.split(",") if m.strip() and m.strip() not in tried}, key=_version_key)
            named = f"--with {', '.join(filter(None, labels))}" if any(labels) else "an extra asked for with --with"
            pin = f"pin a CUDA minor it has builds for (--cuda {have[-1]}), " if have else ""
            return (f"the channel lacks {named} (or the spec's `with:`) for CUDA {', '.join(tried)}: drop it, "
                    f"{pin}or use a --channel that has it")
        return say(("use a channel that has what these CUDA minors need", Slot.ON, " (--channel, --mirror), "
                    f"or pin a CUDA minor other than {', '.join(tried)} with --cuda"), platform)


# --------------------------------------------------------------------------- one attempt


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _lower_bounds(specs: Iterable[str]) -> list[str]:
    found = {m.group(1) for s in specs for m in [_LOWER.search(s)] if m}
    return sorted(found, key=_version_key)


def plain_reason(raw: str, *, cuda: str, channel: str, platform: str, absent: Iterable[str] = ()) -> str:
    """One deterministic sentence out of rattler's unsatisfiability report for one candidate (cause_of's words)."""
    return cause_of(raw, channel=channel, absent=absent).said(platform, cuda)


def cause_of(raw: str, *, channel: str, absent: Iterable[str] = ()) -> Cause:
    """What rattler's unsatisfiability report for one candidate says, as data.

    `absent`: package names the channel has no record of at all for the platform (asked by the caller).
    """
    text = raw.strip().removeprefix("Cannot solve the request because of:").strip()
    lines = [ln.strip(" │├└─\t") for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    absent = set(absent)
    if not lines:
        return Cause("other", None, ("the solver gave no reason",))
    first = _NO_CANDIDATES.search(lines[0])
    if first and len(lines) == 1:
        spec = first.group(1).strip()
        name = match_spec_name(spec)
        if name in absent:
            return Cause("missing", name, (f"there is no package {name!r} in {channel}", Slot.FOR))
        return Cause("no-match", name, (f"no {spec} in {channel}", Slot.FOR))
    conflicts = sorted({_conflict(lines, i) for i, ln in enumerate(lines) if "conflicts with" in ln})
    if conflicts:
        return Cause("conflict", None, ("; ".join(conflicts),))
    roots = [m.group(1) for ln in lines for m in [_ROOT.match(ln)] if m]
    leaves = sorted({m.group(1).strip() for ln in lines for m in [_LEAF.match(ln)] if m})
    excluded = sorted({(m.group(1), m.group(2)) for ln in lines for m in [_EXCLUDED.match(ln)] if m})
    if not roots and not leaves and not excluded:
        return Cause("other", None, (" / ".join(lines[:2]),))
    root = match_spec_name(roots[0]) if roots else "the request"
    package = root if roots else None
    by_name: dict[str, list[str]] = {}
    for leaf in leaves:
        by_name.setdefault(match_spec_name(leaf), []).append(leaf)
    if excluded and not by_name:  # every build of it came after the spec's resolution cutoff
        names = ", ".join(f"{n} {v}" for n, v in excluded[:3]) + (f" (+{len(excluded) - 3} more)" if len(excluded) > 3 else "")
        return Cause("cutoff", package or excluded[0][0], (
            f"{root} cannot be installed: {names} came into {channel} after the spec's resolution cutoff "
            "(envlock.exclude_newer; `envlock lock --refresh` moves it to now)",))
    if set(by_name) == {"cuda-version"}:
        builds = ", ".join(_lower_bounds(by_name["cuda-version"]))
        return Cause("no-build", package, (f"{root} has no build for CUDA ", Slot.CUDA, f" in {channel}", Slot.FOR,
                                           f" (its builds are for CUDA {builds})"))
    if set(by_name) == {"python"}:
        pythons = ", ".join(_lower_bounds(by_name["python"]))
        return Cause("python", package, (f"{roots[0] if roots else root} needs python {pythons}, "
                                         "which is not what the spec asks for",))
    virtual = sorted(n for n in by_name if n.startswith("__"))
    if virtual and set(by_name) <= {*virtual, "cuda-version"}:
        needs = "; ".join(_virtual_words(leaf) for n in virtual for leaf in by_name[n])
        return Cause("virtual", package, (f"{root} cannot be installed", Slot.ON, " as envlock solves it (CUDA ",
                                          Slot.CUDA, f"): it needs {needs}, a virtual package of the machine that "
                                          "the plan does not give"))
    lacking = [by_name[n][0] for n in by_name if n != "cuda-version"] or [f"{n} {v}" for n, v in excluded]
    if not lacking:
        return Cause("other", package, (" / ".join(lines[:2]),))
    missing = ", ".join(sorted(lacking)[:3]) + (f" (+{len(lacking) - 3} more)" if len(lacking) > 3 else "")
    return Cause("no-fit", package, (f"{root} cannot be installed: {channel} has no {missing} that fits it", Slot.FOR))


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


def _groups(attempts: Sequence[Attempt], platform: str | None) -> list[tuple[str, list[str], bool]]:
    """(reason, CUDA minors, whether it names its minor) with the same reason once, in the order tried (cuDNN
    variants fold in); `platform` None: said without the platform."""
    groups: dict[str, tuple[str, list[str], bool]] = {}
    for a in attempts:
        _, minors, _ = groups.setdefault(a.key(), (a.said(platform), [], a.names_cuda()))
        if a.cuda not in minors:
            minors.append(a.cuda)
    return list(groups.values())


def _reasons(attempts: Sequence[Attempt], platform: str | None) -> str:
    """Every candidate of one platform failed: the reasons once each, root cause first."""
    parts = []
    # a missing cuDNN is what widening/dropping cuDNN answers: the reason that remained without it goes first
    for reason, minors, names_cuda in sorted(_groups(attempts, platform), key=lambda g: g[0].lower().startswith("no cudnn")):
        if not names_cuda:  # the reason names no minor: say which it is for
            parts.append(f"{reason} (CUDA {', '.join(minors)})")
        else:
            others = minors[1:]
            parts.append(reason + (f" (the same for CUDA {', '.join(others)})" if others else ""))
    return "; ".join(parts)


def cap(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """The default form of a message: at most `limit` characters (the rest is in the detail)."""
    return text if len(text) <= limit else text[: limit - 40].rstrip(" ,;") + " … (--verbose: every attempt)"


def _root(attempts: Sequence[Attempt]) -> Cause | None:
    """The cause said first (the one no cuDNN variant changes), as data."""
    causes = [a.why for a in attempts if isinstance(a.why, Cause)]
    return next((c for c in causes if not c.said(None, "").lower().startswith("no cudnn")), causes[0] if causes else None)


def platform_failure(platform: str, attempts: Sequence[Attempt], *, lacking: bool) -> SolveError:
    """Every candidate of one platform failed: the reasons once each, root cause first."""
    failure = Failure(platform, tuple(attempts), lacking)
    root = _root(attempts)
    return SolveError(cap(f"no CUDA toolchain solves on {platform}: " + failure.reasons(platform)),
                      hint=failure.hint(platform), detail=tuple(a.detail() for a in attempts), failures=(failure,),
                      platform=platform, cause=root.kind if root else None, package=root.package if root else None,
                      asked=root.asked if root else None)


def blocked(platform: str, attempt: Attempt, blocker: Blocker) -> SolveError:
    """The first candidate failed on something no CUDA minor changes: say it now, with a hint about it."""
    failure = Failure(platform, (attempt,), blocker=blocker)
    return SolveError(cap(failure.reasons(platform)), hint=failure.hint(platform), detail=(attempt.detail(),),
                      failures=(failure,), platform=platform, cause=blocker.kind, package=match_spec_name(blocker.spec))


# --------------------------------------------------------------------------- several platforms


def combined(failed: Sequence[tuple[str, SolveError]], solved: Sequence[str], all_platforms: Sequence[str]) -> SolveError:
    """One error for a multi-platform solve: the failing platform(s) first; a hint without them. Each platform's
    reason and hint are said again from its record without the platform, and grouped where they are the same."""
    names = [p for p, _ in failed]
    reasons: dict[str, list[str]] = {}
    hints: dict[str, list[str]] = {}
    for platform, err in failed:
        records = err.failures or ()
        reasons.setdefault("; ".join(f.reasons(None) for f in records) or err.message, []).append(platform)
        advice = "; ".join(f.hint(None) for f in records) or err.hint
        if advice:
            hints.setdefault(advice, []).append(platform)
    if len(reasons) == 1:
        body = next(iter(reasons))
    else:
        body = "; ".join(f"{' and '.join(ps)}: {text}" for text, ps in reasons.items())
    ok = f" ({', '.join(solved)} solved; nothing was written)" if solved else " (nothing was written)"
    lead = f"{' and '.join(names)} cannot be solved"
    message = cap(f"{lead}: {body}{ok}")
    # each failing platform's own advice, said once (one platform's hint alone left the others' unsaid)
    advice = next(iter(hints)) if len(hints) == 1 else "; ".join(f"{' and '.join(ps)}: {h}" for h, ps in hints.items())
    rest = [p for p in all_platforms if p not in names]
    hint: tuple[HintPart, ...] = (advice,)
    if rest:
        them = "it" if len(names) == 1 else "them"
        hint = (f"lock the others without {them}: ", Retry(set=tuple(("--platform", p) for p in rest)),
                f" (or drop {them} from the spec's platforms){'; ' + advice if advice else ''}")
    detail = tuple(d for _, err in failed for d in err.detail)
    first = failed[0][1]
    return SolveError(message, hint=hint, detail=detail, failures=tuple(f for _, err in failed for f in err.failures),
                      cause=first.cause, package=first.package, asked=first.asked)
