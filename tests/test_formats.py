"""The lock formats: rendering and reading conda-lock v1 / @EXPLICIT files (conda-lock's own parser and
CLI read ours), golden files, credentials, the one lock reader, the name parsers."""

from __future__ import annotations

import envlock.models as records
import os
from pathlib import Path

import pytest

from envlock.errors import LockfileError, NewerFormatError
from envlock.formats import dependency_order, parse_lock, read_lock, render_conda_lock, render_explicit
from envlock.formats.condalock import _dump, package_entries, render_package_section
from envlock.models import LockedPackage
from envlock.names import conda_build, match_spec_name, split_conda_filename, split_match_spec, strip_credentials
from envlock.project import content_hash

GOLDEN = Path(__file__).parent / "data" / "golden" / "lock"
BASE = "https://conda.anaconda.org/conda-forge"


def pkg(name: str, version: str, build: str, depends: tuple[str, ...] = (), subdir: str = "linux-64", platform: str = "linux-64") -> LockedPackage:
    return LockedPackage(
        name=name,
        version=version,
        build=build,
        platform=platform,
        url=f"{BASE}/{subdir}/{name}-{version}-{build}.conda",
        md5=(name.encode().hex() * 32)[:32],
        sha256=(name.encode().hex() * 64)[:64],
        depends=depends,
        subdir=subdir,
    )


PACKAGES = [
    pkg("cuda-nvcc", "12.6.85", "hcdd1206_0", ("cuda-nvcc_linux-64 12.6.85.*", "gcc_linux-64", "gxx_linux-64")),
    pkg("cuda-nvcc_linux-64", "12.6.85", "h04802cd_0", ("cuda-version >=12.6,<12.7.0a0",), subdir="noarch"),
    pkg("cuda-version", "12.6", "h7480c83_3", (), subdir="noarch"),
    pkg("gcc_linux-64", "13.3.0", "h6f18a23_11", ("gcc_impl_linux-64 13.3.0.*",)),
    pkg("gxx_linux-64", "13.3.0", "hb14504d_11", ("gcc_linux-64 ==13.3.0 h6f18a23_11",)),
    pkg("gcc_impl_linux-64", "13.3.0", "hfea6d02_1", ()),
    pkg("cuda-version", "12.6", "h7480c83_3", (), subdir="noarch", platform="win-64"),
]


def render(**kw: object) -> str:
    hashes = {"linux-64": content_hash({"p": "linux-64"}), "win-64": content_hash({"p": "win-64"})}
    return render_conda_lock(
        packages=dependency_order([p for p in PACKAGES if p.platform == "linux-64"]) + [PACKAGES[-1]],
        platforms=["linux-64", "win-64"],
        channels=["conda-forge"],
        content_hashes=hashes,
        sources=["environments/x.yml"],
        custom_metadata={"envlock.version": "0.1.0", "envlock.lock_format": "1", "envlock.anchor": '{"cuda": "12.6"}'},
        **kw,  # type: ignore[arg-type]
    )


