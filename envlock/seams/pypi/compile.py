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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envlock.seams import proc
from envlock.errors import ChannelError, EnvlockError, SolveError
from envlock.models import PypiPackage
from envlock.names import strip_credentials
from envlock.seams.net import scrub
from envlock.seams.pypi import uv
from envlock.seams.pypi.part import Index, index_root, python_platform
from envlock.seams.pypi.choose import choose_wheels
from envlock.seams.pypi.uvreport import project_of, undated_files, uv_error

_ROUNDS = 8  # rounds of lifting the cutoff off dateless packages (each brings the next level of dependencies)


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
    users: tuple[str, ...] = ()  # the `- pip:` lines the user wrote (the others are envlock's: torch, ninja)
    # Indexes known to give no upload times (the spec's envlock.undated_indexes): no cutoff is tried first
    undated: tuple[str, ...] = ()
    # Soft preferences, the earlier lock's pins: a re-lock without a cutoff keeps what it locked (uv's -o file)
    prefer: Mapping[str, Sequence[PypiPackage]] = field(default_factory=dict)


@dataclass(frozen=True)
class CompileResult:
    packages: dict[str, tuple[PypiPackage, ...]]
    warnings: tuple[str, ...] = ()
    undated: tuple[str, ...] = ()  # the indexes (canonical, no credentials) whose files carry no upload time


@dataclass(frozen=True)
class _Outcome:
    """One platform's uv run: its packages and notes, or its error; and the files uv found without a date."""

    packages: tuple[PypiPackage, ...] = ()
    warnings: tuple[str, ...] = ()
    error: Exception | None = None
    undated: frozenset[str] = frozenset()


# --------------------------------------------------------------------------- compile


def compile_part(req: CompileRequest, started: Callable[[], None] | None = None) -> CompileResult:
    """Lock the requirements for every platform (platforms side by side); errors name the platform.
    `started()` is called as each platform's uv runs (envlock.usecases.pypi_lock waits for them).

    The resolution cutoff selects by upload time (PEP 700). An index that gives none (a static PEP 503 folder, a
    devpi-style mirror) cannot be cut off: uv drops every file of it. Where uv says it dropped such files and the
    index they come from gives no dates (envlock.seams.pypi.undated asks each index), the PyPI part is locked
    without the cutoff, said once per index and returned in `undated` (the spec records it), with the earlier
    lock's pins as preferences (`prefer`): an unchanged spec locks the same wheels again."""
    from envlock.seams.pypi import undated as dates

    cache = uv.cache_dir(req.cache_dir)
    uv.uv_binary()  # not installed: one error before any thread starts
    if not req.offline:
        _names_resolve((req.index, *req.extra_indexes))
    recorded = dates.in_play(req)  # the spec's envlock.undated_indexes still in use
    found: dict[str, set[str]] = {url: set() for url in recorded}  # dateless index -> the packages lifted
    if not req.exclude_newer or (recorded and dates.covers_all(req, recorded)):
        outcomes = _all_platforms(cache, replace(req, exclude_newer=None, exempt=()), started)
    else:
        outcomes, found = _cut_where_dated(cache, req, bool(recorded), started)
    failed = next((o.error for o in outcomes.values() if o.error is not None), None)
    if failed is not None:
        raise failed
    packages = {p: o.packages for p, o in outcomes.items()}
    every = bool(found) and (not req.exclude_newer or dates.covers_all(req, found))
    warnings = tuple(dates.note(url, req.exclude_newer, () if every else names) for url, names in found.items())
    local = sorted({_where(pkg.url, req) for pkgs in packages.values() for pkg in pkgs if pkg.url.startswith("file:")})
    _readable_by_create(packages)
    if local:
        warnings += (
            f"the lock records machine-local file:// URLs for PyPI packages ({', '.join(local)}): other machines "
            "cannot install them; point pip at a network index (PIP_INDEX_URL / PIP_CONFIG_FILE) and re-lock",
        )
    return CompileResult(packages, warnings, tuple(found))


