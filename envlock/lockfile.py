"""Render and read conda-lock v1 `conda-lock.yml` and `@EXPLICIT` files; content hash; atomic writes.

Rendering is pure and deterministic (sorted, no timestamps unless asked). Reading never imports
conda_lock (1 s of import time): conda-lock's own parser reads our files in the tests instead.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envlock import UPGRADE_HINT, __version__
from envlock.errors import EnvlockError, LockfileError
from envlock.models import LockedPackage, PypiPackage
from envlock.net import scrub as strip_credentials  # the one credential scrubber (envlock.net)

#: Version of what envlock writes into `custom_metadata` (refuse newer ones on read).
LOCK_FORMAT = 1
HASH_VERSION = 1
META_PREFIX = "envlock."


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class LockFile:
    """A parsed lock: conda-lock v1 metadata plus its conda packages."""

    path: Path | None
    platforms: tuple[str, ...]
    channels: tuple[str, ...]
    content_hash: dict[str, str]
    sources: tuple[str, ...]
    custom_metadata: dict[str, str]
    packages: tuple[LockedPackage, ...]
    kind: str = "conda-lock"  # or "explicit"
    other_managers: int = 0  # entries of managers other than conda and pip, which envlock does not install
    extra: dict[str, Any] = field(default_factory=dict)
    pypi: tuple[PypiPackage, ...] = ()  # `manager: pip` entries (the PyPI part of a full environment)

    def packages_for(self, platform: str) -> tuple[LockedPackage, ...]:
        """Conda packages of one platform, in dependency order."""
        return tuple(p for p in self.packages if p.platform == platform)

    def pypi_for(self, platform: str) -> tuple[PypiPackage, ...]:
        """PyPI wheels of one platform, in dependency order."""
        return tuple(p for p in self.pypi if p.platform == platform)

    def envlock_meta(self, platform: str | None = None) -> dict[str, Any]:
        """envlock's own metadata (anchor, plan of `platform`), or {} for a lock envlock did not write."""
        meta = self.custom_metadata
        if f"{META_PREFIX}version" not in meta:
            return {}
        out: dict[str, Any] = {
            "envlock_version": meta.get(f"{META_PREFIX}version"),
            "lock_format": int(meta.get(f"{META_PREFIX}lock_format", "1")),
            "rules_version": meta.get(f"{META_PREFIX}rules_version"),
            "env_name": meta.get(f"{META_PREFIX}env_name"),
            "spec": meta.get(f"{META_PREFIX}spec"),
            "anchor": _loads(meta.get(f"{META_PREFIX}anchor")),
        }
        if platform is not None:
            out["plan"] = _loads(meta.get(f"{META_PREFIX}plan.{platform}"))
        return out


def _loads(text: str | None) -> Any:
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return {}


# --------------------------------------------------------------------------- hashing & urls


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the normal form that gets hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def content_hash(inputs: Mapping[str, Any]) -> str:
    """sha256 of the normalised inputs of one platform."""
    return hashlib.sha256(canonical_json({"hash_version": HASH_VERSION, **inputs}).encode()).hexdigest()


def packages_fingerprint(packages: Iterable[LockedPackage]) -> str:
    """sha256 of what installs (name, version, url, md5, sha256) of one platform's packages, order-free.

    Recorded per platform so `envlock check` can tell a hand-edited package list from a reformatted one.
    """
    rows = sorted([p.name, p.version, strip_credentials(p.url), p.md5, p.sha256 or ""] for p in packages)
    return hashlib.sha256(canonical_json(rows).encode()).hexdigest()


def pypi_fingerprint(packages: Iterable[PypiPackage]) -> str:
    """sha256 of what installs (name, version, url, sha256) of one platform's PyPI part, order-free."""
    rows = sorted([p.name, p.version, strip_credentials(p.url), p.sha256] for p in packages)
    return hashlib.sha256(canonical_json(rows).encode()).hexdigest()


def package_section_digest(text: str) -> str | None:
    """sha256 of the top-level `package:` section of conda-lock text, or None when there is none.

    Line endings, trailing blanks, blank lines and comment lines are ignored, so a CRLF checkout or an
    end-of-file fixer leaves it unchanged; `envlock check` compares it without parsing the packages.
    """
    idx = -1 if text.startswith("package:") else text.find("\npackage:")
    if idx < 0 and not text.startswith("package:"):
        return None
    start = idx + 1
    lines = [ln.rstrip() for ln in text[start:].splitlines()]
    kept = [ln for ln in lines if ln and not ln.lstrip().startswith("#")]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()


# --------------------------------------------------------------------------- dependency order


