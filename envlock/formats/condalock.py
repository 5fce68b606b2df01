"""conda-lock v1 `conda-lock.yml`: render (pure, deterministic), parse (v1, and v2 for `diff`); what `check`
reads of it (the header, the package section without YAML) is head.py's.

Rendering sorts explicitly and writes no timestamp unless asked. Reading never imports conda_lock
(1 s of import time): conda-lock's own parser reads our files in the tests instead.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock import UPGRADE_HINT, __version__
from envlock.envname import problem, shown
from envlock.errors import LockfileError, NewerFormatError
from envlock.formats import slots
from envlock.formats.model import LOCK_FORMAT, META_PREFIX, ForeignEntry, LockFile
from envlock.formats.yamlsubset import NeedsPyYAML, dump, scalar
from envlock.models import LockedPackage, PypiPackage
from envlock.names import conda_build, split_match_spec, strip_credentials
from envlock.formats.untrusted import LOCK_CAP, load_json
from envlock.formats.untrusted import load_yaml as load_checked

RESTORE_HINT = "restore it from git (`git checkout -- <file>`) or re-create it with `envlock lock`"
COMPARE_HINT = "pass a conda-lock.yml, an @EXPLICIT .lock or a pixi.lock"
COMPARE_READS = "envlock diff reads conda-lock v1/v2, @EXPLICIT and pixi.lock v4-v6 files"


# --------------------------------------------------------------------------- render


def _dump(doc: Mapping[str, Any]) -> str:
    """`doc` as PyYAML's block style writes it: envlock.formats.yamlsubset (no PyYAML), else PyYAML itself
    (libyaml's emitter when built: the same bytes for this shape, checked on real locks, ~6x faster)."""
    try:
        return dump(doc)
    except NeedsPyYAML:
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True)


def _dependency(spec: str) -> tuple[str, str]:
    name, rest = split_match_spec(spec)
    return name, rest or "*"


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
                    "dependencies": dict(sorted(_dependency(d) for d in p.depends)),
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
                    # Requires-Dist specifiers ('' = any): rattler reads name+value as PEP 508 ('*' is not)
                    "dependencies": {d: w.specifier(d) for d in sorted(w.dependencies)},
                    "url": strip_credentials(w.url),
                    "hash": {"sha256": w.sha256},
                    "category": "main",
                    "optional": False,
                }
            )
    return entries


_HEX = re.compile(r"[0-9a-fA-F]+\Z")


class _MultiLine(Exception):
    """A scalar PyYAML writes over several lines (never seen in real repodata)."""


@functools.lru_cache(maxsize=16384)
def _scalar(value: str, key: bool = False) -> str:
    """How PyYAML's SafeDumper writes a string as a block mapping key or value: envlock.formats.yamlsubset's
    port of its rule for one line of printable ASCII, else PyYAML itself, so the bytes always equal a dump."""
    with contextlib.suppress(NeedsPyYAML):  # else PyYAML's to write
        return scalar(value, key=key)
    if key:
        text = _dump({value: 0})
        out = text[: text.rindex(": 0\n")]
    else:
        out = _dump({"k": value})[len("k: ") : -1]
    if "\n" in out:
        raise _MultiLine  # its continuation lines depend on the nesting depth: let PyYAML do it all
    return out


