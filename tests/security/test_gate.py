"""envlock/seams/gate.py, the one way from an untrusted string to a path: property tests over arbitrary strings (the
result lies under its root, or an UnsafeNameError refuses it; never another exception) and the attack encodings
the issue names, each spelled several ways.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.seams import gate
from envlock.errors import EnvlockError, UnsafeNameError
from envlock.models import LockedPackage, PypiPackage
from tests.tiers import counts

# Pieces an attacker strings together: separators and dots in every spelling, encodings of them (once and twice
# encoded, upper and lower case, overlong UTF-8), control characters, drive letters, look-alike unicode.
PIECES = ["..", ".", "/", "\\", "%2F", "%2f", "%252F", "%5C", "%5c", "%2E", "%2e", "%2E%2E", "%00", "\x00", "\n", "\x1b",
          "%0A", "C:", "c:", "%C0%AF", "%C0%AE", "%E2%80%AE", "\u2215", "\uff0f", "\u2024", "\ufe52", "etc", "profile.d",
          "zz.sh", "-", "1.0", "h0_0", ".tar.bz2", ".conda", ".whl", "py3-none-any", "%", "%%", "%2", "~", " "]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=12).map("".join)
anything = st.one_of(hostile, st.text(max_size=40))


def _inside(path: Path, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top + os.sep)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding a symlink that leads out of it (`out -> ..`) and one that stays (`same -> sub`)."""
    base = tmp_path_factory.mktemp("gate")
    top = base / "root"
    (top / "sub").mkdir(parents=True)
    (top / "out").symlink_to("..")
    (top / "abs").symlink_to("/etc")
    (top / "same").symlink_to("sub")
    (top / "sub" / "up").symlink_to("../../..")  # a chain: root/sub/up -> outside
    return top


@pytest.mark.parametrize("n", counts(1500))
def test_a_component_is_under_its_root_or_refused(n: int, root: Path) -> None:
    @settings(max_examples=n, deadline=None)
    @given(raw=anything)
    def prop(raw: str) -> None:
        try:
            path = gate.under(root, gate.component(raw))
        except UnsafeNameError as exc:
            assert exc.hint and "\n" not in exc.message
            return
        assert _inside(path, root) and path.parent == root

    prop()


@pytest.mark.parametrize("n", counts(1500))
def test_a_relative_path_is_under_its_root_or_refused(n: int, root: Path) -> None:
    @settings(max_examples=n, deadline=None)
    @given(raw=anything)
    def prop(raw: str) -> None:
        try:
            path = gate.under(root, gate.relative(raw))
        except UnsafeNameError:
            return
        assert _inside(path, root)

    prop()


@pytest.mark.parametrize("n", counts(1000))
def test_a_conda_archive_name_is_the_records_or_refused(n: int, root: Path) -> None:
    @settings(max_examples=n, deadline=None)
    @given(name=anything, version=anything, build=anything, last=anything)
    def prop(name: str, version: str, build: str, last: str) -> None:
        pkg = LockedPackage(name, version, build, "linux-64", f"https://h/c/linux-64/{last}", "0" * 32, None)
        try:
            dist = gate.conda_dist(pkg)
            path = gate.under(root, gate.conda_archive(pkg))
        except UnsafeNameError:
            return
        assert dist == f"{name}-{version}-{build}" and _inside(path, root) and path.parent == root

    prop()


@pytest.mark.parametrize("n", counts(1000))
def test_a_wheel_file_name_is_the_entrys_or_refused(n: int, root: Path) -> None:
    @settings(max_examples=n, deadline=None)
    @given(name=anything, version=anything, last=anything, sha=st.one_of(anything, st.just("a" * 64)))
    def prop(name: str, version: str, last: str, sha: str) -> None:
        pkg = PypiPackage(name, version, "linux-64", f"http://127.0.0.1/simple/{name}/{last}", sha)
        try:
            path = gate.under(root, gate.relative(f"{gate.sha256_hex(pkg.sha256)}/{gate.wheel_file(pkg)}",
                                                  decode=False))
        except UnsafeNameError:
            return
        assert _inside(path, root) and path.name.endswith(".whl")

    prop()


# --------------------------------------------------------------------------- the encodings, by name

ESCAPES = ["..", ".", "", "../x", "..%2Fx", "..%2fx", "%2E%2E", "%2e%2E", "..\\x", "..%5Cx", "a/b", "a%2Fb", "x\x00y",
           "x%00y", "x\ny", "x%0Ay", "C:x", "c:%5Cx", "%C0%AE%C0%AE", "..%2F..%2F..%2Fetc%2Fprofile.d%2Fzz.sh",
           "/etc/passwd", "%2Fetc%2Fpasswd"]


@pytest.mark.parametrize("raw", ESCAPES)
def test_every_spelling_of_a_separator_or_a_dot_dir_is_refused(raw: str) -> None:
    with pytest.raises(UnsafeNameError) as info:
        gate.component(raw)
    assert repr(raw)[1:-1][:20] in info.value.message or raw == ""  # named, control characters escaped


