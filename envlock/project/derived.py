"""The files of `locks/<name>/` derived from its conda-lock.yml — the @EXPLICIT files, `requirements-*.txt` and
the activation scripts — rendered by one function for the writer and for every reader that checks them.

A reviewer reads conda-lock.yml; conda, pip and the Dockerfile install these files. So each is a function of
conda-lock.yml alone: `check` re-renders them and compares byte for byte (a difference names the file and its
first differing line), `envlock lock NAME` re-renders them without a solve, and create, unpack and export
refuse one that disagrees with the conda-lock.yml beside it. The folder holds nothing else: `check` names any
other file in it (a `conda-osx-64.lock` planted for a platform the lock lacks), and create, unpack and export
refuse such a file when asked to use it. This module is the one list of what the folder may hold (`OWN_KINDS`,
`render`, `platform_envs`). Pure: values in, (name, text) pairs out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from envlock import __version__
from envlock.errors import LockfileError
from envlock.formats import LOCK_NAME, LockFile, read_lock, render_explicit, render_requirements
from envlock.formats.model import META_PREFIX, custom_value
from envlock.formats.spec import EnvSpec, pip_requirements, render_platform_env
from envlock.models import LockedPackage, PypiPackage, record
from envlock.names import printable

CUDNN_PACKAGES = ("cudnn", "libcudnn-dev")
#: The names of the kinds of file envlock renders beside conda-lock.yml, for any platform (and the temp files of a
#: killed write): `envlock lock` removes one that its new rendering lacks; a file of any other name is not
#: envlock's, and is left for the user to remove.
OWN_KINDS = re.compile(r"(conda-[a-z]+-[a-z0-9]+\.lock|requirements-[a-z]+-[a-z0-9]+\.txt|environment-[a-z]+-[a-z0-9]+\.yml"
                       r"|(de)?activate\.(sh|fish|ps1|bat)|\..+\.tmp)")


@record
class Derived:
    """Everything the derived files of one lock depend on (all of it recorded in conda-lock.yml)."""

    env_name: str
    platforms: tuple[str, ...]
    content_hash: Mapping[str, str]
    packages: Sequence[LockedPackage]
    pypi: Mapping[str, Sequence[PypiPackage]]  # platform -> wheels; {} for a toolchain-only lock
    torch_source: str
    version: str = __version__  # the envlock that wrote the lock (the files' first line names it)


def variant_indexes(pypi: Mapping[str, Sequence[PypiPackage]]) -> tuple[str, ...]:
    """The PyTorch wheel index a requirements file must name: that of the locked torch's `+cuXYZ` label."""
    from envlock.core.tables import variant_index_url

    labels = sorted({w.version.partition("+")[2] for ws in pypi.values() for w in ws if w.name == "torch"} - {""})
    return tuple(variant_index_url(label) for label in labels if label[:2] == "cu" and label[2:].isdigit())


def render(d: Derived) -> dict[str, str]:
    """file name -> text of every derived file (the writer's and the checks' one rendering)."""
    files = {
        f"conda-{p}.lock": render_explicit(packages=d.packages, platform=p, content_hash_value=d.content_hash[p],
                                           env_name=d.env_name, version=d.version, header=(
            f"# install: conda create -p PREFIX --file conda-{p}.lock   (then the activation: envlock hook -p PREFIX)",))
        for p in d.platforms
    }
    if d.pypi:
        extra = variant_indexes(d.pypi)
        files.update({
            f"requirements-{p}.txt": render_requirements(d.pypi.get(p, ()), platform=p, content_hash_value=d.content_hash[p],
                                                         env_name=d.env_name, extra_indexes=extra, version=d.version)
            for p in d.platforms
        })  # fmt: skip
    has_cudnn = any(p.name in CUDNN_PACKAGES for p in d.packages)
    return {**files, **_scripts(tuple(d.platforms), d.torch_source, has_cudnn)}


