"""`envlock pack`: one archive that carries a lock's packages to a node that never saw a channel (`envlock unpack`,
envlock/usecases/unpack.py, creates the env from it).

The archive (an uncompressed tar: conda packages and wheels are compressed already) holds, for one platform:

    envlock-pack.json                  first member: format, the lock's path, channel dirs, every member's sha256
    locks/<name>/…                     the lock dir's files (conda-lock.yml, @EXPLICIT, requirements, activation)
    environments/<name>.yml            the spec, where the lock has one beside it
    channels/<channel>/<subdir>/…      every conda package + repodata.json (rattler's indexer; channeldir.py)
    pypi/simple/…, pypi/files/…        the PyPI part's wheels in a PEP 503 index
    conda-<platform>.txt               exact specs for plain conda (`conda create --offline --file`), usage on top

Same lock, same bytes: members sorted, fixed owner, mode and mtime. `pack` writes a temp file beside the
output and renames it, so a failure (a package not reachable, Ctrl-C) leaves no archive. `unpack` checks the
prefix first, extracts into a temp dir while checking every member against the manifest (a corrupted or
extra member is refused before anything is installed), then runs create (envlock/usecases/create.py) with every
channel mirrored to the extracted copy: each package is checked against the lock again, linking is atomic,
and no network is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tarfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from envlock import __version__
from envlock.errors import LockfileError, SpecError, again
from envlock.seams.fs import LEFTOVER_AGE_S, owned, pinned_work_dir, remove_dead, work_dir

MANIFEST = "envlock-pack.json"
FORMAT = 1
_CHUNK = 1 << 20


@dataclass(frozen=True)
class PackRequest:
    lock_path: Path
    platform: str
    output: Path
    mirrors: Mapping[str, str] = field(default_factory=dict)
    force: bool = False
    jobs: int = 4
    allow_insecure: bool = False  # plain http off loopback (refused otherwise, as resolve refuses it)


@dataclass(frozen=True)
class PackResult:
    output: Path
    name: str
    platform: str
    packages: int
    wheels: int
    size: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"output": str(self.output), "name": self.name, "platform": self.platform, "packages": self.packages,
                "wheels": self.wheels, "bytes": self.size, "seconds": round(self.seconds, 3)}


# --------------------------------------------------------------------------- pack


def pack(req: PackRequest, progress: Any = None) -> PackResult:
    """Every package of the lock's platform, verified, in one archive at `req.output` (all or nothing)."""
    from envlock.usecases.channeldir import content_of
    from envlock.seams.conda.channels import check_fetch_urls
    from envlock.seams.gate import check_entries
    from envlock.formats import read_lock
    from envlock.seams.mirror_urls import channel_of, check_in_play

    started = time.perf_counter()
    lock = read_lock(req.lock_path)
    if req.platform not in lock.platforms:
        raise LockfileError(f"{req.lock_path} has no {req.platform} packages (it locks {', '.join(lock.platforms)})",
                            hint=f"pass --platform {lock.platforms[0]}" if lock.platforms else "re-lock it")
    content = content_of([(lock, (req.platform,))])
    check_entries(content.packages, content.wheels)  # every name a path is made of: envlock/seams/gate.py
    check_fetch_urls([p.url for p in content.packages], [w.url for w in content.wheels], req.mirrors,
                     allow_insecure=req.allow_insecure)
    check_in_play(req.mirrors, {channel_of(p.url) for p in content.packages}, [w.url for w in content.wheels])
    out = req.output.absolute()
    if out.exists() and not req.force:
        raise SpecError(f"{out} exists", hint=("replace it: ", again("--force"), ", or choose another -o"))
    if not out.parent.is_dir():
        raise SpecError(f"{out.parent} is not a directory", hint="create it, or choose another -o")
    name = lock.env_name()
    _remove_leftovers(out)
    with work_dir_in(out.parent, f".{out.name}.", root=out.parent) as staging:
        manifest = _stage(staging, lock, req, content, name, progress)
        tmp = staging.parent / f"{staging.name}.tar"
        try:
            _write_tar(staging, manifest, tmp)
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    return PackResult(out, name, req.platform, len(content.packages), len(content.wheels), out.stat().st_size,
                      time.perf_counter() - started)


def _stage(staging: Path, lock: Any, req: PackRequest, content: Any, name: str, progress: Any) -> dict[str, Any]:
    """Fill the staging dir; return the manifest (without member hashes)."""
    from envlock.usecases.channeldir import channels_of, index_channels, store_packages, store_wheels
    from envlock.seams.dirs import cache_location

    store_packages(staging / "channels", content.packages, mirrors=req.mirrors, jobs=req.jobs, progress=progress)
    index_channels(staging / "channels", content.packages, zst_and_shards=False)
    store_wheels(staging, content.wheels, content.upload_bound, mirrors=req.mirrors, cache=cache_location().path,
                 jobs=req.jobs)
    lock_dir = PurePosixPath("locks") / name
    for src in _lock_files(req.lock_path, req.platform):
        dest = staging / lock_dir / src.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    spec = _spec_of(lock, req.lock_path)
    if spec is not None:
        (staging / "environments").mkdir()
        shutil.copyfile(spec, staging / "environments" / spec.name)
    channels = {url: f"channels/{rel}" for url, rel in channels_of(content.packages).items()}
    (staging / f"conda-{req.platform}.txt").write_text(_conda_specs(content.packages, channels, req.platform, name))
    return {"envlock_pack_version": FORMAT, "envlock_version": __version__, "name": name, "platform": req.platform,
            "lock": str(lock_dir / req.lock_path.name), "channels": channels,
            "pypi": "pypi/simple" if content.wheels else None}


