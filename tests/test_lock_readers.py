"""Every reader reads every lock envlock writes (issue 23): py-rattler's `LockFile.from_path` (the library inside
pixi), conda-lock's own parser and `conda-lock render`, envlock's reader — for full and toolchain-only locks
and every locked platform. The pip entries' `dependencies` are the wheels' real Requires-Dist specifiers
(markers evaluated for the platform), never '*', which rattler cannot read ("untagged enum MapOrVec").
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import rattler

from envlock.errors import ChannelError
from envlock.formats import read_lock
from envlock.models import PypiPackage
from envlock.seams.pypi import requires
from tests.lockproject import make_project, package_blocks
from tests.test_pypi_part import _conda_lock, _resolve
from tests.wheelindex import WheelIndex, build_wheel

FULL2 = "torch2.11.0-cu130"
TWO = ("linux-64", "linux-aarch64")


@pytest.fixture(scope="session")
def full_two(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    """torch 2.11.0 (CUDA 13.0: CUDA wheels on both arches), linux-64 + linux-aarch64, full environment."""
    root = tmp_path_factory.mktemp("full-two")
    code, doc = _resolve(root, test_channel_url, "--torch", "2.11.0", "--platform", TWO[0], "--platform", TWO[1])
    assert code == 0, doc
    return root


@pytest.fixture(scope="session")
def toolchain_three(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    """torch 2.3.0, toolchain-only, linux-64 + linux-aarch64 + win-64."""
    return make_project(tmp_path_factory.mktemp("tc-three"), test_channel)


def _rattler_view(path: Path) -> dict[str, tuple[set[str], dict[str, list[str]]]]:
    """platform -> (conda file names, pip name -> requires_dist), as py-rattler reads the lock."""
    env = rattler.LockFile.from_path(path).default_environment()
    assert env is not None
    out: dict[str, tuple[set[str], dict[str, list[str]]]] = {}
    for platform in env.platforms():  # its own LockPlatform objects (DESIGN.md: a fresh one panics)
        records = env.conda_repodata_records_for_platform(platform) or []
        pip = env.pypi_packages_for_platform(platform) or []
        out[platform.name] = ({r.url.rsplit("/", 1)[-1] for r in records}, {p.name: list(p.requires_dist) for p in pip})
    return out


def test_rattler_reads_a_full_two_platform_lock_with_the_real_specifiers(full_two: Path) -> None:
    lock = full_two / "locks" / FULL2 / "conda-lock.yml"
    pip_blocks = [b for b in package_blocks(lock.read_text()) if "\n  manager: pip\n" in b]
    assert pip_blocks and not [b for b in pip_blocks if "'*'" in b]
    ours = read_lock(lock)
    seen = _rattler_view(lock)
    assert set(seen) == set(TWO)
    for platform in TWO:
        files, pip = seen[platform]
        assert files == {p.filename for p in ours.packages_for(platform)}
        assert set(pip) == {w.name for w in ours.pypi_for(platform)} and "torch" in pip
        # The wheel's own Requires-Dist (tests/wheelindex.py), the marker `platform_system == "Linux"` evaluated
        # for Linux; the cudart extra that torch asks of cuda-toolkit turns on its runtime pin.
        assert sorted(pip["torch"]) == ["cuda-toolkit==13.0.2", "filelock", "nvidia-cudnn-cu13==9.19.0.56",
                                        "sympy>=1.13.3", "typing-extensions>=4.8.0"], platform
        assert pip["cuda-toolkit"] == ["nvidia-cuda-runtime==13.0.96"]
        assert pip["sympy"] == ["mpmath>=1.1.0,<1.4"]


def test_conda_lock_parses_and_renders_the_full_lock(full_two: Path, tmp_path: Path) -> None:
    lock = full_two / "locks" / FULL2 / "conda-lock.yml"
    parsed = _conda_lock(lock)
    torch = {p.platform: p for p in parsed.package if p.manager == "pip" and p.name == "torch"}
    assert set(torch) == set(TWO) and torch["linux-aarch64"].dependencies["sympy"] == ">=1.13.3"
    assert torch["linux-64"].dependencies["filelock"] == ""  # no version asked: '' (rattler reads it; '*' it cannot)
    done = subprocess.run([sys.executable, "-m", "conda_lock", "render", "-k", "explicit", "-p", "linux-aarch64",
                           str(lock)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    text = (tmp_path / "conda-linux-aarch64.lock").read_text()
    assert "# pip torch @ " in text and "manylinux_2_28_aarch64" in text


def test_every_reader_reads_a_toolchain_only_lock_of_three_platforms(toolchain_three: Path) -> None:
    lock = next((toolchain_three / "locks").glob("*/conda-lock.yml"))
    ours = read_lock(lock)
    seen = _rattler_view(lock)
    assert set(seen) == {"linux-64", "linux-aarch64", "win-64"} == set(ours.platforms)
    for platform in ours.platforms:
        assert seen[platform][0] == {p.filename for p in ours.packages_for(platform)} and not seen[platform][1]
    assert {p.platform for p in _conda_lock(lock).package} == set(ours.platforms)


def test_envlock_reads_back_the_specifiers_it_wrote(full_two: Path) -> None:
    torch = next(w for w in read_lock(full_two / "locks" / FULL2 / "conda-lock.yml").pypi_for("linux-64")
                 if w.name == "torch")
    assert torch.specifier("sympy") == ">=1.13.3" and torch.specifier("filelock") == ""


# --------------------------------------------------------------------------- the specifiers themselves


def _pkg(name: str, deps: tuple[str, ...] = (), platform: str = "linux-64") -> PypiPackage:
    return PypiPackage(name, "1.0", platform, f"http://127.0.0.1:1/files/{name}-1.0-py3-none-any.whl", "0" * 64, deps)


def _meta(name: str, *lines: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(f"Requires-Dist: {ln}\n" for ln in lines)


@pytest.mark.parametrize("platform, python, want", [
    ("linux-64", "3.11", "<2,>=1.5"),  # both lines apply on Linux x86_64, python 3.11
    ("linux-aarch64", "3.11", ">=1.5"),
    ("win-64", "3.11", ""),  # no line applies: the edge (uv's) keeps '' (any version)
    ("linux-64", "3.12", ">=1.5"),
])
def test_markers_are_evaluated_for_the_platform_and_python(platform: str, python: str, want: str) -> None:
    top = _pkg("top", ("dep",), platform)
    meta = {"top": _meta("top", 'dep>=1.5; sys_platform == "linux"',
                         'dep<2; platform_machine == "x86_64" and python_version < "3.12"', "unlocked>=9"),
            "dep": _meta("dep")}
    out = requires.with_specifiers([top, _pkg("dep", (), platform)], meta, ["top"], platform, python)
    assert out[0].requires == (("dep", want),)


def test_extras_asked_by_a_root_or_by_another_package_turn_on_their_lines() -> None:
    pkgs = [_pkg("app", ("kit",)), _pkg("kit", ("rt", "extra-only")), _pkg("rt"), _pkg("extra-only")]
    meta = {"app": _meta("app", "kit[cudart]==1.0"),
            "kit": _meta("kit", 'rt==1.0; extra == "cudart"', 'extra-only>=0.5; extra == "more"'),
            "rt": _meta("rt"), "extra-only": _meta("extra-only")}
    out = {p.name: p for p in requires.with_specifiers(pkgs, meta, ["app"], "linux-64", "3.11")}
    assert out["kit"].specifier("rt") == "==1.0" and out["kit"].specifier("extra-only") == ""
    out = {p.name: p for p in requires.with_specifiers(pkgs, meta, ["app", "kit[more]"], "linux-64", "3.11")}
    assert out["kit"].specifier("extra-only") == ">=0.5"


def _served(tmp_path: Path, wheel_bytes: bytes, name: str, metadata: bytes | None) -> tuple[PypiPackage, str]:
    files = tmp_path / "files"
    files.mkdir(exist_ok=True)
    (files / name).write_bytes(wheel_bytes)
    if metadata is not None:
        (files / f"{name}.metadata").write_bytes(metadata)
    sha = hashlib.sha256(wheel_bytes).hexdigest()
    return PypiPackage("demo", "1.0", "linux-64", f"http://127.0.0.1:9/files/{name}", sha), (files / name).as_uri()


def test_metadata_comes_from_pep658_else_the_wheel_and_is_cached(tmp_path: Path) -> None:
    wheel = build_wheel("demo", "1.0", requires=["dep>=2"])
    index = WheelIndex().add([wheel]).start()
    try:
        pkg = PypiPackage("demo", "1.0", "linux-64", f"{index.base}/files/{wheel.filename}", wheel.sha256)
        cache = tmp_path / "cache"
        got = requires.metadata_of([pkg], {}, cache, offline=False)
        assert requires.requires_dist(got["demo"]) == ["dep>=2"]
        assert index.requests == [f"/files/{wheel.filename}.metadata"] and not index.downloads()
        # Cached by the wheel's sha256: --offline works, and nothing is asked again.
        assert requires.metadata_of([pkg], {}, cache, offline=True) == got and len(index.requests) == 1
    finally:
        index.stop()
    # No .metadata beside a file:// wheel: the wheel's own METADATA, read in place (nothing copied).
    local, url = _served(tmp_path, wheel.data, wheel.filename, None)
    got = requires.metadata_of([local], {"demo": url}, tmp_path / "cache2", offline=True)
    assert requires.requires_dist(got["demo"]) == ["dep>=2"] and not (tmp_path / "cache2" / "wheels").exists()


def test_without_pep658_a_big_wheel_s_metadata_is_read_through_range_requests(tmp_path: Path) -> None:
    """An index that serves no .metadata (this machine's proxy serves none): the zip's
    directory and the METADATA member through HTTP range requests, a few blocks of a 3 MB wheel; a server
    without ranges gets the whole wheel downloaded once, sha256-checked, into the wheel cache."""
    import os as _os

    big = build_wheel("bigwheel", "2.0", requires=['small>=1; python_version >= "3"'],
                      files={"bigwheel/blob.bin": _os.urandom(3 * 1024 * 1024), "bigwheel/__init__.py": ""})
    index = WheelIndex().add([big]).start()
    try:
        index.no_metadata.add(big.filename)
        index.ranges = True
        pkg = PypiPackage("bigwheel", "2.0", "linux-64", f"{index.base}/files/{big.filename}", big.sha256)
        got = requires.metadata_of([pkg], {}, tmp_path / "c1", offline=False)
        assert requires.requires_dist(got["bigwheel"]) == ['small>=1; python_version >= "3"']
        assert index.ranged and len(index.ranged) <= 4 and not (tmp_path / "c1" / "wheels").exists()
        index.ranges = False  # the server sends the whole file to a range request: download it once
        got = requires.metadata_of([pkg], {}, tmp_path / "c2", offline=False)
        assert requires.requires_dist(got["bigwheel"]) == ['small>=1; python_version >= "3"']
        assert (tmp_path / "c2" / "wheels" / big.sha256[:2] / big.sha256 / big.filename).is_file()
    finally:
        index.stop()


def test_metadata_of_another_package_is_not_taken(tmp_path: Path) -> None:
    """A hostile index answers the .metadata request with another package's file: envlock falls back to the
    locked wheel itself (sha256-checked), and a wheel whose METADATA lies is refused."""
    wheel = build_wheel("demo", "1.0", requires=["dep>=2"])
    liar = b"Metadata-Version: 2.1\nName: evil\nVersion: 6.6\nRequires-Dist: evil-dep\n\n"
    pkg, url = _served(tmp_path, wheel.data, wheel.filename, liar)
    got = requires.metadata_of([pkg], {"demo": url}, tmp_path / "cache", offline=False)
    assert requires.requires_dist(got["demo"]) == ["dep>=2"]
    other = build_wheel("evil", "1.0")  # its bytes under demo's file name: its METADATA names another package
    (tmp_path / "x").mkdir()
    bad, url = _served(tmp_path / "x", other.data, wheel.filename, None)
    with pytest.raises(ChannelError, match="names another package"):
        requires.metadata_of([bad], {"demo": url}, tmp_path / "cache3", offline=False)


def test_offline_without_the_metadata_is_one_error_naming_the_wheel(tmp_path: Path) -> None:
    pkg = _pkg("demo")
    with pytest.raises(ChannelError, match=r"not in envlock's cache and --offline is set: demo-1.0-py3-none-any\.whl"):
        requires.metadata_of([pkg], {}, tmp_path, offline=True)


def test_a_wheel_without_a_single_metadata_member_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo/__init__.py", "")
    pkg = PypiPackage("demo", "1.0", "linux-64", path.as_uri(), hashlib.sha256(path.read_bytes()).hexdigest())
    with pytest.raises(ChannelError, match="cannot read the metadata of demo-1.0"):
        requires.metadata_of([pkg], {}, tmp_path / "cache", offline=False)
    assert json.dumps(pkg.requires) == "[]"
