"""Locking the PyPI part of a full environment (torch's own wheel, its CUDA wheels, ninja, the user's `- pip:`)
with `uv pip compile`, per platform, platforms side by side (uv runs through envlock.seams.pypi.uv).

The PEP 751 `pylock.toml` output gives each package's wheel URLs and hashes; the requirements output's
`# via` annotations give the dependency edges, compiled once per resolved set (then cached: a re-lock of an
unchanged spec runs uv once per platform).
uv does not read pip's configuration; envlock passes the user's index URLs (envlock.seams.pypi) itself.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import re
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from envlock.seams import proc
from envlock.errors import ChannelError, EnvlockError, SolveError, SpecError
from envlock.models import PypiPackage
from envlock.names import strip_credentials
from envlock.seams.net import scrub
from envlock.seams.pypi import uv
from envlock.seams.pypi.part import Index, index_root, python_platform


@dataclass(frozen=True)
class CompileRequest:
    """Everything `compile_part` needs for every platform of one spec."""

    requirements: tuple[str, ...]
    python: str  # "3.11"
    platforms: tuple[str, ...]
    glibc: str
    index: Index
    extra_indexes: tuple[Index, ...] = ()
    exclude_newer: str | None = None
    no_emit: Mapping[str, Sequence[str]] = field(default_factory=dict)  # platform -> names conda provides
    offline: bool = False
    cache_dir: Path | None = None
    preferences: Mapping[str, Sequence[PypiPackage]] = field(default_factory=dict)  # `envlock update`
    upgrade: tuple[str, ...] = ()  # `envlock update`: the packages it moves (the others in `preferences` are held)
    # Exactly pinned packages the cutoff does not apply to: the PyTorch wheel index serves no upload
    # dates (PEP 700), and uv drops an undated file whenever a cutoff applies to its package.
    exempt: tuple[str, ...] = ()
    # file name -> canonical URL, for wheels fetched through a `pypi=` mirror (envlock/usecases/channeldir.py's wheels.json)
    mirror_files: Mapping[str, str] = field(default_factory=dict)
    mirror_root: str = ""  # the `pypi=` mirror's file prefix (index_root of its URL), "" without one


@dataclass(frozen=True)
class CompileResult:
    packages: dict[str, tuple[PypiPackage, ...]]
    warnings: tuple[str, ...] = ()


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


# --------------------------------------------------------------------------- compile


def compile_part(req: CompileRequest, started: Callable[[], None] | None = None) -> CompileResult:
    """Lock the requirements for every platform (platforms side by side); errors name the platform.
    `started()` is called as each platform's uv runs (envlock.usecases.pypi_lock waits for them)."""
    cache = uv.cache_dir(req.cache_dir)
    uv.uv_binary()  # not installed: one error before any thread starts
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(req.platforms))) as pool:
        futures = {p: pool.submit(_compile_platform, cache, req, p, started) for p in req.platforms}
        results = {p: f.result() for p, f in futures.items()}
    packages = {p: r[0] for p, r in results.items()}
    warnings = tuple(dict.fromkeys(w for r in results.values() for w in r[1]))
    local = sorted({_where(pkg.url) for pkgs in packages.values() for pkg in pkgs if pkg.url.startswith("file:")})
    if local:
        warnings += (
            f"the lock records machine-local file:// URLs for PyPI packages ({', '.join(local)}): other machines "
            "cannot install them; point pip at a network index (PIP_INDEX_URL / PIP_CONFIG_FILE) and re-lock",
        )
    return CompileResult(packages, warnings)


def _where(url: str) -> str:
    return url.rsplit("/", 1)[0] + "/"


def _base_args(req: CompileRequest, platform: str) -> list[str]:
    args = [
        "pip", "compile", "-", "--no-config", "--quiet", "--no-header",
        # The interpreter running envlock, never one uv would find itself (an active VIRTUAL_ENV, a .venv, a
        # .python-version): a stale or unreadable one failed the lock, and the markers must not depend on it.
        "--python", sys.executable, "--python-version", req.python, "--python-platform", python_platform(platform, req.glibc),
        "--only-binary", ":all:",
        # pip's own rule for several indexes (best version over all of them), not uv's first-index one.
        "--index-strategy", "unsafe-best-match",
    ]  # fmt: skip  (the indexes go through uv's environment: index_environ)
    if req.exclude_newer:
        args += ["--exclude-newer", req.exclude_newer]
        for name in req.exempt:
            args += ["--exclude-newer-package", f"{name}=false"]
    if req.offline:
        args.append("--offline")
    for name in sorted(set(req.no_emit.get(platform, ()))):
        args += ["--no-emit-package", name]
    return args