@functools.lru_cache(maxsize=64)
def _scripts(platforms: tuple[str, ...], torch_source: str, has_cudnn: bool) -> dict[str, str]:
    """The activation scripts (rendered once per kind of lock: a project's locks mostly share one)."""
    from envlock.seams.activation import ActivationSpec, render_scripts

    spec = ActivationSpec(platforms=platforms, torch_source=torch_source,  # type: ignore[arg-type]  # the lock's str for a Literal
                          has_cudnn=has_cudnn)
    return dict(sorted(render_scripts(spec).items()))


def platform_envs(lock: LockFile, spec: EnvSpec) -> dict[str, str]:
    """`environment-<platform>.yml` of each platform, as conda alone reads it (envlock.formats.spec), from what
    conda-lock.yml records of each solve: the chosen specs and channels, the user's extra specs (the tail of the
    chosen specs, as the rules append them) and the optional package it took (ninja beside a toolchain, pip beside
    a full env's python). The `- pip:` list is the spec's: the lock records it only sorted (a spec whose list
    changed is stale by its content hash anyway)."""
    pip = () if spec.toolchain_only else pip_requirements(spec.pip, spec.torch, spec.torch_source)[0]
    optional = spec.optional
    out = {}
    taken = {q.platform for q in lock.packages if q.name == optional}
    for p in lock.platforms:
        plan = custom_value(lock.custom_metadata, f"plan.{p}", {})
        inputs = custom_value(lock.custom_metadata, f"inputs.{p}", {})
        if not isinstance(plan, dict) or not isinstance(inputs, dict):
            continue  # not a lock this envlock reads a plan of: the integrity checks say so
        specs, extras = [str(s) for s in plan.get("specs") or ()], {str(s) for s in inputs.get("extras") or ()}
        toolchain = [s for s in specs if s not in extras]
        toolchain += [optional] if p in taken else []
        out[f"environment-{p}.yml"] = render_platform_env(spec, p, toolchain, [s for s in specs if s in extras], pip,
                                                          [str(c) for c in plan.get("channels") or ()])
    return out


def of_lock(lock: LockFile) -> Derived:
    """The inputs of a lock's derived files, from conda-lock.yml alone; LockfileError when it lacks them."""
    meta = lock.envlock_meta()
    anchor = meta.get("anchor") if isinstance(meta.get("anchor"), dict) else {}
    missing = [p for p in lock.platforms if p not in lock.content_hash]
    if not meta or missing:
        where = lock.path or "the lock"
        raise LockfileError(f"{where} does not record what its files are rendered from"
                            + (f" (no content_hash for {printable(missing[0])})" if missing else " (no envlock metadata)"),
                            hint="re-create it with `envlock lock`")
    pypi = {p: lock.pypi_for(p) for p in lock.platforms if f"{META_PREFIX}pypi.{p}" in lock.custom_metadata}
    return Derived(env_name=lock.env_name(), platforms=lock.platforms, content_hash=lock.content_hash,
                   packages=lock.packages, pypi=pypi, torch_source=str(anchor.get("torch_source") or "pip"),
                   version=str(meta.get("envlock_version") or __version__))


def platform_of(file_name: str) -> str | None:
    """The platform a derived file belongs to (conda-linux-64.lock, environment-linux-64.yml -> linux-64), None
    for the activation scripts."""
    stem = file_name.rsplit(".", 1)[0]
    for prefix in ("conda-", "requirements-", "environment-"):
        if stem.startswith(prefix):
            return stem[len(prefix) :]
    return None


# --------------------------------------------------------------------------- comparing


def first_difference(have: str, want: str) -> str:
    """Where a file's text departs from its rendering: 'line 9: `torch==2.7.0 \\` (conda-lock.yml renders
    `torch==2.7.1 \\`)', escaped and cut to fit a line."""
    old, new = have.split("\n"), want.split("\n")
    for i, (a, b) in enumerate(zip(old, new), start=1):
        if a != b:
            at = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return f"line {i}: `{_cut(a, at)}` (conda-lock.yml renders `{_cut(b, at)}`)"
    if len(old) > len(new):  # lines past the end of the rendering
        return f"line {len(new) + 1}: `{_cut(old[len(new)])}` is not in conda-lock.yml"
    if new[len(old):] == [""]:
        return f"line {len(old)}: the file does not end with a line break"
    return f"line {len(old) + 1}: the file ends where conda-lock.yml renders `{_cut(new[len(old)])}`"


