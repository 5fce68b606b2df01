"""The one checked loader of untrusted documents: every spec, lock, manifest, config file and cache record that
a pull request, an archive, a mirror or another user could have written (docs/security.md).

The work is bounded whatever the bytes: a size cap per kind of document, checked before it is parsed; no
YAML aliases (nine levels of them in a 1 KB spec expand to 10^9 strings: `check` grew to 2.7 GB); nesting
bounded (libyaml stops at 1,000 levels; deeper JSON or TOML is refused here, not a RecursionError). Each
refusal is one EnvlockError of the caller's class, naming the document (`where`) and the reason.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

#: The caller's error class (an envlock.errors.EnvlockError: this module imports nothing of envlock's, so every
#: floor can use it), called as error(message, hint=hint).
ErrorClass = Callable[..., Exception]

MiB = 1 << 20
SPEC_CAP = 1 * MiB  # environments/<name>.yml, envlock.toml
LOCK_CAP = 32 * MiB  # conda-lock.yml and the files beside it, pixi.lock (diff)
DOC_CAP = 64 * MiB  # manifests, a mirror's repodata, package metadata, cache records
_KIND = {SPEC_CAP: "a spec or config file", LOCK_CAP: "a lock", DOC_CAP: "a manifest or metadata file"}
ALIAS_HINT = "write the values out in full (envlock writes no YAML aliases), or restore the file from git"
SIZE_HINT = "restore the file from git (or re-create it with envlock); envlock refuses bigger ones unread"


def _error(error: ErrorClass, where: object, why: str, hint: str) -> Exception:
    return error(f"{where} {why}", hint=hint)


def over_cap(size: int, cap: int) -> str:
    """The reason a document of `size` bytes is refused ('is 40.0 MiB, over the 32 MiB a lock may be')."""
    return f"is {size / MiB:.1f} MiB, over the {cap // MiB} MiB {_KIND.get(cap, 'a document')} may be"


def check_size(data: str | bytes, cap: int, where: object, error: ErrorClass) -> None:
    if len(data) > cap:  # characters of a str: at least as many bytes
        raise _error(error, where, over_cap(len(data), cap), SIZE_HINT)


def read_capped(path: Path, cap: int, error: ErrorClass) -> str:
    """A text file (UTF-8, universal newlines, as Path.read_text reads it), refused past `cap` bytes before
    it is read whole. OSError and UnicodeDecodeError reach the caller, which words a missing file."""
    with path.open("rb") as fh:
        data = fh.read(cap + 1)
        if len(data) > cap:
            raise _error(error, path, over_cap(max(os.fstat(fh.fileno()).st_size, len(data)), cap), SIZE_HINT)
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


# --------------------------------------------------------------------------- YAML


@functools.cache
def _loader() -> type:
    """The safe loader (libyaml's when PyYAML has it) that refuses a node constructed twice: an alias."""
    import yaml  # noqa: PLC0415 - only the readers of YAML pay for it

    class NoAliases(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # the loader base is chosen at run time (libyaml's when PyYAML has it)
        def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
            if node in self.constructed_objects or node in self.recursive_objects:
                raise yaml.constructor.ConstructorError(None, None, "alias", node.start_mark)
            return super().construct_object(node, deep)

    return NoAliases


def load_yaml(text: str, where: object, error: ErrorClass, *, hint: str, cap: int,
              invalid: str = "is not valid YAML at line {line}") -> Any:
    """A YAML document, or one `error`: over `cap`, not YAML (`invalid` with the caller's `hint`), using
    aliases, nested too deeply."""
    check_size(text, cap, where, error)
    from envlock.formats.yamlsubset import NotSimple, parse  # noqa: PLC0415

    try:  # envlock's own block style, read exactly as PyYAML reads it, ~10x faster (no aliases, bounded depth)
        return parse(text)
    except NotSimple:
        pass  # anything else: PyYAML, checked
    import yaml  # noqa: PLC0415

    loader = _loader()(text)
    try:
        return loader.get_single_data()
    except yaml.constructor.ConstructorError as exc:
        if exc.problem != "alias":
            raise _error(error, where, invalid.format(line=_line(exc, bare=True)), hint) from None
        raise _error(error, where, f"uses a YAML alias (the value anchored at line {_line(exc, bare=True)} is "
                                   "used again); envlock reads no aliases", ALIAS_HINT) from None
    except yaml.YAMLError as exc:
        if "nesting depth" in str(exc):
            raise _error(error, where, f"is nested too deeply ({_line(exc)}over 1000 levels)", SIZE_HINT) from None
        raise _error(error, where, invalid.format(line=_line(exc, bare=True)), hint) from None
    except RecursionError:  # the pure-Python loader (no libyaml) on deep nesting
        raise _error(error, where, "is nested too deeply", SIZE_HINT) from None
    except (ValueError, TypeError, AttributeError, OverflowError):
        # PyYAML's constructors on a tagged value they cannot build (`!!timestamp '0610-07-03 18:37:17-09:17:40'`
        # ended in AttributeError, `!!int x` in ValueError): not YAML envlock can read.
        raise _error(error, where, invalid.format(line="?").replace(" at line ?", "") + " (a value of a YAML tag such as "
                     "!!timestamp or !!int that cannot be read as one)", hint) from None
    finally:
        loader.dispose()


def _line(exc: yaml.YAMLError, bare: bool = False) -> str:
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return "?" if bare else ""
    return str(mark.line + 1) if bare else f"line {mark.line + 1}: "


# --------------------------------------------------------------------------- JSON and TOML


def load_json(text: str | bytes, where: object, error: ErrorClass, *, hint: str, cap: int = DOC_CAP) -> Any:
    """A JSON document, or one `error` (over `cap`, not JSON, nested too deeply)."""
    import json  # noqa: PLC0415

    check_size(text, cap, where, error)
    try:
        return json.loads(text)
    except RecursionError:
        raise _error(error, where, "is nested too deeply", SIZE_HINT) from None
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError of bytes
        raise _error(error, where, f"is not valid JSON ({exc})", hint) from None


def json_value(text: str | bytes, default: Any = None) -> Any:
    """A JSON value from an untrusted place (a lock's metadata, a cache record), or `default` when it is over
    DOC_CAP, does not read or is nested too deeply. The caller checks the value's shape."""
    import json  # noqa: PLC0415

    if len(text) > DOC_CAP:
        return default
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return default


def read_json(path: Path, default: Any = None) -> Any:
    """A JSON file another user, a package or an archive may have written (a cache record, a mirror's index,
    a package's info/paths.json): json_value of its bytes, or `default` when it cannot be read."""
    try:
        with path.open("rb") as fh:
            data = fh.read(DOC_CAP + 1)
    except OSError:
        return default
    return json_value(data, default)


def load_toml(text: str, where: object, error: ErrorClass, *, hint: str, cap: int = SPEC_CAP) -> dict[str, Any]:
    """A TOML document, or one `error` (over `cap`, not TOML, nested too deeply)."""
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415  (only the specs that are TOML pay for it)
    else:
        import tomli as tomllib  # noqa: PLC0415  (the same parser before 3.11)
    check_size(text, cap, where, error)
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except RecursionError:
        raise _error(error, where, "is nested too deeply", SIZE_HINT) from None
    except tomllib.TOMLDecodeError as exc:
        raise _error(error, where, f"is not valid TOML: {exc}", hint) from None
