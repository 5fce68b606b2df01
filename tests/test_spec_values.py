"""Spec edits (issue 34.6): only the user's own lines are warned about, every `envlock:` value is validated when the
spec is read, and a user's line is never dropped in silence.

Real projects resolved against the test channel (toolchain-only) and the test wheel index (a full env); `lock`,
`check` and `update` run in-process through envlock's own CLI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envlock.errors import EnvlockError, NewerFormatError, SpecError
from envlock.formats import read_lock
from envlock.formats.spec import parse_spec, read_spec
from tests.channelbuilder import PackageSpec, build_channel
from tests.lockproject import NAME, cli, copy_project, edit, make_project, spec_file

FULL = "torch2.7.1-cu126"


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(tmp_path_factory.mktemp("spec-values-toolchain"), test_channel, platforms=("linux-64",))


@pytest.fixture(scope="module")
def ninja_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test channel for linux-64, CUDA 12.4 and 12.6, with a conda `ninja` (the full test channel has none)."""
    ninja = PackageSpec("ninja", "1.12.1", subdir="linux-64", files={"bin/ninja": "#!/bin/sh\necho 1.12.1\n"},
                        executables={"bin/ninja"})
    return build_channel(tmp_path_factory.mktemp("spec-values-channel"), cuda_minors=("12.4", "12.6"),
                         subdirs=("linux-64",), with_cuda11=False, extra=[ninja])


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory, ninja_channel: Path) -> Path:
    """torch 2.7.1 (CUDA 12.6), a full environment on linux-64: conda part + PyPI part from the test index."""
    return make_project(tmp_path_factory.mktemp("spec-values-full"), ninja_channel, torch="2.7.1",
                        platforms=("linux-64",), toolchain_only=False)


@pytest.fixture
def cf(test_channel: Path) -> str:
    return f"conda-forge={test_channel.as_uri()}"


@pytest.fixture
def ncf(ninja_channel: Path) -> str:
    return f"conda-forge={ninja_channel.as_uri()}"


# --------------------------------------------------------------------------- whose lines are warned about


def test_an_edited_torch_replaces_envlocks_own_lines_without_a_warning(toolchain: Path, tmp_path: Path, capsys,
                                                                       cf: str) -> None:
    """The seed of 34.6: `torch: 2.3.0` -> `2.5.1` made `lock` warn that cuda-version=12.1, the gcc caps and the
    cudnn line (all written by envlock) were "replaced by the plan"."""
    project = copy_project(toolchain, tmp_path / "p")
    spec = spec_file(project)
    assert "  - cuda-version=12.1\n" in spec.read_text()
    edit(spec, "  torch: 2.3.0\n", "  torch: 2.5.1\n")
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 0, err
    assert "replaced by the plan" not in out + err, out + err
    assert not re.search(r"^\s*warning:", out + err, re.M)
    text = spec.read_text()
    assert "  - cuda-version=12.4\n" in text and "cuda-version=12.1" not in text  # envlock's lines, renewed


def test_a_users_own_toolchain_line_is_still_warned_about(toolchain: Path, tmp_path: Path, capsys, cf: str) -> None:
    project = copy_project(toolchain, tmp_path / "p")
    edit(spec_file(project), "  - cuda-nvcc\n", "  - cuda-nvcc 12.1.99\n")
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 0, err
    warned = re.findall(r"spec line '([^']+)' is replaced by the plan", unfolded_all(out + err))
    assert warned == ["cuda-nvcc 12.1.99"], out + err


def test_a_full_envs_torch_edit_warns_about_no_line_envlock_wrote(full: Path, tmp_path: Path, capsys, ncf: str) -> None:
    """The `- pip:` list's torch==2.7.1 is envlock's line too: moving `torch:` replaces it in silence."""
    project = copy_project(full, tmp_path / "p")
    spec = spec_file(project, FULL)
    assert "    - torch==2.7.1\n" in spec.read_text()
    edit(spec, "  torch: 2.7.1\n", "  torch: 2.6.0\n")
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", ncf)
    assert code == 0, err
    # envlock's own warning lines (the test index's server thread may print a broken pipe to stderr)
    assert not re.search(r"^\s*warning:", out + err, re.M), out + err
    assert "    - torch==2.6.0\n" in spec.read_text()
    assert {w.version for w in read_lock(project / "locks" / FULL / "conda-lock.yml").pypi if w.name == "torch"} == {"2.6.0"}


def unfolded_all(text: str) -> str:
    """Output with folded continuation lines joined (a warning may fold across lines)."""
    return re.sub(r"\n\s+", " ", text)


# --------------------------------------------------------------------------- a user's line is never dropped


