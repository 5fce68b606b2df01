"""pixi.lock (v4–v6), read for `envlock diff`: each environment's packages per platform."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envlock.errors import LockfileError
from envlock.formats.model import LockFile
from envlock.models import LockedPackage, PypiPackage
from envlock.names import conda_stem, split_conda_filename, wheel_name_version


def is_pixi(doc: Mapping[str, Any]) -> bool:
    return "environments" in doc and isinstance(doc.get("packages"), list)


def parse_pixi(doc: Mapping[str, Any], p: Path | None) -> LockFile:
    """A pixi.lock's packages; an environment other than `default` names its platforms `<env>/<platform>`."""
    version = doc.get("version")
    if not isinstance(version, int) or not 4 <= version <= 6:
        raise LockfileError(f"{p} is pixi.lock version {version!r}", hint="envlock diff reads pixi.lock v4-v6")
    pypi_meta = {
        str(x.get("pypi")): (str(x.get("name", "")), str(x.get("version", "")))
        for x in doc["packages"]
        if isinstance(x, dict) and "pypi" in x
    }
    platforms: list[str] = []
    conda: list[LockedPackage] = []
    pypi: list[PypiPackage] = []
    for env, body in (doc.get("environments") or {}).items():
        for platform, items in ((body or {}).get("packages") or {}).items():
            key = platform if env == "default" else f"{env}/{platform}"
            platforms.append(key)
            for item in items or ():
                if "conda" in item:
                    url = str(item["conda"])
                    name, version_, build = split_conda_filename(url) or (conda_stem(url), "", "")
                    conda.append(LockedPackage(name, version_, build, key, url, "", None))
                elif "pypi" in item:
                    url = str(item["pypi"])
                    name, version_ = pypi_meta.get(url, wheel_name_version(url))
                    pypi.append(PypiPackage(name, version_, key, url, ""))
    return LockFile(
        path=p,
        platforms=tuple(platforms),
        channels=(),
        content_hash={},
        sources=(),
        custom_metadata={},
        packages=tuple(conda),
        pypi=tuple(pypi),
        kind="pixi",
        version=version,
    )


def pixi_content(path: Path, env: str = "default") -> dict[str, Any]:
    """What a pixi.lock holds for environment `env`, per platform: each conda package's (url, sha256, md5,
    depends) and each wheel's (url, sha256), sorted (envlock.project.pixiexport compares it with the lock's);
    LockfileError where it does not read as a pixi.lock."""
    from envlock.formats import read_text
    from envlock.formats.condalock import load_yaml

    doc = load_yaml(read_text(path, missing="no pixi.lock", missing_hint="export it: envlock export pixi"), path,
                    compare=True)
    if not is_pixi(doc) or not isinstance((doc.get("environments") or {}).get(env), dict):
        raise LockfileError("is not a pixi.lock with a default environment", hint="export it again")
    entries = {}
    for x in doc["packages"]:
        if isinstance(x, dict) and isinstance(x.get("conda") or x.get("pypi"), str):
            entries[str(x.get("conda") or x.get("pypi"))] = x
    out: dict[str, Any] = {}
    for platform, items in (doc["environments"][env].get("packages") or {}).items():
        conda, pypi = [], []
        for item in items or ():
            url = str((item or {}).get("conda") or (item or {}).get("pypi") or "")
            x = entries.get(url, {})
            if "conda" in (item or {}):
                conda.append((url, str(x.get("sha256") or ""), str(x.get("md5") or ""),
                              tuple(str(d) for d in x.get("depends") or ())))
            else:
                pypi.append((url, str(x.get("sha256") or "")))
        out[str(platform)] = (sorted(conda), sorted(pypi))
    return out