def _compile_platform(cache: Path, req: CompileRequest, platform: str,
                      started: Callable[[], None] | None = None) -> tuple[tuple[PypiPackage, ...], list[str]]:
    stdin = "".join(f"{r}\n" for r in req.requirements)
    base = _base_args(req, platform)
    with tempfile.TemporaryDirectory(prefix="envlock-uv-") as tmp:
        out_txt = Path(tmp) / "requirements.txt"
        held = [p for p in req.preferences.get(platform, ()) if p.name not in req.upgrade]
        if held:
            # `envlock update`: every package it does not move is held at its locked version, as a constraint.
            # Given as preferences (an output file that already holds the pins), uv took a held version's files
            # from the first index listing it, even one without a wheel for the platform: an extra index with
            # only nvidia-nvshmem-cu13 3.4.5's x86_64 wheel failed the aarch64 part (tests/test_update_pypi.py).
            constraints = Path(tmp) / "held.txt"
            constraints.write_text("".join(f"{p.name}=={p.version}\n" for p in held))
            base = [*base, "-c", str(constraints)]
        pylock = _run_uv([*base, "--format", "pylock.toml"], stdin, cache, platform, req, started=started)
        entries = _parse_pylock(pylock.stdout, platform)
        # The dependency edges of a resolved set never change: kept in envlock's cache, keyed by the set, so
        # a re-lock of an unchanged spec runs uv once (benchmarks/bench_pypi.py).
        key = hashlib.sha256(f"{platform}\n{req.python}\n{req.glibc}\n{stdin}\n{pylock.stdout}".encode()).hexdigest()
        vias = _read_vias(cache, key)
        if vias is None:  # the same inputs resolve to the same set
            _run_uv([*base, "--format", "requirements.txt", "-o", str(out_txt)], stdin, cache, platform, req)
            vias = parse_via(out_txt.read_text(encoding="utf-8"))
            if set(vias) != {_canon(e["name"]) for e in entries}:
                raise SolveError(f"uv resolved the PyPI part of {platform} differently twice in a row",
                                 hint="the index changed during the lock; run the command again")
        _write_vias(cache, key, vias)
    packages, fetched = _choose_wheels(entries, vias, platform, req)
    packages = _with_requires(packages, fetched, cache, platform, req)
    warnings = [_upload_date_warning(pylock.stderr)] if "is missing an upload date" in pylock.stderr else []
    return packages, warnings


