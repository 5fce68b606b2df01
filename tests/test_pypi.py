"""The index metadata client against a real HTTP index on 127.0.0.1 (tests/fixtures/pypi.py)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from packaging.version import Version

from envlock.core.tables import torch_table
from envlock.errors import AnchorError, ChannelError
from envlock.seams.pypi import (
    IndexSettings,
    cache_root,
    configured_index_url,
    parse_cuda_pins,
    pip_config_files,
    redact,
    torch_cuda_from_index,
)
from tests.fixtures.pypi import TORCH_230_NVIDIA, FakeTorchIndex

FAST = IndexSettings(backoff=0.01, timeout=5.0)
REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- Requires-Dist parsing


def test_parses_the_exact_torch_230_lines() -> None:
    pins = parse_cuda_pins(TORCH_230_NVIDIA)
    assert (pins.cuda, pins.cudnn) == ("12.1", "8.9.2.26")
    assert pins.requirement == "nvidia-cuda-runtime-cu12==12.1.105"


@pytest.mark.parametrize(
    ("lines", "cuda", "cudnn"),
    [
        (["nvidia-cuda-runtime-cu11 (==11.7.99)", "nvidia-cudnn-cu11 (==8.5.0.96)"], "11.7", "8.5.0.96"),
        (
            ['nvidia-cuda-runtime-cu12==12.6.77; platform_system == "Linux"', "nvidia-cudnn-cu12==9.5.1.17"],
            "12.6",
            "9.5.1.17",
        ),
        (
            [
                'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2; platform_system == "Linux"',
                'nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"',
            ],
            "13.0",
            "9.19.0.56",
        ),
        (["nvidia-cuda-runtime==13.0.96.*", "nvidia-cudnn-cu13==9.20.0.48"], "13.0", "9.20.0.48"),
        (["cuda-toolkit[cudart]==13.0.3"], "13.0", None),
    ],
)
def test_parses_every_documented_shape(lines: list[str], cuda: str, cudnn: str | None) -> None:
    pins = parse_cuda_pins(lines)
    assert (pins.cuda, pins.cudnn) == (cuda, cudnn)


def test_the_runtime_pin_wins_over_the_toolkit_and_markers_are_honoured() -> None:
    lines = [
        'nvidia-cuda-runtime-cu12==12.4.127; platform_machine == "aarch64"',  # not for x86_64: ignored
        "cuda-toolkit[cudart]==13.0.2",
        'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"',
    ]
    assert parse_cuda_pins(lines).cuda == "12.8"


def test_no_nvidia_dependency_means_no_cuda() -> None:
    assert parse_cuda_pins(["filelock", "sympy", 'opt-einsum>=3.3; extra == "opt-einsum"']).cuda is None


def test_unreadable_cuda_pins_are_errors_with_hints() -> None:
    with pytest.raises(AnchorError, match="not an exact pin") as info:
        parse_cuda_pins(["nvidia-cuda-runtime-cu12>=12.1"])
    assert "--cuda" in info.value.hint
    with pytest.raises(AnchorError, match="names no CUDA runtime"):
        parse_cuda_pins(["nvidia-nccl-cu12==2.20.5"])


# --------------------------------------------------------------------------- lookups over HTTP


def test_reads_230_from_the_index_without_downloading_the_wheel(pypi_index: FakeTorchIndex) -> None:
    meta = torch_cuda_from_index("2.3.0", FAST)
    row = torch_table().row_for(Version("2.3.0"))
    assert row is not None and (meta.cuda, meta.cudnn) == (row.pypi_cuda, row.pypi_cudnn)
    assert meta.wheel == "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl"
    assert meta.index == pypi_index.url and not meta.cached
    assert pypi_index.wheel_downloads() == []
    assert pypi_index.hits(".metadata") == 1
    page_requests = pypi_index.hits("/simple/torch/")
    assert page_requests == 1


def test_cuda_toolkit_style_release(pypi_index: FakeTorchIndex) -> None:
    meta = torch_cuda_from_index("2.16.0", FAST)
    assert (meta.cuda, meta.cudnn) == ("13.2", "9.30.0.12")
    assert meta.requirement.startswith("cuda-toolkit[") and meta.requirement.endswith("==13.2.2")
    assert meta.wheel.endswith("manylinux_2_28_x86_64.whl") and "cp311" in meta.wheel


def test_bare_runtime_style_release_with_legacy_advertisement(pypi_index: FakeTorchIndex) -> None:
    meta = torch_cuda_from_index("2.16.1", FAST)
    assert (meta.cuda, meta.cudnn, meta.requirement) == (
        "12.9",
        "9.10.2.21",
        "nvidia-cuda-runtime-cu12==12.9.79",
    )


def test_falls_back_to_another_wheel_when_one_has_no_metadata(pypi_index: FakeTorchIndex) -> None:
    meta = torch_cuda_from_index("2.16.2", FAST)
    assert meta.cuda == "11.8" and "cp312" in meta.wheel  # cp311's .metadata is 404; sha256 checked on cp312
    assert pypi_index.hits(".metadata") == 2
    assert pypi_index.wheel_downloads() == []


def test_metadata_not_matching_its_advertised_hash_is_refused(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(ChannelError, match="does not match the sha256"):
        torch_cuda_from_index("2.16.3", FAST)


def test_no_metadata_anywhere_is_an_error_and_the_wheel_is_still_not_fetched(
    pypi_index: FakeTorchIndex,
) -> None:
    with pytest.raises(AnchorError, match="serves no metadata") as info:
        torch_cuda_from_index("2.16.4", FAST)
    assert "never downloads" in info.value.hint
    assert pypi_index.wheel_downloads() == []


def test_cpu_only_wheel_is_an_error_also_from_the_cache(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(AnchorError, match="CPU build") as info:
        torch_cuda_from_index("2.17.0", FAST)
    assert "--cuda" in info.value.hint
    before = len(pypi_index.requests)
    with pytest.raises(AnchorError, match="CPU build"):
        torch_cuda_from_index("2.17.0", FAST, offline=True)
    assert len(pypi_index.requests) == before


def test_release_without_a_linux_wheel(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(AnchorError, match="no Linux x86_64 wheel"):
        torch_cuda_from_index("2.18.0", FAST)


def test_unknown_version_names_the_index(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(AnchorError) as info:
        torch_cuda_from_index("9.9.9", FAST)
    assert (
        str(info.value) == f"torch 9.9.9 exists neither in envlock's table nor on the index {pypi_index.url}"
    )
    assert "pip index versions torch" in info.value.hint


def test_html_only_index_works_too(pypi_index: FakeTorchIndex) -> None:
    pypi_index.html_only = True
    assert torch_cuda_from_index("2.16.2", FAST).cuda == "11.8"  # data-core-metadata sha256 parsed from HTML


# --------------------------------------------------------------------------- cache


def test_second_lookup_is_served_from_the_cache_with_zero_requests(pypi_index: FakeTorchIndex) -> None:
    first = torch_cuda_from_index("2.16.0", FAST)
    count = len(pypi_index.requests)
    second = torch_cuda_from_index("2.16.0", FAST)
    assert len(pypi_index.requests) == count
    assert second.cached and (second.cuda, second.cudnn, second.wheel) == (
        first.cuda,
        first.cudnn,
        first.wheel,
    )
    files = list(cache_root(FAST).glob("*.json"))
    assert [f.name for f in files] == ["torch-2.16.0.json"]
    assert json.loads(files[0].read_text())["cuda"] == "13.2"
    assert not list(cache_root(FAST).glob("*.tmp"))  # atomic write leaves no temp file


def test_offline_with_empty_cache_is_an_error(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(AnchorError, match="--offline") as info:
        torch_cuda_from_index("2.16.0", FAST, offline=True)
    assert "without --offline" in info.value.hint
    assert pypi_index.requests == []


def test_offline_with_warm_cache_works(pypi_index: FakeTorchIndex) -> None:
    torch_cuda_from_index("2.16.1", FAST)
    pypi_index.fail("/simple/torch/", *[500] * 10)  # the index is now broken; offline must not care
    meta = torch_cuda_from_index("2.16.1", FAST, offline=True)
    assert meta.cached and meta.cuda == "12.9"


def test_corrupt_cache_entry_is_refetched(pypi_index: FakeTorchIndex) -> None:
    torch_cuda_from_index("2.16.1", FAST)
    (cache_root(FAST) / "torch-2.16.1.json").write_text("{not json")
    meta = torch_cuda_from_index("2.16.1", FAST)
    assert not meta.cached and meta.cuda == "12.9"


def test_cache_dir_follows_envlock_cache_dir(pypi_index: FakeTorchIndex, tmp_path: Path) -> None:
    assert cache_root(IndexSettings()) == tmp_path / "envlock-cache" / "pypi"
    assert cache_root(IndexSettings(cache_dir=tmp_path / "x")) == tmp_path / "x" / "pypi"


# --------------------------------------------------------------------------- faults


def test_5xx_is_retried_then_succeeds(pypi_index: FakeTorchIndex) -> None:
    pypi_index.fail("/simple/torch/", 500, 503)
    assert torch_cuda_from_index("2.16.0", FAST).cuda == "13.2"
    assert pypi_index.hits("/simple/torch/") == 3


def test_retries_are_bounded(pypi_index: FakeTorchIndex) -> None:
    pypi_index.fail("/simple/torch/", *[502] * 10)
    settings = IndexSettings(retries=2, backoff=0.01)
    with pytest.raises(ChannelError, match="HTTP 502") as info:
        torch_cuda_from_index("2.16.0", settings)
    assert info.value.exit_code == 4 and "3 attempts" in str(info.value)
    assert pypi_index.hits("/simple/torch/") == 3


def test_404_page_means_unknown(pypi_index: FakeTorchIndex) -> None:
    pypi_index.fail("/simple/torch/", 404)
    with pytest.raises(AnchorError, match="exists neither"):
        torch_cuda_from_index("2.16.0", FAST)


def test_same_scheme_redirect_is_followed(pypi_index: FakeTorchIndex) -> None:
    pypi_index.redirect("/simple/torch/", "/simple/torch/?moved=1")
    assert torch_cuda_from_index("2.16.0", FAST).cuda == "13.2"


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/simple/torch/"])
def test_redirect_to_another_scheme_is_refused(pypi_index: FakeTorchIndex, target: str) -> None:
    pypi_index.redirect("/simple/torch/", target)
    with pytest.raises(ChannelError, match="refuses") as info:
        torch_cuda_from_index("2.16.0", FAST)
    assert "PIP_INDEX_URL" in info.value.hint


def test_timeout_is_bounded(pypi_index: FakeTorchIndex) -> None:
    pypi_index.delays["/simple/torch/"] = 2.0
    start = time.monotonic()
    with pytest.raises(ChannelError, match="did not answer within ENVLOCK_HTTP_TIMEOUT"):
        torch_cuda_from_index("2.16.0", IndexSettings(timeout=0.3, retries=1, backoff=0.01))
    assert time.monotonic() - start < 2.0
    assert pypi_index.hits("/simple/torch/") == 2


def test_unreachable_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path))
    with pytest.raises(ChannelError, match="cannot reach the package index") as info:
        torch_cuda_from_index(
            "2.16.0", IndexSettings(index_url=f"http://127.0.0.1:{port}/simple/", retries=1, backoff=0.01)
        )
    assert "--cuda" in info.value.hint


def test_non_http_index_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PIP_INDEX_URL", f"file://{tmp_path}/simple")
    with pytest.raises(ChannelError, match="not an http"):
        torch_cuda_from_index("2.16.0")


# --------------------------------------------------------------------------- credentials


def test_credentials_are_used_but_never_shown(
    pypi_index: FakeTorchIndex, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="envlock.seams.pypi")
    pypi_index.auth = ("alice", "s3cret-pw")
    monkeypatch.setenv("PIP_INDEX_URL", pypi_index.url_with_credentials("alice", "s3cret-pw"))
    meta = torch_cuda_from_index("2.3.0", FAST)  # its cp311 wheel link is relative to the page
    assert meta.cuda == "12.1" and "s3cret" not in meta.index and "***@" in meta.index
    assert torch_cuda_from_index("2.16.0", FAST).cuda == "13.2"  # absolute link on the same host: login kept
    assert pypi_index.hits("/files/torch-2.16.0-cp311") == 1
    with pytest.raises(AnchorError) as unknown:
        torch_cuda_from_index("9.9.9", FAST)
    pypi_index.fail("/simple/torch/", *[500] * 10)
    with pytest.raises(ChannelError) as broken:
        torch_cuda_from_index("2.16.1", IndexSettings(retries=1, backoff=0.01))
    for err in (unknown.value, broken.value):
        assert "s3cret" not in str(err) and "s3cret" not in err.hint and "alice" not in str(err)
    assert "s3cret" not in caplog.text
    cached = (cache_root(FAST) / "torch-2.3.0.json").read_text()
    assert "s3cret" not in cached


def test_wrong_credentials_are_reported_without_the_password(
    pypi_index: FakeTorchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    pypi_index.auth = ("alice", "right")
    monkeypatch.setenv("PIP_INDEX_URL", pypi_index.url_with_credentials("alice", "wr0ng-pw"))
    with pytest.raises(ChannelError, match="HTTP 401") as info:
        torch_cuda_from_index("2.16.0", FAST)
    assert "wr0ng" not in str(info.value) and "credentials" in info.value.hint


def test_redact() -> None:
    assert redact("https://u:p@host:8443/simple/") == "https://***@host:8443/simple/"
    assert redact("http://127.0.0.1:1/simple/") == "http://127.0.0.1:1/simple/"


# --------------------------------------------------------------------------- pip configuration


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment whose pip config files all lie under tmp_path (except /etc/pip.conf)."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_DIRS": str(tmp_path / "xdg"),
        "VIRTUAL_ENV": str(tmp_path / "venv"),
        **extra,
    }


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pip_config_file_global_index_url(tmp_path: Path) -> None:
    conf = _write(tmp_path / "pip.conf", "[global]\nindex-url = http://mirror.example/simple/\n")
    url, origin = configured_index_url(_env(tmp_path, PIP_CONFIG_FILE=str(conf)))
    assert url == "http://mirror.example/simple/" and str(conf) in origin and "[global]" in origin


def test_install_section_beats_global_across_files(tmp_path: Path) -> None:
    _write(
        tmp_path / "home" / ".config" / "pip" / "pip.conf",
        "[install]\nindex_url = http://user-install/simple\n",
    )
    conf = _write(tmp_path / "pip.conf", "[global]\nindex-url = http://env-global/simple\n")
    # PIP_CONFIG_FILE names an existing file, so pip skips the user files: the env file's [global] wins.
    assert configured_index_url(_env(tmp_path, PIP_CONFIG_FILE=str(conf)))[0] == "http://env-global/simple"
    _write(tmp_path / "venv" / "pip.conf", "[install]\nindex-url = http://site-install/simple\n")
    assert configured_index_url(_env(tmp_path, PIP_CONFIG_FILE=str(conf)))[0] == "http://site-install/simple"


def test_later_files_override_earlier_ones(tmp_path: Path) -> None:
    _write(tmp_path / "xdg" / "pip" / "pip.conf", "[global]\nindex-url = http://global/simple\n")
    assert configured_index_url(_env(tmp_path))[0] == "http://global/simple"
    _write(tmp_path / "home" / ".pip" / "pip.conf", "[global]\nindex-url = http://legacy-user/simple\n")
    assert configured_index_url(_env(tmp_path))[0] == "http://legacy-user/simple"
    _write(tmp_path / "home" / ".config" / "pip" / "pip.conf", "[global]\nindex-url = http://user/simple\n")
    assert configured_index_url(_env(tmp_path))[0] == "http://user/simple"
    _write(tmp_path / "venv" / "pip.conf", "[global]\nindex-url = http://site/simple\n")
    assert configured_index_url(_env(tmp_path))[0] == "http://site/simple"


def test_pip_index_url_env_has_precedence(tmp_path: Path) -> None:
    conf = _write(tmp_path / "pip.conf", "[install]\nindex-url = http://file/simple\n")
    env = _env(tmp_path, PIP_CONFIG_FILE=str(conf), PIP_INDEX_URL="http://env/simple")
    assert configured_index_url(env) == ("http://env/simple", "PIP_INDEX_URL")


def test_devnull_config_file_means_pips_default(tmp_path: Path) -> None:
    from pip._internal.models.index import PyPI

    _write(tmp_path / "home" / ".config" / "pip" / "pip.conf", "[global]\nindex-url = http://user/simple\n")
    env = _env(tmp_path, PIP_CONFIG_FILE=os.devnull)
    assert pip_config_files(env) == []
    assert configured_index_url(env) == (PyPI.simple_url, "pip's default index")


def test_malformed_pip_config_is_an_error(tmp_path: Path) -> None:
    conf = _write(tmp_path / "pip.conf", "index-url = no section header\n")
    with pytest.raises(AnchorError, match="cannot read pip configuration") as info:
        configured_index_url(_env(tmp_path, PIP_CONFIG_FILE=str(conf)))
    assert "PIP_INDEX_URL" in info.value.hint


def test_lookup_follows_a_pip_config_file(
    pypi_index: FakeTorchIndex, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PIP_INDEX_URL")
    conf = _write(tmp_path / "pip.conf", f"[global]\nindex-url = {pypi_index.url}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert torch_cuda_from_index("2.16.1", FAST).cuda == "12.9"
    assert pypi_index.hits("/simple/torch/") == 1


def test_no_index_host_is_hard_coded_in_the_repository() -> None:
    """envlock follows the user's pip config; pip's default host must appear in no tracked file."""
    from pip._internal.models.index import PyPI

    host = urlsplit(PyPI.simple_url).hostname
    assert host
    try:
        tracked = (
            subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
            .stdout.decode()
            .split("\0")
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: cannot list the repository's files")
    offenders = [
        name
        for name in filter(None, tracked)
        if (REPO / name).is_file() and host.encode() in (REPO / name).read_bytes()
    ]
    assert offenders == []


def test_https_index_may_not_be_redirected_to_http() -> None:
    from envlock.seams.net import redirect_target

    with pytest.raises(ChannelError, match="to a http URL") as info:
        redirect_target("https://u:pw@index.test/simple/torch/", "http://index.test/simple/torch/")
    assert "u:pw" not in str(info.value) and "***@index.test" in str(info.value)
    assert redirect_target("http://a.test/x/", "https://a.test/y/") == "https://a.test/y/"


def test_credentials_follow_a_redirect_on_the_same_host_only() -> None:
    from envlock.seams.net import carry_credentials as _carry_credentials

    src = "https://u:pw@index.test/simple/torch/"
    assert _carry_credentials(src, "https://index.test/other/") == "https://u:pw@index.test/other/"
    assert _carry_credentials(src, "https://elsewhere.test/x/") == "https://elsewhere.test/x/"
    assert _carry_credentials(src, "https://index.test:8443/x/") == "https://index.test:8443/x/"