def check_golden(name: str, text: str) -> None:
    """Byte-for-byte against the golden file. ENVLOCK_UPDATE_GOLDEN=1 rewrites a differing golden and fails
    (the run that changes a golden never passes: review the diff, then run again without it)."""
    path = GOLDEN / name
    if os.environ.get("ENVLOCK_UPDATE_GOLDEN") and (not path.exists() or path.read_text() != text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        pytest.fail(f"{name} rewritten (ENVLOCK_UPDATE_GOLDEN): review `git diff`, then rerun without it")
    assert text == path.read_text(), f"{name} changed; rerun with ENVLOCK_UPDATE_GOLDEN=1 if intended"


def test_conda_lock_render_matches_golden() -> None:
    check_golden("conda-lock.yml", render())


def test_explicit_render_matches_golden() -> None:
    text = render_explicit(packages=dependency_order(PACKAGES[:-1]), platform="linux-64", content_hash_value="abc", env_name="x")
    check_golden("conda-linux-64.lock", text)


def test_render_is_deterministic_and_timestamps_only_when_asked() -> None:
    assert render() == render()
    assert "created_at" not in render()
    assert "created_at: '2026-11-30T00:00:00Z'" in render(timestamp="2026-11-30T00:00:00Z")


def test_dependency_order_puts_dependencies_first() -> None:
    order = [p.name for p in dependency_order(PACKAGES[:-1])]
    assert order.index("cuda-version") < order.index("cuda-nvcc_linux-64") or "cuda-version" not in PACKAGES[1].depends[0]
    assert order.index("gcc_impl_linux-64") < order.index("gcc_linux-64") < order.index("gxx_linux-64")
    assert order.index("cuda-nvcc_linux-64") < order.index("cuda-nvcc")


def test_roundtrip_read(tmp_path: Path) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text(render())
    lock = read_lock(path)
    assert lock.platforms == ("linux-64", "win-64")
    assert lock.channels == ("conda-forge",)
    linux = lock.packages_for("linux-64")
    assert [p.name for p in linux] == [p.name for p in dependency_order(PACKAGES[:-1])]
    nvcc = next(p for p in linux if p.name == "cuda-nvcc")
    assert nvcc.build == "hcdd1206_0" and nvcc.sha256 == PACKAGES[0].sha256
    assert set(nvcc.depends) == set(PACKAGES[0].depends)
    assert lock.envlock_meta("linux-64")["anchor"] == {"cuda": "12.6"}


def test_conda_lock_itself_parses_the_golden(tmp_path: Path) -> None:
    import conda_lock.lockfile as conda_lock  # the test extra: conda-lock's own parser checks our format

    path = tmp_path / "conda-lock.yml"
    path.write_text(render())
    lf = conda_lock.parse_conda_lock_file(path)
    assert {p.name for p in lf.package} == {p.name for p in PACKAGES}
    assert lf.metadata.custom_metadata["envlock.lock_format"] == "1"


def test_explicit_roundtrip_keeps_sha256(tmp_path: Path) -> None:
    path = tmp_path / "conda-linux-64.lock"
    path.write_text(render_explicit(packages=PACKAGES[:-1], platform="linux-64", content_hash_value="abc", env_name="x"))
    lock = read_lock(path)
    assert lock.kind == "explicit" and lock.platforms == ("linux-64",)
    assert {p.name: p.sha256 for p in lock.packages} == {p.name: p.sha256 for p in PACKAGES[:-1]}


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://user:tok3n@repo.example.com/conda-forge", "https://repo.example.com/conda-forge"),
        ("https://repo.example.com/t/abc-123/conda-forge/linux-64/x.conda", "https://repo.example.com/conda-forge/linux-64/x.conda"),
        ("https://conda.anaconda.org/conda-forge", "https://conda.anaconda.org/conda-forge"),
        ("conda-forge", "conda-forge"),
    ],
)
def test_credentials_are_stripped(url: str, clean: str) -> None:
    assert strip_credentials(url) == clean


def test_credentials_never_reach_a_rendered_lock() -> None:
    secret = LockedPackage("a", "1", "0", "linux-64", "https://u:s3cret@h.example/t/tk-9/c/linux-64/a-1-0.conda", "0" * 32, None)
    text = render_conda_lock(
        packages=[secret], platforms=["linux-64"], channels=["https://u:s3cret@h.example/t/tk-9/c"],
        content_hashes={"linux-64": "h"}, sources=[], custom_metadata={},
    )  # fmt: skip
    assert "s3cret" not in text and "tk-9" not in text
    explicit = render_explicit(packages=[secret], platform="linux-64", content_hash_value="h", env_name="x")
    assert "s3cret" not in explicit and "tk-9" not in explicit


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("version: 1\nmetadata: [", "YAML error"),
        ("- a\n- b\n", "not a mapping"),
        ("version: 3\nmetadata: {}\npackage: []\n", "format version 3"),
        ("metadata: {}\n", "version: 1"),
        ("version: 1\npackage: []\n", "metadata"),
        ("version: 1\nmetadata: {platforms: [linux-64]}\npackage: [{name: a}]\n", "unexpected structure"),
    ],
)
def test_corrupt_locks_are_lockfile_errors_with_hints(text: str, needle: str) -> None:
    with pytest.raises(LockfileError) as err:
        parse_lock(text, Path("x.yml"))
    assert needle in err.value.message and err.value.hint


@pytest.mark.parametrize(("key", "value"), [("name", ""), ("name", None), ("version", " "), ("platform", []),
                                            ("url", {"a": 1})])
def test_an_entry_with_an_empty_or_non_scalar_field_is_refused(key: str, value: object) -> None:
    """create would install a package with no name (the slow fuzz tier found `name: ''` accepted)."""
    import yaml

    doc = yaml.safe_load(render())
    doc["package"][0][key] = value
    with pytest.raises(LockfileError) as err:
        parse_lock(yaml.safe_dump(doc), Path("x.yml"))
    assert f"a package entry's {key} is" in err.value.message and err.value.hint


def test_lock_from_a_newer_envlock_is_refused() -> None:
    text = render().replace("envlock.lock_format: '1'", "envlock.lock_format: '7'")
    with pytest.raises(LockfileError) as err:
        parse_lock(text)
    assert "newer envlock" in err.value.message and "upgrade envlock" in err.value.hint


def test_missing_lock_has_a_hint(tmp_path: Path) -> None:
    with pytest.raises(LockfileError, match="no lock at"):
        read_lock(tmp_path / "nope.yml")


