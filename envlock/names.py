"""What strings name: a conda package's file name, a wheel's file name, a match spec's package name, a
URL without its credentials (and a text without the secrets in force), a name as a terminal may show it.

One parser each (pure, imports nothing of envlock), used by every reader, writer and report.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

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


# --------------------------------------------------------------------------- credentials
#
# The one credential rule. A URL's userinfo (`user:password@`, a token alone, any characters, percent-encoded or
# not) ends at the authority's last `@` (RFC 3986: the authority ends at the first `/`, `?` or `#`); conda's token
# is `/t/<token>` ANYWHERE in the path (conda.common.url.split_anaconda_token searches the whole URL: `/api/t/<tk>/`
# too), `/%74/` its percent-encoded spelling. `strip_credentials` removes them from one URL (what a lock, a spec, a
# cache key records); `scrub` from every URL in a text, and then every secret in force (`remember_secrets`: the
# command line, the environment, envlock.toml, pip's configuration, as each is read) wherever it appears, whatever
# a URL parser would make of the text around it (a password with a space, a '/', a quote).

_AUTHORITY_END = re.compile(r"[/?#]")
_TOKEN_SEGMENTS = frozenset({"t", "%74"})
#: A URL in a text: its authority runs to whitespace or / ? # (a password may hold quotes and <), its path to a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#]*[^\s'\"<>]*")
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: Secrets shorter than this are removed from URLs only: replacing every "pw" in a text would garble it.
MIN_SECRET = 3
_IN_FORCE: set[str] = set()  # the process's secrets in force (this module's one piece of state)


def _url_parts(url: str) -> tuple[str, str, str]:
    """(scheme, authority, path) of a URL, split as RFC 3986 splits it (the query and fragment dropped)."""
    scheme, _, rest = url.partition("://")
    m = _AUTHORITY_END.search(rest)
    end = m.start() if m else len(rest)
    tail = rest[end:]
    stop = min((i for i in (tail.find("?"), tail.find("#")) if i >= 0), default=len(tail))
    return scheme, rest[:end], tail[:stop]


def strip_credentials(url: str, marked: bool = False) -> str:
    """`url` without its userinfo and without conda's `/t/<token>` segments wherever they are in its path (see
    above). `marked`: they become `***@` and `/t/***` (the user sees a login was used). A query or fragment of a
    URL that carried credentials may carry a token too: dropped with them."""
    if "://" not in url or ("@" not in url and "/t/" not in url and "/%74/" not in url):
        return url  # nothing to strip (the common case: hundreds of package URLs per lock)
    scheme, authority, path = _url_parts(url)
    changed = "@" in authority and authority.rsplit("@", 1)[0] != "***"  # `***@`: already marked, nothing left
    if changed:
        authority = ("***@" if marked else "") + authority.rsplit("@", 1)[1]
    segs, out, i = path.split("/"), [], 0
    while i < len(segs):
        if i > 0 and segs[i] in _TOKEN_SEGMENTS and i + 1 < len(segs) and segs[i + 1] != "***":  # /t/<token>, anywhere
            out += ["t", "***"] if marked else []
            i, changed = i + 2, True
            continue
        out.append(segs[i])
        i += 1
    return f"{scheme.lower()}://{authority}{'/'.join(out)}" if changed else url


def url_secrets(text: str, *, users: bool = False) -> set[str]:
    """Every secret the URLs in `text` carry, each with its percent-decoded and -encoded spellings: the
    password (a user name alone: the token; `users`: every user name too), conda tokens. Generous where a parser
    is not: a URL runs to the end of its line (a password may hold a space), and a userinfo holding a raw '/'
    (`https://u:pa/ss@host`) counts up to the line's last '@' when what precedes its first '/' holds a ':' that is
    no port's."""
    found: set[str] = set()
    for m in _URL_START.finditer(text):  # each URL runs to the end of its line: a value may hold spaces
        end = min((i for i in (text.find("\n", m.end()), text.find("\r", m.end())) if i >= 0), default=len(text))
        rest = text[m.end() : end]
        _scheme, authority, path = _url_parts(text[m.start() : end])
        infos = [authority.rsplit("@", 1)[0]] if "@" in authority else []
        first = rest.split("/", 1)[0]
        if "@" in rest and ":" in first and not first.rsplit(":", 1)[1].isdigit():  # host:port is no password
            infos.append(rest[: rest.rindex("@")])
        for info in infos:
            user, sep, password = info.partition(":")
            found.update([password, *([user] if users else [])] if sep and password else [user])
        segs = path.split("/")
        found.update(segs[i + 1] for i in range(1, len(segs) - 1) if segs[i] in _TOKEN_SEGMENTS and segs[i + 1])
    import json  # noqa: PLC0415 - only where a URL carries a secret

    # A parser that stops at one of these characters (WHATWG's URL parser at '\\', most at / ? # and whitespace)
    # shows the secret cut there: each piece is a secret too.
    found |= {piece for s in found for piece in re.split(r"[\\/?#@\s]", s) if piece != s}
    forms = {f for s in found if s for f in (s, unquote(s), quote(s, safe=""), quote(unquote(s), safe=""), quote(s))}
    forms |= {g for f in forms for g in (json.dumps(f)[1:-1], printable(f))}  # as --json and a terminal show it
    return {f for f in forms if len(f) >= MIN_SECRET}


def remember_secrets(*texts: str) -> None:
    """Add the secrets of these URLs (or texts holding URLs) to those in force: `scrub` removes them from every
    text from now on (the command line and environment at start; config and pip's configuration as read)."""
    for text in texts:
        if "://" in text:
            _IN_FORCE.update(url_secrets(text))


def secrets_in_force() -> frozenset[str]:
    return frozenset(_IN_FORCE)


def forget_secrets() -> None:
    """A new command starts with none in force (cli.run, several runs in one process)."""
    _IN_FORCE.clear()


def scrub(text: str, *, marked: bool = False, secrets: Iterable[str] = ()) -> str:
    """`text` without credentials: every URL in it through `strip_credentials`, then every secret in force (and
    those of the URLs in `secrets`) replaced by `***` wherever it appears. The one scrubber: errors, warnings,
    every line a command prints, logs and `--json` pass through it."""
    extra = url_secrets("\n".join(secrets), users=True) if secrets else set()
    for secret in sorted(_IN_FORCE | extra, key=len, reverse=True):  # first: a URL's stripping may cut one apart
        if secret in text:
            text = text.replace(secret, "***")
    if "://" in text and ("@" in text or "/t/" in text or "/%74/" in text):
        text = _URL_IN_TEXT.sub(lambda m: strip_credentials(m.group(0), marked), text)
    return text


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

def slip_of(word: str, names: Iterable[str], edits: int = 2) -> str | None:
    """The name in `names` that `word` is one slip from (at most `edits` letters added, dropped or changed, not
    equal; case aside): what a typo of a setting or a channel looks like (`conda-forg`, `ENVLOCK_HTTP_TIMOUT`)."""
    word = word.lower()
    best: tuple[int, str] | None = None
    for name in dict.fromkeys(names):
        d = _distance(word, name.lower(), edits)
        if 0 < d <= edits and (best is None or d < best[0]):
            best = (d, name)
    return best[1] if best else None


def _distance(a: str, b: str, cap: int) -> int:
    """Levenshtein distance of a and b, cut at cap + 1 (short strings: a setting's or a channel's name)."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        if min(row) > cap:
            return cap + 1
    return row[-1]