def _names_resolve(indexes: Sequence[Index]) -> None:
    """Each index's host name resolves, asked once before uv runs: uv retries a failed lookup like any connect
    error (seconds of waiting for the same answer). One that does not: named, with the setting that chose it."""
    from envlock.seams import net

    for ix in indexes:
        host = net.unresolvable(ix.url)
        if host is None:
            continue
        if ix.url != ix.canonical:
            where, fix = "the pypi= mirror (--mirror, ENVLOCK_MIRRORS or envlock.toml)", "that mirror's URL (`envlock config`)"
        elif ix.pytorch:
            where, fix = "the PyTorch wheel index of the torch label", "a pypi= mirror (--mirror pypi=<its URL>)"
        else:
            from envlock.seams.pypi.pipconf import configured_index_url

            where, fix = f"the index pip uses, from {configured_index_url()[1]}", "PIP_INDEX_URL"
        raise ChannelError(f"cannot reach {where}: {net.said(net.HOST_NOT_FOUND, host)}",
                           hint=f"check the network or proxy (HTTPS_PROXY), or {fix}")


def _cut_where_dated(cache: Path, req: CompileRequest, known: bool,
                     started: Callable[[], None] | None) -> tuple[dict[str, _Outcome], dict[str, set[str]]]:
    """Lock with the cutoff, lifted (`--exclude-newer-package NAME=false`) for the packages uv dropped for want of an
    upload time where an index of the user's serves them so (envlock.seams.pypi.undated asks), round by round as the
    lifted ones bring their dependencies in; with no index left that gives dates, without the cutoff at all. The
    earlier lock's pins are preferred once an index is known to give no dates (`known`: the spec says so)."""
    from envlock.seams.pypi import undated as dates

    uncut = replace(req, exclude_newer=None, exempt=())
    exempt, asked = set(req.exempt), set[str]()
    found: dict[str, set[str]] = {}
    outcomes = _all_platforms(cache, req if known else replace(req, prefer={}), started)
    for _ in range(_ROUNDS):
        projects = {project_of(f) for o in outcomes.values() for f in o.undated} - exempt - asked
        asked |= projects
        new = dates.dateless(cache, req, projects) if projects else {}
        if not new:
            return outcomes, found
        for url, names in new.items():
            found.setdefault(url, set()).update(names)
        if dates.covers_all(req, found):
            return _all_platforms(cache, uncut, None), found
        exempt |= {n for names in new.values() for n in names}
        outcomes = _all_platforms(cache, replace(req, exempt=tuple(sorted(exempt))), None)
    return _all_platforms(cache, uncut, None), {url: set() for url in found}  # deeper than any real tree: no cutoff


def _readable_by_create(packages: Mapping[str, Sequence[PypiPackage]]) -> None:
    """Every file:// URL of the lock passes create's rule (envlock.seams.pypi.wheels.local_wheel): never a lock
    that create refuses to read."""
    from envlock.seams.pypi.wheels import local_wheel

    for pkg in (p for pkgs in packages.values() for p in pkgs if p.url.startswith("file:")):
        try:
            local_wheel(pkg.url, pkg, {})
        except EnvlockError as exc:
            raise SolveError(f"the PyPI part locks {pkg.filename} at {scrub(pkg.url)}, which create would not read: "
                             f"{exc.message}", hint=exc.hint) from None


def _all_platforms(cache: Path, req: CompileRequest, started: Callable[[], None] | None) -> dict[str, _Outcome]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(req.platforms))) as pool:
        futures = {p: pool.submit(_compile_platform, cache, req, p, started) for p in req.platforms}
        return {p: f.result() for p, f in futures.items()}