def dependency_order(packages: Sequence[LockedPackage]) -> list[LockedPackage]:
    """Packages sorted so that every dependency comes before its dependents (ties by name)."""
    by_name = {p.name: p for p in packages}
    deps = {p.name: sorted({_dep_name(d) for d in p.depends} & by_name.keys() - {p.name}) for p in packages}
    done: set[str] = set()
    out: list[LockedPackage] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in done or name in visiting:
            return  # a cycle (rare, e.g. python <-> pip) is broken by name order
        visiting.add(name)
        for dep in deps[name]:
            visit(dep)
        visiting.discard(name)
        done.add(name)
        out.append(by_name[name])

    for name in sorted(by_name):
        visit(name)
    return out


def _dep_name(spec: str) -> str:
    if not spec.split():
        return ""
    return spec.split()[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0].split("!")[0]


def _split_dep(spec: str) -> tuple[str, str]:
    name = _dep_name(spec)
    rest = spec[len(name) :].strip()
    return name, rest or "*"


# --------------------------------------------------------------------------- render


def _dump(doc: Mapping[str, Any]) -> str:
    # libyaml's emitter when PyYAML has it: byte-identical output for this document shape (checked on
    # real locks) and ~6x faster; the pure-Python dumper was a third of a warm 3-platform resolve
    # (benchmarks/README.md). Same options either way.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True)


def package_entries(
    packages: Sequence[LockedPackage], platforms: Sequence[str], pypi: Sequence[PypiPackage] = ()
) -> list[dict[str, Any]]:
    """The conda-lock v1 `package:` entries, platform by platform, each in dependency order (pip after conda)."""
    entries = []
    for platform in platforms:
        for p in (q for q in packages if q.platform == platform):
            entries.append(
                {
                    "name": p.name,
                    "version": p.version,
                    "manager": "conda",
                    "platform": p.platform,
                    "dependencies": dict(sorted(_split_dep(d) for d in p.depends)),
                    "url": strip_credentials(p.url),
                    "hash": {"md5": p.md5, **({"sha256": p.sha256} if p.sha256 else {})},
                    "category": "main",
                    "optional": False,
                }
            )
        for w in (q for q in pypi if q.platform == platform):
            entries.append(
                {
                    "name": w.name,
                    "version": w.version,
                    "manager": "pip",
                    "platform": w.platform,
                    "dependencies": {d: "*" for d in sorted(w.dependencies)},
                    "url": strip_credentials(w.url),
                    "hash": {"sha256": w.sha256},
                    "category": "main",
                    "optional": False,
                }
            )
    return entries


_PLAIN = re.compile(r"(?:[A-Za-z0-9_][A-Za-z0-9_.+\-]*|https?://[A-Za-z0-9_.+\-/~%]+)\Z")


@functools.lru_cache(maxsize=16384)
def _scalar(value: str, key: bool = False) -> str:
    """How PyYAML's SafeDumper writes a string as a block mapping key or value.

    Plain when it is plainly safe (a conservative pattern, and YAML would read it back as a string);
    anything else is asked of PyYAML itself, so the bytes always equal a PyYAML dump.
    """
    if _PLAIN.match(value) and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG:
        return value
    if key:
        text = _dump({value: 0})
        out = text[: text.rindex(": 0\n")]
    else:
        out = _dump({"k": value})[len("k: ") : -1]
    if "\n" in out:
        raise _MultiLine  # its continuation lines depend on the nesting depth: let PyYAML do it all
    return out


class _MultiLine(Exception):
    """A scalar PyYAML writes over several lines (never seen in real repodata)."""


_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


def render_package_section(
    packages: Sequence[LockedPackage], platforms: Sequence[str], pypi: Sequence[PypiPackage] = ()
) -> str:
    """The `package:` section of a conda-lock v1 file (it does not depend on the metadata).

    Byte-identical to `yaml.safe_dump({"package": package_entries(...)})` (tests/test_lockfile.py
    compares them on every real lock at hand) without PyYAML's representer, which cost ~40 ms a
    3-platform lock: the shape is fixed, only the scalars need YAML's quoting rules.
    """
    entries = package_entries(packages, platforms, pypi)
    try:
        return _emit_entries(entries)
    except _MultiLine:
        return _dump({"package": entries})


