"""Every value of a spec, validated when the spec is read: a value envlock cannot use is one `error:` naming the
file, the key and the form it takes, never a silent default, a value ignored, or an `internal error` later.

The `envlock:` block (each key below, nothing else), `name`, `channels`, `platforms`. The torch and CUDA a spec
names are read where every request's are, once (envlock.usecases.resolve.asked.of_spec: `check`, `lock`, `update`
say theirs); python's and glibc's forms are read here, by the readers resolve's `--python` uses too. What a value
means for a plan (a CUDA torch was never built for, a Python torch has no wheels for) is the anchor's and the
rules' to say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from envlock.errors import EnvlockError, HintPart, SpecError, again
from envlock.models import CUDA_PLATFORMS

#: The keys of a spec's `envlock:` block, in the order a spec is written (formats/spec.py, render_spec).
ENVLOCK_KEYS = ("spec_version", "torch", "torch_source", "cuda", "python", "glibc", "cudnn", "toolchain_only",
                "exclude_newer", "undated_indexes", "with")
_MACOS = ("osx-64", "osx-arm64")


class Groups(Protocol):
    """What `with:` names are checked against (envlock.core.tables.ExtrasTables)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def default_set(self) -> Mapping[str, str]: ...


def check_keys(block: dict[Any, Any], where: str) -> None:
    """Refuse a key the `envlock:` block does not have (a typo, `cudn: false`, would be a setting ignored)."""
    for key in block:
        if key not in ENVLOCK_KEYS:
            import difflib

            close = difflib.get_close_matches(str(key), ENVLOCK_KEYS, n=1, cutoff=0.6)
            said = f"did you mean `{close[0]}`? " if close else ""
            named = key if isinstance(key, str) and key.isprintable() and len(key) <= 40 else _shown(key)
            raise SpecError(f"{where}: envlock.{named} is not a setting of the `envlock:` block",
                            hint=f"{said}its keys: {', '.join(ENVLOCK_KEYS)}")


def text(block: dict[Any, Any], key: str, where: str) -> str | None:
    """A string value (None when absent or null); an unquoted number or a list is refused."""
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, (bool, float)) or not isinstance(value, (str, int)):
        # An unquoted 3.10 is the float 3.1: refuse rather than guess.
        raise SpecError(f"{where}: envlock.{key} must be a quoted string", hint=f"quote it, e.g. {key}: '{_EXAMPLE[key]}'")
    return str(value)


_EXAMPLE = {"torch": "2.3.0", "torch_source": "pip", "cuda": "12.1", "python": "3.11", "glibc": "2.28",
            "exclude_newer": "2026-11-30T12:00:00Z"}


def flag(block: dict[Any, Any], key: str, default: bool, where: str) -> bool:
    """A true/false value (`default` when absent): `cudnn: '9.10'` or `cudnn: banana` is refused, not taken as true."""
    if key not in block:
        return default
    value = block[key]
    if isinstance(value, bool):
        return value
    what = {"cudnn": "cuDNN follows torch's, chosen by the rules; false locks none",
            "toolchain_only": "true: no python and no PyPI part"}[key]
    raise SpecError(f"{where}: envlock.{key} is {_shown(value)}, not true or false",
                    hint=f"write {key}: true or {key}: false ({what})")


def checked(value: str | None, key: str, where: str, reader: Any) -> str | None:
    """`value` when `reader` (parse_python, parse_glibc) takes it (None passes); its error said as the spec's key."""
    if value is None:
        return None
    try:
        reader(value, f"{where}: envlock.{key}")
    except EnvlockError as err:
        raise SpecError(err.message, hint=err.hint) from None
    return value


def torch_value(value: str | None, where: str) -> str:
    """envlock.torch: present (its form is read with the request's inputs, envlock.usecases.resolve.asked)."""
    if not value or not value.strip():
        raise SpecError(f"{where}: envlock.torch is missing", hint="set envlock.torch to a version, e.g. '2.3.0'")
    return value


_MAJOR_MINOR = re.compile(r"^(\d+)\.(\d+)$")
#: conda-forge's oldest glibc baseline (cos7), and the oldest manylinux tag uv takes for it (manylinux_2_17).
OLDEST_GLIBC = 17


