"""A pixi environment on disk (`<workspace>/.pixi/envs/<name>`) and what its manifest says of it, for doctor.

pixi marks an env it installed with conda-meta/pixi (JSON: manifest_path, environment_name, ...); an env without
it is still pixi's where it sits at `<workspace>/.pixi/envs/<name>` beside a pixi.toml or pyproject.toml. Its
activation is in the manifest, not in the env: `pixi run` applies `[activation]` (envlock export pixi writes
envlock's there: CUDA_HOME = "$CONDA_PREFIX" beside an envlock-activate*.sh script), so such an env needs no
`envlock hook`. Everything here is read (capped, parsed as untrusted), nothing is run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.errors import SpecError
from envlock.formats.untrusted import SPEC_CAP, load_toml, read_capped, read_json


@dataclass(frozen=True)
class PixiEnv:
    manifest: Path
    name: str
    envlock_activation: bool  # the manifest applies envlock's activation to this environment
    cuda: str | None  # its system-requirements.cuda (what `envlock export pixi` sets from the lock's anchor)


def _manifest_of(prefix: Path) -> tuple[Path, str] | None:
    doc = read_json(prefix / "conda-meta" / "pixi")
    if isinstance(doc, dict) and isinstance(doc.get("manifest_path"), str):
        return Path(doc["manifest_path"]), str(doc.get("environment_name") or prefix.name)
    if prefix.parent.name == "envs" and prefix.parent.parent.name == ".pixi":
        workspace = prefix.parent.parent.parent
        found = [workspace / n for n in ("pixi.toml", "pyproject.toml") if (workspace / n).is_file()]
        return (found[0], prefix.name) if found else None
    return None


def _features(table: Mapping[str, Any], env: str) -> list[Mapping[str, Any]]:
    """The tables that make up environment `env`: the default feature (the top level) unless it is left out,
    then its features."""
    spec = (table.get("environments") or {}).get(env) if env != "default" else None
    names = spec if isinstance(spec, list) else (spec or {}).get("features", []) if isinstance(spec, dict) else []
    no_default = isinstance(spec, dict) and spec.get("no-default-feature") is True
    features = table.get("feature") or {}
    out = [] if no_default else [table]
    return out + [features[n] for n in names if isinstance(n, str) and isinstance(features.get(n), dict)]


def _activations(feature: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield feature.get("activation") or {}
    for target in (feature.get("target") or {}).values():
        if isinstance(target, dict):
            yield target.get("activation") or {}


def _is_envlocks(act: Mapping[str, Any]) -> bool:
    env, scripts = act.get("env") or {}, act.get("scripts") or []
    return (isinstance(env, dict) and env.get("CUDA_HOME") in ("$CONDA_PREFIX", "%CONDA_PREFIX%\\Library")
            and isinstance(scripts, list) and any(str(s).startswith("envlock-activate") for s in scripts))


def pixi_env(prefix: Path) -> PixiEnv | None:
    """The pixi environment at `prefix`, None where it is not one (or its manifest is gone)."""
    found = _manifest_of(prefix)
    if found is None:
        return None
    manifest, name = found
    try:
        doc = load_toml(read_capped(manifest, SPEC_CAP, SpecError), manifest, SpecError, hint="")
    except (OSError, UnicodeDecodeError, SpecError):
        return PixiEnv(manifest, name, False, None)
    table = (doc.get("tool") or {}).get("pixi") if manifest.name == "pyproject.toml" else doc
    if not isinstance(table, dict):
        return None
    features = [f for f in _features(table, name) if isinstance(f, dict)]
    envlock = any(_is_envlocks(a) for f in features for a in _activations(f) if isinstance(a, dict))
    cuda = next((str(c) for f in reversed(features) if (c := (f.get("system-requirements") or {}).get("cuda"))), None)
    return PixiEnv(manifest, name, envlock, cuda)