def _emit_entries(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "package: []\n"
    out = ["package:\n"]
    for e in entries:
        out.append(f"- name: {_scalar(e['name'])}\n  version: {_scalar(e['version'])}\n")
        out.append(f"  manager: {e['manager']}\n  platform: {_scalar(e['platform'])}\n")
        deps = e["dependencies"]
        if deps:
            out.append("  dependencies:\n")
            out.extend(f"    {_scalar(k, True)}: {_scalar(v)}\n" for k, v in deps.items())
        else:
            out.append("  dependencies: {}\n")
        out.append(f"  url: {_scalar(e['url'])}\n  hash:\n")
        out.extend(f"    {k}: {_scalar(v)}\n" for k, v in e["hash"].items())
        out.append("  category: main\n  optional: false\n")
    return "".join(out)


def render_conda_lock(
    *,
    packages: Sequence[LockedPackage],
    platforms: Sequence[str],
    channels: Sequence[str],
    content_hashes: Mapping[str, str],
    sources: Sequence[str],
    custom_metadata: Mapping[str, str],
    timestamp: str | None = None,
    package_section: str | None = None,
) -> str:
    """conda-lock v1 YAML text; byte-identical for identical inputs.

    `package_section` is `render_package_section(packages, platforms)` when the caller has it already.
    """
    metadata: dict[str, Any] = {
        "content_hash": {p: content_hashes[p] for p in platforms},
        "channels": [{"url": strip_credentials(c), "used_env_vars": []} for c in channels],
        "platforms": list(platforms),
        "sources": list(sources),
    }
    if timestamp:
        metadata["time_metadata"] = {"created_at": timestamp}
    metadata["custom_metadata"] = {k: custom_metadata[k] for k in sorted(custom_metadata)}
    header = (
        f"# Generated by envlock {__version__}: do not edit by hand.\n"
        "# Re-lock with `envlock lock`; check freshness with `envlock check`.\n"
    )
    # Top-level block mappings concatenate: dumping the two halves gives the bytes of dumping the whole.
    body = _dump({"version": 1, "metadata": metadata})
    return header + body + (package_section or render_package_section(packages, platforms))


def render_explicit(*, packages: Sequence[LockedPackage], platform: str, content_hash_value: str, env_name: str) -> str:
    """An @EXPLICIT file (url#md5, dependency order) for `conda create --file`."""
    lines = [
        f"# Generated by envlock {__version__}: do not edit by hand.",
        f"# env: {env_name}",
        f"# platform: {platform}",
        f"# content_hash: {content_hash_value}",
    ]
    pkgs = [p for p in packages if p.platform == platform]
    # conda ignores comment lines; envlock reads these to verify sha256 (md5 alone is not enough).
    lines += [f"# sha256: {p.filename} {p.sha256}" for p in pkgs if p.sha256]
    lines.append("@EXPLICIT")
    lines += [f"{strip_credentials(p.url)}#{p.md5}" for p in pkgs]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- read


def read_text(
    path: Path, *, missing: str, missing_hint: str, error: type[EnvlockError] = LockfileError
) -> str:
    """A text file's content, or one EnvlockError (missing: LockfileError; unreadable: `error`)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockfileError(f"{missing} at {path}", hint=missing_hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {path}: {exc}", hint="check the path and its permissions") from None


def read_lock(path: str | os.PathLike[str]) -> LockFile:
    """Read a conda-lock v1 file (or an @EXPLICIT file, detected by its marker)."""
    p = Path(path)
    text = read_text(p, missing="no lock", missing_hint="run `envlock resolve --torch VERSION` to make one")
    if "@EXPLICIT" in text and not text.lstrip().startswith(("version:", "{")) and "\npackage:" not in text:
        return parse_explicit(text, p)
    return parse_conda_lock(text, p)


read_explicit = read_lock


def _bad(p: Path | None, what: str) -> LockfileError:
    return LockfileError(
        f"{p or 'lock'} is not a valid conda-lock v1 file: {what}",
        hint="restore it from git (`git checkout -- <file>`) or re-create it with `envlock lock`",
    )


def check_lock_header(doc: dict[str, Any], p: Path | None) -> tuple[dict[str, Any], dict[str, str]]:
    """Validate a parsed lock's version, metadata and envlock lock format; return (metadata, custom)."""
    version = doc.get("version")
    if version != 1:
        if isinstance(version, int) and version > 1:
            raise LockfileError(
                f"{p} is conda-lock format version {version}; envlock reads version 1",
                hint="render it as v1 with conda-lock, or re-create it with `envlock lock`",
            )
        raise _bad(p, "missing `version: 1`")
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        raise _bad(p, "missing `metadata`")
    raw_custom = meta.get("custom_metadata") or {}
    if not isinstance(raw_custom, dict):  # found by tests/reliability/test_fuzz.py
        raise _bad(p, "`custom_metadata` is not a mapping")
    custom = {str(k): str(v) for k, v in raw_custom.items()}
    fmt = custom.get(f"{META_PREFIX}lock_format")
    if fmt is not None and (not fmt.isdigit() or int(fmt) > LOCK_FORMAT):
        raise LockfileError(
            f"{p} was written by a newer envlock ({custom.get(META_PREFIX + 'version', '?')}, lock format {fmt})",
            hint=f"{UPGRADE_HINT} to read it",
        )
    return meta, custom


def parse_conda_lock(text: str, p: Path | None = None) -> LockFile:
    """Parse conda-lock v1 YAML text."""
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: ~8x faster
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise _bad(p, f"YAML error{where}") from None
    if not isinstance(doc, dict):
        raise _bad(p, "top level is not a mapping")
    meta, custom = check_lock_header(doc, p)
    try:
        platforms = tuple(str(x) for x in meta["platforms"])
        channels = tuple(str(c["url"] if isinstance(c, dict) else c) for c in meta.get("channels") or ())
        hashes = {str(k): str(v) for k, v in (meta.get("content_hash") or {}).items()}
        sources = tuple(str(x) for x in meta.get("sources") or ())
        packages: list[LockedPackage] = []
        pypi: list[PypiPackage] = []
        others = 0
        for entry in doc.get("package") or ():
            manager = entry.get("manager", "conda")
            if manager == "pip":
                pypi.append(_pypi_from_entry(entry))
            elif manager != "conda":
                others += 1
            else:
                packages.append(_package_from_entry(entry))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise _bad(p, f"unexpected structure ({type(exc).__name__}: {exc})") from None
    return LockFile(
        path=p,
        platforms=platforms,
        channels=channels,
        content_hash=hashes,
        sources=sources,
        custom_metadata=custom,
        packages=tuple(packages),
        other_managers=others,
        pypi=tuple(pypi),
    )


def _pypi_from_entry(entry: Mapping[str, Any]) -> PypiPackage:
    sha = (entry.get("hash") or {}).get("sha256")
    if not sha:
        raise ValueError(f"pip package {entry.get('name')} has no sha256")
    return PypiPackage(
        name=str(entry["name"]),
        version=str(entry["version"]),
        platform=str(entry["platform"]),
        url=str(entry["url"]),
        sha256=str(sha),
        dependencies=tuple(str(k) for k in (entry.get("dependencies") or {})),
    )


def _package_from_entry(entry: Mapping[str, Any]) -> LockedPackage:
    url = str(entry["url"])
    hashes = entry.get("hash") or {}
    md5 = hashes.get("md5")
    if not md5:
        raise ValueError(f"package {entry.get('name')} has no md5")
    filename = url.rsplit("/", 1)[-1]
    build = entry.get("build") or _build_from_filename(filename, str(entry["name"]), str(entry["version"]))
    deps = tuple(f"{k} {v}".strip() if v not in ("", "*") else str(k) for k, v in (entry.get("dependencies") or {}).items())
    return LockedPackage(
        name=str(entry["name"]),
        version=str(entry["version"]),
        build=build,
        platform=str(entry["platform"]),
        url=url,
        md5=str(md5),
        sha256=str(hashes["sha256"]) if hashes.get("sha256") else None,
        depends=deps,
        subdir=url.rsplit("/", 2)[-2] if url.count("/") >= 2 else "",
    )


def _build_from_filename(filename: str, name: str, version: str) -> str:
    stem = filename.removesuffix(".conda").removesuffix(".tar.bz2")
    prefix = f"{name}-{version}-"
    return stem[len(prefix) :] if stem.startswith(prefix) else stem.rsplit("-", 1)[-1]


def parse_explicit(text: str, p: Path | None = None) -> LockFile:
    """Parse an @EXPLICIT file (one platform)."""
    platform = ""
    sha: dict[str, str] = {}
    urls: list[str] = []
    seen_marker = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line[1:].strip()
            if body.startswith("platform:"):
                platform = body.split(":", 1)[1].strip()
            elif body.startswith("sha256:"):
                parts = body.split()
                if len(parts) == 3:
                    sha[parts[1]] = parts[2]
            continue
        if line == "@EXPLICIT":
            seen_marker = True
            continue
        if seen_marker:
            urls.append(line)
    if not seen_marker:
        raise _bad(p, "no @EXPLICIT marker")
    if not platform:
        raise LockfileError(
            f"{p} does not say its platform (`# platform: linux-64`)",
            hint="pass --platform, or use the conda-lock.yml next to it",
        )
    packages = []
    for u in urls:
        url, _, md5 = u.partition("#")
        filename = url.rsplit("/", 1)[-1]
        stem = filename.removesuffix(".conda").removesuffix(".tar.bz2")
        try:
            name, version, build = stem.rsplit("-", 2)
        except ValueError:
            raise _bad(p, f"cannot read a package name from {filename!r}") from None
        if not md5:
            raise _bad(p, f"{filename} has no #md5")
        packages.append(
            LockedPackage(
                name=name,
                version=version,
                build=build,
                platform=platform,
                url=url,
                md5=md5.removeprefix("md5:"),
                sha256=sha.get(filename),
                subdir=url.rsplit("/", 2)[-2] if url.count("/") >= 2 else "",  # fuzz: a bare file name
            )
        )
    return LockFile(
        path=p,
        platforms=(platform,),
        channels=(),
        content_hash={},
        sources=(),
        custom_metadata={},
        packages=tuple(packages),
        kind="explicit",
    )