def test_a_bare_ninja_in_a_full_env_is_a_conda_dependency(full: Path, tmp_path: Path, capsys, ncf: str) -> None:
    """`- ninja` added to a full env's dependencies was taken for the toolchain's optional-ninja marker: `check`
    said fresh and `lock` dropped it. It is the user's conda dependency."""
    project = copy_project(full, tmp_path / "p")
    spec = spec_file(project, FULL)
    lock = project / "locks" / FULL / "conda-lock.yml"
    assert "ninja" not in {p.name for p in read_lock(lock).packages}
    edit(spec, "\n  - pip:\n", "\n  - ninja\n  - pip:\n")
    code, _, err = cli(capsys, "check", "--project-dir", str(project))
    assert code == 1, err  # the spec asks for more than the lock has
    code, _, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", ncf)
    assert code == 0, err
    assert "ninja" in {p.name for p in read_lock(lock).packages}
    assert "\n  - ninja\n" in spec.read_text()  # kept in the spec envlock wrote
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0


def test_a_bare_ninja_in_a_toolchain_spec_is_still_the_optional_marker() -> None:
    from envlock.core.tables import extras_tables
    from envlock.project import plan_options

    text = BASE.replace("  - cuda-nvcc\n", "  - cuda-nvcc\n  - ninja\n  - pip\n").replace(
        "python: '3.11'", "python: null\n  toolchain_only: true")
    spec = parse_spec(text)
    assert spec.optional == "ninja"
    assert plan_options(spec, extras_tables())[1] == ("pip",)  # ninja: the solve's optional package; pip: the user's
    full = parse_spec(text.replace("  toolchain_only: true\n", "").replace("python: null", "python: '3.11'"))
    assert plan_options(full, extras_tables())[1] == ("ninja",)  # and the other way round in a full env


# --------------------------------------------------------------------------- every value validated when read

BASE = """name: x
channels:
  - conda-forge
dependencies:
  - cuda-nvcc
platforms:
  - linux-64
envlock:
  spec_version: 1
  torch: '2.3.0'
  torch_source: pip
  cuda: null
  python: '3.11'
  glibc: '2.28'
  cudnn: true
  exclude_newer: '2026-11-30T12:00:00Z'
"""


def spec_with(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new)


@pytest.mark.parametrize(("old", "new", "needle"), [
    ("cudnn: true", "cudnn: banana", "envlock.cudnn is 'banana', not true or false"),
    ("cudnn: true", "cudnn: '9.10'", "envlock.cudnn is '9.10', not true or false"),
    ("cudnn: true", "cudnn: null", "envlock.cudnn is None, not true or false"),
    ("cudnn: true", "cudnn: true\n  toolchain_only: 'yes'", "envlock.toolchain_only is 'yes', not true or false"),
    ("python: '3.11'", "python: '3.x'", "envlock.python '3.x' is not a Python version of the form 3.Y"),
    ("python: '3.11'", "python: '2.7'", "envlock.python 2.7: torch has wheels for CPython 3 only"),
    ("python: '3.11'", "python: 3.10", "envlock.python must be a quoted string"),
    ("glibc: '2.28'", "glibc: banana", "envlock.glibc 'banana' is not a glibc version of the form 2.Y"),
    ("glibc: '2.28'", "glibc: '2.5'", "(2.17 or newer)"),
    ("glibc: '2.28'", "glibc: ''", "envlock.glibc '' is not a glibc version"),
    ("torch_source: pip", "torch_source: ''", "envlock.torch_source '' is not a torch source"),
    ("exclude_newer: '2026-11-30T12:00:00Z'", "exclude_newer: '0001-01-01T00:00:00+01:00'", "not an ISO timestamp"),
    ("exclude_newer: '2026-11-30T12:00:00Z'", "exclude_newer: '9999-12-31T23:59:59-14:00'", "not an ISO timestamp"),
    ("exclude_newer: '2026-11-30T12:00:00Z'", "exclude_newer: [1]", "not an ISO timestamp"),
    ("cudnn: true", "cudnn: true\n  with: deepspeed", "envlock.with must be a list of names"),
    ("cudnn: true", "cudnn: true\n  with: [bogus]", "envlock.with names 'bogus', not a group envlock knows"),
    ("cudnn: true", "cudnn: true\n  with: [cusparse]", "which is in the default set: every lock has cuSPARSE"),
    ("cudnn: true", "cudn: false", "envlock.cudn is not a setting of the `envlock:` block"),
    ("spec_version: 1", "spec_version: true", "envlock.spec_version True is not a spec version"),
    ("spec_version: 1", "spec_version: 0", "envlock.spec_version 0 is not a spec version"),
    ("  - linux-64\n", "  - banana\n", "platform 'banana' is not a platform envlock locks"),
    ("  - linux-64\n", "  - osx-arm64\n", "torch on macOS has no CUDA"),
    ("  - linux-64\n", "  - linux-64\n  - linux-64\n", "platform linux-64 is listed twice"),
    ("platforms:\n  - linux-64\n", "platforms: []\n", "`platforms` lists no platform"),
    ("  - conda-forge\n", "  - ''\n", "channel '' is not a channel name or URL"),
    ("  - conda-forge\n", "  - conda-forge\n  - conda-forge\n", "channel conda-forge is listed twice"),
    ("  - cuda-nvcc\n", "  - cuda-nvcc\n  - pip: ['-e .']\n", "is a pip option"),
    ("  - cuda-nvcc\n", "  - cuda-nvcc\n  - pip: ['torch >=']\n", "is not valid"),
])
def test_every_envlock_value_is_validated_when_the_spec_is_read(old: str, new: str, needle: str) -> None:
    from envlock.core.tables import extras_tables

    with pytest.raises(SpecError) as err:
        parse_spec(spec_with(old, new), Path("environments/x.yml"), extras_tables())
    assert needle in err.value.message, err.value.message
    assert err.value.message.startswith("environments/x.yml") or "pip:" in err.value.message
    assert err.value.hint


