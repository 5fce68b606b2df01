"""`--for SOURCE`: a folder, an sdist or wheel, or the name of an installed package whose sources ship with
it (asked of a python with `importlib.util.find_spec`, in a subprocess: nothing of it is imported here)."""

from __future__ import annotations

import json
from pathlib import Path

from envlock.errors import SpecError, UsageError
from envlock.sources.scan import Scan

_FIND = (
    "import importlib.util, json, sys\n"
    "s = importlib.util.find_spec(sys.argv[1])\n"
    "d = list(s.submodule_search_locations or []) if s else []\n"
    "print(json.dumps(d[0] if d else (s.origin if s and s.origin else None)))\n"
)
HINT = "give a source folder, an sdist (.tar.gz, .zip), a wheel, or an installed package's name"


def package_dir(name: str, python: str | None) -> Path | None:
    """Where `python` imports package `name` from (None when it has no such package)."""
    from envlock.seams import proc

    from envlock.seams.installed_torch import user_python

    exe = python or user_python(None).exe  # the python --torch installed asks (one rule)
    if exe is None or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
        return None
    got = proc.run([exe, "-c", _FIND, name.replace("-", "_")], what=f"looking for {name} in {exe}", timeout=120,
                   failed=lambda why: SpecError(f"cannot ask {exe} where {name} is: {why}", hint=HINT))  # fmt: skip
    try:
        where = json.loads(got.stdout.strip().splitlines()[-1]) if got.returncode == 0 and got.stdout.strip() else None
    except ValueError:
        return None
    return Path(where) if where else None


def load_scan(value: str, python: str | None = None) -> Scan:
    """The scan of one `--for` value; SpecError with a hint when it names nothing readable."""
    from envlock.sources.classify import source_tables
    from envlock.sources.profiles import profile_for
    from envlock.sources.reader import read_sources
    from envlock.sources.scan import scan

    path = Path(value).expanduser()
    if not path.exists():
        found = package_dir(value, python)
        if found is None or not found.exists():
            raise UsageError(f"--for {value}: no such file or folder, and no installed package of that name",
                             hint=HINT)  # fmt: skip
        path = found if found.is_dir() else found.parent
    src = read_sources(path)
    if not src.sources() and not any(p.endswith(".py") for p in src.files):
        raise SpecError(f"--for {value}: no C/C++/CUDA sources in {path}", hint=HINT)
    result = scan(src, source_tables(), profile_for(src.files))
    if not result.units:
        raise SpecError(f"--for {value}: {path} has no C/C++/CUDA sources to build", hint=HINT)
    return result


def groups_for(values: list[str], python: str | None = None) -> tuple[list[str], list[str]]:
    """(`--with` groups the sources of each `--for` value need beyond the default dev set, one line per value
    saying why). `deepspeed` is the bundle of DeepSpeed 0.19.8's ops (data/extras.yaml)."""
    groups: list[str] = []
    lines: list[str] = []
    for value in values:
        if value == "deepspeed":
            groups.append("deepspeed")
            lines.append("--for deepspeed: --with deepspeed (the groups DeepSpeed 0.19.8's JIT ops include)")
            continue
        result = load_scan(value, python)
        got = result.groups()
        groups += got
        if not got:
            lines.append(f"--for {value}: no group beyond the default dev set ({len(result.units)} build unit(s))")
            continue
        why = []
        for g in got:
            need = next(n for u in result.units for n in u.needs if n.provider.group == g and n.provider.kind == "cuda")
            why.append(f"--with {g} ({need.name}, {need.via})")
        lines.append(f"--for {value}: " + "; ".join(why))
    return list(dict.fromkeys(groups)), lines