def render_package_section(
    packages: Sequence[LockedPackage], platforms: Sequence[str], pypi: Sequence[PypiPackage] = ()
) -> str:
    """The `package:` section of a conda-lock v1 file (it does not depend on the metadata).

    Byte-identical to `yaml.safe_dump({"package": package_entries(...)})` (tests/test_formats.py
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
    # One printable line each, as the reader requires (check_header): the files beside the lock repeat them.
    metadata["custom_metadata"] = {slots.line(k, "a custom_metadata key"): slots.line(custom_metadata[k], k)
                                   for k in sorted(custom_metadata)}
    header = (
        f"# Generated by envlock {__version__}: do not edit by hand.\n"
        "# Re-lock with `envlock lock`; check freshness with `envlock check`.\n"
        "# Install with `envlock create`; installed by conda-lock or micromamba, add the CUDA activation with\n"
        "# `envlock hook -p PREFIX` (it also records this lock's anchor for `envlock doctor`).\n"
    )
    # Top-level block mappings concatenate: dumping the two halves gives the bytes of dumping the whole.
    body = _dump({"version": 1, "metadata": metadata})
    return header + body + (package_section or render_package_section(packages, platforms))


# --------------------------------------------------------------------------- read


def _bad(p: Path | None, what: str) -> LockfileError:
    return LockfileError(f"{p or 'lock'} is not a valid conda-lock v1 file: {what}", hint=RESTORE_HINT)


def load_yaml(text: str, p: Path | None, *, compare: bool = False) -> dict[str, Any]:
    """A lock's YAML document (a mapping), or one LockfileError worded for the reader's purpose (the checked
    loader: size cap, no aliases, bounded nesting)."""
    if compare:
        doc = load_checked(text, p, LockfileError, hint=COMPARE_HINT, cap=LOCK_CAP)
    else:
        doc = load_checked(text, p or "lock", LockfileError, hint=RESTORE_HINT, cap=LOCK_CAP,
                           invalid="is not a valid conda-lock v1 file: YAML error (line {line})")
    if not isinstance(doc, dict):
        if compare:
            raise LockfileError(f"{p} is not a lock file", hint=COMPARE_HINT)
        raise _bad(p, "top level is not a mapping")
    return doc


def check_header(doc: dict[str, Any], p: Path | None, *, compare: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
    """Validate a lock's version, metadata and envlock lock format; return (metadata, custom_metadata).

    `compare` (diff) also accepts conda-lock v2 and a lock without metadata.
    """
    version = doc.get("version")
    if compare:
        found: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
        _check_format(_custom(found, p), p)
        if version not in (1, 2) or not isinstance(doc.get("package"), list):
            raise LockfileError(f"{p} is not a conda-lock v1/v2 file (version {version!r})", hint=COMPARE_READS)
        return found, _custom(found, p)
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
    custom = _custom(meta, p)
    _check_format(custom, p)
    hashes = meta.get("content_hash") or {}
    # What the files beside the lock repeat (a name, a content hash) must not break their lines.
    texts = [*custom.values(), *(map(str, hashes.values()) if isinstance(hashes, dict) else ())]
    if not all(t.isprintable() for t in texts):
        raise _bad(p, "its metadata holds a control character")
    name = custom.get(f"{META_PREFIX}env_name")
    if name is not None and problem(name) is not None:  # the one name rule (envlock/envname.py), at the one reader
        raise _bad(p, f"its env_name {shown(name)} is not a lock name ({problem(name)})")
    return meta, custom


def _custom(meta: dict[str, Any], p: Path | None) -> dict[str, str]:
    raw = meta.get("custom_metadata") or {}
    if not isinstance(raw, dict):  # found by tests/reliability/test_fuzz.py
        raise _bad(p, "`custom_metadata` is not a mapping")
    if any(isinstance(v, (dict, list, set)) for v in raw.values()):  # str() of a nested value: unbounded
        raise _bad(p, "a `custom_metadata` value is not a string")
    out = {str(k): str(v) for k, v in raw.items()}
    for key, value in out.items():  # envlock's JSON values: read once here, so no reader meets a hostile one
        if key.startswith(META_PREFIX) and value.lstrip().startswith(("{", "[")):
            load_json(value, f"{p or 'lock'}: custom_metadata {key}", LockfileError, hint=RESTORE_HINT)
    return out


def _check_format(custom: Mapping[str, str], p: Path | None) -> None:
    fmt = custom.get(f"{META_PREFIX}lock_format")
    if fmt is not None and (not fmt.isdigit() or int(fmt) > LOCK_FORMAT):
        raise NewerFormatError(
            f"{p} was written by a newer envlock ({custom.get(META_PREFIX + 'version', '?')}, lock format {fmt})",
            hint=f"{UPGRADE_HINT} to read it",
        )


def parse(doc: dict[str, Any], p: Path | None, *, compare: bool = False) -> LockFile:
    """A conda-lock document as a LockFile; `compare` (diff) needs only a name per entry, else every entry
    must be installable (an md5 for conda, a sha256 for pip)."""
    meta, custom = check_header(doc, p, compare=compare)
    try:
        platforms = tuple(str(x) for x in ((meta.get("platforms") or ()) if compare else meta["platforms"]))
        channels = tuple(str(c["url"] if isinstance(c, dict) else c) for c in meta.get("channels") or ())
        hashes = {str(k): str(v) for k, v in (meta.get("content_hash") or {}).items()}
        sources = tuple(str(x) for x in meta.get("sources") or ())
        packages: list[LockedPackage] = []
        pypi: list[PypiPackage] = []
        foreign: list[ForeignEntry] = []
        for entry in doc.get("package") or ():
            if compare and (not isinstance(entry, dict) or "name" not in entry):
                raise LockfileError(f"{p}: a package entry has no name", hint="restore the file from git")
            manager = str(entry.get("manager", "conda"))
            if manager == "pip":
                pypi.append(_pypi_from_entry(entry, compare))
            elif manager != "conda":
                foreign.append(ForeignEntry(str(entry.get("platform", "")), manager, str(entry["name"]),
                                            str(entry.get("version", ""))))
            else:
                packages.append(_package_from_entry(entry, compare))
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
        pypi=tuple(pypi),
        foreign=tuple(foreign),
        version=int(doc.get("version") or 1),
    )


def _text(entry: Mapping[str, Any], key: str, compare: bool) -> str:
    """An entry's text field, a non-empty scalar; for `compare` (diff) only the name must be there."""
    if compare and key != "name" and not entry.get(key):
        return ""
    value = entry[key]
    if isinstance(value, (dict, list, bool)) or value is None or not str(value).strip():
        raise ValueError(f"a package entry's {key} is {value!r}")  # found by tests/reliability/test_fuzz.py
    if not compare and not str(value).isprintable():  # a line break would add a line to an @EXPLICIT file
        raise ValueError(f"a package entry's {key} holds a control character ({str(value)[:80]!r})")
    return str(value)


