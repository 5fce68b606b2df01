"""Which wheel of each package the lock records for a platform (the best tag, as an installer ranks them), at
which URL (a mirror's mapped back to its canonical index, no credentials), in dependency order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from envlock.errors import SolveError
from envlock.models import PypiPackage
from envlock.names import strip_credentials
from envlock.seams.net import scrub
from envlock.seams.pypi.part import index_root, python_platform


def _tag_ranks(platform: str, glibc: str, python: str) -> dict[str, int]:
    """wheel tag -> preference (0 best) on the target, as an installer would rank them."""
    from packaging import tags

    major, minor = (int(x) for x in python.split(".")[:2])
    if platform == "win-64":
        plats = ["win_amd64"]
    else:
        arch = "x86_64" if platform == "linux-64" else "aarch64"
        top = int(glibc.split(".")[1])
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        plats = [f"manylinux_2_{m}_{arch}" for m in range(top, 4, -1)]
        plats += [f"{legacy[m]}_{arch}" for m in legacy if m <= top]
        plats.append(f"linux_{arch}")
    ordered = [*tags.cpython_tags((major, minor), platforms=plats), *tags.compatible_tags((major, minor), f"cp{major}{minor}", plats)]
    ranks: dict[str, int] = {}
    for i, tag in enumerate(ordered):
        ranks.setdefault(str(tag), i)
    return ranks


def _wheel_rank(filename: str, ranks: Mapping[str, int]) -> int | None:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tagset = parse_wheel_filename(filename)[3]
    except (InvalidWheelFilename, ValueError):
        return None
    found = [ranks[str(t)] for t in tagset if str(t) in ranks]
    return min(found) if found else None


def choose_wheels(
    entries: list[dict[str, Any]], vias: Mapping[str, set[str]], platform: str, req: Any
) -> tuple[tuple[PypiPackage, ...], dict[str, str]]:
    """The best wheel of each locked package for the platform (dependency order), and where uv found each."""
    from packaging.utils import canonicalize_name

    ranks = _tag_ranks(platform, req.glibc, req.python)
    names = {str(canonicalize_name(e["name"])) for e in entries}
    out: list[PypiPackage] = []
    fetched: dict[str, str] = {}
    for e in entries:
        name = str(canonicalize_name(e["name"]))
        best = None
        for wheel in e.get("wheels") or ():
            url = str(wheel.get("url") or wheel.get("path") or "")
            sha = (wheel.get("hashes") or {}).get("sha256")
            rank = _wheel_rank(unquote(url.rsplit("/", 1)[-1]), ranks)
            if sha and rank is not None and (best is None or (rank, url) < best[0]):
                best = ((rank, url), url, sha)
        if best is None:
            raise SolveError(
                f"{name} {e.get('version')} has no wheel for {platform} ({python_platform(platform, req.glibc)}, "
                f"python {req.python})",
                hint="envlock installs wheels only: pick a version with a wheel for that platform, or drop the platform",
            )
        deps = tuple(sorted(n for n, parents in vias.items() if name in parents and n in names))
        out.append(PypiPackage(name, str(e["version"]), platform, _canonical_url(best[1], req), best[2], deps))
        fetched[name] = best[1]
    # A dependency-first order (ties by name), as conda's part is written.
    return tuple(_dependency_order(out)), fetched


def _canonical_url(url: str, req: Any) -> str:
    """The URL the lock records: a mirror's prefix mapped back to its canonical index, no credentials."""
    url = strip_credentials(url)  # uv gets each index's login apart from its URL (index_environ)
    if req.mirror_root and url.startswith(strip_credentials(req.mirror_root)):
        name = unquote(url.rsplit("/", 1)[-1])
        if name not in req.mirror_files:
            raise SolveError(f"the pypi mirror does not record where {name} comes from (its wheels.json lacks it)",
                             hint="mirror the lock with `envlock mirror` (it writes wheels.json), or lock against the "
                                  "index itself (PIP_INDEX_URL) instead of pypi=")
        return req.mirror_files[name]
    for idx in (req.index, *req.extra_indexes):
        fetch, canon = strip_credentials(index_root(idx.url)), index_root(idx.canonical)
        if fetch != canon and url.startswith(fetch):
            url = canon + url[len(fetch):]
            break
    return scrub(url)


def _dependency_order(packages: list[PypiPackage]) -> list[PypiPackage]:
    by_name = {p.name: p for p in packages}
    done: set[str] = set()
    out: list[PypiPackage] = []

    def visit(name: str, stack: frozenset[str]) -> None:
        if name in done or name in stack:
            return
        for dep in by_name[name].dependencies:
            visit(dep, stack | {name})
        done.add(name)
        out.append(by_name[name])

    for name in sorted(by_name):
        visit(name, frozenset())
    return out
