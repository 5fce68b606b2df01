"""The env record, conda-meta/envlock: what envlock knows of an environment it made (`envlock create`, `unpack`)
or hooked (`envlock hook`). This module is its one owner: its name, its version, reading it (the version
checked) and the document written. `envlock run`/`shell-hook` (activation/conda.py), `envlock hook` and
`create` (prefix.py) and doctor (doctor/observe.py) read it through here.

JSON without a .json suffix, like pixi's conda-meta/pixi and conda's conda-meta/state: conda, micromamba and
rattler parse every conda-meta/*.json as a package record, and an envlock.json there makes rattler fail with
"failed to determine the currently installed packages" (measured).

Versions: 1 is the only one so far. A record without a version is read as 1 (hand-made ones, in tests and
elsewhere); a version this envlock does not know (a newer envlock's) is one NewerFormatError, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envlock.errors import NewerFormatError

#: What a record may weigh (envlock writes ~1 KB); more is "not valid JSON". Read here with json alone, as
#: envlock.formats.untrusted.json_value reads such values, so that activation/ (which reads the record) stays low.
CAP = 1 << 20

NAME = "envlock"
REL = f"conda-meta/{NAME}"
VERSION = 1
VERSION_KEY = "envlock_json_version"


def record_anchor(anchor: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a lock's anchor a record keeps (doctor's reference and its re-plan fix): torch, its CUDA and
    cuDNN, its source; where they are set, what the anchor came from, the label, and torch's own CUDA under an
    override (`torch_cuda`: nvcc.skew measures from it, as resolve does)."""
    out = {k: anchor.get(k) for k in ("torch", "cuda", "cudnn", "torch_source")}
    out.update({k: anchor[k] for k in ("source", "local_label", "torch_cuda") if anchor.get(k)})
    return out


def path(prefix: Path) -> Path:
    return prefix / "conda-meta" / NAME


def document(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The record to write for `meta`: this envlock's version and record version first."""
    from envlock import __version__

    return {VERSION_KEY: VERSION, "envlock_version": __version__,
            **{k: v for k, v in meta.items() if k not in (VERSION_KEY, "envlock_version")}}


def load(prefix: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None); (None, None) when there is none; (None, why) when it does not read (another user's 0600
    record, not JSON, not an object, a version that is not a number). A newer version: NewerFormatError."""
    where = path(prefix)
    import json

    try:
        with where.open("rb") as fh:
            data = fh.read(CAP + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"its record {where} cannot be read ({exc.strerror or exc})"
    try:
        doc = json.loads(data) if len(data) <= CAP else None
    except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError too), or nested too deeply
        doc = None
    if not isinstance(doc, dict):  # not JSON, nested too deeply, too big, or not an object
        return None, f"its record {where} is not valid JSON"
    version = doc.get(VERSION_KEY, 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return None, f"its record {where} has no valid {VERSION_KEY} ({version!r})"
    if version > VERSION:
        from envlock import UPGRADE_HINT

        raise NewerFormatError(
            f"{where} was written by a newer envlock ({str(doc.get('envlock_version', '?'))[:40]}, "
            f"record version {version}; this envlock reads version {VERSION})",
            hint=f"{UPGRADE_HINT} to use this environment")
    return doc, None


def read(prefix: Path) -> dict[str, Any]:
    """The record, or {} when there is none or it does not read; a newer version: NewerFormatError."""
    return load(prefix)[0] or {}
