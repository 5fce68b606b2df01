"""Mirrors: `NAME=URL` entries, and where a locked URL is fetched from (locks keep canonical URLs).

A key is a conda channel name (`conda-forge`; `nvidia` also covers its labels, `nvidia/label/cuda-11.8.0`),
a channel or index URL (`https://download.pytorch.org/whl/cu126`), or `pypi`: every wheel of the PyPI part,
looked up by project name on a PEP 503 simple index (envlock/seams/pypi/wheels.py). A value is an http(s):// or
file:// URL, or a plain path (made a file:// URL, relative to the current directory or to the config file
that names it); a local `envlock mirror` directory's root stands for its channel of that name (conda-forge=DIR
is DIR/conda-forge, pypi=DIR is DIR/pypi/simple). The longest key that covers a URL wins. Where the entries come from: envlock/seams/config.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from envlock.errors import Retry, SpecError, UsageError
from envlock.names import file_url_path, slip_of, strip_credentials

PYPI = "pypi"
MIRROR_MANIFEST = "envlock-mirror.json"  # the file `envlock mirror` writes at its directory's root
CANONICAL_BASE = "https://conda.anaconda.org/"
_SCHEMES = ("http://", "https://", "file://")


class MirrorMap(dict[str, str]):
    """key -> URL to fetch from; `strict`: the keys given on the command line; `origins`: key -> where it comes
    from (`--mirror`, `ENVLOCK_MIRRORS`, `project PATH`, `user PATH`: envlock.seams.config); `unconfirmed`: for a
    solve (resolve, lock, update), the project's own mirrors that the user's config, ENVLOCK_MIRRORS or --mirror do not name with
    the same URL (key -> `URL (FILE)`): left out of the map, and refused where a channel in play would use them.

    One rule for every source (check_in_play): an entry no channel in play uses is not used (a site names mirrors
    for many projects); one whose key is a typo of a channel in play (`conda-forg=`) is refused, naming its source.
    """

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = (), strict: Iterable[str] = (),
                 unconfirmed: Mapping[str, str] | None = None, origins: Mapping[str, str] | None = None) -> None:
        super().__init__(items)
        self.strict = frozenset(strict)
        self.unconfirmed = dict(unconfirmed or {})
        self.origins = dict(origins or {})


def _error(source: str) -> type[SpecError] | type[UsageError]:
    """A malformed entry of the command line or of ENVLOCK_MIRRORS is a usage error (exit 2); of a file, not."""
    return UsageError if source.startswith(("--mirror", "ENVLOCK_MIRRORS")) else SpecError


def normalise_key(key: str) -> str:
    """`conda-forge/` -> `conda-forge`, `https://host/x/` -> `https://host/x`."""
    return key.strip().rstrip("/")


def parse_entry(text: str, *, base: Path | None = None, source: str = "--mirror") -> tuple[str, str]:
    """`NAME=URL` (or `NAME=PATH`) -> (key, URL); SpecError naming `source` for anything else."""
    name, sep, value = text.partition("=")
    key, value = normalise_key(name), value.strip()
    if not sep or not key or not value:
        raise _error(source)(f"{source} {text!r} is not NAME=URL",
                             hint="e.g. conda-forge=https://mirror.example.org/conda-forge or conda-forge=/srv/mirror/conda-forge")
    return key, _channel_in_mirror(key, mirror_url(value, base=base, source=f"{source} {key}="))


def _channel_in_mirror(key: str, url: str) -> str:
    """`conda-forge=file://DIR` where DIR is an `envlock mirror` directory: its channel, DIR/conda-forge.

    Such a directory holds its channels as subdirectories (and the PyPI part as pypi/simple); a file://
    URL of its root is taken to mean the one the key names, where that one is there.
    """
    if not url.startswith("file://") or "://" in key:
        return url
    root = file_url_path(url)
    sub = root / ("pypi/simple" if key == PYPI else key.strip("/"))
    try:
        if (root / MIRROR_MANIFEST).is_file() and sub.is_dir():
            return sub.as_uri()
    except OSError:  # a folder this user cannot enter: taken as given (the fetch names what is wrong)
        pass
    return url


def mirror_url(value: str, *, base: Path | None = None, source: str = "--mirror") -> str:
    """An http(s):// or file:// URL as given; a plain path (must exist) as a file:// URL."""
    if "://" in value:
        if not value.lower().startswith(_SCHEMES):
            raise _error(source)(f"{source}{value}: only http://, https:// and file:// URLs (or a plain path) can be mirrors",
                            hint="e.g. https://mirror.example.org/conda-forge or /srv/mirror/conda-forge")
        return value.rstrip("/")
    try:
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if path.is_dir():
            return path.resolve().as_uri()
    except (OSError, ValueError, RuntimeError):  # a NUL byte, an unknown ~user, a path too long
        pass
    raise SpecError(f"{source}{value}: no such directory",
                    hint="give an existing mirror directory, or a URL with its scheme (https://…)")


def key_prefix(key: str) -> str:
    """The canonical URL prefix a key covers (ends with '/'; `pypi` stays `pypi`)."""
    if key == PYPI:
        return PYPI
    if "://" in key:
        return strip_credentials(key).rstrip("/") + "/"
    return CANONICAL_BASE + key.strip("/") + "/"


def _best(url: str, mirrors: Mapping[str, str]) -> tuple[str, str] | None:
    """(prefix, mirror URL) of the longest key covering `url`, or None."""
    found = [(key_prefix(k), v) for k, v in mirrors.items() if k != PYPI]
    found = [(p, v) for p, v in found if url.startswith(p)]
    return max(found, key=lambda pv: len(pv[0])) if found else None


