"""No rattler exception leaves envlock/seams/conda/: each public function that calls rattler, driven into each family of
failure it can meet with real rattler calls on real (tiny) packages and channels, raises an EnvlockError with a
hint. (tests/test_conda_errors.py maps every rattler class by name; this drives the functions themselves.)

    solve.RattlerSolver.solve       channel (no such channel dir; --offline, empty cache), spec, solve
    solve.conda_forge_pytorch_lookup channel
    cache.fill                      package (an archive that matches its lock line but is no conda package)
    install.records                 package (a cache entry whose index.json does not read)
    install.link                    install (a cache entry with a file gone); cache.damaged names that entry
    index.index_dirs                channel (a channel dir that cannot be indexed)
"""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from envlock.seams.conda import cache as pkgcache
from envlock.seams.conda import install
from envlock.seams.conda.solve import RattlerSolver, SolveOptions, conda_forge_pytorch_lookup
from envlock.errors import ChannelError, EnvCreateError, EnvlockError, SolveError, SpecError
from envlock.seams.net import HttpSettings
from envlock.models import Anchor, Candidate, LockedPackage, Plan, PlanOptions, PlatformPlan, VirtualPackage
from envlock.progress import NoProgress
from tests.channelbuilder import PackageSpec, write_package


def _plan(*specs: str) -> Plan:
    cand = Candidate(cuda="12.1", skew="exact", specs=specs, channels=("conda-forge",),
                     virtual_packages=(VirtualPackage("__glibc", "2.28"), VirtualPackage("__unix", "0")),
                     gcc_max=13, cudnn=None)
    anchor = Anchor(torch="2.3.0", cuda="12.1", cudnn=None, source="override", detail="test")
    return Plan(anchor, PlanOptions(platforms=("linux-64",)), (PlatformPlan("linux-64", (cand,)),), "test")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real indexed channel with one package, `tiny 1.0` (linux-64), holding two files."""
    from envlock.seams.conda.index import index_dirs

    root = tmp_path_factory.mktemp("tiny-channel")
    write_package(PackageSpec(name="tiny", version="1.0", subdir="linux-64",
                              files={"share/tiny/a.txt": "a\n", "share/tiny/b.txt": "b\n"}), root / "linux-64")
    index_dirs(root, ["."], zst_and_shards=False)
    return root


def _locked(archive: Path, platform: str = "linux-64") -> LockedPackage:
    data = archive.read_bytes()
    name, version, build = archive.name.removesuffix(".tar.bz2").removesuffix(".conda").rsplit("-", 2)
    return LockedPackage(name=name, version=version, build=build, platform=platform, url=archive.as_uri(),
                         md5=hashlib.md5(data).hexdigest(), sha256=hashlib.sha256(data).hexdigest(),
                         subdir=platform, size=len(data))


class _Url(str):
    def as_uri(self) -> str:
        return str(self)


def _closed_port() -> _Url:
    """An http channel URL on 127.0.0.1 where nothing listens (the port was bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return _Url(f"http://127.0.0.1:{port}/conda-forge")


def _solver(tmp_path: Path, channel: Path | _Url, **kw: object) -> RattlerSolver:
    return RattlerSolver(SolveOptions(cache_dir=tmp_path / "cache", mirrors={"conda-forge": channel.as_uri()},
                                      http=HttpSettings(timeout=5, retries=0), **kw))  # type: ignore[arg-type]


def test_solve_maps_each_family(tiny: Path, tmp_path: Path) -> None:
    assert [p.name for p in _solver(tmp_path, tiny).solve(_plan("tiny"))[0].packages] == ["tiny"]  # control
    with pytest.raises(ChannelError) as channel:
        _solver(tmp_path, tmp_path / "no-such-channel").solve(_plan("tiny"))
    with pytest.raises(ChannelError, match="--offline") as offline:
        _solver(tmp_path / "empty", _closed_port(), offline=True).solve(_plan("tiny"))
    with pytest.raises(SpecError, match="invalid match spec") as spec:
        _solver(tmp_path, tiny).solve(_plan("tiny >=<1"))
    with pytest.raises(SolveError) as solve:
        _solver(tmp_path, tiny).solve(_plan("tiny ==99"))
    for info in (channel, offline, spec, solve):
        assert info.value.hint and "\n" not in info.value.message


def test_the_pytorch_lookup_maps_a_channel_failure(tmp_path: Path) -> None:
    options = SolveOptions(cache_dir=tmp_path / "cache", mirrors={"conda-forge": _closed_port().as_uri()},
                           http=HttpSettings(timeout=5, retries=0))
    with pytest.raises(ChannelError) as info:
        conda_forge_pytorch_lookup(options)("2.3.0")
    assert info.value.hint


def test_fill_maps_an_archive_that_is_no_package(tmp_path: Path) -> None:
    archive = tmp_path / "chan" / "linux-64" / "broken-1.0-h0_0.conda"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"matches its lock line, but no zip")
    with pytest.raises(EnvCreateError, match="broken-1.0-h0_0.conda"):
        pkgcache.fill([_locked(archive)], tmp_path / "pkgs", mirrors={}, offline=False, jobs=1,
                      progress=NoProgress())