@pytest.mark.parametrize(("old", "new", "needle"), [
    ("python: '3.11'", "python: '3.12'\n  toolchain_only: true", "a toolchain-only spec locks no python"),
    ("  - cuda-nvcc\n", "  - cuda-nvcc\n  - pip: [einops]\n", "would be dropped: a toolchain-only spec has no PyPI"),
])
def test_a_toolchain_only_spec_refuses_what_it_would_drop(old: str, new: str, needle: str) -> None:
    text = spec_with(old, new)
    if "toolchain_only" not in text:
        text = text.replace("python: '3.11'", "python: null\n  toolchain_only: true")
    with pytest.raises(SpecError) as err:
        parse_spec(text, Path("environments/x.yml"))
    assert needle in err.value.message


def test_the_values_envlock_writes_still_read() -> None:
    spec = parse_spec(BASE, Path("environments/x.yml"))
    assert (spec.python, spec.glibc, spec.cudnn, spec.toolchain_only) == ("3.11", "2.28", True, False)
    assert parse_spec(spec_with("spec_version: 1", "spec_version: 1\n  with: [deepspeed, all]")).with_extras == (
        "deepspeed", "all")
    with pytest.raises(NewerFormatError):
        parse_spec(spec_with("spec_version: 1", "spec_version: 2"))


@pytest.mark.parametrize(("old", "new", "needle"), [
    ("  cudnn: true\n", "  cudnn: banana\n", "envlock.cudnn is 'banana', not true or false"),
    ("  glibc: '2.28'\n", "  glibc: '3.x'\n", "envlock.glibc '3.x' is not a glibc version"),
    ("  cudnn: true\n", "  cudnn: true\n  with: [cusparse]\n", "in the default set"),
])
def test_check_and_lock_refuse_a_bad_value_with_one_error(toolchain: Path, tmp_path: Path, capsys, cf: str,
                                                          old: str, new: str, needle: str) -> None:
    """`cudnn: banana` was taken as true and `check` said fresh."""
    project = copy_project(toolchain, tmp_path / "p")
    edit(spec_file(project), old, new)
    for args in (("check",), ("lock", "--mirror", cf), ("update", "cuda-nvcc", "--mirror", cf)):
        code, out, err = cli(capsys, *args, "--project-dir", str(project))
        assert code == 1, (args, out, err)
        assert needle in unfolded_all(out + err), (args, out, err)
        assert "internal error" not in err and err.count("error:") == 1, (args, err)


def test_a_python_that_is_not_a_version_is_one_error_not_a_value_error(full: Path, tmp_path: Path, capsys,
                                                                        ncf: str) -> None:
    """`python: '3.x'` ended `lock` in `internal error: ValueError`."""
    project = copy_project(full, tmp_path / "p")
    edit(spec_file(project, FULL), "  python: '3.11'\n", "  python: '3.x'\n")
    code, _, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", ncf)
    assert code == 1, err
    assert "internal error" not in err
    assert "envlock.python '3.x' is not a Python version of the form 3.Y" in err


def test_the_error_names_the_spec_the_toolchain_fixture_reads(toolchain: Path) -> None:
    assert read_spec(spec_file(toolchain)).name == NAME
    with pytest.raises(EnvlockError):
        parse_spec(BASE.replace("torch: '2.3.0'", "torch: null"))


@pytest.mark.parametrize("tagged", ["!!timestamp '0610-07-03 18:37:17.171757-09:17:40'", "!!int x", "!!float y"])
def test_a_yaml_tag_pyyaml_cannot_build_is_a_spec_error(tagged: str) -> None:
    """The fuzz's find: PyYAML's timestamp constructor ends in AttributeError on an offset with seconds."""
    with pytest.raises(SpecError, match="is not valid YAML"):
        parse_spec(spec_with("exclude_newer: '2026-11-30T12:00:00Z'", f"exclude_newer: {tagged}"))