def test_real_public_locks_parse(shared_dir: Path) -> None:
    for path in sorted((shared_dir / "real-locks").glob("*.conda-lock.yml")):
        lock = read_lock(path)
        assert lock.platforms and lock.packages, path
        assert all(p.md5 and p.url for p in lock.packages)
        assert lock.envlock_meta() == {}


def test_conda_lock_render_explicit_renders_our_lock(tmp_path: Path) -> None:
    """`conda-lock render --kind explicit` (conda-lock's own CLI) accepts what envlock writes."""
    import shutil
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "conda-lock"
    if not exe.exists():
        exe = Path(shutil.which("conda-lock") or "conda-lock")
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(render())
    proc = subprocess.run(
        [str(exe), "render", "--kind", "explicit", "--platform", "linux-64", str(lock),
         "--filename-template", str(tmp_path / "out-{platform}.txt")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out-linux-64.txt").read_text()
    assert "@EXPLICIT" in out
    urls = [ln for ln in out.splitlines() if ln.startswith("https://")]
    assert {u.split("#")[0] for u in urls} == {p.url for p in PACKAGES if p.platform == "linux-64"}


def _pyyaml_section(packages: list[LockedPackage], platforms: list[str]) -> str:
    """What PyYAML (the dumper envlock used before its own emitter) writes for the section."""
    return _dump({"package": package_entries(packages, platforms)})


def test_package_section_emitter_equals_pyyaml_on_real_locks(shared_dir: Path) -> None:
    checked = 0
    for path in sorted((shared_dir / "real-locks").glob("*.conda-lock.yml")):
        lock = read_lock(path)
        platforms = list(lock.platforms)
        assert render_package_section(list(lock.packages), platforms) == _pyyaml_section(list(lock.packages), platforms)
        checked += len(lock.packages)
    assert checked > 1000


def test_package_section_emitter_equals_pyyaml_on_odd_strings() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text = st.text(min_size=1, max_size=20)

    @settings(max_examples=1000, deadline=None)
    @given(name=text, version=text, dep=text.filter(str.strip), spec=st.text(max_size=20), url=text, md5=text)
    def check(name: str, version: str, dep: str, spec: str, url: str, md5: str) -> None:
        p = LockedPackage(name, version, "0", "linux-64", url, md5, None, depends=(f"{dep} {spec}".strip(),))
        assert render_package_section([p], ["linux-64"]) == _pyyaml_section([p], ["linux-64"])

    check()
    assert render_package_section([], ["linux-64"]) == _pyyaml_section([], ["linux-64"])


# --------------------------------------------------------------------------- one reader for every format


def test_one_reader_tells_the_formats_apart(tmp_path: Path, shared_dir: Path) -> None:
    yml = tmp_path / "conda-lock.yml"
    yml.write_text(render())
    explicit = tmp_path / "conda-linux-64.lock"
    explicit.write_text(render_explicit(packages=PACKAGES[:-1], platform="linux-64", content_hash_value="abc", env_name="x"))
    assert (read_lock(yml).kind, read_lock(yml).version) == ("conda-lock", 1)
    assert read_lock(explicit).kind == "explicit"
    # YAML that mentions the marker in a comment is still conda-lock YAML, not an @EXPLICIT file.
    assert parse_lock("# @EXPLICIT in a comment\n" + render()).kind == "conda-lock"
    pixi = shared_dir / "real-locks" / "matthewfeickert-pytorch-gpu-pixi-example.pixi.lock"
    lock = read_lock(pixi, compare=True)
    assert lock.kind == "pixi" and lock.version == 6 and "linux-64" in lock.platforms
    assert {p.name for p in lock.packages_for("linux-64")} >= {"cuda-version", "python"}
    with pytest.raises(LockfileError, match="format version 6; envlock reads version 1"):
        read_lock(pixi)  # create/check: only conda-lock v1 and @EXPLICIT files


def test_compare_mode_reads_conda_lock_v2_and_entries_without_hashes() -> None:
    v2 = "version: 2\nmetadata: {platforms: [linux-64]}\npackage:\n- {name: a, version: '1', platform: linux-64}\n"
    lock = parse_lock(v2, Path("v2.yml"), compare=True)
    assert lock.version == 2 and [(p.name, p.version, p.md5) for p in lock.packages] == [("a", "1", "")]
    with pytest.raises(LockfileError, match="format version 2"):
        parse_lock(v2, Path("v2.yml"))  # installing needs v1 with md5 and sha256


def test_the_header_alone_shares_the_full_readers_checks(tmp_path: Path) -> None:
    from envlock.formats import read_head

    path = tmp_path / "conda-lock.yml"
    path.write_text("version: 1\nmetadata:\n  platforms: [linux-64]\n  custom_metadata: [a, b]\npackage: []\n")
    with pytest.raises(LockfileError) as err:
        read_head(path)
    assert "custom_metadata" in err.value.message and err.value.hint
    path.write_text(render().replace("envlock.lock_format: '1'", "envlock.lock_format: '7'"))
    with pytest.raises(NewerFormatError):
        read_head(path)
    path.write_text(render())
    head = read_head(path)
    assert head.platforms == ("linux-64", "win-64") and head.meta_json("anchor") == {"cuda": "12.6"}
    # the section is envlock's own text, so it is read by its layout, without the dependency lists (nothing that
    # reading feeds holds them): every other field as the full reader gives it
    full = read_lock(path).packages
    assert any(p.depends for p in full)
    assert list(head.packages_read().packages) == [records.replace(p, depends=()) for p in full]


# --------------------------------------------------------------------------- the name parsers


@pytest.mark.parametrize(
    ("spec", "name", "rest"),
    [
        ("python 3.11.*", "python", "3.11.*"),
        ("cuda-version=12.6", "cuda-version", "=12.6"),
        ("gcc_linux-64 <14", "gcc_linux-64", "<14"),
        ("libcudnn[build=*cuda12*]", "libcudnn", "[build=*cuda12*]"),
        ("x>=1,<2", "x", ">=1,<2"),
        ("  ninja  ", "ninja", ""),
        ("", "", ""),
        # Where the two parsers envlock had disagreed: a channel prefix is not part of the name, and `~=`
        # (compatible release) ends it. The old plan-side parser said `python`/`pkg`; the lock writer's said
        # `conda-forge::python`/`pkg~`, which dependency_order and the lock's dependency map then used.
        ("conda-forge::python >=3.10", "python", ">=3.10"),
        ("nvidia/label/cuda-11.8.0::cuda-nvcc 11.8.*", "cuda-nvcc", "11.8.*"),
        ("pkg~=1.0", "pkg", "~=1.0"),
    ],
)
def test_one_match_spec_parser(spec: str, name: str, rest: str) -> None:
    assert split_match_spec(spec) == (name, rest)
    assert match_spec_name(spec) == name


def test_a_channel_prefixed_dependency_orders_and_renders_by_its_name() -> None:
    py = pkg("python", "3.11.9", "h1_0")
    user = pkg("tool", "1.0", "h2_0", ("conda-forge::python >=3.10", "pkg~=1.0"))
    assert [p.name for p in dependency_order([user, py])] == ["python", "tool"]
    entry = package_entries([user], ["linux-64"])[0]
    assert entry["dependencies"] == {"pkg": "~=1.0", "python": ">=3.10"}


@pytest.mark.parametrize(
    ("filename", "parts"),
    [
        ("cuda-nvcc-12.6.85-hcdd1206_0.conda", ("cuda-nvcc", "12.6.85", "hcdd1206_0")),
        ("https://h/c/noarch/cuda-version-12.6-h7480c83_3.tar.bz2#0123", ("cuda-version", "12.6", "h7480c83_3")),
        ("gcc_linux-64-13.3.0-h6f18a23_11", ("gcc_linux-64", "13.3.0", "h6f18a23_11")),
        ("nodashes.conda", None),
    ],
)
def test_one_conda_filename_parser(filename: str, parts: tuple[str, str, str] | None) -> None:
    assert split_conda_filename(filename) == parts
    if parts:
        assert conda_build(filename, parts[0], parts[1]) == parts[2]


def test_the_package_digest_of_a_section_in_normal_form_is_the_digest_of_its_normal_form() -> None:
    """package_section_digest hashes a section as it is when the normal form would leave it unchanged (envlock's
    own output); any blank, comment, CR, tab or non-ASCII space makes it normalise first, with the same result."""
    import hashlib
    import random

    from envlock.formats.head import package_section_digest

    def normalised(text: str) -> str:
        section = text[text.index("package:"):]
        kept = [ln.rstrip() for ln in section.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        return hashlib.sha256("\n".join(kept).encode()).hexdigest()

    base = render_conda_lock(packages=PACKAGES, platforms=["linux-64"], channels=["conda-forge"], sources=["x.yml"],
                             content_hashes={"linux-64": "0" * 64}, custom_metadata={})
    assert package_section_digest(base) == normalised(base)
    rng = random.Random(7)
    pieces = ["\n", " ", "\t", "#", "\r", "\x0b", "\x85", "\u2028", "\xa0", "\x1f", "\n\n", " \n", "\n  # c", "x"]
    for _ in range(400):
        text = list(base)
        for _ in range(rng.randint(1, 3)):
            text.insert(rng.randrange(base.index("package:") + 9, len(text) + 1), rng.choice(pieces))
        edited = "".join(text) + rng.choice(["", "\n", " ", "\n# end\n", "\xa0"])
        assert package_section_digest(edited) == normalised(edited)
