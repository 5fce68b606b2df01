"""The anchor: every source in its order, every refusal, the sources handed in as values, and the helpers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from envlock.core.anchor import (
    CondaForgeLookup,
    Sources,
    cuda_of_conda_build,
    derive,
    parse_cuda,
    read_torch,
    recorded,
    reusable,
    source_of,
)
from envlock.errors import AnchorError, EnvlockError, SpecError
from envlock.models import Anchor, InstalledTorch
from envlock.seams.pypi import IndexSettings, torch_cuda_from_index
from envlock.core.tables import torch_table
from envlock.seams.installed_torch import probe
from tests.fixtures.pypi import FakeTorchIndex

FAST = IndexSettings(backoff=0.01, timeout=5.0)


def anchor_of(
    torch: str,
    *,
    cuda: str | None = None,
    torch_source: str = "pip",
    python_exe: str | None = None,
    conda_forge: CondaForgeLookup | None = None,
    index: IndexSettings | None = None,
    offline: bool = False,
) -> Anchor:
    """What `envlock resolve` asks: the pure anchor, with the outside sources made as resolve makes them
    (the real probe of an installed torch, the real index client against the fake index)."""
    override = parse_cuda(cuda) if cuda is not None else None
    ask = read_torch(torch)
    found = Sources(
        installed=probe(python_exe) if ask.installed else None,
        conda_forge=conda_forge,
        index=lambda version: torch_cuda_from_index(version, index, offline=offline),
    )
    return derive(ask, cuda=override, torch_source=torch_source, table=torch_table(), sources=found)  # type: ignore[arg-type]


def fake_torch(
    root: Path,
    version: str = "2.3.0+cu121",
    cuda: str | None = "12.1",
    cudnn: int | None = 8902,
    import_error: str | None = None,
) -> Path:
    """A real importable `torch` package with the attributes envlock reads (version, cuda, cuDNN)."""
    pkg = root / "torch"
    (pkg / "backends" / "cudnn").mkdir(parents=True)
    if import_error:
        (pkg / "__init__.py").write_text(f"raise ImportError({import_error!r})\n")
    else:
        (pkg / "__init__.py").write_text(f"__version__ = {version!r}\nfrom . import version, backends\n")
    (pkg / "version.py").write_text(f"__version__ = {version!r}\ncuda = {cuda!r}\n")
    (pkg / "backends" / "__init__.py").write_text("from . import cudnn\n")
    (pkg / "backends" / "cudnn" / "__init__.py").write_text(f"def version():\n    return {cudnn!r}\n")
    return root


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Put a fake torch on PYTHONPATH for the real interpreter; returns that interpreter's path."""

    def make(**kwargs: object) -> str:
        root = fake_torch(tmp_path / "site", **kwargs)  # type: ignore[arg-type]
        monkeypatch.setenv("PYTHONPATH", str(root))
        return sys.executable

    return make


@pytest.fixture(scope="module")
def conda_forge_linux64(shared_dir: Path) -> Callable[[str], list[tuple[str, str]]]:
    """A lookup over the real conda-forge linux-64 repodata snapshot (what envlock/seams/conda/solve.py provides)."""
    data = json.loads((shared_dir / "channels" / "conda-forge" / "linux-64" / "repodata.json").read_text())
    records = [
        (r["version"], r["build"])
        for key in ("packages", "packages.conda")
        for r in data.get(key, {}).values()
        if r["name"] == "pytorch"
    ]
    return lambda version: [r for r in records if r[0] == version]


# --------------------------------------------------------------------------- 1. --cuda override


def test_override_wins_over_everything_and_keeps_the_version(installed: Callable[..., str]) -> None:
    a = anchor_of(torch="2.3.0+cu118", cuda="12.4")
    assert (a.torch, a.cuda, a.source, a.local_label) == ("2.3.0", "12.4", "override", "cu118")
    assert "cu118, cu121" in a.detail  # says what torch itself was built for
    exe = installed(version="2.3.0+cpu", cuda=None)
    b = anchor_of(torch="installed", cuda="12.1", python_exe=exe)
    assert (b.torch, b.cuda, b.source) == ("2.3.0", "12.1", "override") and "installed in" in b.detail


def test_override_takes_the_cudnn_of_a_known_variant() -> None:
    a = anchor_of(torch="2.3.0", cuda="11.8")
    assert (a.cuda, a.cudnn) == ("11.8", "8.7.0.84")
    assert anchor_of(torch="2.16.0", cuda="13.2").cudnn is None  # unknown: no guess


