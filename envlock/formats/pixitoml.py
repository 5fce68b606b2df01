"""pixi's manifest for `envlock export pixi`: a whole pixi.toml, or one feature added to an existing manifest.

PURE: values in, text out (the use case, envlock/usecases/export/pixi.py, computes the values from the lock).

Every name and value reaches the text through `toml_key` / `toml_string`: a key that is not bare
([A-Za-z0-9_-]+) and every string value is a TOML basic string with every control character escaped, so a
hostile package name, version or channel stays one key or one string (tomllib reads it back as given).

An existing manifest is never re-serialised: the feature goes in as one block of tables between two marker
lines, appended at the end, or put in place of the block an earlier export wrote (`insert_feature`). Every
byte outside the block stays as it was (formatting, comments, key order), and the result is read back
with tomllib and compared with the original, less the feature's own keys, before anything is written.
No tomlkit: it would re-serialise the user's file (and be a dependency for one command).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from envlock.errors import SpecError
from envlock.models import record

_BARE = re.compile(r"[A-Za-z0-9_-]+\Z")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
#: pixi's environment (and so feature) names: lower-case letters, digits and dashes (its manifest schema).
FEATURE_NAME = re.compile(r"[a-z0-9-]+\Z")

Table = tuple[tuple[str, ...], list[tuple[str, str]]]  # a table's key path, its (key, value text) lines


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and every control character escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A key: bare where TOML allows it, else quoted."""
    return key if _BARE.match(key) else toml_string(key)


def toml_array(items: Sequence[str]) -> str:
    return "[" + ", ".join(toml_string(i) for i in items) + "]"


@record
class PypiDep:
    """A `pypi-dependencies` entry: the locked version, and the index it must come from (torch's variant)."""

    version: str
    index: str | None = None

    def text(self) -> str:
        if self.index is None:
            return toml_string(f"=={self.version}")
        return f"{{ version = {toml_string('==' + self.version)}, index = {toml_string(self.index)} }}"


@record
class Activation:
    """One platform's `[activation]`: the variables set (`env`) and the scripts run, relative to the manifest."""

    env: tuple[tuple[str, str], ...]
    scripts: tuple[str, ...]


@record
class Manifest:
    """What an exported manifest (or feature) states, per platform."""

    name: str  # the workspace's name (a whole manifest)
    channels: tuple[str, ...]
    platforms: tuple[str, ...]
    cuda: str | None  # system-requirements.cuda (the anchor's CUDA)
    conda: Mapping[str, Mapping[str, str]]  # platform -> {package: "==version"}
    pypi: Mapping[str, Mapping[str, PypiDep]]  # platform -> {package: dep}; {} for a toolchain-only lock
    activation: Mapping[str, Activation]  # platform -> its activation
    header: tuple[str, ...] = ()  # comment lines (without "# ")


def _common(per_platform: Mapping[str, Mapping[str, Any]], platforms: Sequence[str]) -> dict[str, Any]:
    """The entries every platform has alike (they go in the table of all platforms)."""
    tables = [per_platform.get(p, {}) for p in platforms]
    if not tables or any(not t for t in tables):
        return {}
    return {k: v for k, v in sorted(tables[0].items()) if all(t.get(k) == v for t in tables[1:])}


def body_tables(m: Manifest, root: tuple[str, ...]) -> list[Table]:
    """The tables below `root` (() for a whole manifest, (feature, NAME) for a feature)."""
    conda_all, pypi_all = _common(m.conda, m.platforms), _common(m.pypi, m.platforms)
    tables: list[Table] = []
    if m.cuda:
        tables.append(((*root, "system-requirements"), [("cuda", toml_string(m.cuda))]))
    tables.append(((*root, "dependencies"), [(toml_key(k), toml_string(v)) for k, v in conda_all.items()]))
    tables.append(((*root, "pypi-dependencies"), [(toml_key(k), v.text()) for k, v in pypi_all.items()]))
    for p in m.platforms:
        target = (*root, "target", p)
        conda = sorted((k, v) for k, v in m.conda.get(p, {}).items() if k not in conda_all)
        pypi = sorted((k, v) for k, v in m.pypi.get(p, {}).items() if k not in pypi_all)
        tables.append(((*target, "dependencies"), [(toml_key(k), toml_string(v)) for k, v in conda]))
        tables.append(((*target, "pypi-dependencies"), [(toml_key(k), v.text()) for k, v in pypi]))
        act = m.activation.get(p)
        if act is not None:
            if act.scripts:
                tables.append(((*target, "activation"), [("scripts", toml_array(act.scripts))]))
            tables.append(((*target, "activation", "env"), [(toml_key(k), toml_string(v)) for k, v in act.env]))
    return [t for t in tables if t[1]]


def render_tables(tables: Sequence[Table], nl: str = "\n") -> str:
    blocks = []
    for path, lines in tables:
        head = "[" + ".".join(toml_key(k) for k in path) + "]"
        blocks.append(nl.join([head, *(f"{k} = {v}" for k, v in lines)]) + nl)
    return nl.join(blocks)


