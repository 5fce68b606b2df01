"""The terminal summary of `envlock resolve`: anchor, one table row per platform, then the reasons.

Fits the terminal width (80 columns in CI logs and pipes): the table holds only short values, and
why a platform moved off the exact CUDA minor goes below it as wrapped sentences, never cut mid-word
inside a table cell. Narrower than the table: one `platform: key value, …` line per platform instead.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.names import printable

if TYPE_CHECKING:
    from envlock.usecases.resolve import ResolveResult

HEADERS = ("platform", "CUDA", "nvcc", "gcc ≤", "cuDNN", "pkgs", "PyPI", "skew")


def width() -> int:
    """The terminal's width ($COLUMNS, else 80 where there is no terminal)."""
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def rows(result: ResolveResult) -> list[tuple[str, ...]]:
    from envlock.core.rules import torch_skew

    by_platform = {r.platform: r for r in result.results}
    out = []
    for pp in result.plan.platforms:
        res = by_platform.get(pp.platform)
        cand = res.chosen if res else pp.candidates[0]
        cudnn = (res.version_of("cudnn") if res else None) or (cand.cudnn.split()[-1] if cand.cudnn else "-")
        out.append((
            pp.platform,
            cand.cuda,
            (res.nvcc if res else None) or "-",
            str(cand.gcc_max) if cand.gcc_max else "msvc",
            cudnn,
            str(len(res.packages)) if res else "-",
            _pypi_cell(result, pp.platform),
            torch_skew(result.anchor.own_cuda, cand.cuda) if res else "plan",  # from torch's own CUDA
        ))
    return out


def _pypi_cell(result: ResolveResult, platform: str) -> str:
    """`torch 2.7.1 +24` for the platform's PyPI part ('-' when there is none)."""
    wheels = result.pypi.get(platform, ())
    if not wheels:
        return "-"
    torch = next((w.version for w in wheels if w.name == "torch"), None)
    return f"torch {torch} +{len(wheels) - 1}" if torch else f"{len(wheels)} wheels"


def table(data: Sequence[tuple[str, ...]], cols: int) -> list[str]:
    """Left-aligned columns two spaces apart; per-platform lines when that is wider than `cols`."""
    grid = [HEADERS, *data]
    widths = [max(len(r[i]) for r in grid) for i in range(len(HEADERS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in grid]
    if max(len(ln) for ln in lines) <= cols:
        return lines
    return [f"{r[0]}: " + ", ".join(f"{h} {v}" for h, v in zip(HEADERS[1:], r[1:])) for r in data]


def reasons(result: ResolveResult) -> list[str]:
    """Why each platform is where it is, when that is not simply the exact minor."""
    by_platform = {r.platform: r for r in result.results}
    groups: dict[str, list[str]] = {}  # the same reason on several platforms is said once
    for pp in result.plan.platforms:
        res = by_platform.get(pp.platform)
        if res is None:
            tried = " → ".join(dict.fromkeys(c.cuda for c in pp.candidates))
            groups.setdefault(f"plan only; would try CUDA {tried}", []).append(pp.platform)
            continue
        if res.chosen.skew == "exact" and not res.attempts:
            continue
        chosen = res.chosen
        # the chosen minor's own failed attempts are its cuDNN variants: they say why cuDNN moved, not the minor
        same = list(dict.fromkeys(_without_variant(why) for cuda, why in res.attempts if cuda == chosen.cuda))
        before = list(dict.fromkeys(f"CUDA {cuda}: {_without_variant(why)}" for cuda, why in res.attempts
                                    if cuda != chosen.cuda))
        text = f"CUDA {chosen.cuda} ({chosen.skew}) solved"
        if same:
            variant = f"with {chosen.cudnn}" if chosen.cudnn else "without cuDNN"
            text += f" {variant}, as {'; '.join(same)}"
        if before:
            text += f"{',' if same else ''} after {'; '.join(before)}"
        groups.setdefault(text.replace(f" for {pp.platform}", ""), []).append(pp.platform)
    return [f"{', '.join(platforms)}: {text}" for text, platforms in groups.items()]


def _without_variant(why: str) -> str:
    """An attempt's reason without its cuDNN variant ("with cudnn 9.*: …"): the variants fail alike."""
    head, sep, rest = why.partition(": ")
    return rest if sep and head.startswith(("with cudnn", "without cuDNN")) else why


class PlainConsole:
    """What `render` needs of rich's Console, for a stdout that is not a terminal (rich prints no styles there)."""

    def print(self, line: str, style: str | None = None, markup: bool = False, highlight: bool = False) -> None:
        sys.stdout.write(printable(line) + "\n")


def render(result: ResolveResult, project_dir: Path, console: Any) -> None:
    """Print the summary on `console` (rich), wrapped to the terminal's width (never inside a word)."""
    from envlock.wrapping import lines_of

    cols = width()

    def say(text: str, style: str = "", indent: str = "  ") -> None:
        text = printable(text)  # names from the spec and the channels with control characters escaped
        lead = text[: len(text) - len(text.lstrip(" "))]
        for line in lines_of(text.strip(" "), lead, indent, cols) if len(text) > cols else [text]:
            console.print(line, style=style or None, markup=False, highlight=False)

    a = result.anchor
    cudnn = f", cuDNN {a.cudnn}" if a.cudnn else ""
    if a.torch_cuda:  # an override: torch's own CUDA, then the toolchain's
        say(f"torch {a.torch} (built with CUDA {a.torch_cuda}{cudnn}) → toolchain CUDA {a.cuda} (--cuda)")
    else:
        say(f"torch {a.torch} → CUDA {a.cuda}{cudnn}")
    say(f"  ({a.detail})", "dim", indent="  ")
    for line in table(rows(result), cols):
        say(line, indent="    ")
    for why in reasons(result):
        say(f"why: {why}")
    notes = {n for pp in result.plan.platforms for c in pp.candidates[:1] for n in (*c.notes, *c.complaints)}
    for r in result.results:
        notes.update((*r.chosen.notes, *r.chosen.complaints))
    for note in sorted(notes):
        say(f"note: {note}", "yellow")
    for warning in result.warnings:
        say(f"warning: {warning}", "yellow")
    if result.dry_run:
        say("dry run: nothing solved, nothing written")
        return
    mode = "toolchain only (no python, no PyPI part)" if result.spec.toolchain_only else "full environment"
    say(f"{mode}; resolution cutoff {result.spec.exclude_newer} (envlock.exclude_newer)")
    changed = set(result.written)
    for f in (*result.files, *result.removed):
        try:
            shown = f.resolve().relative_to(project_dir.resolve())
        except ValueError:
            shown = f
        state = "removed" if f in result.removed else "wrote" if f in changed else "unchanged"
        say(f"{state} {shown}" + (" (not in the new lock)" if f in result.removed else ""))
