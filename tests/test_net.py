"""envlock.seams.net, the network seam, against a real HTTP server on 127.0.0.1 with real faults (tests/channelbuilder.py).

The wheel download once replayed the bytes it had already written when a connection dropped mid-body and the
retry started over (pypi_install._chunks): the file then failed its sha256. Here the server cuts a 4 MB body off
after 2 MB (past the 1 MB chunk size, so bytes were written before the drop).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from envlock.seams import net
from envlock.errors import ChannelError
from envlock.models import PypiPackage
from tests.channelbuilder import ChannelServer

SIZE = 4 << 20


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, bytes]:
    root = tmp_path / "root"
    (root / "files").mkdir(parents=True)
    body = os.urandom(SIZE)
    (root / "files" / "demo-1.0-py3-none-any.whl").write_bytes(body)
    return root, body


def _download(server: ChannelServer, dest: Path, retries: int = 2) -> list[int]:
    seen: list[int] = []
    with net.session(net.HttpSettings(timeout=10, retries=retries, backoff=0.01)) as s:
        net.download(s, f"{server.url}/files/demo-1.0-py3-none-any.whl", dest, what="demo", hint="h",
                     on_bytes=seen.append, http=net.HttpSettings(timeout=10, retries=retries, backoff=0.01))
    return seen


def test_a_body_cut_off_mid_way_starts_the_file_again(served: tuple[Path, bytes], tmp_path: Path) -> None:
    root, body = served
    with ChannelServer(root) as server:
        server.add_fault("/files/*", "close-mid-body", times=1)
        seen = _download(server, tmp_path / "out")
        assert server.count("/files/*", status=200) == 2
    assert (tmp_path / "out").read_bytes() == body
    assert sum(seen) == SIZE and any(n < 0 for n in seen)  # the cut-off attempt's bytes were taken back


def test_a_body_cut_off_every_time_is_one_error_after_the_retries(served: tuple[Path, bytes], tmp_path: Path) -> None:
    root, _ = served
    with ChannelServer(root) as server:
        server.add_fault("/files/*", "close-mid-body")
        with pytest.raises(ChannelError, match=r"connection closed mid-download, 3 attempts") as info:
            _download(server, tmp_path / "out")
        assert server.count("/files/*", status=200) == 3
    assert info.value.exit_code == 4


def test_5xx_is_retried_by_the_session_and_a_404_is_final(served: tuple[Path, bytes], tmp_path: Path) -> None:
    root, body = served
    with ChannelServer(root) as server:
        server.add_fault("/files/*", "status:503", times=2)
        _download(server, tmp_path / "out")
        assert server.count("/files/*", status=503) == 2 and (tmp_path / "out").read_bytes() == body
        server.add_fault("/files/*", "status:404")
        with pytest.raises(ChannelError, match="HTTP 404"):
            _download(server, tmp_path / "again")
        assert server.count("/files/*", status=404) == 1


def test_the_wheel_cache_survives_a_connection_dropped_mid_body(served: tuple[Path, bytes], tmp_path: Path) -> None:
    from envlock.seams.pypi.wheels import fetch_wheels

    root, body = served
    with ChannelServer(root) as server:
        server.add_fault("/files/*", "close-mid-body", times=1)
        wheel = PypiPackage("demo", "1.0", "linux-64", f"{server.url}/files/demo-1.0-py3-none-any.whl",
                            hashlib.sha256(body).hexdigest(), ())
        (path,), fetched = fetch_wheels([wheel], tmp_path / "cache", offline=False)
        assert server.count("/files/*", status=200) == 2
    assert fetched == 1 and path.read_bytes() == body
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".part")]


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "7.5")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    assert (net.settings().timeout, net.settings().retries) == (7.5, 0)
    monkeypatch.delenv("ENVLOCK_HTTP_TIMEOUT")
    monkeypatch.delenv("ENVLOCK_HTTP_RETRIES")
    assert (net.settings().timeout, net.settings().retries) == (net.DEFAULT_TIMEOUT_S, net.DEFAULT_RETRIES)
    # a value of the wrong form is a usage error, not the default in silence (issue 24)
    from envlock.errors import UsageError

    for name, value in (("ENVLOCK_HTTP_TIMEOUT", "soon"), ("ENVLOCK_HTTP_RETRIES", "-2")):
        monkeypatch.setenv(name, value)
        with pytest.raises(UsageError, match=name):
            net.settings()
        monkeypatch.delenv(name)


def test_the_index_client_and_rattler_follow_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock.seams.conda.solve import SolveOptions
    from envlock.seams.pypi import IndexSettings

    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "9")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "5")
    assert (IndexSettings().timeout, IndexSettings().retries) == (9.0, 5)
    assert SolveOptions(cache_dir=Path("c")).http == net.HttpSettings(timeout=9.0, retries=5)


@pytest.mark.parametrize(
    "text,marked,want",
    [
        ("https://u:p@host/t/tok/conda-forge/linux-64/x.conda", False, "https://host/conda-forge/linux-64/x.conda"),
        ("https://conda.anaconda.org/conda-forge/noarch/a-1-0.conda", False,
         "https://conda.anaconda.org/conda-forge/noarch/a-1-0.conda"),
        ("https://u:p@host:8443/simple/", True, "https://***@host:8443/simple/"),
        ("cannot fetch https://alice:pw@idx/simple/torch/ (HTTP 500) / and http://h/t/T0K/c", False,
         "cannot fetch https://idx/simple/torch/ (HTTP 500) / and http://h/c"),
        ("https://u:p@host/x.whl?token=abc#sha256=00", False, "https://host/x.whl"),
    ],
)
def test_one_scrubber_for_urls_and_messages(text: str, marked: bool, want: str) -> None:
    assert net.scrub(text, marked=marked) == want


def test_scrub_blanks_the_secrets_of_a_url_wherever_they_appear() -> None:
    said = "ConnectionError: host='idx' user alice rejected (s3cret)"
    assert net.scrub(said, secrets=["https://alice:s3cret@idx/simple/"]) == "ConnectionError: host='idx' user *** rejected (***)"


@pytest.mark.parametrize(
    "channel,want",
    [
        # A channel value is one URL, spaces and all (the slow fuzz tier found a token kept past a space).
        ("http://ex ample.org/t/tk-SECRET5/conda-forge", "http://ex ample.org/conda-forge/"),
        ("https://u:SECRET@host/t/SECRET/conda-forge/", "https://host/conda-forge/"),
        ("conda-forge", "https://conda.anaconda.org/conda-forge/"),
    ],
)
def test_a_channel_url_keeps_no_credential_even_with_a_space_in_it(channel: str, want: str) -> None:
    from envlock.seams.conda.channels import canonical_channel_url, check_channel_security
    from envlock.errors import SpecError

    assert canonical_channel_url(channel) == want
    if channel.startswith("http://"):
        with pytest.raises(SpecError) as refused:
            check_channel_security(channel, allow_insecure=False)
        assert "SECRET" not in str(refused.value)


@pytest.mark.parametrize("url", ["file:///a%20b/c", "file:///tmp/x", "file://localhost/tmp/y", "file:///%E2%82%AC/x.conda",
                                 "file:///srv/mirror/conda-forge/"])
def test_a_file_url_is_the_path_urllib_gives(url: str) -> None:
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    from envlock.names import file_url_path

    assert file_url_path(url) == Path(url2pathname(urlsplit(url).path))
