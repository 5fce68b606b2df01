"""What `envlock export pixi` states, from conda-lock.yml alone: the manifest's values, the activation scripts,
and what the pixi.lock must hold (for `check`, which reads it back without rattler).

The manifest pins the packages the lock was solved for (each spec of the plan, and the optional ninja or pip
it took) to the versions locked, per platform; the PyPI requirements of the spec likewise (torch from its
CUDA variant's index when its version carries a +cuXYZ label); `system-requirements.cuda` is the anchor's
CUDA. The activation is envlock's (envlock.seams.activation): the variables it sets go in
`[target.<platform>.activation.env]` as `$CONDA_PREFIX/...` (every shell pixi renders for expands that);
the lists it extends (CPATH, LIBRARY_PATH, LD_LIBRARY_PATH; INCLUDE and LIB on Windows) need "add the entry
unless it is there, with no empty entry when the list was unset" (an empty entry is the current directory),
which a static value cannot say: envlock's own activation script does it, with its prefix from $CONDA_PREFIX
only (pixi sets it before it runs a manifest's scripts). pixi adds `<prefix>/bin` to PATH itself and runs the
packages' own activate.d scripts (the compilers' CC/CXX, cuda-nvcc's NVCC_PREPEND_FLAGS), as conda does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envlock.errors import LockfileError
from envlock.formats import LockFile
from envlock.formats.model import custom_value
from envlock.formats.pixitoml import Activation, Manifest, PypiDep
from envlock.names import printable, split_match_spec

LOCK = "pixi.lock"
MANIFEST = "pixi.toml"


def script_names(lock: LockFile, feature: str | None) -> dict[bool, str]:
    """windows? -> the activation script's file name beside the manifest (only those the lock's platforms need)."""
    stem = "envlock-activate" + (f"-{feature}" if feature else "")
    has = {w: any(p.startswith("win-") == w for p in lock.platforms) for w in (False, True)}
    return {w: f"{stem}.{'bat' if w else 'sh'}" for w in (False, True) if has[w]}


def _activation(lock: LockFile) -> tuple[str, bool]:
    anchor = lock.envlock_meta().get("anchor") or {}
    from envlock.models import CUDNN_NAMES

    return str(anchor.get("torch_source") or "pip"), any(p.name in CUDNN_NAMES for p in lock.packages)


def scripts(lock: LockFile, feature: str | None = None) -> dict[str, str]:
    """file name -> text of the activation scripts the manifest names."""
    from envlock.seams.activation import ActivationSpec, cmd, sh

    torch_source, has_cudnn = _activation(lock)
    out = {}
    for windows, name in script_names(lock, feature).items():
        platforms = tuple(p for p in lock.platforms if p.startswith("win-") == windows)
        spec = ActivationSpec(platforms, torch_source, has_cudnn, conda_prefix_only=True)  # type: ignore[arg-type]  # the lock's str for a Literal
        out[name] = (cmd if windows else sh).render_activate(spec)
    return out


def _env_values(platform: str, torch_source: str, has_cudnn: bool) -> tuple[tuple[str, str], ...]:
    """The variables envlock's activation sets, as pixi's env table states them."""
    from envlock.seams.activation.model import TARGETS, TARGETS_TOKEN, env_ops, is_windows, join

    windows = is_windows(platform)
    prefix = "%CONDA_PREFIX%" if windows else "$CONDA_PREFIX"
    return tuple((op.var, join(prefix, op.rel.replace(TARGETS_TOKEN, TARGETS.get(platform, "")), windows))
                 for op in env_ops(platform, torch_source, has_cudnn) if op.action == "set")


def _pins(lock: LockFile, platform: str) -> dict[str, str]:
    """package -> "==version" for the specs the platform was solved for (and the optional package it took)."""
    plan = custom_value(lock.custom_metadata, f"plan.{platform}", {})
    specs = [str(s) for s in plan.get("specs") or ()] if isinstance(plan, dict) else []
    locked = {p.name: p.version for p in lock.packages_for(platform)}
    names = [split_match_spec(s)[0] for s in specs] + [n for n in ("pip", "ninja") if n in locked]
    return {n: f"=={locked[n]}" for n in dict.fromkeys(names) if n in locked}


def _pypi_pins(lock: LockFile, platform: str) -> dict[str, PypiDep]:
    """The spec's PyPI requirements pinned to the versions locked (torch's +cuXYZ from its variant's index)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from envlock.core.tables import variant_index_url

    inputs = custom_value(lock.custom_metadata, f"inputs.{platform}", {})
    wanted = [str(r) for r in inputs.get("pip") or ()] if isinstance(inputs, dict) else []
    locked = {w.name: w.version for w in lock.pypi_for(platform)}
    out = {}
    for text in wanted:
        try:
            name = str(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue  # the spec's own check refuses it; the lock holds what it resolved
        if name not in locked:
            continue
        label = locked[name].partition("+")[2]
        index = variant_index_url(label) if name == "torch" and label[:2] == "cu" and label[2:].isdigit() else None
        out[name] = PypiDep(locked[name], index)
    return out


def _channels(lock: LockFile) -> tuple[str, ...]:
    out: list[str] = []
    for p in lock.platforms:
        plan = custom_value(lock.custom_metadata, f"plan.{p}", {})
        out += [str(c) for c in (plan.get("channels") or ()) if isinstance(plan, dict)]
    return tuple(dict.fromkeys(out)) or tuple(dict.fromkeys(lock.channels))  # the lock reader gives URLs as str


def lock_channels(lock: LockFile) -> tuple[str, ...]:
    """The channels as the pixi.lock records them (URLs, in priority order)."""
    from envlock.seams.conda.channels import canonical_channel_url

    return tuple(dict.fromkeys(canonical_channel_url(c) for c in _channels(lock)))


def regenerate(lock_path: Path, folder: Path, feature: str | None = None, manifest_name: str = MANIFEST) -> str:
    """How to write this export again. Inside the project (its root, locks/NAME/, any folder of it): the very
    command, run in the project's folder — it stays true when the project is moved or cloned, so the same lock
    still gives the same bytes. A folder outside the project has no path from it that stays true: said in words."""
    import os
    import shlex

    lock_dir = lock_path.resolve().parent
    project, name = lock_dir.parent.parent, lock_dir.name
    where = folder.resolve()
    if where != project and project not in where.parents:
        what = f"--feature {feature} --manifest FILE" if feature else "-o DIR --force"
        return (f"run `envlock export pixi {name} {what}` in the project folder, {'FILE' if feature else 'DIR'} "
                f"being this {'file' if feature else 'folder'}")
    rel = os.path.relpath(where, project)
    how = (f"--feature {feature} --manifest {shlex.quote(os.path.join(rel, manifest_name) if rel != '.' else manifest_name)}"
           if feature else f"-o {shlex.quote(rel)} --force")
    return f"in the project folder: envlock export pixi {shlex.quote(name)} {how}"


def manifest(lock: LockFile, lock_path: Path, feature: str | None = None, folder: Path | None = None,
             manifest_name: str = MANIFEST) -> Manifest:
    """The manifest's (or the feature's) values; `folder`: where the manifest is (default: beside the lock)."""
    meta = lock.envlock_meta()
    if not meta:
        raise LockfileError(f"{lock_path} was not written by envlock (no envlock.* metadata)",
                            hint="export a lock envlock wrote: envlock resolve, then envlock export pixi")
    name = lock.env_name()  # the one name rule (envlock/envname.py)
    torch_source, has_cudnn = _activation(lock)
    names = script_names(lock, feature)
    cuda = (meta.get("anchor") or {}).get("cuda")
    version = str(meta.get("envlock_version") or "")
    header = (
        f"Generated by envlock {printable(version)} from the lock {printable(name)}: do not edit by hand.",
        f"{LOCK} beside it holds exactly the lock's packages: `pixi install --frozen` installs them as locked",
        "(pixi does not solve again), then e.g. `pixi run python setup.py build_ext`.",
        f"Re-generate: {printable(regenerate(lock_path, folder or lock_path.parent, feature, manifest_name))}",
    )
    return Manifest(
        name=name, channels=_channels(lock), platforms=lock.platforms, cuda=str(cuda) if cuda else None,
        conda={p: _pins(lock, p) for p in lock.platforms},
        pypi={p: pins for p in lock.platforms if (pins := _pypi_pins(lock, p))},
        activation={p: Activation(_env_values(p, torch_source, has_cudnn), (names[p.startswith("win-")],))
                    for p in lock.platforms},
        header=header,
    )


def whole(lock: LockFile, lock_path: Path, folder: Path | None = None) -> dict[str, str]:
    """file name -> text of a whole pixi workspace's manifest and scripts (the pixi.lock is rattler's), written
    into `folder` (default: beside the lock)."""
    from envlock.formats.pixitoml import render_manifest

    return {**scripts(lock), MANIFEST: render_manifest(manifest(lock, lock_path, folder=folder))}


# --------------------------------------------------------------------------- check


def lock_content(lock: LockFile) -> dict[str, Any]:
    """What a pixi.lock of `lock` holds, as envlock.formats.pixi reads it: per platform, each package's URL with
    its hashes and depends (compared by `check`, which has no rattler to render the bytes)."""
    out: dict[str, Any] = {}
    for p in lock.platforms:
        conda = sorted((q.url, q.sha256 or "", q.md5, tuple(q.depends)) for q in lock.packages_for(p))
        pypi = sorted((w.url, w.sha256) for w in lock.pypi_for(p))
        out[p] = (conda, pypi)
    return out


def read_lock_content(path: Path) -> dict[str, Any] | str:
    """A pixi.lock's content in `lock_content`'s form (its `default` environment), or what is wrong with it."""
    from envlock.formats.pixi import pixi_content

    try:
        return pixi_content(path)
    except LockfileError as exc:
        return exc.message


def disagreements(lock_dir: Path) -> list[tuple[str, str]]:
    """(file, what differs) for a pixi export written into `lock_dir` (none when there is no pixi.toml there).
    The lock is read whole here (check's own reading skips the dependency lists, which pixi.lock holds)."""
    from envlock.formats import read_lock
    from envlock.project.derived import disagreements as differ

    if not (lock_dir / MANIFEST).is_file():
        return []
    lock = read_lock(lock_dir / "conda-lock.yml")
    found = differ(lock_dir, whole(lock, lock_dir / "conda-lock.yml"), present_only=False)
    have = read_lock_content(lock_dir / LOCK) if (lock_dir / LOCK).is_file() else "is missing"
    if isinstance(have, str):
        found.append((LOCK, have))
    elif have != lock_content(lock):
        diff = sorted(p for p in set(have) | set(lock_content(lock)) if have.get(p) != lock_content(lock).get(p))
        found.append((LOCK, f"holds other packages than conda-lock.yml for {', '.join(diff)}"))
    return found