def mirror_of(url: str, mirrors: Mapping[str, str]) -> tuple[str, str] | None:
    """(the key's URL prefix, the mirror's URL) of the mirror a locked URL is fetched from, or None."""
    return _best(url, mirrors)


def mirrored(url: str, mirrors: Mapping[str, str]) -> str:
    """Where to fetch a canonical URL from (itself when no key covers it)."""
    hit = _best(url, mirrors)
    return url if hit is None else hit[1].rstrip("/") + "/" + url[len(hit[0]):]


def channel_fetch_url(channel: str, mirrors: Mapping[str, str]) -> str:
    """The URL a channel (name or URL) is read from, with a trailing '/'."""
    canonical = key_prefix(channel)
    hit = _best(canonical, mirrors)
    if hit is not None:
        return mirrored(canonical, mirrors).rstrip("/") + "/"
    return channel.rstrip("/") + "/" if "://" in channel else canonical


def display(url: str) -> str:
    """A channel URL as users name it (`conda-forge`, `nvidia/label/cuda-11.8.0`, `pypi`, or the URL)."""
    if url.startswith(CANONICAL_BASE):
        return url[len(CANONICAL_BASE):].strip("/")
    return strip_credentials(url).rstrip("/")


def refuse_unconfirmed(mirrors: Mapping[str, str], channels: Iterable[str], index_urls: Iterable[str] = (), *,
                       pypi: bool = False) -> None:
    """A solve reads no mirror that only the project's envlock.toml names (MirrorMap.unconfirmed): the mirror a lock
    is solved from decides the hashes it records, and the project file comes with the pull request. SpecError for
    the first such mirror a channel in play (or the PyPI part) would use; one not in play is simply not used."""
    unconfirmed = getattr(mirrors, "unconfirmed", {})
    if not unconfirmed:
        return
    urls = sorted({key_prefix(c) for c in channels} | {u.rstrip("/") + "/" for u in index_urls})
    for key, where in sorted(unconfirmed.items()):
        if not ((key == PYPI and pypi) or any(u.startswith(key_prefix(key)) for u in urls)):
            continue
        url = where.rsplit(" (", 1)[0]
        raise SpecError(
            f"the project's envlock.toml names the mirror {key} = {where}: a project's file does not decide where a "
            "lock's packages and hashes come from",
            hint=("confirm it for this run: ", Retry((("--mirror", f"{key}={url}"),)),
                  " (or name it in your own envlock.toml, or ENVLOCK_MIRRORS), or remove it from the project's file"))


def check_in_play(mirrors: Mapping[str, str], channels: Iterable[str], wheel_urls: Iterable[str] = (),
                  *, pypi: bool = False) -> None:
    """Refuse a mirror entry whose key is a typo of a channel in play (`conda-forg=` beside conda-forge), wherever
    it comes from (--mirror and ENVLOCK_MIRRORS: a usage error; an envlock.toml: its file named), naming the ones in
    play. An entry no channel in play uses and that is no typo of one (`nvidia=` for a CUDA 12 lock, `pypi=` for
    a toolchain) is simply not used: one rule for every source (docs/reference.md).

    `channels`: the conda channels the command reads (names or URLs); `wheel_urls`: URLs of the PyPI part
    (wheels, or the index URLs it is locked from); `pypi` (or any wheel URL) puts the PyPI part in play.
    """
    keys = {*mirrors, *getattr(mirrors, "unconfirmed", {})}  # a project's unconfirmed entry may be a typo too
    if not keys:
        return
    chans, wheels = sorted({key_prefix(c) for c in channels}), sorted({u.rstrip("/") + "/" for u in wheel_urls})
    pypi = pypi or bool(wheels)
    names = sorted({display(u) for u in chans}) + ([PYPI] if pypi else [])
    origins = getattr(mirrors, "origins", {})
    for key in sorted(keys):
        prefix = key_prefix(key)
        if (key == PYPI and pypi) or any(u.startswith(prefix) for u in (*chans, *wheels)):
            continue
        near = slip_of(strip_credentials(key).rstrip("/"), [*names, *{n.split("/", 1)[0] for n in names}])
        if near is None:
            continue  # not used here
        origin = origins.get(key, "--mirror")
        source = origin if origin in ("--mirror", "ENVLOCK_MIRRORS") else origin.partition(" ")[2] + ": [mirrors]"
        raise _error(origin)(
            f"{source} {key}=… names no channel in play here (in play: {', '.join(names)}); a typo of {near}?",
            hint=f"mirror one of those (--mirror {near}=URL; nvidia= covers its labels, pypi= the PyPI part), "
                 f"or drop {source} {key}=…",
        )


def channel_of(package_url: str) -> str:
    """`https://conda.anaconda.org/conda-forge/linux-64/x.conda` -> `https://conda.anaconda.org/conda-forge/`."""
    return package_url.rsplit("/", 2)[0] + "/"


def missing_file_hint(path: Path, canonical_url: str) -> str | None:
    """For a file:// mirror pointed at the root of an `envlock mirror` directory instead of a channel in it."""
    channel = display(channel_of(canonical_url)).split("/", 1)[0]
    for root in list(path.parents)[:4]:
        try:
            found = (root / MIRROR_MANIFEST).is_file() and (root / channel).is_dir()
        except OSError:  # a folder this user cannot enter
            found = False
        if found:
            return (f"{root} is an envlock mirror: its channels are subdirectories, so use {channel}={(root / channel).as_uri()} "
                    "(`envlock mirror` prints the whole ENVLOCK_MIRRORS line)")
    return None