def parse_python(text: str, setting: str = "--python") -> str:
    """'3.11' -> '3.11'; SpecError unless it is CPython 3's major.minor (torch has wheels for CPython 3 only).
    `setting`: where the value came from (`--python`, `environments/x.yml: envlock.python`)."""
    m = _MAJOR_MINOR.match(text.strip())
    if m and m.group(1) == "3" and len(m.group(2)) <= 3:
        return f"3.{int(m.group(2))}"
    if m:
        raise SpecError(f"{setting} {text}: torch has wheels for CPython 3 only", hint=_example(setting, "3.11"))
    raise SpecError(f"{setting} {text!r} is not a Python version of the form 3.Y", hint=_example(setting, "3.11"))


def parse_glibc(text: str, setting: str = "glibc") -> str:
    """'2.28' -> '2.28'; SpecError unless it is glibc 2.Y, at least 2.17 (the oldest glibc conda-forge built for)."""
    m = _MAJOR_MINOR.match(text.strip())
    if m and m.group(1) == "2" and OLDEST_GLIBC <= int(m.group(2)) < 1000:
        return f"2.{int(m.group(2))}"
    raise SpecError(f"{setting} {text!r} is not a glibc version of the form 2.Y (2.{OLDEST_GLIBC} or newer)",
                    hint=_example(setting, "2.28"))


def _example(setting: str, value: str) -> tuple[HintPart, ...]:
    """`e.g. --python 3.11` for an option (a Retry: the user's command with it), `e.g. python: '3.11'` for a key."""
    if setting.startswith("--"):
        return ("e.g. ", again(setting, value))
    return (f"write it quoted, e.g. {setting.rpartition('.')[2]}: '{value}'",)


def groups(value: Any, where: str, known: Groups | None) -> list[str]:
    """envlock.with: a list of group names (`known`: envlock's extras table; None: the names are not checked)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(w, str) and w.strip() for w in value):
        raise SpecError(f"{where}: envlock.with must be a list of names", hint="e.g. `with: [deepspeed]`")
    if known is not None:
        for name in value:
            key = name.strip().lower()
            if key in known.default_set:
                raise SpecError(f"{where}: envlock.with names {key!r}, which is in the default set: every lock has "
                                f"{known.default_set[key]}", hint=f"remove {key!r} from `with:`")
            if key not in known.names:
                raise SpecError(f"{where}: envlock.with names {_shown(key)}, not a group envlock knows",
                                hint=f"one of: {', '.join(known.names)} (envlock/data/extras.yaml)")
    return value


def platforms(value: tuple[str, ...], where: str) -> tuple[str, ...]:
    """`platforms:`: at least one CUDA platform, each once."""
    if not value:
        raise SpecError(f"{where}: `platforms` lists no platform", hint=f"list one or more of: {', '.join(CUDA_PLATFORMS)}")
    for i, p in enumerate(value):
        if p not in CUDA_PLATFORMS:
            why = ": torch on macOS has no CUDA" if p in _MACOS else ""
            raise SpecError(f"{where}: platform {_shown(p)} is not a platform envlock locks{why}",
                            hint=f"list one or more of: {', '.join(CUDA_PLATFORMS)}")
        if p in value[:i]:
            raise SpecError(f"{where}: platform {p} is listed twice", hint="list each platform once")
    return value


def channels(value: tuple[str, ...], where: str) -> tuple[str, ...]:
    """`channels:`: names or URLs, each one word."""
    for i, c in enumerate(value):
        if not c.strip() or any(ch.isspace() or not ch.isprintable() for ch in c):
            raise SpecError(f"{where}: channel {_shown(c)} is not a channel name or URL",
                            hint="e.g. conda-forge, or https://host/channel (one word each)")
        if c in value[:i]:
            raise SpecError(f"{where}: channel {c} is listed twice", hint="list each channel once, first the one to prefer")
    return value


def toolchain_only_unused(python: str | None, pip: Sequence[str], where: str) -> None:
    """A toolchain-only spec locks no python and no PyPI part: a `python:` or a `- pip:` line would be dropped."""
    if python is not None:
        raise SpecError(f"{where}: envlock.python is {python!r}, but a toolchain-only spec locks no python",
                        hint="set python: null, or toolchain_only: false for the full environment")
    if pip:
        raise SpecError(f"{where}: the `- pip:` list ({', '.join(repr(r) for r in pip[:2])}) would be dropped: a "
                        "toolchain-only spec has no PyPI part",
                        hint="remove the `- pip:` list, or set toolchain_only: false for the full environment")


def _shown(value: Any) -> str:
    """A value as an error quotes it: its repr, cut short."""
    said = repr(value)
    return said if len(said) <= 60 else said[:57] + "..."
