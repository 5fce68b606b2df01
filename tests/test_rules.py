"""The pure rules: skew candidates, package sets, gcc caps, cuDNN pairing, virtual packages."""

from __future__ import annotations


import pytest

from envlock.errors import PlanError
from envlock.models import Anchor, PlanOptions
from envlock.core.rules import cudnn_spec, make_plan
from envlock.core.tables import cuda_tables, extras_tables


def anchor(cuda: str, cudnn: str | None = "9.10.2.21", torch: str = "2.8.0", source: str = "pip") -> Anchor:
    return Anchor(torch=torch, cuda=cuda, cudnn=cudnn, source="table", detail="test", torch_source=source)  # type: ignore[arg-type]


def cands(cuda: str, platform: str = "linux-64", **kw: object) -> list[tuple[str, str]]:
    plan = make_plan(anchor(cuda, **kw), PlanOptions(platforms=(platform,)), cuda_tables(), extras_tables())  # type: ignore[arg-type]
    return [(c.cuda, c.skew) for c in plan.platforms[0].candidates if not c.relaxed]


def test_cudnn_widens_within_a_minor_before_the_minor_moves() -> None:
    plan = make_plan(anchor("13.0", cudnn="9.19.0.56"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    got = [(c.cuda, c.cudnn, c.relaxed) for c in plan.platforms[0].candidates]
    assert got == [
        ("13.0", "cudnn 9.19.*", False),
        ("13.0", "cudnn 9.*", True),
        ("13.0", None, True),
        ("13.1", "cudnn 9.19.*", False),
        ("13.1", "cudnn 9.*", True),
        ("13.1", None, True),
    ]
    assert any("widened" in n for n in plan.platforms[0].candidates[1].notes)
    dropped = plan.platforms[0].candidates[2]
    assert not any(s.startswith("cudnn") for s in dropped.specs)
    assert any("cuDNN is not locked" in n for n in dropped.notes)


def test_exact_then_lower_then_higher() -> None:
    assert cands("12.4") == [("12.4", "exact"), ("12.3", "minor-1"), ("12.5", "minor+1")]


def test_12_8_can_only_move_to_12_9_because_12_7_was_never_released() -> None:
    assert cands("12.8") == [("12.8", "exact"), ("12.9", "minor+1")]


def test_12_6_never_widens_past_one_minor() -> None:
    assert cands("12.6") == [("12.6", "exact"), ("12.5", "minor-1")]


def test_window_stays_inside_the_major() -> None:
    assert cands("13.0", cudnn="9.19.0.56") == [("13.0", "exact"), ("13.1", "minor+1")]
    assert cands("12.9") == [("12.9", "exact"), ("12.8", "minor-1")]


def test_conda_forge_torch_gets_the_exact_minor_only() -> None:
    assert cands("12.6", source="conda-forge") == [("12.6", "exact")]


def test_cuda_12_7_is_refused_with_neighbours_in_the_hint() -> None:
    with pytest.raises(PlanError) as err:
        make_plan(anchor("12.7"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    assert "never released" in err.value.message
    assert "12.6" in err.value.hint and "12.8" in err.value.hint


def test_unknown_cuda_is_refused() -> None:
    with pytest.raises(PlanError, match="no conda toolchain"):
        make_plan(anchor("9.0"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())


def test_cuda12_package_set_caps_cuda_version_and_gcc() -> None:
    plan = make_plan(anchor("12.6", cudnn="9.5.1.17"), PlanOptions(platforms=("linux-64",), python="3.11"), cuda_tables(), extras_tables())
    c = plan.platforms[0].candidates[0]
    for spec in ("cuda-version=12.6", "cuda-nvcc", "cuda-cudart-dev", "libcusparse-dev", "libcublas-dev",
                 "libcusolver-dev", "gcc_linux-64 <14", "gxx_linux-64 <14", "python 3.11.*"):  # fmt: skip
        assert spec in c.specs
    assert c.gcc_max == 13
    assert [str(v) for v in c.virtual_packages] == ["__cuda=12.6=0", "__glibc=2.28=0", "__linux=5.10=0", "__unix=0=0"]


@pytest.mark.parametrize(
    ("cuda", "gcc"),
    [("12.0", 12), ("12.3", 12), ("12.4", 12), ("12.5", 13), ("12.6", 13), ("12.8", 14), ("12.9", 14), ("13.0", 15), ("11.8", 11)],
)
def test_gcc_cap_follows_nvcc_limits(cuda: str, gcc: int) -> None:
    assert cuda_tables().gcc_max(cuda) == gcc


def test_aarch64_uses_the_aarch64_compilers_and_win_uses_msvc() -> None:
    plan = make_plan(anchor("12.9"), PlanOptions(platforms=("linux-aarch64", "win-64")), cuda_tables(), extras_tables())
    aarch, win = (pp.candidates[0] for pp in plan.platforms)
    assert "gcc_linux-aarch64 <15" in aarch.specs and not any(s.startswith("gcc_linux-64") for s in aarch.specs)
    assert "vs2022_win-64" in win.specs and win.gcc_max is None
    assert [v.name for v in win.virtual_packages] == ["__cuda", "__win"]


def test_cuda_11_8_uses_the_nvidia_label_channel_first() -> None:
    plan = make_plan(anchor("11.8", cudnn="8.7.0.84", torch="2.0.0"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    c = plan.platforms[0].candidates[0]
    assert c.channels == ("nvidia/label/cuda-11.8.0", "conda-forge")
    assert "cuda-nvcc=11.8" in c.specs and "gcc_linux-64 <12" in c.specs


def test_cuda_11_7_uses_cudatoolkit_dev_and_warns_about_its_download() -> None:
    plan = make_plan(anchor("11.7", cudnn="8.5.0.96", torch="2.0.0"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    c = plan.platforms[0].candidates[0]
    assert c.specs[0] == "cudatoolkit-dev=11.7.0"
    assert any("downloads NVIDIA's CUDA installer" in n for n in c.notes)
    assert c.channels == ("conda-forge",)


def test_cudatoolkit_dev_is_not_planned_for_aarch64_so_only_11_8_remains() -> None:
    assert cands("11.7", platform="linux-aarch64", torch="2.0.0") == [("11.8", "minor+1")]
    with pytest.raises(PlanError, match="linux-aarch64"):
        make_plan(anchor("11.6", torch="1.13.0"), PlanOptions(platforms=("linux-aarch64",)), cuda_tables(), extras_tables())


def test_cudnn_matches_torch_major_minor_when_conda_forge_builds_it() -> None:
    row = cuda_tables().minor("12.1")
    assert row is not None
    assert cudnn_spec(anchor("12.1", cudnn="8.9.2.26"), row, cuda_tables()) == ("cudnn 8.9.*", None)


def test_cudnn_moves_to_the_nearest_with_a_reason() -> None:
    row = cuda_tables().minor("12.1")
    assert row is not None
    spec, note = cudnn_spec(anchor("12.1", cudnn="9.1.0.70"), row, cuda_tables())
    assert spec == "cudnn 9.2.*"
    assert note is not None and "9.1" in note and "nearest is 9.2" in note


def test_cudnn_for_cuda13_comes_from_the_cuda13_builds() -> None:
    row = cuda_tables().minor("13.0")
    assert row is not None
    assert cudnn_spec(anchor("13.0", cudnn="9.19.0.56"), row, cuda_tables()) == ("cudnn 9.19.*", None)


def test_complaints_name_deepspeed_for_cuda13_minor_skew() -> None:
    plan = make_plan(anchor("13.0", cudnn="9.19.0.56"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    plus = [c for c in plan.platforms[0].candidates if c.skew == "minor+1"][0]
    assert plus.skew == "minor+1"
    assert any("DeepSpeed refuses" in c for c in plus.complaints)
    plan12 = make_plan(anchor("12.4", cudnn="9.1.0.70"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    assert not any("DeepSpeed" in c for cand in plan12.platforms[0].candidates for c in cand.complaints)


def test_minus_one_with_pip_torch_warns_about_ld_library_path() -> None:
    plan = make_plan(anchor("12.4", cudnn="9.1.0.70"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    minus = [c for c in plan.platforms[0].candidates if c.skew == "minor-1"][0]
    assert minus.skew == "minor-1"
    assert any("LD_LIBRARY_PATH" in c for c in minus.complaints)


def test_conda_forge_torch_adds_pytorch_for_the_chosen_cuda() -> None:
    plan = make_plan(anchor("12.6", torch="2.7.1", source="conda-forge"), PlanOptions(platforms=("linux-64",)), cuda_tables(), extras_tables())
    assert "pytorch ==2.7.1 cuda126*" in plan.platforms[0].candidates[0].specs


def test_rule_table_invariants() -> None:
    import yaml

    from envlock.core.tables import text_of

    t, raw = cuda_tables(), yaml.safe_load(text_of("cuda.yaml"))
    keys = [m.key for m in t.minors.values()]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert "12.7" not in t.minors and "12.7" in t.never_released
    for row in t.minors.values():
        assert set(row.platforms) <= {"linux-64", "linux-aarch64", "win-64"}
        if row.toolchain == "cf-split":  # the nvcc releases the table sources for the minor (data only)
            nvcc = raw["cuda"][row.cuda]["nvcc"]
            assert row.key >= (12, 0) and nvcc and all(v.startswith(row.cuda + ".") for v in nvcc)
        if row.toolchain == "cudatoolkit-dev":
            assert row.key <= (11, 7) and row.package_version
    # every cuDNN family list is sorted and CUDA 13 starts at 9.11
    for fam in t.cudnn.values():
        assert [tuple(map(int, v.split("."))) for v in fam] == sorted(tuple(map(int, v.split("."))) for v in fam)
    assert t.cudnn[13][0] == "9.11"
