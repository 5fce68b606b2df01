"""Indexes that give no upload times (PEP 700): where the resolution cutoff cannot select.

uv drops every file without an upload time once a cutoff applies (`--exclude-newer`), and warns about each. A static
PEP 503 index (a `file://` folder, a devpi-style mirror, a plain web server) gives none, so a full environment
locked against it had no torch at all. Which index a dropped file came from is asked of uv itself: one `uv pip
compile --no-deps` of the dropped files' projects against each index alone, with the cutoff — an index whose
files uv again finds dateless is one the cutoff cannot apply to. The PyTorch wheel index (a `+cuXYZ` torch) is
known to give none: its torch is exempted by name (envlock.usecases.pypi_lock), the rest has dated copies on the
default index.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from envlock.seams.net import scrub
from envlock.seams.pypi import uv
from envlock.seams.pypi.uvreport import undated_files

_MOST = 16  # projects asked about per round: enough to find an index's dates out


def _indexes(req: Any) -> list[Any]:
    """The indexes whose dates matter: the default and the extra ones, not the PyTorch wheel index."""
    seen, out = set(), []
    for idx in (req.index, *req.extra_indexes):
        if not idx.pytorch and idx.url not in seen:
            seen.add(idx.url)
            out.append(idx)
    return out


def in_play(req: Any) -> tuple[str, ...]:
    """The spec's recorded dateless indexes (envlock.undated_indexes) that this lock still uses."""
    recorded = {scrub(u) for u in req.undated}
    return tuple(dict.fromkeys(scrub(i.canonical) for i in _indexes(req) if scrub(i.canonical) in recorded))


def covers_all(req: Any, urls: Iterable[str]) -> bool:
    """Whether every index whose dates matter is among `urls` (then no cutoff can select anything)."""
    found = set(urls)
    return all(scrub(i.canonical) in found for i in _indexes(req))


def dateless(cache: Path, req: Any, projects: Iterable[str]) -> dict[str, set[str]]:
    """index (canonical, credentials scrubbed) -> which of `projects` it serves without upload times, asked of uv:
    one `uv pip compile --no-deps` per project and index, side by side (a project an index lacks fails a run before
    uv reads any other, so they go one by one)."""
    wanted = sorted(projects)[:_MOST]
    jobs = [(idx, p) for idx in _indexes(req) for p in wanted]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda job: _dateless(cache, req, *job), jobs))
    out: dict[str, set[str]] = {}
    for (idx, project), yes in zip(jobs, answers):
        if yes:
            out.setdefault(scrub(idx.canonical), set()).add(project)
    return out


def _dateless(cache: Path, req: Any, idx: Any, project: str) -> bool:
    """Whether uv, reading `idx` alone with the cutoff, finds files of `project` without an upload time."""
    import sys

    from envlock.errors import ChannelError
    from envlock.seams.pypi.part import python_platform

    where = scrub(idx.canonical)
    args = ["pip", "compile", "-", "--no-config", "--no-header", "--no-deps", "--only-binary", ":all:",
            "--python", sys.executable, "--python-version", req.python,  # never an interpreter uv finds (compile.py)
            "--python-platform", python_platform(req.platforms[0], req.glibc), "--exclude-newer", req.exclude_newer,
            *(["--offline"] if req.offline else [])]
    done = uv.run(args, cache=uv.cache_for(cache, [idx.url]), what=f"asking {where} for upload times",
                  failed=lambda why: ChannelError(f"uv {why} asking {where} for upload times",
                                                  hint="check the network and the index"),
                  stdin=f"{project}\n", environ=uv.index_environ([idx.url]))
    return bool(undated_files(done.stderr))


def note(url: str, cutoff: str | None, projects: Iterable[str] = ()) -> str:
    """What the summary says, once per dateless index: to which packages the cutoff did not apply (all: none given)."""
    when = f" {cutoff}" if cutoff else ""
    names = sorted(projects)
    which = (f"it did not apply to {', '.join(names[:6])}{' …' if len(names) > 6 else ''} (locked by exact version "
             "and sha256)" if names else "the PyPI part is locked without it, by exact version and sha256")
    return (f"{url} gives no upload times, so the resolution cutoff (envlock.exclude_newer{when}) cannot select "
            f"its files: {which}; recorded in the spec (envlock.undated_indexes); a re-lock keeps those pins, "
            "`envlock lock --refresh` moves them")
