"""`envlock pack` / `envlock unpack`: one archive that carries a lock's packages to a node that never saw a channel.

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
extra member is refused before anything is installed), then runs create (envlock/create.py) with every
channel mirrored to the extracted copy: each package is checked against the lock again, linking is atomic,
and no network is used.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from envlock import UPGRADE_HINT, __version__, beneath
from envlock.errors import ArchiveError, EnvCreateError, LockfileError, SpecError, UnsafeNameError
from envlock.gate import component, relative, shown, under
from envlock.untrusted import DOC_CAP, load_json, over_cap

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


@dataclass(frozen=True)
class UnpackRequest:
    archive: Path
    prefix: Path
    jobs: int = 4


# --------------------------------------------------------------------------- pack


def pack(req: PackRequest, progress: Any = None) -> PackResult:
    """Every package of the lock's platform, verified, in one archive at `req.output` (all or nothing)."""
    from envlock.channeldir import content_of
    from envlock.gate import check_entries
    from envlock.formats import read_lock
    from envlock.mirrors import channel_of, check_in_play

    started = time.perf_counter()
    lock = read_lock(req.lock_path)
    if req.platform not in lock.platforms:
        raise LockfileError(f"{req.lock_path} has no {req.platform} packages (it locks {', '.join(lock.platforms)})",
                            hint=f"pass --platform {lock.platforms[0]}" if lock.platforms else "re-lock it")
    content = content_of([(lock, (req.platform,))])
    check_entries(content.packages, content.wheels)  # every name a path is made of: envlock/gate.py
    check_in_play(req.mirrors, {channel_of(p.url) for p in content.packages}, [w.url for w in content.wheels])
    out = req.output.absolute()
    if out.exists() and not req.force:
        raise SpecError(f"{out} exists", hint="pass --force to replace it, or choose another -o")
    if not out.parent.is_dir():
        raise SpecError(f"{out.parent} is not a directory", hint="create it, or choose another -o")
    name = component(str(lock.envlock_meta().get("env_name") or req.lock_path.parent.name), "the lock's env name")
    staging = _mkdtemp(f".{out.name}.", out.parent)
    try:
        manifest = _stage(staging, lock, req, content, name, progress)
        tmp = staging.with_suffix(".tar")
        try:
            _write_tar(staging, manifest, tmp)
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PackResult(out, name, req.platform, len(content.packages), len(content.wheels), out.stat().st_size,
                      time.perf_counter() - started)


def _stage(staging: Path, lock: Any, req: PackRequest, content: Any, name: str, progress: Any) -> dict[str, Any]:
    """Fill the staging dir; return the manifest (without member hashes)."""
    from envlock.channeldir import channels_of, index_channels, store_packages, store_wheels
    from envlock.dirs import cache_location

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
    from envlock.mirrors import channel_of

    chans = " ".join(f"-c file://$PWD/{channels[c]}" for c in sorted({channel_of(p.url) for p in packages}))
    head = [
        f"# {name} ({platform}) for plain conda, without envlock and without a network:",
        "#   mkdir unpacked && tar -xf ARCHIVE -C unpacked && cd unpacked",
        f"#   conda create --offline -p PREFIX --override-channels {chans} --file conda-{platform}.txt",
        "# (no GPU on this machine: CONDA_OVERRIDE_CUDA=X.Y before it; a PyPI part: PREFIX/bin/python -m pip install",
        f"#  --no-index --find-links pypi/files --no-deps --require-hashes -r locks/{name}/requirements-{platform}.txt)",
        "# then the lock's CUDA activation, so that `conda activate PREFIX` sets CUDA_HOME, CPATH, ... (its hooks):",
        f"#   for k in activate deactivate; do mkdir -p PREFIX/etc/conda/$k.d && cp locks/{name}/$k.sh "
        "PREFIX/etc/conda/$k.d/envlock-cuda.sh; done",
        "# envlock's own way, which also checks every package against the lock: envlock unpack ARCHIVE -p PREFIX",
    ]
    return "\n".join(head + [f"{p.name}={p.version}={p.build}" for p in packages]) + "\n"