def _canon(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def _run_uv(args: list[str], stdin: str, cache: Path, platform: str, req: CompileRequest,
            started: Callable[[], None] | None = None) -> Any:
    def failed(why: proc.Failure) -> EnvlockError:
        return ChannelError(f"uv {why} to lock the PyPI part of {platform}" if why.kind == "timeout" else
                            f"uv cannot lock the PyPI part of {platform}: {why}",
                            hint="check the network and the index, or set ENVLOCK_UV_TIMEOUT")

    # a `pypi=` mirror serves the variant index too: one index, once
    urls = [req.index.url, *(e.url for e in req.extra_indexes if e.url != req.index.url)]
    done = uv.run(args, cache=uv.cache_for(cache, urls), what=f"locking the PyPI part of {platform}", failed=failed,
                  stdin=stdin, environ=uv.index_environ(urls), started=started)
    if done.returncode != 0:
        raise _uv_error(done.stderr, platform, req)
    return done


def _read_vias(cache: Path, key: str) -> dict[str, set[str]] | None:
    from envlock.formats.untrusted import read_json  # noqa: PLC0415

    try:
        data = read_json(cache / "pypi-graphs" / f"{key}.json")
        return {str(k): set(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def _write_vias(cache: Path, key: str, vias: Mapping[str, set[str]]) -> None:
    import json  # noqa: PLC0415

    from envlock.errors import UnsafeNameError  # noqa: PLC0415
    from envlock.seams.fs import write_atomic  # noqa: PLC0415

    path = cache / "pypi-graphs" / f"{key}.json"
    try:
        # The same set gives the same bytes: a re-lock that read them rewrites (and syncs) nothing.
        write_atomic(path, json.dumps({k: sorted(v) for k, v in sorted(vias.items())}), root=cache)
    except (OSError, UnsafeNameError):
        pass  # a cache that cannot be written only costs a second uv run next time


def _upload_date_warning(stderr: str) -> str:
    return (
        "some index files carry no upload date, so the resolution cutoff excluded them "
        "(uv: " + next(ln for ln in stderr.splitlines() if "missing an upload date" in ln).removeprefix("warning: ") + ")"
    )


def parse_via(text: str) -> dict[str, set[str]]:
    """name -> the names that require it, from uv's `# via` annotations."""
    from packaging.utils import canonicalize_name

    via: dict[str, set[str]] = {}
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("#") and "==" in line:
            current = str(canonicalize_name(line.split("==", 1)[0].split("[", 1)[0].strip()))
            via.setdefault(current, set())
            continue
        if current is None or not line.startswith("#"):
            continue
        body = line.lstrip("#").strip()
        if body.startswith("via"):
            body = body[3:].strip()
        for part in body.split(","):
            name = part.strip()
            if name and not name.startswith("-") and re.match(r"^[A-Za-z0-9._-]+$", name):
                via[current].add(str(canonicalize_name(name)))
    return via


def _parse_pylock(text: str, platform: str) -> list[dict[str, Any]]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]  # Python 3.10: tomli is tomllib's backport
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SolveError(f"uv wrote an unreadable pylock.toml for {platform}: {exc}",
                         hint="report it (ENVLOCK_DEBUG=1), or lock with --toolchain-only") from None
    return list(doc.get("packages") or [])


def _with_requires(packages: tuple[PypiPackage, ...], fetched: Mapping[str, str], cache: Path, platform: str,
                   req: CompileRequest) -> tuple[PypiPackage, ...]:
    """Each edge's version specifier, from the wheels' metadata (envlock.seams.pypi.requires)."""
    from envlock.seams.pypi import requires

    logins = [i.url for i in (req.index, *req.extra_indexes)]
    metadata = requires.metadata_of(packages, fetched, cache, offline=req.offline, logins=logins)
    return requires.with_specifiers(packages, metadata, req.requirements, platform, req.python)


def _choose_wheels(
    entries: list[dict[str, Any]], vias: Mapping[str, set[str]], platform: str, req: CompileRequest
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


def _canonical_url(url: str, req: CompileRequest) -> str:
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


def _uv_error(stderr: str, platform: str, req: CompileRequest) -> Exception:
    """One envlock error out of uv's report (no solution: 3; index unreachable: 4; else 1)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    text = scrub(" ".join(lines))
    cause = text.split("cause:", 1)[1].split("hint:", 1)[0].strip() if "cause:" in text else ""
    cause = cause.replace("╰─▶", "").replace("×", "").strip()
    first = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else "uv failed")
    first = scrub(first.removeprefix("error:").strip())
    network = ("Failed to fetch", "error sending request", "Could not connect", "dns error", "Connection refused",
               "Request failed after", "tcp connect error", "timed out", "Failed to read")
    if any(n in text for n in network) and "No solution found" not in text:
        where = ", ".join(scrub(i.canonical) for i in (*req.extra_indexes, req.index))
        return ChannelError(
            f"cannot reach the package index for the PyPI part of {platform}: {first}",
            hint=f"check the network and the indexes ({where}; from your pip configuration and the torch label), "
            "or --mirror URL=MIRROR, or --offline with a warm cache",
        )
    if "No solution found" in text:  # uv's resolver failed: a requirement (the user's, or against torch's pins)
        from envlock.core.solve_explain import cap

        held = ("`envlock update` holds every PyPI package it does not name at its locked version: name those that "
                "must move with it too, or re-lock them all with `envlock lock --refresh`")
        return SolveError(
            cap(f"the PyPI part does not resolve on {platform}: {cause or first}"),
            hint=held if any(pin in text and pin not in req.requirements
                             for pin in (f"{p.name}=={p.version}" for p in req.preferences.get(platform, ()))) else
            "change or drop the conflicting `- pip:` requirement (torch's own pins come from the anchor)",
            detail=(f"{platform}, PyPI part (uv):\n" + "\n".join(f"    {ln}" for ln in lines),),
        )
    if "--offline" in text or "offline" in first.lower():
        return ChannelError(f"the PyPI part of {platform} needs the network: {first}",
                            hint="run once without --offline to fill uv's cache")
    if "Python interpreter" in text:  # uv could not run the python it was given (envlock's own)
        return SpecError(f"uv cannot lock the PyPI part of {platform}: {first}{': ' + cause if cause else ''}",
                         hint="run envlock with a python that the current user can execute (uv inspects it)")
    return SpecError(f"uv cannot lock the PyPI part of {platform}: {first}{': ' + cause if cause else ''}",
                     hint="check the `- pip:` requirements of the spec (PEP 508, e.g. einops>=0.7)")