def _filled(tiny: Path, cache: Path) -> list[pkgcache.Fetched]:
    archive = next((tiny / "linux-64").glob("tiny-*.tar.bz2"))
    return pkgcache.fill([_locked(archive)], cache, mirrors={}, offline=False, jobs=1, progress=NoProgress())


def test_records_maps_an_entry_whose_index_json_does_not_read(tiny: Path, tmp_path: Path) -> None:
    fetched = _filled(tiny, tmp_path / "pkgs")
    assert [r.name.normalized for r in install.records(fetched, tmp_path / "pkgs")] == ["tiny"]  # control
    (pkgcache.entry(tmp_path / "pkgs", fetched[0].pkg) / "info" / "index.json").write_text("{not json")
    with pytest.raises(EnvCreateError, match="cannot unpack tiny-1.0-") as info:
        install.records(fetched, tmp_path / "pkgs")
    assert info.value.hint


def test_link_maps_a_damaged_entry_and_damaged_names_it(tiny: Path, tmp_path: Path) -> None:
    cache = tmp_path / "pkgs"
    fetched = _filled(tiny, cache)
    pkgs = [f.pkg for f in fetched]
    install.link(install.records(fetched, cache), tmp_path / "ok", "linux-64", cache, NoProgress())  # control
    assert (tmp_path / "ok" / "share" / "tiny" / "b.txt").read_text() == "b\n"
    assert pkgcache.damaged(cache, pkgs) == []
    (pkgcache.entry(cache, pkgs[0]) / "share" / "tiny" / "b.txt").unlink()
    assert pkgcache.damaged(cache, pkgs) == pkgs
    with pytest.raises(EnvCreateError, match="linking into .* failed") as info:
        install.link(install.records(fetched, cache), tmp_path / "new", "linux-64", cache, NoProgress())
    assert info.value.hint


def test_index_dirs_maps_a_failure(tmp_path: Path) -> None:
    from envlock.seams.conda.index import index_dirs

    (tmp_path / "chan" / "linux-64").mkdir(parents=True)
    (tmp_path / "chan" / "linux-64" / "bad-1.0-0.tar.bz2").write_bytes(b"no archive")
    with pytest.raises(ChannelError, match="indexing"):
        index_dirs(tmp_path, ["chan"], zst_and_shards=False)


def test_what_leaves_is_always_envlock_s() -> None:
    """Control for the tests above: pytest.raises(X) passes only for X; rattler's classes are not envlock's."""
    import rattler.exceptions

    assert not issubclass(rattler.exceptions.LinkError, EnvlockError)
    assert not issubclass(rattler.exceptions.SolverError, EnvlockError)