def _lock_files(lock_path: Path, platform: str) -> list[Path]:
    """The lock and what lies beside it for this platform (@EXPLICIT, requirements, activation scripts)."""
    wanted = {lock_path.name, f"conda-{platform}.lock", f"requirements-{platform}.txt"}
    out = [lock_path]
    for p in sorted(lock_path.parent.iterdir()):
        if p != lock_path and p.is_file() and (p.name in wanted or p.stem in ("activate", "deactivate")):
            out.append(p)
    return out


def _spec_of(lock: Any, lock_path: Path) -> Path | None:
    """environments/<name>.yml of the lock's project (conda-lock's `metadata.sources`, relative to the lock)."""
    for source in lock.sources:
        path = (lock_path.parent / source).resolve()
        if path.is_file() and path.suffix in (".yml", ".yaml"):
            return path
    return None


def _conda_specs(packages: Any, channels: Mapping[str, str], platform: str, name: str) -> str:
    """Exact `name=version=build` specs for `conda create --offline --file`, with the command to run."""
    from envlock.seams.mirror_urls import channel_of

    chans = " ".join(f"-c file://$PWD/{channels[c]}" for c in sorted({channel_of(p.url) for p in packages}))
    head = [
        f"# {name} ({platform}) for plain conda, without envlock and without a network:",
        "#   mkdir unpacked && tar -xf ARCHIVE -C unpacked && cd unpacked",
        f"#   conda create --offline -p PREFIX --override-channels {chans} --file conda-{platform}.txt",
        "# (no GPU on this machine: CONDA_OVERRIDE_CUDA=X.Y before it; a PyPI part: PREFIX/bin/python -m pip install",
        f"#  --no-index --find-links pypi/files --no-deps --require-hashes -r locks/{name}/requirements-{platform}.txt)",
        "# then the lock's CUDA activation, so that `conda activate PREFIX` sets CUDA_HOME, CPATH, ... (its hooks;",
        "# any shell, and doctor learns the lock's anchor):",
        f"#   envlock hook -p PREFIX --lock locks/{name}/conda-lock.yml",
        "# or, where envlock is not installed, in bash or zsh only (conda's fish activation runs *.fish scripts,",
        "# which the lock does not ship):",
        f"#   for k in activate deactivate; do mkdir -p PREFIX/etc/conda/$k.d && cp locks/{name}/$k.sh "
        "PREFIX/etc/conda/$k.d/envlock-cuda.sh; done",
        "# envlock's own way, which also checks every package against the lock: envlock unpack ARCHIVE -p PREFIX",
    ]
    return "\n".join(head + [f"{p.name}={p.version}={p.build}" for p in packages]) + "\n"


def _write_tar(staging: Path, manifest: dict[str, Any], dest: Path) -> None:
    """The manifest first (with every member's sha256 and size), then the members, sorted; deterministic headers."""
    members = sorted(str(p.relative_to(staging)).replace(os.sep, "/") for p in staging.rglob("*") if p.is_file())
    manifest = {**manifest, "members": {m: _sha256(staging / m) for m in members},
                "sizes": {m: (staging / m).stat().st_size for m in members}}
    data = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    # A new file, never through a link: the name beside the staging folder is guessable by whoever can write there.
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                 0o666)
    with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
        tf.addfile(_info(MANIFEST, len(data)), io.BytesIO(data))
        for m in members:
            with (staging / m).open("rb") as fh:
                tf.addfile(_info(m, (staging / m).stat().st_size), fh)


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = size, 0o644, 0, 0, 0, "", ""
    return info


def _remove_leftovers(out: Path) -> None:
    """What a killed pack of `out` left beside it: its staging folder, and its tar once that folder is gone."""
    remove_dead(out.parent, f".{out.name}.*")
    for tar in out.parent.glob(f".{out.name}.*.tar"):
        try:
            st = tar.lstat()
            if not tar.with_suffix("").exists() and time.time() - st.st_mtime > LEFTOVER_AGE_S and owned(st):
                tar.unlink()  # only this user's: another user's leftover in a shared folder is theirs
        except OSError:
            continue


@contextlib.contextmanager
def work_dir_in(parent: Path, prefix: str, *, root: Path, pinned: bool = False) -> Iterator[Path]:
    """envlock.seams.fs.work_dir (`pinned`: pinned_work_dir, reached through the open folder), with one error line
    where the folder cannot be made."""
    try:
        ctx = (pinned_work_dir if pinned else work_dir)(parent, prefix, root=root)
        path = ctx.__enter__()
    except OSError as exc:
        raise SpecError(f"cannot write to {parent}: {exc.strerror or exc}",
                        hint="choose a writable place (-o for pack; ENVLOCK_CACHE_DIR for unpack's temp files)") from None
    try:
        yield path
    finally:
        ctx.__exit__(None, None, None)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
