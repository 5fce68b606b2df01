"""An environment on disk, as create sees it: what is at a prefix, its records, hooks and envlock's own record
(conda-meta/envlock, whose format envlock/seams/envrecord.py owns: written here through envlock/seams/beneath.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from envlock.seams import beneath, envrecord
from envlock.seams.activation import hook_files
from envlock.errors import EnvCreateError
from envlock.seams.filelocks import FileLock
from envlock.seams.fs import new_file_mode
from envlock.formats.untrusted import read_json


def refuse_unusable(prefix: Path, envs: Path | None = None) -> None:
    """EnvCreateError, before anything is written, for a prefix nvcc cannot build in (see nvcc_cannot_use);
    `envs`: the envs dir (ENVLOCK_ENVS_DIR), named in the hint when the prefix is in it."""
    from envlock.errors import HintPart, again
    from envlock.names import nvcc_cannot_use, usable_path

    why = nvcc_cannot_use(prefix)
    if why is None:
        return
    hint: tuple[HintPart, ...] = ("create it at a path without it: ",
                                  again("--prefix", usable_path(prefix), drop=("--name",)))
    if envs is not None and nvcc_cannot_use(envs) and prefix.parent == envs:
        hint += (", or set ENVLOCK_ENVS_DIR to a folder without it",)
    raise EnvCreateError(
        f"{prefix} has {why}: conda-forge's nvcc activation puts `-ccbin={prefix}/bin/…` in NVCC_PREPEND_FLAGS, "
        f"and nvcc cannot read a path with {why} there (it splits that variable at whitespace, keeps quotes as part "
        "of the path and runs the host compiler through sh): every nvcc build in the env would fail",
        hint=hint)


def prefix_state(prefix: Path) -> Literal["absent", "empty", "env"]:
    """What is at `prefix`; EnvCreateError for a file or a non-empty dir that is not a conda env."""
    if not prefix.exists():
        return "absent"
    if not prefix.is_dir():
        raise EnvCreateError(f"{prefix} exists and is not a directory",
                             hint="choose another -p PREFIX, or remove that file")
    if (prefix / "conda-meta").is_dir():
        return "env"
    if any(prefix.iterdir()):
        raise EnvCreateError(f"{prefix} exists, is not empty and is not a conda environment (no conda-meta/)",
                             hint="choose another -p PREFIX; envlock never installs over unrelated files")
    return "empty"


def check_writable(prefix: Path) -> None:
    """Try to create a file where the prefix will be written (os.access says yes to root)."""
    probe_dir = prefix if prefix.is_dir() else prefix.parent
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=".envlock-probe-", dir=probe_dir)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise EnvCreateError(f"cannot write to {probe_dir}: {exc.strerror or exc}",
                             hint="choose a -p PREFIX you can write to (or fix the permissions)") from None


def prefix_lock(prefix: Path, cache_root: Path) -> FileLock:
    """The file lock of one prefix (kept in the cache dir), keyed by the prefix's real path: every path that names
    the same directory (through a symlinked parent, `..`, a bind of the same path) takes the same lock."""
    real = os.path.realpath(prefix)
    key = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return FileLock(cache_root / "file-locks" / f"prefix-{Path(real).name[:40]}-{key}.lock", f"the environment {prefix}",
                    root=cache_root)


def write_env_meta(prefix: Path, meta: Mapping[str, Any]) -> None:
    """conda-meta/envlock (envrecord.document of `meta`), atomically, with the usual file mode (other users'
    doctor must read it); never through a symlink (envlock/seams/beneath.py)."""
    beneath.write_json(prefix, envrecord.REL, envrecord.document(meta), mode=new_file_mode())


def installed_dists(prefix: Path) -> set[str]:
    """The `name-version-build` of every package record in conda-meta/."""
    return {p.stem for p in (prefix / "conda-meta").glob("*.json")}


def damaged_records(prefix: Path) -> list[Path]:
    """conda-meta records of packages with a file missing from the prefix (deleted by hand, say).

    rattler decides what to link from these records alone, so a damaged package looks installed;
    dropping its record makes the next link put its files back.
    """
    damaged = []
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        doc = read_json(record)
        files = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(files, list) or any(not os.path.lexists(prefix / str(f)) for f in files):
            damaged.append(record)
    return damaged


def drop_duplicate_records(prefix: Path, dists: Sequence[str]) -> None:
    """Remove the records (and the files only they list) of packages installed twice under one name, but for the
    lock's own: rattler keeps one record per name and leaves the other on disk (two creates of one prefix that
    raced left cuda-nvcc 12.1 and 12.6 both recorded), so the prefix could never again equal the lock."""
    by_name: dict[str, list[tuple[Path, list[str]]]] = {}
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        doc = read_json(record)
        files = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not isinstance(files or [], list):
            continue  # unreadable: damaged_records drops it
        by_name.setdefault(doc["name"], []).append((record, [str(f) for f in files or ()]))
    wanted = set(dists)
    for group in (g for g in by_name.values() if len(g) > 1):
        keep = {f for record, files in group if record.stem in wanted for f in files}
        for record, files in group:
            if record.stem in wanted:
                continue
            for rel in (f for f in files if f not in keep):
                try:
                    beneath.unlink(prefix, rel)  # never through a link, never outside (a record is a file anyone edits)
                except EnvCreateError:
                    continue
            beneath.unlink(prefix, f"conda-meta/{record.name}")


def share_records(prefix: Path) -> None:
    """Give conda-meta's records the usual file mode (rattler writes them 0600).

    A shared env (a cluster's) must be readable by its other users: conda, `conda list` and envlock's
    doctor read conda-meta/*.json and conda-meta/envlock.
    """
    beneath.chmod_files(prefix, "conda-meta", new_file_mode())


def install_hooks(root: Path, platform: str, torch_source: str, has_cudnn: bool,
                  prefix: Path | None = None) -> tuple[str, ...]:
    """Write etc/conda/{activate,deactivate}.d/envlock-cuda.* for the env at `prefix` into `root` (the prefix, or
    the clone an update builds beside it); return their paths."""
    written = []
    for rel, text in hook_files(platform, str(prefix or root), torch_source, has_cudnn).items():
        beneath.write_bytes(root, rel, text.encode("utf-8"))  # never through a symlink out of the prefix
        written.append(rel)
    return tuple(sorted(written))


def add_hooks(prefix: Path, torch_source: str | None = None,
              extra: Mapping[str, Any] | None = None) -> tuple[tuple[str, ...], str, str, bool]:
    """`envlock hook`: envlock's activation hooks (what `create` installs) in an env another tool made
    (conda, conda-lock, conda-pack, micromamba): (paths written, platform, torch source, has cuDNN).

    Platform, torch source and cuDNN come from the env's package records unless `torch_source` is given. The
    hook folders must lie inside the prefix: a symlink out of it is refused before anything is written. `extra`
    (the anchor of the lock the env was installed from, envlock.usecases.hook) goes into the record of an env
    that `envlock create` did not make.
    """
    from envlock.seams.activation.conda import prefix_activation

    root = prefix.resolve()
    for kind in ("activate", "deactivate"):
        folder = prefix / "etc" / "conda" / f"{kind}.d"
        if root not in (folder.resolve(), *folder.resolve().parents):
            raise EnvCreateError(f"{folder} leads out of the environment (a symlink to {folder.resolve()})",
                                 hint=f"remove the link and run `envlock hook -p {prefix}` again")
    platform, guessed, has_cudnn = prefix_activation(prefix)
    source = torch_source or guessed
    written = install_hooks(prefix, platform, source, has_cudnn)
    # The record says how the env is activated (`envlock run`, shell-hook and doctor read it); one that
    # `envlock create` wrote keeps its lock and anchor.
    meta = envrecord.read(prefix)
    if not meta.get("lock_path"):
        meta = {"platform": platform, "made_by": "another tool (activation: envlock hook)", "state": "complete",
                **(extra or {})}
    write_env_meta(prefix, {**meta, "activation": {"torch_source": source, "has_cudnn": has_cudnn}})
    return written, platform, source, has_cudnn


def hooks_current(prefix: Path, platform: str, torch_source: str, has_cudnn: bool) -> bool:
    """Whether the prefix holds this envlock's hooks, byte for byte (an older envlock's are rewritten)."""
    for rel, text in hook_files(platform, str(prefix), torch_source, has_cudnn).items():
        try:
            if (prefix / rel).read_bytes() != text.encode("utf-8"):
                return False
        except OSError:
            return False
    return True


def is_unchanged(prefix: Path, new_meta: Mapping[str, Any], dists: Sequence[str]) -> bool:
    """Whether the prefix is already, completely, what `new_meta` describes (create has nothing to do)."""
    old = envrecord.read(prefix)
    same = all(old.get(k) == new_meta[k] for k in ("lock_path", "content_hash", "packages_digest", "platform"))
    if not same or old.get("state") != "complete":
        return False
    act = new_meta["activation"]
    # the installed records must be exactly the lock's: a record more (a second create that raced this one, a
    # package installed by hand) is a change too
    return (hooks_current(prefix, new_meta["platform"], act["torch_source"], act["has_cudnn"])
            and set(dists) == installed_dists(prefix) and not damaged_records(prefix))


def roll_back(prefix: Path, state: str) -> None:
    """After a failed link: a new prefix is removed (an empty one made empty again); an env stays, marked."""
    if state in ("absent", "empty"):
        _remove_settled(prefix)
    if state == "empty":
        prefix.mkdir(parents=True, exist_ok=True)


def rollback_hint(prefix: Path, state: str) -> str:
    if state == "env":
        return f"{prefix} was left as it was; run the command again once the cause is fixed"
    return f"the new environment was removed; run the command again (or use another -p than {prefix})"


def _remove_settled(path: Path, quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
    """Remove `path`, again and again until it stays gone.

    rattler's install returns on the first failing package while its other link tasks still run on
    rattler's own threads (there is no way to join them from Python), and they recreate files.
    """
    deadline = time.monotonic() + limit_s
    while True:
        shutil.rmtree(path, ignore_errors=True)
        time.sleep(quiet_s)
        if not path.exists() or time.monotonic() > deadline:
            return