def _cut(line: str, at: int = 0, width: int = 60) -> str:
    """A line for a message: escaped, at most `width` characters, showing column `at` (where it differs)."""
    start = max(0, min(at - 20, len(line) - width + 3)) if len(line) > width else 0
    text = printable(line[start : start + width])
    return ("..." if start else "") + text + ("..." if start + width < len(line) else "")


def disagreements(lock_dir: Path, expected: Mapping[str, str], *, present_only: bool) -> list[tuple[str, str]]:
    """(file name, what differs) for each derived file that is not its rendering; `present_only`: a missing
    file is fine (an archive holds one platform's)."""
    out = []
    for name, rendered in sorted(expected.items()):
        want = rendered.replace("\r\n", "\n")  # line endings aside (.bat/.ps1 are CRLF; a checkout may convert)
        path = lock_dir / name
        try:
            with path.open(encoding="utf-8", newline="") as fh:
                have = fh.read(len(rendered) + 4096).replace("\r\n", "\n")
        except FileNotFoundError:
            if not present_only:
                out.append((name, "is missing"))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            out.append((name, f"cannot be read ({type(exc).__name__})"))
            continue
        if have != want:
            out.append((name, f"differs from what conda-lock.yml renders, at {first_difference(have, want)}"))
    return out


def strangers(lock_dir: Path, rendered: Iterable[str]) -> list[str]:
    """The entries of a lock folder that are neither conda-lock.yml nor one of the `rendered` files, sorted."""
    try:
        names = sorted(p.name for p in lock_dir.iterdir())
    except OSError:
        return []
    keep = {LOCK_NAME, *rendered}
    return [n for n in names if n not in keep]


def exported(lock_dir: Path, lock: LockFile) -> list[str]:
    """The files an `envlock export pixi -o locks/<name>` keeps in the lock folder, where its pixi.toml is there
    (checked by envlock.project.pixiexport.disagreements), with pixi's own environment folder `.pixi`."""
    from envlock.project import pixiexport

    if not (lock_dir / pixiexport.MANIFEST).is_file():
        return []
    return [pixiexport.MANIFEST, pixiexport.LOCK, *pixiexport.script_names(lock, None).values(), ".pixi"]


def refuse_disagreeing(lock: LockFile, lock_path: Path, platform: str) -> None:
    """For create, unpack and export of `platform`: LockfileError naming the first derived file beside `lock_path`
    (that platform's and the activation scripts) that disagrees with the envlock conda-lock.yml there (`lock` may
    be one of those files: an @EXPLICIT one), or `lock_path` itself when it is not a file that conda-lock.yml
    renders (one planted for a platform the lock lacks)."""
    if lock.kind != "conda-lock":
        beside = lock_path.parent / LOCK_NAME
        if not beside.is_file():
            return  # a lone @EXPLICIT file: nothing it derives from
        given, (lock, lock_path) = lock_path, (read_lock(beside), beside)
        if lock.envlock_meta() and given.name not in render(of_lock(lock)):
            raise LockfileError(
                f"{printable(str(given))} is not a file that the {LOCK_NAME} beside it renders (that lock has "
                f"{', '.join(lock.platforms) or 'no platform'}): envlock does not use it",
                hint=f"remove {printable(given.name)} from {printable(str(lock_path.parent))} (`envlock check` names every "
                     f"file there that is not the lock's), and use {LOCK_NAME} with one of its platforms")
    if not lock.envlock_meta():
        return  # not envlock's: nothing is rendered from it
    files = {n: t for n, t in render(of_lock(lock)).items() if platform_of(n) in (None, platform)}
    found = disagreements(lock_path.parent, files, present_only=True)
    if found:
        name, what = found[0]
        raise LockfileError(
            f"{printable(str(lock_path.parent / name))} {what}",
            hint=f"`envlock lock {printable(lock_path.parent.name)}` re-renders it from conda-lock.yml (no solve), "
            "or restore it from git",
        )
