"""`--for SOURCE`: a folder, an sdist or wheel, or the name of an installed package whose sources ship with
it. The package is looked for by a python run as `python -I -S` (isolated: no current folder, no PYTHON*
variables, no user site; no `site`, so no .pth file runs) that walks the import system's search paths with
the path finder's rules (a package folder or module, then a namespace folder; only folders and file
names are looked at, nothing is imported: a checkout's `a/__init__.py` never runs, not even for `a.b`), the interpreter's site-packages and the path lines of their .pth files included, and
maps a distribution's name to its import name through its .dist-info's top_level.txt or RECORD.
A project envlock has profiled (data/profiles/: flash-attn, xformers, …) is its saved scan, no sources needed,
unless that name is installed with its C/C++/CUDA sources (a source or editable install: those are read)."""

from __future__ import annotations

import json
from pathlib import Path

from envlock.errors import SpecError
from envlock.sources.scan import Scan

_FIND = r"""
import glob, importlib.machinery as m, json, os, re, sys, sysconfig
name = sys.argv[1]
here = os.path.dirname(os.path.abspath(sys.executable))  # without `site`, a venv's prefix is found here
venv = next((d for d in (here, os.path.dirname(here)) if os.path.isfile(os.path.join(d, "pyvenv.cfg"))), None)
cfg = open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8", errors="replace").read() if venv else ""
bases = ([venv] if venv else []) + ([sys.prefix] if not venv or re.search(r"system-site-packages\s*=\s*true", cfg, re.I) else [])
sites = list(dict.fromkeys(sysconfig.get_paths(vars={"base": b, "platbase": b})[k] for b in bases for k in ("purelib", "platlib")))
dirs = [p for p in sys.path if p and os.path.isabs(p)] + sites
for site in sites:  # a .pth file's path lines (an editable install's folder); its `import` lines are not run
    for pth in sorted(glob.glob(os.path.join(site, "*.pth"))):
        try:
            lines = open(pth, encoding="utf-8", errors="replace").read().splitlines()
        except OSError:
            continue
        dirs += [os.path.join(site, x.strip()) for x in lines if x.strip() and not x.startswith(("#", "import ", "import	"))]
def top_of(dist):
    norm = re.sub(r"[-_.]+", "_", dist).lower()
    for site in sites:
        for info in sorted(glob.glob(os.path.join(site, "*.dist-info"))):
            if re.sub(r"[-_.]+", "_", os.path.basename(info)[: -len(".dist-info")].rsplit("-", 1)[0]).lower() != norm:
                continue
            for fname, pick in (("top_level.txt", lambda l: l), ("RECORD", lambda l: l.split(",")[0].split("/")[0])):
                try:
                    rows = [pick(l.strip()) for l in open(os.path.join(info, fname), encoding="utf-8") if l.strip()]
                except OSError:
                    continue
                rows = [r for r in rows if r and not r.endswith((".dist-info", ".data", ".pth")) and r != "__pycache__"]
                if rows:
                    return rows[0].removesuffix(".py")
    return None
def locate(parts, where):
    hit = None
    for i, part in enumerate(parts):  # a package folder or module first, as the path finder does; a bare folder last
        hit = None
        for d in where:
            c = os.path.join(d, part)
            init = next((f for f in (os.path.join(c, "__init__" + s) for s in m.all_suffixes()) if os.path.isfile(f)), None)
            mod = next((c + s for s in m.all_suffixes() if os.path.isfile(c + s)), None)
            if init or mod:
                hit = c if init else mod
                break
        if hit is None:
            hit = next((os.path.join(d, part) for d in where if os.path.isdir(os.path.join(d, part))), None)
        if hit is None or (i < len(parts) - 1 and not os.path.isdir(hit)):
            return None
        where = [hit]
    return hit
parts = name.replace("-", "_").split(".")
hit = locate(parts, dirs)
if hit is None and len(parts) == 1 and top_of(name):
    hit = locate([top_of(name)], dirs)
print(json.dumps(hit))
"""
HINT = ("give a source folder, an sdist (.tar.gz, .zip), a wheel, an installed package's name, or a profiled project "
        "(envlock doctor --help lists them)")


def package_dir(name: str, python: str | None) -> Path | None:
    """Where `python` would import package `name` from (None when it has no such package); nothing is imported."""
    from envlock.seams import proc

    from envlock.seams.installed_torch import user_python

    exe = python or user_python(None).exe  # the python --torch installed asks (one rule)
    if exe is None or not name.replace("_", "").replace("-", "").replace(".", "").isalnum() or ".." in name:
        return None
    got = proc.run([exe, "-I", "-S", "-c", _FIND, name], what=f"looking for {name} in {exe}", timeout=120,
                   failed=lambda why: SpecError(f"cannot ask {exe} where {name} is: {why}", hint=HINT))  # fmt: skip
    try:
        where = json.loads(got.stdout.strip().splitlines()[-1]) if got.returncode == 0 and got.stdout.strip() else None
    except ValueError:
        return None
    return Path(where) if isinstance(where, str) and where else None


def load_scan(value: str, python: str | None = None) -> Scan:
    """The scan of one `--for` value; SpecError with a hint when it names nothing readable."""
    from envlock.sources.classify import source_tables
    from envlock.sources.profiles import profile_for
    from envlock.sources.reader import read_sources
    from envlock.sources.scan import scan

    path = Path(value).expanduser()
    saved = None
    if not path.exists():
        from envlock.sources.profiles import profile_named
        from envlock.sources.saved import saved_scan

        named = profile_named(value)
        saved = saved_scan(named["name"]) if named else None
        found = package_dir(value, python)
        if found is None or not found.exists():
            if saved is not None:  # a project envlock has profiled: its saved scan, no sources needed
                return saved
            # a well-formed value envlock cannot serve: exit 1, as a -p PATH that is not there (docs/reference.md)
            raise SpecError(f"--for {value}: no such file or folder, and no installed package of that name",
                            hint=HINT)  # fmt: skip
        path = found if found.is_dir() else found.parent
    src = read_sources(path)
    if saved is not None and not src.sources():
        return saved  # installed without its sources (a wheel): the profile's saved scan says more
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