def test_override_of_another_cuda_major_is_refused_naming_the_builds() -> None:
    """torch 2.5.1 was built for 11.8/12.1/12.4: a CUDA 13 nvcc can never build its extensions."""
    with pytest.raises(AnchorError) as info:
        anchor_of(torch="2.5.1", cuda="13.0")
    assert "CUDA 11.8, 12.1, 12.4 (cu118, cu121, cu124), never for CUDA 13" in info.value.message
    assert "--cuda 12.4" in info.value.hint
    assert anchor_of(torch="2.5.1", cuda="12.6").cuda == "12.6"  # a minor skew: allowed
    assert anchor_of(torch="2.5.1+cu118", cuda="11.8").cuda == "11.8"
    # A release the table does not know is asked of nobody here: not judged.
    assert anchor_of(torch="2.16.0", cuda="13.2").cuda == "13.2"


def test_override_of_another_major_than_the_installed_torch_is_refused(installed: Callable[..., str]) -> None:
    exe = installed(version="2.11.0+cu130", cuda="13.0", cudnn=91900)
    with pytest.raises(AnchorError) as info:
        anchor_of(torch="installed", cuda="12.6", python_exe=exe)
    assert "torch 2.11.0+cu130 was built for CUDA 13.0, never for CUDA 12" in info.value.message
    assert "--cuda 13.0" in info.value.hint
    assert anchor_of(torch="installed", cuda="13.2", python_exe=exe).cuda == "13.2"


@pytest.mark.parametrize("bad", ["12", "12.x", "v12.1", "12.1.0", "", "cu121"])
def test_override_must_be_major_minor(bad: str) -> None:
    with pytest.raises(SpecError, match="X.Y") as info:
        anchor_of(torch="2.3.0", cuda=bad)
    assert "--cuda 12.1" in info.value.hint


# --------------------------------------------------------------------------- 2. local label


@pytest.mark.parametrize(
    ("spec", "cuda", "cudnn"),
    [
        ("2.3.0+cu118", "11.8", "8.7.0.84"),
        ("2.11.0+cu130", "13.0", "9.19.0.56"),
        ("1.13.1+cu116", "11.6", "8.3.2.44"),
    ],
)
def test_local_label(spec: str, cuda: str, cudnn: str) -> None:
    a = anchor_of(torch=spec)
    assert (a.cuda, a.cudnn, a.source, a.local_label) == (cuda, cudnn, "local-label", spec.split("+")[1])
    assert a.torch == spec.split("+")[0]


def test_local_label_of_an_unknown_version_needs_no_network(pypi_index: FakeTorchIndex) -> None:
    a = anchor_of(torch="2.16.0+cu132")
    assert (a.cuda, a.cudnn, a.source) == ("13.2", None, "local-label")
    assert pypi_index.requests == []


@pytest.mark.parametrize(("label", "kind"), [("cpu", "CPU"), ("rocm6.0", "ROCm"), ("xpu", "XPU")])
def test_non_cuda_labels_are_refused(label: str, kind: str) -> None:
    with pytest.raises(AnchorError, match=kind) as info:
        anchor_of(torch=f"2.3.0+{label}")
    # a CUDA build the release has, and its default wheel: never a label envlock would refuse (issue 24)
    assert "--torch 2.3.0+cu121`" in info.value.hint and "--torch 2.3.0`" in info.value.hint


def test_a_label_torch_was_never_built_with_is_refused() -> None:
    with pytest.raises(
        AnchorError, match="never built as \\+cu124; its CUDA builds are cu118, cu121"
    ) as info:
        anchor_of(torch="2.3.0+cu124")
    assert "--cuda 12.4" in info.value.hint


def test_a_label_with_the_conda_forge_source_is_contradictory() -> None:
    with pytest.raises(SpecError, match="conda-forge builds have no local labels"):
        anchor_of(torch="2.3.0+cu118", torch_source="conda-forge")


# --------------------------------------------------------------------------- 3. installed torch (subprocess)


def test_installed_cuda_build(installed: Callable[..., str]) -> None:
    exe = installed(version="2.3.0+cu118", cuda="11.8", cudnn=8700)
    a = anchor_of(torch="installed", python_exe=exe)
    assert (a.torch, a.cuda, a.cudnn, a.source, a.local_label) == (
        "2.3.0",
        "11.8",
        "8.7.0",
        "installed",
        "cu118",
    )
    assert exe in a.detail and "torch.version.cuda" in a.detail


