"""What uv's stderr says, in envlock's words: one error (its real reason on the error line), the files it found
without an upload date, and the note when the resolution cutoff excluded some of them.

Pure text in, values out (envlock.seams.pypi.compile runs uv and hands its report here).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from envlock.errors import ChannelError, HintPart, SolveError, SpecError, again
from envlock.seams.net import scrub

_UNDATED = re.compile(r"`([^`]+)` is missing an upload date")
_NETWORK = ("Failed to fetch", "error sending request", "Could not connect", "dns error", "Connection refused",
            "Request failed after", "tcp connect error", "timed out", "Failed to read")


def undated_files(stderr: str) -> set[str]:
    """The files uv warned carry no upload date (PEP 700) while a cutoff applied: it dropped each of them."""
    return set(_UNDATED.findall(stderr))


def project_of(filename: str) -> str:
    """The canonical project name of a wheel or sdist file name."""
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, canonicalize_name
    from packaging.utils import parse_sdist_filename, parse_wheel_filename

    try:
        return str(parse_wheel_filename(filename)[0] if filename.endswith(".whl") else parse_sdist_filename(filename)[0])
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return str(canonicalize_name(filename.split("-", 1)[0]))


def upload_date_note(stderr: str) -> str:
    """The note when the cutoff excluded dateless files of an index that has dated copies (the PyTorch wheel index)."""
    first = next(ln for ln in stderr.splitlines() if "missing an upload date" in ln).removeprefix("warning: ")
    return f"some index files carry no upload date, so the resolution cutoff excluded them (uv: {first})"


def _sections(lines: Sequence[str]) -> tuple[str, str, str]:
    """(uv's first `error:` line, its `cause:` text, its own `hint:` text), each on one line, credentials scrubbed."""
    text = scrub(" ".join(lines))
    first = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else "uv failed")
    cause = text.split("cause:", 1)[1].split("hint:", 1)[0] if "cause:" in text else ""
    told = text.split("hint:", 1)[1] if "hint:" in text else ""
    clean = [" ".join(s.replace("╰─▶", "").replace("×", "").split()) for s in (cause, told)]
    return scrub(first.removeprefix("error:").strip()), clean[0], clean[1]


def uv_error(stderr: str, platform: str, req: Any) -> Exception:
    """One envlock error out of uv's report (no solution: 3; index unreachable: 4; else 1). uv's own reason (its
    cause, and its hint where it says why: a cutoff, a missing wheel) is on the error line; the hint names what the
    user wrote only where it is in the conflict."""
    from envlock.core.solve_explain import cap

    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    first, cause, told = _sections(lines)
    text = " ".join(lines)
    if any(n in text for n in _NETWORK) and "No solution found" not in text:
        where = ", ".join(scrub(i.canonical) for i in (*req.extra_indexes, req.index))
        return ChannelError(
            f"cannot reach the package index for the PyPI part of {platform}: {first}",
            hint=f"check the network and the indexes ({where}; from your pip configuration and the torch label), "
            "or --mirror URL=MIRROR, or --offline with a warm cache",
        )
    if "No solution found" in text:  # uv's resolver failed: a requirement (the user's, or against torch's pins)
        reason = cause or first
        if told and ("exclude-newer" in told or "--" not in told):  # why, not an option of uv's to try
            reason += f" (uv: {told.split(' Consider ', 1)[0].rstrip('.')})"
        return SolveError(cap(f"the PyPI part does not resolve on {platform}: {reason}"), hint=_solve_hint(text, platform, req),
                          detail=(f"{platform}, PyPI part (uv):\n" + "\n".join(f"    {ln}" for ln in lines),))
    if "--offline" in text or "offline" in first.lower():
        return ChannelError(f"the PyPI part of {platform} needs the network: {first}",
                            hint="run once without --offline to fill uv's cache")
    said = f"{first}{': ' + cause if cause else ''}"
    if "Python interpreter" in text:  # uv could not run the python it was given (envlock's own)
        return SpecError(f"uv cannot lock the PyPI part of {platform}: {said}",
                         hint="run envlock with a python that the current user can execute (uv inspects it)")
    hint = ("check the `- pip:` requirements of the spec (PEP 508, e.g. einops>=0.7)" if req.users else
            "report it with ENVLOCK_DEBUG=1, or lock only the toolchain: --toolchain-only")
    return SpecError(f"uv cannot lock the PyPI part of {platform}: {said}", hint=hint)


def _solve_hint(text: str, platform: str, req: Any) -> str | tuple[HintPart, ...]:
    """The fix for a failed resolution: what `update` held, the user's own conflicting requirement, the cutoff, or
    (only envlock's own requirements: torch, its pins, ninja) the index that lacks them."""
    from packaging.requirements import InvalidRequirement, Requirement

    held = [f"{p.name}=={p.version}" for p in req.preferences.get(platform, ())]
    if any(pin in text and pin not in req.requirements for pin in held):
        return ("`envlock update` holds every PyPI package it does not name at its locked version: name those that "
                "must move with it too, or re-lock them all with `envlock lock --refresh`")
    mine = []
    for line in req.users:
        try:
            name = Requirement(line).name
        except InvalidRequirement:
            continue
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", text, re.IGNORECASE):
            mine.append(line)
    said = ", ".join(repr(m) for m in mine)
    if "exclude-newer" in text:  # uv filtered dated files by the cutoff: the cutoff, or what asks past it, must move
        needs = f"`- pip:` {said}" if mine else "the requirements"
        return (f"the resolution cutoff (envlock.exclude_newer) predates what {needs} need(s): move it to now with ",
                again(command="lock --refresh", args=()), ", give resolve a later --exclude-newer"
                + (", or relax that requirement" if mine else ""))
    if mine:
        return f"change or drop the conflicting `- pip:` requirement {said}"
    where = scrub(req.index.canonical)
    return (f"the package index ({where}, from your pip configuration) has no wheel that fits envlock's own "
            f"requirements ({', '.join(r for r in req.requirements if r not in req.users)}) for {platform}: point "
            "PIP_INDEX_URL (or pip.conf) at an index that has them, or lock only the toolchain beside your torch: ",
            again("--toolchain-only", drop=("--python", "--pip")))