def _comments(lines: Sequence[str], nl: str = "\n") -> str:
    return "".join(f"# {line}{nl}" for line in lines)


def render_manifest(m: Manifest) -> str:
    """A whole pixi.toml."""
    workspace: Table = (("workspace",), [("name", toml_string(m.name)), ("channels", toml_array(m.channels)),
                                         ("platforms", toml_array(m.platforms))])
    return _comments(m.header) + "\n" + render_tables([workspace, *body_tables(m, ())])


# --------------------------------------------------------------------------- a feature in an existing manifest


def _markers(feature: str) -> tuple[str, str]:
    return (f"# >>> envlock export pixi: feature {feature} (generated: re-export to change it) >>>",
            f"# <<< envlock export pixi: feature {feature} <<<")


def feature_block(m: Manifest, feature: str, *, pyproject: bool, nl: str = "\n") -> str:
    """The marked block of tables that adds feature `feature` and an environment of the same name holding it
    alone (no-default-feature: the environment is exactly the lock's packages)."""
    base = ("tool", "pixi") if pyproject else ()
    root = (*base, "feature", feature)
    head: Table = (root, [("channels", toml_array(m.channels)), ("platforms", toml_array(m.platforms))])
    env: Table = ((*base, "environments", feature), [("features", toml_array([feature])),
                                                      ("no-default-feature", "true")])
    begin, end = _markers(feature)
    return (begin + nl + _comments(m.header, nl) + nl
            + render_tables([head, *body_tables(m, root), env], nl) + end + nl)


def _parse(text: str, what: str) -> dict[str, Any]:
    from envlock.formats.untrusted import load_toml

    return load_toml(text, what, SpecError, hint="fix it (pixi would not read it either), then export again")


def _pixi_table(doc: dict[str, Any], pyproject: bool) -> dict[str, Any] | None:
    table = (doc.get("tool") or {}).get("pixi") if pyproject else doc
    return table if isinstance(table, dict) else None


def _without(doc: dict[str, Any], feature: str, pyproject: bool) -> dict[str, Any]:
    """A copy of a parsed manifest without `feature` and its environment (what the block adds)."""
    import copy

    out = copy.deepcopy(doc)
    table = _pixi_table(out, pyproject)
    if table is not None:
        for key in ("feature", "environments"):
            sub = table.get(key)
            if isinstance(sub, dict):
                sub.pop(feature, None)
                if not sub:
                    del table[key]
    if pyproject and table is not None and not table:
        out["tool"].pop("pixi", None)
    return out


def insert_feature(text: str, block: str, feature: str, *, pyproject: bool, what: str,
                   platforms: Sequence[str]) -> str:
    """`text` with the block of `feature` in place of the block an earlier export wrote, else appended.

    SpecError where the manifest is no pixi manifest, already defines the feature or its environment
    itself, lacks a platform of the lock, or would read differently outside the feature."""
    before = _parse(text, what)
    table = _pixi_table(before, pyproject)
    if table is None or not any(k in table for k in ("workspace", "project", "package")):
        where = "[tool.pixi] with a [tool.pixi.workspace]" if pyproject else "a [workspace] table"
        raise SpecError(f"{what} is not a pixi manifest (it has no {where})",
                        hint="run `pixi init` there first, or export a whole manifest: envlock export pixi -o DIR")
    begin, end = _markers(feature)
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == begin]
    ends = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == end]
    if len(starts) > 1 or len(ends) > 1 or len(starts) != len(ends) or (starts and ends[0] < starts[0]):
        raise SpecError(f"{what} holds envlock's markers of feature {feature} out of order",
                        hint="remove the feature's block by hand (from its >>> line to its <<< line), then export again")
    if starts:
        new = "".join(lines[: starts[0]]) + block + "".join(lines[ends[0] + 1 :])
    else:
        for key in ("feature", "environments"):
            if feature in (table.get(key) or {}):
                raise SpecError(f"{what} already has [{key}.{feature}] (not written by envlock)",
                                hint="pick another name with --feature NAME")
        sep = "" if not text or text.endswith("\n") else ("\r\n" if "\r\n" in text else "\n")
        new = text + sep + ("\r\n" if "\r\n" in text else "\n") + block
    workspace = table.get("workspace") or table.get("project") or {}
    have = workspace.get("platforms") if isinstance(workspace, dict) else None
    missing = [p for p in platforms if isinstance(have, list) and p not in have]
    if missing:
        raise SpecError(f"{what}'s workspace platforms lack {', '.join(missing)}, which the lock has",
                        hint="add them to the workspace's `platforms`, then export again")
    after = _parse(new, f"{what} with the feature added")
    if _without(after, feature, pyproject) != _without(before, feature, pyproject):
        raise SpecError(f"adding feature {feature} to {what} would change what the rest of it says",
                        hint="remove the feature's block by hand, then export again")
    return new