def test_installed_beats_conda_forge_and_the_table(installed: Callable[..., str]) -> None:
    exe = installed(version="2.8.0", cuda="12.9", cudnn=91002)
    a = anchor_of(torch="installed", python_exe=exe, torch_source="conda-forge", conda_forge=lambda v: [])
    assert (a.cuda, a.cudnn, a.source, a.torch_source) == ("12.9", "9.10.2", "installed", "conda-forge")


def test_installed_defaults_to_the_active_venv(installed: Callable[..., str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --python-exe: the active venv's python (envlock.seams.installed_torch.user_python), not envlock's."""
    installed(version="2.14.1+cu130", cuda="13.0", cudnn=92400)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "venv"))
    a = anchor_of(torch="installed")
    assert (a.torch, a.cuda, a.cudnn) == ("2.14.1", "13.0", "9.24.0")
    assert f"{tmp_path / 'venv' / 'bin' / 'python'} (the active venv $VIRTUAL_ENV)" in a.detail


def test_installed_cpu_build_is_refused(installed: Callable[..., str]) -> None:
    exe = installed(version="2.3.0+cpu", cuda=None, cudnn=None)
    with pytest.raises(AnchorError, match="CPU build") as info:
        anchor_of(torch="installed", python_exe=exe)
    assert "--cuda" in info.value.hint


def test_installed_torch_that_cannot_be_imported(installed: Callable[..., str]) -> None:
    exe = installed(import_error="libcudart.so.12: cannot open shared object file")
    with pytest.raises(AnchorError, match="libcudart.so.12") as info:
        anchor_of(torch="installed", python_exe=exe)
    assert "--python-exe" in info.value.hint


def test_python_without_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = tmp_path / "venv"  # a real python that certainly has no torch
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with pytest.raises(AnchorError, match="cannot be imported.*ModuleNotFoundError"):
        anchor_of(torch="installed", python_exe=str(venv / "bin" / "python"))


def test_missing_python(tmp_path: Path) -> None:
    with pytest.raises(AnchorError, match="does not exist") as info:
        anchor_of(torch="installed", python_exe=str(tmp_path / "nope" / "python"))
    assert "--python-exe" in info.value.hint


def test_stray_torch_directory_in_the_cwd_is_not_imported(
    installed: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = installed(version="2.3.0+cu121", cuda="12.1")
    cwd = tmp_path / "project"
    fake_torch(cwd, version="9.9.9", cuda="99.9")
    monkeypatch.chdir(cwd)
    assert anchor_of(torch="installed", python_exe=exe).cuda == "12.1"


# --------------------------------------------------------------------------- 4. conda-forge pytorch builds


@pytest.mark.parametrize(
    ("version", "cuda"),
    [("2.7.1", "12.9"), ("2.8.0", "12.9"), ("2.3.1", "12.0"), ("2.0.0", "11.8"), ("2.5.1", "12.6")],
)
def test_conda_forge_picks_the_newest_cuda_build(
    conda_forge_linux64: Callable[[str], list[tuple[str, str]]], version: str, cuda: str
) -> None:
    a = anchor_of(torch=version, torch_source="conda-forge", conda_forge=conda_forge_linux64)
    assert (a.torch, a.cuda, a.source, a.torch_source, a.cudnn) == (
        version,
        cuda,
        "conda-forge",
        "conda-forge",
        None,
    )


def test_conda_forge_is_asked_before_the_table(
    conda_forge_linux64: Callable[[str], list[tuple[str, str]]],
) -> None:
    pip = anchor_of(torch="2.8.0")
    cf = anchor_of(torch="2.8.0", torch_source="conda-forge", conda_forge=conda_forge_linux64)
    assert (pip.cuda, cf.cuda) == ("12.8", "12.9")
    assert "12.9" in cf.detail and "cuda129_" in cf.detail


def test_conda_forge_without_a_cuda_build_lists_what_exists() -> None:
    records = [
        ("2.7.1", "cpu_mkl_py312_h8abce0f_103"),
        ("2.7.1", "cpu_generic_py311_h0_3"),
        ("2.6.0", "cuda126_x"),
    ]
    with pytest.raises(
        AnchorError, match="only as cpu_generic_py311_h0_3, cpu_mkl_py312_h8abce0f_103"
    ) as info:
        anchor_of(torch="2.7.1", torch_source="conda-forge", conda_forge=lambda v: records)
    assert "(without --torch-source)" in info.value.hint  # pip, the default
    with pytest.raises(AnchorError, match="no build at all"):
        anchor_of(torch="2.2.0", torch_source="conda-forge", conda_forge=lambda v: [])


def test_conda_forge_without_a_lookup_is_an_error() -> None:
    with pytest.raises(AnchorError, match="conda-forge"):
        anchor_of(torch="2.7.1", torch_source="conda-forge")


@pytest.mark.parametrize(
    ("build", "cuda"),
    [
        ("cuda126_generic_py311_h1234567_200", "12.6"),
        ("cuda129_mkl_py312_hfde4d7d_304", "12.9"),
        ("cuda120_py311h327d3bc_301", "12.0"),
        ("cuda118py39h06e0762_304", "11.8"),
        ("cuda130_generic_py313_habc_200", "13.0"),
        ("cpu_generic_py311_h0_3", None),
        ("py311_cuda126_0", None),
    ],
)
def test_cuda_of_conda_build(build: str, cuda: str | None) -> None:
    assert cuda_of_conda_build(build) == cuda


# --------------------------------------------------------------------------- 5. table, 6. the index


def test_table_answers_offline_without_any_request(pypi_index: FakeTorchIndex) -> None:
    a = anchor_of(torch="2.3.0", offline=True)
    assert (a.torch, a.cuda, a.cudnn, a.source) == ("2.3.0", "12.1", "8.9.2.26", "table")
    assert "nvidia-cuda-runtime-cu12==12.1.105" in a.detail
    assert pypi_index.requests == []


def test_unverified_table_rows_say_so() -> None:
    a = anchor_of(torch="2.15.0")
    assert a.cuda == "13.2" and "unverified" in a.detail


def test_versions_the_table_does_not_know_go_to_the_index(pypi_index: FakeTorchIndex) -> None:
    a = anchor_of(torch="2.16.0", index=FAST)
    assert (a.torch, a.cuda, a.cudnn, a.source) == ("2.16.0", "13.2", "9.30.0.12", "pypi")
    assert pypi_index.url in a.detail and "cuda-toolkit" in a.detail
    assert pypi_index.wheel_downloads() == []
    count = len(pypi_index.requests)
    again = anchor_of(torch="2.16.0", index=FAST, offline=True)
    assert again.cuda == "13.2" and "(cached)" in again.detail and len(pypi_index.requests) == count


def test_index_retries_through_the_anchor(pypi_index: FakeTorchIndex) -> None:
    pypi_index.fail("/simple/torch/", 500)
    assert anchor_of(torch="2.16.1", index=FAST).cuda == "12.9"


def test_offline_and_unknown_to_the_table_with_empty_cache(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(AnchorError, match="--offline") as info:
        anchor_of(torch="2.16.0", offline=True)
    assert "--cuda" in info.value.hint and pypi_index.requests == []


def test_version_that_exists_nowhere(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(
        AnchorError, match=f"torch 3.0.0 exists neither in envlock's table nor on the index {pypi_index.url}"
    ):
        anchor_of(torch="3.0.0", index=FAST)


def test_cpu_only_release_on_the_index(pypi_index: FakeTorchIndex) -> None:
    with pytest.raises(AnchorError, match="CPU build"):
        anchor_of(torch="2.17.0", index=FAST)


# --------------------------------------------------------------------------- malformed input


@pytest.mark.parametrize("bad", ["2.x", "abc", "", "   ", "2.3", "2", "2.3.0+", "latest"])
def test_malformed_versions(bad: str) -> None:
    with pytest.raises(SpecError) as info:
        anchor_of(torch=bad)
    assert (
        re.search(r"--torch \d+\.\d+\.\d+`|such as 2\.3\.0", info.value.hint) and "installed" in info.value.hint
    )


def test_one_torch_source_validator_for_the_option_and_the_spec() -> None:
    from envlock.errors import UsageError
    from envlock.formats.spec import check_torch_source

    assert check_torch_source("conda-forge", "--torch-source") == "conda-forge"
    with pytest.raises(UsageError, match="--torch-source 'conda' is not a torch source") as info:
        check_torch_source("conda", "--torch-source", UsageError)
    assert "did you mean --torch-source conda-forge?" in info.value.hint
    with pytest.raises(SpecError, match="x.yml: envlock.torch_source 'brew' is not a torch source") as spec:
        check_torch_source("brew", "x.yml: envlock.torch_source")
    assert "did you mean envlock.torch_source pip?" in spec.value.hint


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("torch", "cuda", "name"),
    [("2.3.0", "12.1", "torch2.3.0-cu121"), ("2.11.0", "13.0", "torch2.11.0-cu130")],
)
def test_default_env_name(torch: str, cuda: str, name: str) -> None:
    assert Anchor(torch=torch, cuda=cuda, cudnn=None, source="table", detail="").env_name == name


def test_default_env_name_of_a_resolved_anchor() -> None:
    assert anchor_of(torch="2.3.0+cu118").env_name == "torch2.3.0-cu118"


@pytest.mark.parametrize("platform", ["osx-64", "osx-arm64"])
def test_macos_has_no_cuda(platform: str) -> None:
    from envlock.usecases.resolve import check_platforms

    with pytest.raises(AnchorError, match="torch on macOS has no CUDA") as info:
        check_platforms([platform])
    assert "linux-64" in info.value.hint


def test_platforms() -> None:
    from envlock.usecases.resolve import check_platforms

    assert check_platforms(["linux-64", "linux-aarch64", "win-64", "linux-64"]) == ("linux-64", "linux-aarch64", "win-64")
    for platform in ("linux-32", "linux-ppc64le"):
        with pytest.raises(SpecError, match=f"unknown or unsupported platform '{platform}'"):
            check_platforms([platform])


# --------------------------------------------------------------------------- pure: values in, Anchor out


def test_the_anchor_asks_only_the_sources_it_is_handed() -> None:
    """No process, no network: an installed torch's answer and the index are values and callables."""
    table = torch_table()
    seen: list[str] = []
    found = InstalledTorch("/opt/py/bin/python", version="2.3.0+cu118", cuda="11.8", cudnn=8700, file="/t.py")
    a = derive(read_torch("installed"), cuda=None, torch_source="pip", table=table, sources=Sources(installed=found))
    assert (a.torch, a.cuda, a.cudnn, a.source, a.local_label) == ("2.3.0", "11.8", "8.7.0", "installed", "cu118")
    assert a.python_span == table.python_span("2.3.0") and a.python_span is not None

    class Answer:
        cuda, cudnn, requirement, wheel, index, cached = "13.2", None, "cuda-toolkit==13.2.0", "torch.whl", "idx", False

    b = derive(read_torch("2.16.0"), cuda=None, torch_source="pip", table=table,
               sources=Sources(index=lambda v: seen.append(v) or Answer()))  # type: ignore[func-returns-value]
    assert (b.cuda, b.source, seen) == ("13.2", "pypi", ["2.16.0"]) and b.python_span is None
    with pytest.raises(AnchorError, match="cannot be asked here"):
        derive(read_torch("2.16.0"), cuda=None, torch_source="pip", table=table)  # no index handed in


@pytest.mark.parametrize(
    ("torch", "cuda", "source", "answer"),
    [
        ("installed", None, "pip", "installed"), ("installed", "12.1", "pip", "installed"),
        ("2.3.0+cu118", "12.4", "pip", "override"), ("2.3.0+cu118", None, "pip", "local-label"),
        ("2.7.1", None, "conda-forge", "conda-forge"), ("2.7.1", None, "pip", "table"), ("2.99.0", None, "pip", "pypi"),
    ],
)
def test_source_of_is_the_order_derive_follows(torch: str, cuda: str | None, source: str, answer: str) -> None:
    assert source_of(read_torch(torch), cuda, source, torch_table()) == answer  # type: ignore[arg-type]


def test_a_lock_records_what_only_an_outside_source_knows_and_check_reuses_it() -> None:
    table = torch_table()
    pypi = recorded({"torch": "2.16.0", "cuda": "13.2", "cudnn": None, "source": "pypi", "detail": "d"}, table)
    assert pypi is not None and pypi.cuda == "13.2"
    assert reusable(read_torch("2.16.0"), None, "pip", pypi)
    assert not reusable(read_torch("2.16.1"), None, "pip", pypi)  # another release: derived again
    assert not reusable(read_torch("2.16.0"), "13.0", "pip", pypi)  # an override wins
    assert not reusable(read_torch("2.16.0"), None, "conda-forge", pypi)
    table_made = recorded({"torch": "2.7.1", "cuda": "12.6", "source": "table"}, table)
    assert not reusable(read_torch("2.7.1"), None, "pip", table_made)  # the table answers offline: re-derived
    assert recorded({"cuda": "12.6"}, table) is None and recorded("not a mapping", table) is None


def test_every_failure_is_an_envlock_error_with_a_hint() -> None:
    for torch, cuda in (("2.3.0+cpu", None), ("abc", None), ("2.3.0", "x")):
        with pytest.raises(EnvlockError) as info:
            anchor_of(torch, cuda=cuda)
        assert info.value.hint and "--help" not in info.value.hint
