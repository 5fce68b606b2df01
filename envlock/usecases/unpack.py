"""`envlock unpack`: the env of a pack archive (envlock/usecases/pack.py), created offline, every byte of the archive checked.

The archive is untrusted (it comes from another site): its manifest is read first and its types checked; every
member is extracted only if it is a plain file the manifest lists, under a name envlock/seams/gate.py accepts, no larger
than the manifest records and within the archive's own size (a sparse member claiming 400 MB is refused before
a byte of it is written), and its sha256 is checked as it is written. Then create (envlock/usecases/create.py) installs the
lock with every channel mirrored to the extracted copy: each package is checked against the lock again, an existing
env is updated all or nothing, and no network is used. The extracted copy lives in a work folder of the cache
that the next unpack removes if this one is killed.
"""

from __future__ import annotations

import errno
import hashlib
import os
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock import UPGRADE_HINT

from envlock.seams import beneath
from envlock.errors import ArchiveError, EnvCreateError, UnsafeNameError
from envlock.models import replace
from envlock.seams.fs import remove_dead
from envlock.seams.gate import relative, shown, under
from envlock.formats.untrusted import DOC_CAP, load_json, over_cap
from envlock.usecases.pack import _CHUNK, FORMAT, MANIFEST, work_dir_in


@dataclass(frozen=True)
class UnpackRequest:
    archive: Path
    prefix: Path
    jobs: int = 4


def unpack(req: UnpackRequest, progress: Any = None) -> Any:
    """Create the archive's env at `req.prefix` offline; returns create's CreateResult."""
    from envlock.seams.dirs import cache_location
    from envlock.usecases.create import CreateRequest, create_env
    from envlock.seams.prefix import check_writable, prefix_state, refuse_unusable

    try:
        tf = tarfile.open(req.archive, "r:")
    except FileNotFoundError:
        raise ArchiveError(f"{req.archive}: no such file", hint="give the path of the .tar file `envlock pack` wrote") from None
    except IsADirectoryError:
        raise ArchiveError(f"{req.archive} is a directory, not an archive",
                           hint="give the path of the .tar file `envlock pack` wrote") from None
    except OSError as exc:
        raise ArchiveError(f"cannot read {req.archive}: {exc.strerror or exc}",
                           hint="check the path and its permissions") from None
    except tarfile.TarError:
        raise ArchiveError(f"{req.archive} is not a tar archive",
                           hint="give the .tar file `envlock pack` wrote (not compressed, not another format)") from None
    with tf:
        manifest = _read_manifest(tf, req.archive)
        prefix_state(req.prefix)  # a file, or a non-empty dir that is not an env: refused before extracting
        if str(manifest.get("platform", "")).startswith("linux"):
            refuse_unusable(req.prefix)  # a path nvcc cannot build in (create says it too, after extracting)
        check_writable(req.prefix)
        remove_dead(cache_location().path / "unpack", "unpack-*")  # what a killed unpack left (extracted archives)
        # Reached through the folder it holds open: in a group-shared cache another member could rename the folder
        # and put theirs under its name after the members were checked (a lock and channels of their own).
        with work_dir_in(cache_location().path / "unpack", "unpack-", root=cache_location().path, pinned=True) as work:
            _extract_checked(tf, manifest, work, req.archive)
            mirrors = _local_mirrors(work, manifest, req.archive)
            kept = req.prefix / "share" / "envlock"
            result = create_env(CreateRequest(lock_path=work / manifest["lock"], prefix=req.prefix,
                                              platform=manifest["platform"], mirrors=mirrors, jobs=req.jobs,
                                              lock_record=kept / manifest["lock"]), progress)
            # The lock and spec stay with the env: conda-meta/envlock points at that copy (doctor's repair hint).
            for rel in sorted(m for m in manifest["members"] if m.startswith(("locks/", "environments/"))):
                beneath.copy_in(work / rel, req.prefix, f"share/envlock/{rel}")  # never through a link out of it
            return replace(result, lock_path=req.archive, source="the archive")  # no download: said so


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
    """Where a member is extracted: `work/<name>` through envlock/seams/gate.py, or None (refused) for any other name."""
    try:
        rel = relative(name, "the member", decode=False)
        return under(work, rel, "the member") if str(rel) == name else None
    except UnsafeNameError:
        return None


def _extract_checked(tf: tarfile.TarFile, manifest: Mapping[str, Any], work: Path, archive: Path) -> None:
    """Every member to `work`, each checked against the manifest's sha256 as it is written."""
    want: Mapping[str, str] = manifest["members"]
    sizes: Mapping[str, int] = manifest.get("sizes") or {}
    budget = archive.stat().st_size  # an uncompressed tar holds its members' bytes: they cannot add up to more
    seen: set[str] = set()
    try:
        for member in tf:
            name = member.name
            if name == MANIFEST and not seen:
                continue  # read first, by _read_manifest
            dest = _member_path(work, name) if member.isfile() and name in want and name not in seen else None
            if dest is None:
                raise ArchiveError(f"{archive}: unexpected member {shown(name)} (not a file the manifest lists)",
                                   hint="the archive was altered; re-create it with `envlock pack`")
            budget -= member.size
            if member.issparse() or (name in sizes and sizes[name] != member.size) or budget < 0:
                raise ArchiveError(f"{archive}: member {shown(name)} claims {member.size} bytes"
                                   + (" as a sparse file" if member.issparse() else "")
                                   + ", more than the archive holds or its manifest records; nothing was extracted "
                                     "past it", hint="the archive was altered; re-create it with `envlock pack`")
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
                raise EnvCreateError(f"cannot extract {archive} into {os.path.realpath(work)}: {exc.strerror or exc}",
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