def _digest(value: Any, size: int, what: str, compare: bool) -> str:
    """A hash as text; outside `compare` (diff), `size` hex digits (it is written into the files beside the lock)."""
    text = "" if value is None else str(value)
    if not compare and text and (len(text) != size or not _HEX.match(text)):
        raise ValueError(f"{what} is not {size} hex digits ({text[:80]!r})")
    return text


def _pypi_from_entry(entry: Mapping[str, Any], compare: bool) -> PypiPackage:
    sha, deps = (entry.get("hash") or {}).get("sha256"), entry.get("dependencies") or {}
    if not sha and not compare:
        raise ValueError(f"pip package {entry.get('name')} has no sha256")
    return PypiPackage(
        name=_text(entry, "name", compare), version=_text(entry, "version", compare),
        platform=_text(entry, "platform", compare), url=_text(entry, "url", compare),
        sha256=_digest(sha, 64, f"the sha256 of {entry.get('name')}", compare),
        dependencies=tuple(str(k) for k in deps),
        requires=tuple((str(k), str(v)) for k, v in deps.items() if v not in (None, "", "*")),
    )


def _package_from_entry(entry: Mapping[str, Any], compare: bool) -> LockedPackage:
    url, name, version = (_text(entry, k, compare) for k in ("url", "name", "version"))
    hashes = entry.get("hash") or {}
    md5 = hashes.get("md5")
    if not md5 and not compare:
        raise ValueError(f"package {name} has no md5")
    build = entry.get("build") or conda_build(url, name, version)
    deps = entry.get("dependencies") or {}
    return LockedPackage(
        name=name, version=version, build=str(build), platform=_text(entry, "platform", compare), url=url,
        md5=_digest(md5, 32, f"the md5 of {name}", compare),
        sha256=_digest(hashes["sha256"], 64, f"the sha256 of {name}", compare) if hashes.get("sha256") else None,
        depends=tuple(f"{k} {v}".strip() if v not in ("", "*") else str(k) for k, v in deps.items()),
        subdir=url.rsplit("/", 2)[-2] if url.count("/") >= 2 else "",
    )
