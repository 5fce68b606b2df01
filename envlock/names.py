"""What strings name: a conda package's file name, a wheel's file name, a match spec's package name, a
URL without its credentials, a name as a terminal may show it.

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
    """`url` without `user:password@` (a token alone, percent-encoded, all the same) and conda's `/t/<token>/`
    segment (`/%74/` too), the one URL rule; envlock.seams.net.scrub applies it to every URL in a text. `marked`: they
    become `***@` and `/t/***/` (the user sees a login was used).
    """
    if "://" not in url or ("@" not in url and "/t/" not in url and "/%74/" not in url):
        return url  # nothing to strip (the common case: hundreds of package URLs per lock)
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = ("***@" if marked else "") + netloc.rsplit("@", 1)[-1]
    segs = parts.path.split("/")
    if len(segs) > 2 and segs[1] in ("t", "%74"):  # conda's token segment: /t/<token>/channel
        segs = segs[:1] + (["t", "***"] if marked else []) + segs[3:]
    if netloc == parts.netloc and segs == parts.path.split("/"):
        return url
    # A query or fragment of a URL that carried credentials may carry a token too: dropped with them.
    return urlunsplit((parts.scheme, netloc, "/".join(segs), "", ""))


def has_credentials(url: str) -> bool:
    """Whether a URL carries a login or a conda token (what strip_credentials removes)."""
    return strip_credentials(url) != url


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without `user:password@`, the user name, the password), both percent-decoded; None where absent."""
    if "@" not in url:
        return url, None, None
    parts = urlsplit(url)
    if parts.username is None:
        return url, None, None
    host = parts.netloc.rsplit("@", 1)[-1]
    password = unquote(parts.password) if parts.password is not None else None
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), unquote(parts.username), password


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


def printable(text: str) -> str:
    """`text` with every character a terminal would act on escaped: C0 and C1 controls, DEL, line breaks and
    Unicode format characters such as a right-to-left override (`\\x1b`, `\\n`, `\\u202e`).

    Names from a spec, a lock, an archive or the file system pass through it on their way to human output
    (docs/security.md); `--json` escapes them as JSON does.
    """
    if text.isprintable():
        return text  # the common case, at C speed
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def printable_lines(text: str) -> str:
    """`printable` for each line of a message (its own line breaks kept)."""
    return "\n".join(map(printable, text.split("\n")))


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


#: What the path of a CUDA env cannot hold. conda-forge's cuda-nvcc activation appends `-ccbin=$CXX` (CXX is
#: PREFIX/bin/<triplet>-c++) to NVCC_PREPEND_FLAGS; nvcc splits that variable at whitespace and keeps quotes as
#: part of a word (`-ccbin="/a b/c++"` names the file `"/a b/c++"` with its quotes), and it runs the host compiler
#: through `sh -c "…"`, where `$` and a backquote are expanded and `"` ends the quoting. Measured with nvcc 13.0:
#: tests/test_prefix_path.py.
_NVCC_CANNOT = {'"': "a double quote", "$": "a dollar sign", "`": "a backquote"}


def nvcc_cannot_use(prefix: object) -> str | None:
    """Why nvcc cannot build in an env at `prefix` (None: it can): the first character it cannot carry, in words."""
    for ch in str(prefix):
        if ch.isspace():
            return {" ": "a space", "\t": "a tab", "\n": "a line break"}.get(ch, f"a whitespace character ({ch!r})")
        if ch in _NVCC_CANNOT:
            return f"{_NVCC_CANNOT[ch]} ({ch})"
    return None


def usable_path(prefix: object) -> str:
    """`prefix` with every character nvcc cannot carry replaced by `-` (what a refusal proposes instead)."""
    return "".join("-" if ch.isspace() or ch in _NVCC_CANNOT else ch for ch in str(prefix))