@pytest.mark.parametrize("raw,name", [("%252F", "%2F"), ("..%252F..%252Fetc", "..%2F..%2Fetc"),
                                      ("a\u2215b", "a\u2215b"), ("a\uff0fb", "a\uff0fb"), ("torch-2.7.0%2Bcu126", "torch-2.7.0+cu126")])
def test_decoded_once_and_kept_as_one_name(raw: str, name: str, root: Path) -> None:
    """Twice-encoded separators and look-alike slashes are plain characters of one name: never a path separator."""
    assert gate.component(raw) == name
    assert gate.under(root, gate.component(raw)).parent == root


@pytest.mark.parametrize("rel", ["out/x", "out", "abs/passwd", "sub/up/x", "same/up/x", "same/up"])
def test_a_symlink_inside_the_root_that_leads_out_is_refused(rel: str, root: Path) -> None:
    with pytest.raises(UnsafeNameError, match="leads out of"):
        gate.under(root, gate.relative(rel))


def test_a_symlink_that_stays_inside_is_accepted(root: Path) -> None:
    assert gate.under(root, "same/x") == root / "same" / "x"


@pytest.mark.parametrize("last,why", [
    ("...tar.bz2", "not cuda-nvcc-12.1-0"), (".tar.bz2", "not cuda-nvcc"), ("..conda", "not cuda-nvcc"),
    ("%2E%2E.tar.bz2", "not cuda-nvcc"), ("..%2F..%2Fx-1-0.tar.bz2", "separator"),
    ("cuda-nvcc-12.1-0.tar.gz", "not a .conda"), ("cuda-nvcc-12.2-0.tar.bz2", "not cuda-nvcc-12.1-0"),
    ("other-12.1-0.conda", "not cuda-nvcc-12.1-0"),
])
def test_a_conda_archive_must_be_the_record_it_is_locked_as(last: str, why: str) -> None:
    pkg = LockedPackage("cuda-nvcc", "12.1", "0", "linux-64", f"https://h/c/noarch/{last}", "0" * 32, None)
    with pytest.raises(UnsafeNameError, match=why):
        gate.conda_archive(pkg)


@pytest.mark.parametrize("name,version,build", [("..", "1", "0"), ("a/b", "1", "0"), ("a", "1/2", "0"), ("a", "1", "0/..")])
def test_a_record_whose_parts_could_be_a_path_is_refused(name: str, version: str, build: str) -> None:
    pkg = LockedPackage(name, version, build, "linux-64", f"https://h/c/noarch/{name}-{version}-{build}.conda", "0", None)
    with pytest.raises(UnsafeNameError):
        gate.conda_dist(pkg)


def test_a_conda_archive_of_the_record_is_accepted() -> None:
    pkg = LockedPackage("cuda-nvcc", "12.1.105", "h1a2_0", "linux-64",
                        "https://conda.anaconda.org/conda-forge/linux-64/cuda-nvcc-12.1.105-h1a2_0.conda#abc", "0", None)
    assert gate.conda_archive(pkg) == "cuda-nvcc-12.1.105-h1a2_0.conda"
    assert gate.conda_dist(pkg) == "cuda-nvcc-12.1.105-h1a2_0"


@pytest.mark.parametrize("last", [
    "..%2F..%2F..%2F..%2Fetc%2Fprofile.d%2Fzz.sh", "..%252F..%252Fzz.sh", "ninja-1.11.1-py3-none-any.whl%2F..",
    "ninja-1.11.2-py3-none-any.whl", "evil-1.11.1-py3-none-any.whl", "ninja-1.11.1.whl", "ninja-1.11.1-py3-none-any.zip",
    "ninja-1.11.1-py3-none-any.whl%00.sh", "..%5C..%5Cninja-1.11.1-py3-none-any.whl",
])
def test_a_wheel_url_must_name_the_locked_wheel(last: str) -> None:
    pkg = PypiPackage("ninja", "1.11.1", "linux-64", f"http://127.0.0.1:1/simple/ninja/{last}", "a" * 64)
    with pytest.raises(UnsafeNameError):
        gate.wheel_file(pkg)


@pytest.mark.parametrize("last,version", [("torch-2.7.0%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl", "2.7.0+cu126"),
                                          ("Ninja-1.11.1.1-py3-none-manylinux1_x86_64.whl#sha256=ab", "1.11.1.1"),
                                          ("nvidia_cudnn_cu12-9.1.0.70-1-py3-none-any.whl", "9.1.0.70")])
def test_real_wheel_names_are_accepted(last: str, version: str) -> None:
    name = last.split("-", 1)[0]
    pkg = PypiPackage(name.lower(), version, "linux-64", f"http://127.0.0.1:1/simple/x/{last}", "a" * 64)
    assert gate.wheel_file(pkg).endswith(".whl")


@pytest.mark.parametrize("sha", ["", "../../..", "a" * 63, "g" * 64, "a" * 64 + "/x", 7])
def test_a_sha256_that_names_a_directory_is_64_hex_digits(sha: object) -> None:
    with pytest.raises(UnsafeNameError):
        gate.sha256_hex(sha)


def test_a_refusal_is_an_envlock_error_with_one_line() -> None:
    with pytest.raises(EnvlockError) as info:
        gate.component("a\nb\x1b[31m")
    assert "\n" not in info.value.message and "\x1b" not in info.value.message and info.value.hint