def _write_tar(staging: Path, manifest: dict[str, Any], dest: Path) -> None:
    """The manifest first (with every member's sha256), then the members, sorted; deterministic headers."""
    members = sorted(str(p.relative_to(staging)).replace(os.sep, "/") for p in staging.rglob("*") if p.is_file())
    manifest = {**manifest, "members": {m: _sha256(staging / m) for m in members}}
    data = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tf:
        tf.addfile(_info(MANIFEST, len(data)), io.BytesIO(data))
        for m in members:
            with (staging / m).open("rb") as fh:
                tf.addfile(_info(m, (staging / m).stat().st_size), fh)


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = size, 0o644, 0, 0, 0, "", ""
    return info


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- unpack


def unpack(req: UnpackRequest, progress: Any = None) -> Any:
    """Create the archive's env at `req.prefix` offline; returns create's CreateResult."""
    from envlock.dirs import cache_location
    from envlock.create import CreateRequest, create_env
    from envlock.prefix import check_writable, prefix_state

    try:
        tf = tarfile.open(req.archive, "r:")
    except (OSError, tarfile.TarError) as exc:
        raise ArchiveError(f"{req.archive} is not a readable tar archive ({exc})",
                           hint="give the .tar file `envlock pack` wrote") from None
    with tf:
        manifest = _read_manifest(tf, req.archive)
        prefix_state(req.prefix)  # a file, or a non-empty dir that is not an env: refused before extracting
        check_writable(req.prefix)
        work = _mkdtemp("unpack-", cache_location().path / "unpack")
        try:
            _extract_checked(tf, manifest, work, req.archive)
            mirrors = _local_mirrors(work, manifest, req.archive)
            kept = req.prefix / "share" / "envlock"
            result = create_env(CreateRequest(lock_path=work / manifest["lock"], prefix=req.prefix,
                                              platform=manifest["platform"], mirrors=mirrors, jobs=req.jobs,
                                              lock_record=kept / manifest["lock"]), progress)
            # The lock and spec stay with the env: conda-meta/envlock points at that copy (doctor's repair hint).
            for rel in sorted(m for m in manifest["members"] if m.startswith(("locks/", "environments/"))):
                beneath.copy_in(work / rel, req.prefix, f"share/envlock/{rel}")  # never through a link out of it
            return replace(result, lock_path=req.archive)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _mkdtemp(prefix: str, parent: Path) -> Path:
    try:
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    except OSError as exc:
        raise SpecError(f"cannot write to {parent}: {exc.strerror or exc}",
                        hint="choose a writable place (-o for pack; ENVLOCK_CACHE_DIR for unpack's temp files)") from None


def _read_manifest(tf: tarfile.TarFile, archive: Path) -> dict[str, Any]:
    not_ours = ArchiveError(f"{archive} is not an envlock pack archive (no {MANIFEST} as its first member)",
                            hint="give the .tar file `envlock pack` wrote")
    try:
        first = tf.next()
        if first is None or first.name != MANIFEST or not first.isfile():
            raise not_ours
        if first.size > DOC_CAP:
            raise ArchiveError(f"{archive}: {MANIFEST} {over_cap(first.size, DOC_CAP)}", hint="re-create the archive with `envlock pack`")
        fh = tf.extractfile(first)
        data = fh.read(DOC_CAP + 1) if fh is not None else b""
    except (OSError, tarfile.TarError):
        raise not_ours from None
    doc = load_json(data, f"{archive}: {MANIFEST}", ArchiveError, hint="re-create the archive with `envlock pack`")
    if not isinstance(doc, dict) or not isinstance(doc.get("members"), dict) or "envlock_pack_version" not in doc:
        raise not_ours
    version = doc["envlock_pack_version"]
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT:
        raise ArchiveError(f"{archive} was packed by a newer envlock ({shown(doc.get('envlock_version'))})",
                           hint=UPGRADE_HINT)
    for key in ("lock", "platform", "channels"):
        if key not in doc:
            raise ArchiveError(f"{archive}: {MANIFEST} lacks {key!r}", hint="re-create the archive with `envlock pack`")
    wrong = _wrong_type(doc)
    if wrong:
        raise ArchiveError(f"{archive}: {MANIFEST} has a malformed {wrong!r}", hint="re-create the archive with `envlock pack`")
    if doc["lock"] not in doc["members"]:
        raise ArchiveError(f"{archive}: the lock {shown(doc['lock'])} is not among its members", hint="re-create the archive")
    return doc