def _where(url: str, req: CompileRequest) -> str:
    """The index a locked file URL comes from (its folder where no index's root holds it)."""
    roots = [index_root(strip_credentials(i.canonical)) for i in (req.index, *req.extra_indexes)]
    return next((scrub(r) for r in roots if url.startswith(r)), url.rsplit("/", 1)[0] + "/")


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
                      started: Callable[[], None] | None = None) -> _Outcome:
    """One platform's part; a failure is returned (with the dateless files uv saw), not raised: compile_part decides
    whether the cutoff was what failed it."""
    stdin = "".join(f"{r}\n" for r in req.requirements)
    base = _base_args(req, platform)
    with tempfile.TemporaryDirectory(prefix="envlock-uv-") as tmp:
        out_txt, out_lock = Path(tmp) / "requirements.txt", Path(tmp) / "pylock.toml"
        held = [p for p in req.preferences.get(platform, ()) if p.name not in req.upgrade]
        if held:
            # `envlock update`: every package it does not move is held at its locked version, as a constraint.
            # Given as preferences (an output file that already holds the pins), uv took a held version's files
            # from the first index listing it, even one without a wheel for the platform: an extra index with
            # only nvidia-nvshmem-cu13 3.4.5's x86_64 wheel failed the aarch64 part (tests/test_update_pypi.py).
            constraints = Path(tmp) / "held.txt"
            constraints.write_text("".join(f"{p.name}=={p.version}\n" for p in held))
            base = [*base, "-c", str(constraints)]
        prefer = _plain(req.prefer.get(platform, ())) if not held else ()
        if prefer:  # uv reads an existing output file as its preferences (the pins it keeps unless it must move)
            out_lock.write_text(_pylock_of(prefer), encoding="utf-8")
            out_txt.write_text("".join(f"{p.name}=={p.version}\n" for p in prefer), encoding="utf-8")
        # Not --quiet: uv's warnings name the files it dropped for want of an upload date.
        pylock = _run_uv([*(a for a in base if a != "--quiet"), "--format", "pylock.toml", "-o", str(out_lock)],
                         stdin, cache, platform, req, started=started)
        undated = frozenset(undated_files(pylock.stderr))
        if pylock.returncode != 0:
            return _Outcome(error=uv_error(pylock.stderr, platform, req), undated=undated)
        try:
            locked = out_lock.read_text(encoding="utf-8")
            entries = _parse_pylock(locked, platform)
            # The dependency edges of a resolved set never change: kept in envlock's cache, keyed by the set, so
            # a re-lock of an unchanged spec runs uv once (benchmarks/bench_pypi.py).
            key = hashlib.sha256(f"{platform}\n{req.python}\n{req.glibc}\n{stdin}\n{locked}".encode()).hexdigest()
            vias = _read_vias(cache, key)
            if vias is None:  # the same inputs resolve to the same set
                done = _run_uv([*base, "--format", "requirements.txt", "-o", str(out_txt)], stdin, cache, platform, req)
                if done.returncode != 0:
                    raise uv_error(done.stderr, platform, req)
                vias = parse_via(out_txt.read_text(encoding="utf-8"))
                if set(vias) != {_canon(e["name"]) for e in entries}:
                    raise SolveError(f"uv resolved the PyPI part of {platform} differently twice in a row",
                                     hint="the index changed during the lock; run the command again")
            _write_vias(cache, key, vias)
            packages, fetched = choose_wheels(entries, vias, platform, req)
            packages = _with_requires(packages, fetched, cache, platform, req)
        except EnvlockError as exc:
            return _Outcome(error=exc, undated=undated)
    return _Outcome(packages, undated=undated)


def _plain(packages: Sequence[PypiPackage]) -> tuple[PypiPackage, ...]:
    """The pins of a lock (untrusted) that are a plain name and a PEP 440 version: nothing else reaches uv's file."""
    from packaging.version import InvalidVersion, Version

    def ok(p: PypiPackage) -> bool:
        try:
            return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", p.name)) and str(Version(p.version)) != ""
        except InvalidVersion:
            return False

    return tuple(p for p in packages if ok(p) and re.fullmatch(r"[A-Za-z0-9.+!_-]+", p.version))


def _pylock_of(packages: Sequence[PypiPackage]) -> str:
    """A pylock.toml that names each package's version (what uv reads of an existing output file as preferences)."""
    body = "".join(f'\n[[packages]]\nname = "{p.name}"\nversion = "{p.version}"\n' for p in packages)
    return 'lock-version = "1.0"\ncreated-by = "envlock"\n' + body


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
    return uv.run(args, cache=uv.cache_for(cache, urls), what=f"locking the PyPI part of {platform}", failed=failed,
                  stdin=stdin, environ=uv.index_environ(urls), started=started)


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


_uv_error = uv_error  # the name tests/test_pypi_part.py knows
