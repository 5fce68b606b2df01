"""pixi.lock as py-rattler (0.28.0) writes it: `rattler.LockFile`, one `Environment` per export, `to_path`.

Each conda package becomes a RepoDataRecord of what conda-lock.yml records of it: url, sha256, md5 and
depends (the lock has no constrains, size or timestamp: none are written). Name, version and build come from
the lock; the build number and the noarch kind are what rattler itself derives from the file name on
reading (the lock records neither), so rattler writes nothing more for them. The channel is the package
URL's channel.

The PyPI part: py-rattler's `add_pypi_package` takes no hash, so each wheel's `sha256:` line is put into
rattler's text where rattler_lock's own writer puts a hash (after the entry's `version:`), and the text is
read back with `LockFile.from_path` to check that rattler sees every hash where it belongs before it is
returned. Same packages in, same bytes out.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock.errors import LockfileError
from envlock.models import LockedPackage, PypiPackage
from envlock.names import split_conda_filename


def _noarch(subdir: str, build: str) -> str | None:
    """What rattler_lock derives for a package of `subdir` whose build string is `build`."""
    if subdir != "noarch":
        return None
    return "python" if "py" in build else "generic"


def _record(p: LockedPackage) -> Any:
    from rattler import PackageRecord, RepoDataRecord
    from rattler.package.build_string import BuildString

    filename = p.url.rsplit("/", 1)[-1]
    subdir = p.subdir or p.url.rsplit("/", 2)[-2]
    split = split_conda_filename(filename)
    build_number = int(p.build.rsplit("_", 1)[-1]) if p.build.rsplit("_", 1)[-1].isdigit() else 0
    if split is None:
        raise LockfileError(f"{filename} is not a conda archive name", hint="re-lock it with `envlock lock`")
    rec = PackageRecord(p.name, p.version, BuildString(p.build), build_number, subdir,
                        noarch=_noarch(subdir, p.build),  # type: ignore[arg-type]  # rattler's literal
                        depends=list(p.depends), constrains=list(p.constrains),
                        sha256=bytes.fromhex(p.sha256) if p.sha256 else None,
                        md5=bytes.fromhex(p.md5) if p.md5 else None, size=p.size)
    return RepoDataRecord(rec, filename, p.url, p.url.rsplit("/", 2)[0] + "/")


def render_pixi_lock(env: str, channels: Sequence[str], conda: Mapping[str, Sequence[LockedPackage]],
                     pypi: Mapping[str, Sequence[PypiPackage]]) -> str:
    """The text of a pixi.lock with one environment `env` (channels: URLs, in priority order)."""
    from rattler import LockFile
    from rattler.lock import LockChannel, LockPlatform

    from envlock.seams.conda.errors import mapped

    platforms = {p: LockPlatform(p) for p in conda}
    with mapped(what="the pixi.lock", default="package"), tempfile.TemporaryDirectory() as tmp:
        lf = LockFile(list(platforms.values()))
        lf.set_channels(env, [LockChannel(c) for c in channels])
        for p, packages in conda.items():
            for pkg in packages:
                lf.add_conda_package(env, platforms[p], _record(pkg))
            for w in pypi.get(p, ()):
                lf.add_pypi_package(env, platforms[p], w.name, w.version, w.url)
        path = Path(tmp) / "pixi.lock"
        lf.to_path(path)
        text = _with_hashes(path.read_text(encoding="utf-8"), {w.url: w.sha256 for ws in pypi.values() for w in ws})
        path.write_text(text, encoding="utf-8")
        _check_read_back(LockFile.from_path(path), env, pypi)
    return text


def _with_hashes(text: str, hashes: Mapping[str, str]) -> str:
    """rattler's text with `  sha256: HEX` after the `version:` line of each top-level `- pypi:` entry."""
    out: list[str] = []
    pending: str | None = None  # the hash of the pypi entry being read
    for line in text.splitlines(keepends=True):
        if line.startswith("- "):
            pending = None
            if line.startswith("- pypi: "):
                url = line[len("- pypi: "):].rstrip("\n")
                pending = hashes.get(url) or hashes.get(url.strip("'\""))
                if pending is None:
                    raise LockfileError(f"rattler wrote a PyPI entry envlock cannot place a hash for ({url[:80]})",
                                        hint="report it: envlock's pixi.lock writer does not know this form")
        out.append(line)
        if pending is not None and line.startswith("  version: "):
            out.append(f"  sha256: {pending}\n")
            pending = None
    return "".join(out)


def _check_read_back(lf: Any, env: str, pypi: Mapping[str, Sequence[PypiPackage]]) -> None:
    """Every wheel's hash is where rattler reads it."""
    environment = lf.environment(env)
    wanted = {(p, w.url): w.sha256 for p, ws in pypi.items() for w in ws}
    have = {}
    for platform, packages in environment.packages_by_platform().items():
        for pkg in packages:
            hashes = getattr(pkg, "hashes", None)
            if type(pkg).__name__ == "PypiLockedPackage":
                have[(str(platform), pkg.location)] = hashes.sha256.hex() if hashes and hashes.sha256 else ""
    if have != wanted:
        raise LockfileError("the pixi.lock rattler wrote does not read back with every wheel's sha256",
                            hint="report it: envlock's pixi.lock writer does not know this rattler's format")
