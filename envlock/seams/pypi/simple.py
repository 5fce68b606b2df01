"""PEP 691 (JSON) and PEP 503 (HTML) project pages: their files, and which torch wheel to read first."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envlock.errors import ChannelError
from envlock.seams.net import scrub

# The interpreter tags whose wheel we read first: the facts were collected from cp311/cp312 wheels.
_PYTHON_PREFERENCE = ("cp311", "cp312", "cp310", "cp313", "cp39", "cp38")
_LINUX_X86_64 = re.compile(r"^(manylinux\w*|linux)_x86_64$")


def redact(url: str) -> str:
    """The URL without user/password (`***@` in their place), safe for messages and logs."""
    return scrub(url, marked=True)


@dataclass(frozen=True, slots=True)
class IndexFile:
    filename: str
    url: str  # absolute, without fragment
    metadata: Any  # PEP 714 "core-metadata" value: True / {"sha256": ...} / None when not advertised


class _AnchorParser(HTMLParser):
    """The <a> elements of a PEP 503 HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []
        self._current: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._current = dict(attrs)
            self._current["#text"] = ""
            self.links.append(self._current)

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._current["#text"] = (self._current.get("#text") or "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._current = None


def _html_metadata(value: str | None) -> Any:
    """data-core-metadata="sha256=..." / "true" -> the PEP 691 shape."""
    if value is None:
        return None
    if "=" in value:
        algo, digest = value.split("=", 1)
        return {algo: digest}
    return True


def parse_simple_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """The files of a PEP 691 JSON or PEP 503 HTML project page."""
    files: list[IndexFile] = []
    if "json" in content_type:
        from envlock.formats.untrusted import json_value

        try:  # the checked loader (capped, nesting bounded); every entry of the shape PEP 691 gives it
            for e in json_value(body)["files"]:
                meta = e.get("core-metadata", e.get("dist-info-metadata"))
                url = urljoin(page_url, str(e["url"])).split("#", 1)[0]
                files.append(IndexFile(str(e["filename"]), url, meta if meta else None))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ChannelError(
                f"the index page {redact(page_url)} is not a valid PEP 691 JSON page",
                hint="check the index URL in PIP_INDEX_URL / pip.conf",
            ) from None
        return files
    if "html" in content_type:
        parser = _AnchorParser()
        parser.feed(body.decode("utf-8", "replace"))
        for a in parser.links:
            href = a.get("href")
            if not href:
                continue
            url = urljoin(page_url, href).split("#", 1)[0]
            name = (a.get("#text") or "").strip() or url.rsplit("/", 1)[-1]
            meta = _html_metadata(a.get("data-core-metadata") or a.get("data-dist-info-metadata"))
            files.append(IndexFile(name, url, meta))
        return files
    raise ChannelError(
        f"the index answered {content_type or 'no content type'} for {redact(page_url)}, not a simple page",
        hint="check the index URL in PIP_INDEX_URL / pip.conf",
    )


def wheel_rank(f: IndexFile, version: Version) -> tuple[int, int] | None:
    """Sort key of a Linux x86_64 wheel of exactly version (smaller is better), or None."""
    try:
        name, ver, build, tags = parse_wheel_filename(f.filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    if name != "torch" or ver != version or ver.local is not None:
        return None
    linux = [t for t in tags if _LINUX_X86_64.match(t.platform) and not t.abi.endswith("t")]
    if not linux:
        return None
    pref = min(
        (_PYTHON_PREFERENCE.index(t.interpreter) for t in linux if t.interpreter in _PYTHON_PREFERENCE),
        default=len(_PYTHON_PREFERENCE),
    )
    return pref, -(build[0] if build else 0)  # the newest re-upload (build tag) first


def python_of(filename: str) -> str:
    """'cp311' of a wheel name -> '3.11' (for marker evaluation)."""
    m = re.search(r"-cp(\d)(\d+)-", filename)
    return f"{m.group(1)}.{m.group(2)}" if m else "3.11"
