"""The big projects' profiles: envlock/data/profiles/<name>.yaml, each made by envlock's source scanner
(envlock/sources/, the code behind `envlock doctor --for SOURCE`) from the project's own sdist or source tree,
as data/profiles.yaml names it. Nothing of a project is imported, built or run, and no torch is needed.

    python tools/project_profiles.py fetch [NAME ...]   # the sources into the cache: sdists from the index pip
                                                        # is configured with; a project whose release has no
                                                        # sdist there (apex, bitsandbytes) is a `git archive`
                                                        # of its repository at the commit its profile names:
                                                        # the command is printed
    python tools/project_profiles.py write [NAME ...]   # (re)write envlock/data/profiles/NAME.yaml
    python tools/project_profiles.py check [NAME ...]   # write each to memory and compare byte for byte:
                                                        # exit 1 on a difference, 0 when equal; a source not
                                                        # in the cache is said and skipped (exit 0)

The cache is $ENVLOCK_SDIST_CACHE, else ~/.cache/envlock-sdists. A new release: change `source` in
data/profiles.yaml (its file name, and the sha256 the index gives for an sdist), fetch, write, review the
diff. Each source's sha256 is checked before it is read; the sources are never committed.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from envlock.sources.classify import source_tables  # noqa: E402
from envlock.sources.profiles import profiles  # noqa: E402
from envlock.sources.reader import read_sources  # noqa: E402
from envlock.sources.saved import document, text  # noqa: E402
from envlock.sources.scan import path_kept, scan  # noqa: E402


def cache_dir() -> Path:
    return Path(os.environ.get("ENVLOCK_SDIST_CACHE") or Path.home() / ".cache" / "envlock-sdists")


def tabled() -> dict[str, dict]:
    """The profiles with a saved table under profiles/ (DeepSpeed's op table has its own tool)."""
    return {k: v for k, v in profiles().items() if str(v.get("table", "")).startswith("profiles/")}


def source_of(profile: dict, cache: Path) -> tuple[Path | None, str]:
    """(the source archive in the cache, or None with why)."""
    src = profile["source"]
    path = cache / src["file"]
    if not path.is_file():
        return None, f"no {src['file']} in {cache} (python tools/project_profiles.py fetch {profile['name']})"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if src.get("sha256") and digest != src["sha256"]:
        return None, f"{path} is not the {src['file']} the profile names (sha256 {digest})"
    return path, ""


def table(profile: dict, path: Path) -> str:
    """The profile's table from its source archive (or folder)."""
    src, globs = profile["source"], profile.get("read")
    keep = (lambda rel: path_kept(rel, globs)) if globs else None
    result = scan(read_sources(path, keep), source_tables(), profile)
    keep = profile.get("units")
    if keep:
        result = type(result)(result.origin, tuple(u for u in result.units if u.name in keep), result.skipped,
                              result.profile, result.notes)  # fmt: skip
    head = {"project": profile["name"], "version": str(src["version"]), "source": src["file"]}
    where = f"{src['file']}" + (f" (sha256 {src['sha256']})" if src.get("sha256") else f" ({src.get('git', '')} at {src.get('commit', '')})")
    comment = (f"{profile['what']} {src['version']}: what its CUDA build needs, read by envlock's source scanner\n"
               f"from {where}.\n"
               f"Made by tools/project_profiles.py (`python tools/project_profiles.py write {profile['name']}`); do not edit by hand.\n"
               "build: the whole project (cuda_headers / cuda_libraries: what every build needs; groups: the --with groups\n"
               "beyond the default dev set; host_compiler and nvcc_min: what the C++ standard and the project's own checks\n"
               "ask; arch: the GPU architectures it compiles for, with the nvcc an arch needs). units: per build unit.")  # fmt: skip
    return text(document(result, head), comment)


def fetch(names: list[str], cache: Path) -> int:
    from tests.sdists import fetch_sdist

    rc = 0
    for name, p in tabled().items():
        if names and name not in names:
            continue
        src = p["source"]
        if source_of(p, cache)[0] is not None:
            print(f"{name}: {cache / src['file']} (already there)")
            continue
        if src.get("requirement"):
            print(f"{name}: {fetch_sdist(src['requirement'], cache)}")
            continue
        top = src["file"].rsplit(".tar.gz", 1)[0]
        print(f"{name}: no sdist on the index for this release; from a clone of {src['git']}:\n"
              f"  git archive --prefix={top}/ -o {cache / src['file']} {src['commit']}")  # fmt: skip
        rc = 1
    return rc


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("fetch", "write", "check"):
        sys.stderr.write(__doc__ or "")
        return 2
    verb, names, cache = argv[0], argv[1:], cache_dir()
    if verb == "fetch":
        return fetch(names, cache)
    rc = 0
    for name, p in tabled().items():
        if names and name not in names:
            continue
        path, why = source_of(p, cache)
        if path is None:
            print(f"{name}: skipped: {why}")
            continue
        got = table(p, path)
        out = REPO / "envlock" / "data" / p["table"]
        if verb == "write":
            out.write_text(got, encoding="utf-8")
            print(f"{name}: wrote {out.relative_to(REPO)}")
        elif out.read_text(encoding="utf-8") != got:
            print(f"{name}: {out.relative_to(REPO)} differs from what its source gives")
            rc = 1
        else:
            print(f"{name}: {out.relative_to(REPO)} is what {p['source']['file']} gives")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