def _wrong_type(doc: Mapping[str, Any]) -> str | None:
    """The first manifest field whose type (or shape) is not what `pack` writes, or None."""
    def text(v: Any) -> bool:
        return isinstance(v, str) and bool(v)

    checks = {
        "envlock_pack_version": isinstance(doc["envlock_pack_version"], int) and not isinstance(doc["envlock_pack_version"], bool),
        "members": all(text(k) and isinstance(v, str) and len(v) == 64 for k, v in doc["members"].items()),
        "lock": text(doc["lock"]), "platform": text(doc["platform"]),
        "channels": isinstance(doc["channels"], dict) and all(text(k) and text(v) for k, v in doc["channels"].items()),
        "pypi": doc.get("pypi") is None or text(doc.get("pypi")),
        "sizes": doc.get("sizes") is None or (isinstance(doc["sizes"], dict) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in doc["sizes"].values())),
    }
    return next((k for k, ok in checks.items() if not ok), None)


def _member_path(work: Path, name: str) -> Path | None:
    """Where a member is extracted: `work/<name>` through envlock/gate.py, or None (refused) for any other name."""
    try:
        rel = relative(name, "the member", decode=False)
        return under(work, rel, "the member") if str(rel) == name else None
    except UnsafeNameError:
        return None


def _extract_checked(tf: tarfile.TarFile, manifest: Mapping[str, Any], work: Path, archive: Path) -> None:
    """Every member to `work`, each checked against the manifest's sha256 as it is written."""
    want: Mapping[str, str] = manifest["members"]
    seen: set[str] = set()
    try:
        for member in tf:
            name = member.name
            if name == MANIFEST and not seen:
                continue  # read first, by _read_manifest
            dest = _member_path(work, name) if member.isfile() and name in want and name not in seen else None
            if dest is None:
                raise ArchiveError(f"{archive}: unexpected member {name!r} (not a file the manifest lists)",
                                   hint="the archive was altered; re-create it with `envlock pack`")
            seen.add(name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            src = tf.extractfile(member)
            assert src is not None
            try:
                with dest.open("wb") as fh:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        fh.write(chunk)
            except OSError as exc:
                if exc.filename is None and exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
                    raise  # a read error of the archive: reported below
                raise EnvCreateError(f"cannot extract {archive} into {work}: {exc.strerror or exc}",
                                     hint="free space there (it is under ENVLOCK_CACHE_DIR), then run unpack again") from None
            if digest.hexdigest() != want[name]:
                raise ArchiveError(f"{archive}: member {name} is corrupt (its sha256 is not the one recorded at pack time)",
                                   hint="nothing was installed; copy the archive again (or re-pack it)")
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise ArchiveError(f"{archive} cannot be read to its end ({exc})",
                           hint="the archive is truncated or damaged; copy it again") from None
    missing = sorted(set(want) - seen)
    if missing:
        raise ArchiveError(f"{archive} lacks {missing[0]}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""),
                           hint="the archive is incomplete; copy it again (or re-pack it)")


def _local_mirrors(work: Path, manifest: Mapping[str, Any], archive: Path) -> dict[str, str]:
    """Every channel of the lock -> its extracted copy (file://); a package none covers is refused here."""
    from envlock.formats import read_lock

    def inside(rel: str) -> str:
        try:
            return under(work, relative(rel, "the manifest's channel dir", decode=False)).as_uri()
        except UnsafeNameError as exc:
            raise ArchiveError(f"{archive}: {exc.message}", hint="the archive was altered; re-create it with `envlock pack`") from None

    mirrors = {url.rstrip("/"): inside(rel) for url, rel in manifest["channels"].items()}
    if manifest.get("pypi"):
        mirrors["pypi"] = inside(manifest["pypi"])
    lock = read_lock(work / manifest["lock"])
    for pkg in lock.packages_for(manifest["platform"]):
        if not any(pkg.url.startswith(url) for url in manifest["channels"]):
            raise ArchiveError(f"{archive} does not hold {pkg.filename} (channel {pkg.url.rsplit('/', 2)[0]})",
                               hint="re-create the archive with `envlock pack` from this lock")
    if lock.pypi_for(manifest["platform"]) and not manifest.get("pypi"):
        raise ArchiveError(f"{archive} does not hold the lock's PyPI part", hint="re-create the archive with `envlock pack`")
    return mirrors
