"""Link a prefix from verified cache entries with rattler's installer (no conda binary).

Every package is extracted in this user's private store, verified and sealed (envlock/seams/conda/cache.py): rattler
links each from there, reached through the store's open directory, and never downloads. `link` also removes packages the lock no longer has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from envlock.seams.conda.cache import Fetched, entries, entry
from envlock.seams.conda.errors import mapped
from envlock.errors import EnvCreateError
from envlock.seams.gate import conda_archive
from envlock.progress import Progress


class LinkReporter:
    """rattler InstallerReporter → Progress (called from rattler's threads, with the GIL).

    `on_linked` (a seam) hears each package's name as it is linked.
    """

    def __init__(self, progress: Progress, on_linked: Callable[[str], None] | None = None) -> None:
        self.progress = progress
        self.on_linked = on_linked
        self.names: dict[int, str] = {}
        self.next = 0

    def on_link_start(self, operation: int, package_name: str) -> int:
        self.next += 1
        self.names[self.next] = package_name
        return self.next

    def on_link_complete(self, index: int) -> None:
        name = self.names.pop(index, "")
        self.progress.advance("link", name)
        if self.on_linked is not None:
            self.on_linked(name)


#: Called with each package's name once it is linked (tests hold a create half-linked through it).
on_linked: Callable[[str], None] | None = None


def records(fetched: Sequence[Fetched], cache: Path) -> list[Any]:
    """RepoDataRecords from each verified archive's own index.json, with the lock's URL."""
    from rattler import PackageRecord, RepoDataRecord

    out = []
    for f in fetched:
        pkg = f.pkg
        with mapped(what=pkg.filename, default="package"):  # a cache entry whose index.json does not read
            rec = PackageRecord.from_index_json((f.path or entry(cache, pkg)) / "info" / "index.json", f.size,
                                                f.sha256, f.md5)
        if (rec.name.normalized, str(rec.version), str(rec.build)) != (pkg.name.lower(), pkg.version, pkg.build):
            raise EnvCreateError(
                f"{pkg.filename} holds {rec.name.normalized} {rec.version} {rec.build}, not what the lock names",
                hint="the lock or the channel is inconsistent; re-lock with `envlock lock`",
            )
        channel = pkg.url.rsplit("/", 2)[0]
        out.append(RepoDataRecord(rec, conda_archive(pkg), pkg.url, channel))
    return out


def link(recs: list[Any], prefix: Path, platform: str, cache: Path, progress: Progress,
         final: Path | None = None, *, root_paths: bool = True) -> None:
    """rattler.install into `prefix` (`final`: the path the env will have, patched into its files: an update
    builds beside the env, envlock/usecases/update.py); a failure is an EnvCreateError ("linking into PREFIX failed: ..."),
    never rattler's exception. The caller rolls back (and forgets damaged cache entries: `cache.damaged`).

    `root_paths`: whether a package of `recs` has a path at the prefix's root (its sealed summary's dirs hold "");
    False lets rattler's CACHEDIR.TAG go without reading the records once the link has succeeded."""
    import asyncio  # here, not at the top: an unchanged env (create's no-op) links nothing

    from rattler import Subdir, install

    from envlock.seams.conda.client import http_client

    # The client is never used (everything is cached), but without one rattler builds its own from the
    # system's CA certificates and panics where there are none (envlock.seams.net.with_ca_fallback).
    client = http_client()
    progress.start("link", len(recs))
    linked = False
    try:
        with mapped(what=f"into {final or prefix}", default="install"):
            asyncio.run(install(recs, target_prefix=prefix, cache_dir=entries(cache), platform=Subdir(platform),
                                client=client, show_progress=False, reporter=_reporter(progress),
                                execute_link_scripts=False,
                                alternative_target_prefix=final if final is not None and final != prefix else None))
        linked = True
    finally:
        progress.finish("link")
        drop_cache_tag(prefix, records=root_paths or not linked)


def _reporter(progress: Progress) -> LinkReporter | None:
    """A LinkReporter where someone hears each package linked (bars, the `on_linked` seam), else none: rattler calls
    a reporter from its threads six times a package (170 calls for 28 packages, each taking the GIL from the event
    loop: ~5 ms, ~10 % of a warm create's CPU), for a progress nobody sees on a pipe, in CI or with --json."""
    if on_linked is None and not getattr(progress, "shows_items", True):
        return None
    return LinkReporter(progress, on_linked)


#: The first line of every cache directory tag (https://bford.info/cachedir/).
CACHE_TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"


def drop_cache_tag(prefix: Path, *, records: bool = True) -> bool:
    """Remove the CACHEDIR.TAG rattler's installer leaves at a prefix's root (no package owns it): backup tools
    run with --exclude-caches would skip the whole environment. A tag a package installed stays.

    A record whose bytes hold a `"files"` key and neither `CACHEDIR` nor a backslash (JSON's only way to spell
    the name otherwise) cannot list the tag, and is not parsed: the 28 records of a CUDA toolchain env are ~1 MB
    of JSON (~4 ms of a ~120 ms warm create), of which this needs one name. `records=False` (the caller knows from
    the linked packages' sealed summaries that none has a path at the root: then no record can list the tag) reads
    none."""
    from envlock.formats.untrusted import DOC_CAP, json_value

    tag = prefix / "CACHEDIR.TAG"
    try:
        if tag.is_symlink() or not tag.is_file() or not tag.read_bytes().startswith(CACHE_TAG_SIGNATURE):
            return False
        for record in (prefix / "conda-meta").glob("*.json") if records else ():  # a package's record: any shape
            with record.open("rb") as fh:
                data = fh.read(DOC_CAP + 1)
            if len(data) <= DOC_CAP and b'"files"' in data and b"CACHEDIR" not in data and b"\\" not in data:
                continue
            doc = json_value(data)
            files = doc.get("files") if isinstance(doc, dict) else None
            if not isinstance(files, list) or "CACHEDIR.TAG" in files:
                return False
        tag.unlink()
    except (OSError, ValueError, AttributeError):
        return False
    return True
