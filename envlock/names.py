"""What strings name: a conda package's file name, a wheel's file name, a match spec's package name, a
URL without its credentials.

One parser each (pure, imports nothing of envlock), used by every reader, writer and report.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

CONDA_SUFFIXES = (".conda", ".tar.bz2")
# Where a conda match spec's name ends: a space, a version operator, or a bracketed key=value part.
_NAME_END = re.compile(r"[\s=<>!~\[]")


def conda_stem(filename: str) -> str:
    """'cudnn-9.1.0-h1_0.conda' -> 'cudnn-9.1.0-h1_0' (a URL's last segment and #md5 are accepted too)."""
    name = filename.rsplit("/", 1)[-1].split("#", 1)[0]
    for suffix in CONDA_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def split_conda_filename(filename: str) -> tuple[str, str, str] | None:
    """(name, version, build) of a conda package file name or URL; None when it has fewer than three parts.

    A conda file name is `<name>-<version>-<build>`; names may hold dashes, versions and builds may not.
    """
    parts = conda_stem(filename).rsplit("-", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def conda_build(filename: str, name: str, version: str) -> str:
    """The build string of a package whose name and version are known (a lock entry's URL)."""
    stem = conda_stem(filename)
    prefix = f"{name}-{version}-"
    return stem[len(prefix) :] if stem.startswith(prefix) else stem.rsplit("-", 1)[-1]


def wheel_name_version(filename: str) -> tuple[str, str]:
    """(distribution, version) of a wheel file name or URL, as written ('' for a missing version)."""
    parts = filename.rsplit("/", 1)[-1].split("#", 1)[0].split("-")
    return (parts[0], parts[1]) if len(parts) > 1 else (parts[0], "")


@functools.lru_cache(maxsize=8192)  # a lock's dependency lines repeat across records and platforms
def split_match_spec(spec: str) -> tuple[str, str]:
    """(package name, the rest) of a conda match spec: 'conda-forge::python >=3.10' -> ('python', '>=3.10').

    The channel prefix (`channel::`, `channel/subdir::`) is not part of the name; the name ends at a
    space, a version operator (=, <, >, !, ~) or a `[key=value]` part. The rest is stripped ('' if none).
    """
    text = spec.strip()
    if not text:
        return "", ""
    body = text.partition("::")[2] if "::" in text.split(maxsplit=1)[0] else text
    m = _NAME_END.search(body)
    if m is None:
        return body, ""
    return body[: m.start()], body[m.start() :].strip()


def match_spec_name(spec: str) -> str:
    """The package name a conda match spec asks for ('' for an empty spec)."""
    return split_match_spec(spec)[0]


def strip_credentials(url: str, marked: bool = False) -> str:
    """`url` without `user:password@` and conda's `/t/<token>/` segment (the one URL rule; envlock.net.scrub
    applies it to every URL in a text). `marked`: the userinfo becomes `***@` (the user sees a login was used).
    """
    if "://" not in url or ("@" not in url and "/t/" not in url):
        return url  # nothing to strip (the common case: hundreds of package URLs per lock)
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = ("***@" if marked else "") + netloc.rsplit("@", 1)[-1]
    segs = parts.path.split("/")
    if len(segs) > 2 and segs[1] == "t":  # conda's token segment: /t/<token>/channel
        segs = segs[:1] + segs[3:]
    if netloc == parts.netloc and len(segs) == len(parts.path.split("/")):
        return url
    # A query or fragment of a URL that carried credentials may carry a token too: dropped with them.
    return urlunsplit((parts.scheme, netloc, "/".join(segs), "", ""))


def file_url_path(url: str) -> Path:
    """The local path of a file:// URL (file:///a%20b -> /a b; file:///C:/x -> C:\\x on Windows).

    urllib.request's url2pathname, without importing urllib.request (http.client, email, ssl: ~40 ms)
    where it is plain unquoting; Windows keeps the real one (drive letters, UNC hosts).
    """
    path = urlsplit(url).path
    if os.name == "nt":  # pragma: no cover - Windows only
        from urllib.request import url2pathname  # noqa: PLC0415

        return Path(url2pathname(path))
    return Path(unquote(path))
