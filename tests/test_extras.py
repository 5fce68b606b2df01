"""libcurand-dev in the default set and `--with NAME`: the table, the plan, the spec, resolve, check.

Resolves run against the conda-forge-shaped test channel (real tiny packages, tests/channel_extras.py);
the snapshot of real conda-forge repodata is used in tests/test_resolve_snapshot.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envlock.cli import run
from envlock.errors import PlanError, SpecError
from envlock.formats import read_lock
from envlock.models import Anchor, PlanOptions
from envlock.project import content_hashes
from envlock.usecases.resolve import plan_for, shipped_tables
from envlock.core.rules import make_plan
from envlock.formats.spec import EnvSpec, parse_spec, render_spec
from envlock.core.tables import TOOLCHAINS, cuda_tables, extras_tables, parse_extras


def anchor(cuda: str, torch: str = "2.8.0") -> Anchor:
    return Anchor(torch=torch, cuda=cuda, cudnn=None, source="table", detail="test")


def first(cuda: str, platform: str = "linux-64", with_: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    plan = make_plan(anchor(cuda), PlanOptions(platforms=(platform,), with_extras=with_), cuda_tables(), extras_tables())
    return plan.platforms[0].candidates


# ------------------------------------------------------------------------------------------- table


def test_the_table_loads_and_every_bundle_names_known_extras() -> None:
    t = extras_tables()
    assert {"profiler-api", "curand", "cufft", "nvrtc", "nvtx", "cufile", "nvml", "cupti"} <= set(t.extras)
    assert t.bundles["deepspeed"].extras == ("curand", "profiler-api")
    toolkit = {n for n, e in t.extras.items() if not e.beside}
    assert set(t.bundles["all"].extras) == toolkit and t.bundles["all"].partial  # the toolkit's groups, all of them
    assert set(t.extras) - toolkit == {"nccl", "cusparselt", "cudss", "cutensor", "cutlass", "libaio", "eigen"}
    for extra in t.extras.values():
        assert extra.headers and set(extra.packages) <= set(TOOLCHAINS)
        assert extra.packages.get("cf-split"), f"{extra.name} has no conda-forge package"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["bundles"]["deepspeed"]["extras"].append("nope"), "unknown extras"),
        (lambda d: d["extras"]["curand"]["packages"].update({"pip": ["x"]}), "unknown toolchain"),
        (lambda d: d["extras"]["curand"].update({"platforms": ["osx-64"]}), "unknown platform"),
        (lambda d: d.update({"schema_version": 2}), "schema_version"),
        (lambda d: d["bundles"].update({"curand": {"what": "x", "extras": ["curand"]}}), "also an extra"),
        (lambda d: d["bundles"]["all"]["extras"].append("nccl"), "bundle all is not every group of the toolkit"),
        (lambda d: d["bundles"]["all"]["extras"].remove("nvtx"), "bundle all is not every group of the toolkit"),
        (lambda d: d["extras"]["eigen"].update({"include_dir": "../x"}), "not one folder name"),
        (lambda d: d["extras"]["eigen"].update({"include_dir": "eigen4"}), "not under include_dir"),
        (lambda d: d["extras"]["nccl"].update({"beside": "yes"}), "beside is not true or false"),
    ],
)
def test_a_broken_table_is_refused_on_load(edit, needle) -> None:
    from importlib import resources

    import yaml

    doc = yaml.safe_load(resources.files("envlock").joinpath("data", "extras.yaml").read_text())
    edit(doc)
    with pytest.raises(Exception, match=needle):
        parse_extras(doc)


# -------------------------------------------------------------------------------------------- plan


@pytest.mark.parametrize("cuda", ["12.0", "12.6", "12.9", "13.0", "13.3"])
def test_curand_is_in_every_cuda12_plus_default_set(cuda: str) -> None:
    for c in first(cuda):
        assert "libcurand-dev" in c.specs and not c.extras


def test_cuda_11_8_gets_the_labels_curand_and_11_7_the_whole_toolkit() -> None:
    assert "libcurand-dev=10" in first("11.8")[0].specs
    assert first("11.7")[0].specs[:1] == ("cudatoolkit-dev=11.7.0",)


def test_with_deepspeed_adds_the_profiler_api_once_and_says_which_with_asked() -> None:
    for c in first("13.0", with_=("deepspeed", "curand", "profiler-api")):
        assert c.specs.count("libcurand-dev") == 1 and c.specs.count("cuda-profiler-api") == 1
        assert c.extras == (("deepspeed (profiler-api)", "cuda-profiler-api"),)


def test_with_all_leaves_out_what_win_64_cannot_have_and_says_so() -> None:
    c = first("13.0", platform="win-64", with_=("all",))[0]
    assert "libcufft-dev" in c.specs and "cuda-nvtx-dev" in c.specs and "libcufile-dev" not in c.specs
    assert any("cufile" in n and "win-64" in n and "left out" in n for n in c.notes)


def test_an_explicit_extra_that_cannot_exist_is_an_error_naming_it() -> None:
    with pytest.raises(PlanError) as err:
        first("13.0", platform="win-64", with_=("cufile",))
    assert "--with cufile" in err.value.message and "win-64" in err.value.message
    with pytest.raises(PlanError, match="not an extra envlock knows") as err2:
        first("13.0", with_=("magma",))
    assert "deepspeed" in err2.value.hint and "cusparselt" in err2.value.hint


def test_a_minor_without_the_extra_is_no_candidate_and_the_plan_says_why() -> None:
    # nvJitLink exists from CUDA 12.0: neither 11.8 (nvidia label) nor 11.7 (cudatoolkit-dev) has it
    with pytest.raises(PlanError, match="--with nvjitlink: conda has no nvjitlink package for CUDA 11.8"):
        first("11.8", with_=("nvjitlink",))
    assert {c.cuda for c in first("12.0", with_=("nvjitlink",))} == {"12.0", "12.1"}


def test_extras_change_the_content_hash_and_the_hash_of_a_spec_without_them_is_kept() -> None:
    plain = EnvSpec(name="t", torch="2.8.0", python="3.11")
    ds = EnvSpec(name="t", torch="2.8.0", python="3.11", with_extras=("deepspeed",))
    a = anchor("12.8")
    assert "with" not in plain.inputs() and ds.inputs()["with"] == ["deepspeed"]
    h_plain = content_hashes(plain, plan_for(plain, a, shipped_tables()))
    h_ds = content_hashes(ds, plan_for(ds, a, shipped_tables()))
    assert h_plain["linux-64"] != h_ds["linux-64"]


# -------------------------------------------------------------------------------------------- spec


def _render(spec: EnvSpec) -> str:
    plan = plan_for(spec, anchor("13.0", "2.11.0"), shipped_tables())
    return render_spec(spec, {pp.platform: pp.candidates[0].specs for pp in plan.platforms}, plan.options.extra_specs)


def test_with_round_trips_and_its_packages_are_not_taken_for_user_extras() -> None:
    spec = EnvSpec(name="t", torch="2.11.0", python="3.12", with_extras=("deepspeed", "cufft"))
    text = _render(spec)
    assert "  with: [deepspeed, cufft]\n" in text and "  - cuda-profiler-api\n" in text
    back = parse_spec(text)
    assert back.with_extras == ("deepspeed", "cufft")
    plan = plan_for(back, anchor("13.0", "2.11.0"), shipped_tables())
    assert plan.options.extra_specs == ()  # cuda-profiler-api and libcufft-dev are the plan's, not the user's
    # without `with:`, a hand-added libcufft-dev stays the user's own dependency
    hand = parse_spec(text.replace("  with: [deepspeed, cufft]\n", ""))
    assert "libcufft-dev" in plan_for(hand, anchor("13.0", "2.11.0"), shipped_tables()).options.extra_specs


def test_a_spec_without_extras_renders_no_with_line() -> None:
    assert "with:" not in _render(EnvSpec(name="t", torch="2.11.0", python="3.12"))


@pytest.mark.parametrize("bad", ["with: deepspeed", "with: [1, 2]", "with: {a: 1}"])
def test_a_bad_with_is_a_spec_error(bad: str) -> None:
    text = _render(EnvSpec(name="t", torch="2.11.0", python="3.12")) + f"  {bad}\n"
    with pytest.raises(SpecError, match="envlock.with"):
        parse_spec(text)


# ------------------------------------------------------------------------------ resolve and check


def resolve(tmp: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = run(["resolve", *args, "--project-dir", str(tmp), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_with_deepspeed_locks_curand_and_the_profiler_api_and_check_is_fresh(tmp_path, capsys, test_channel) -> None:
    mirror = f"conda-forge={test_channel.as_uri()}"
    code, doc = resolve(tmp_path, capsys, "--torch", "2.11.0", "--platform", "linux-64", "--with", "deepspeed", "--mirror", mirror)
    assert code == 0, doc
    assert doc["with"] == ["deepspeed"]
    assert doc["platforms"]["linux-64"]["extras"] == [{"with": "deepspeed (profiler-api)", "spec": "cuda-profiler-api"}]
    names = {p.name for p in read_lock(tmp_path / "locks/torch2.11.0-cu130/conda-lock.yml").packages}
    assert {"libcurand-dev", "libcurand", "cuda-profiler-api"} <= names
    spec = (tmp_path / "environments/torch2.11.0-cu130.yml").read_text()
    assert "  with: [deepspeed]\n" in spec
    assert run(["check", "--project-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    # a hand-deleted extra line: the spec no longer asks for what the lock solved
    (tmp_path / "environments/torch2.11.0-cu130.yml").write_text(spec.replace("  - cuda-profiler-api\n", ""))
    assert run(["check", "--project-dir", str(tmp_path)]) == 1
    assert "the lock solved cuda-profiler-api" in capsys.readouterr().out
    # dropping the extra from the spec makes the lock stale, and check names what changed
    (tmp_path / "environments/torch2.11.0-cu130.yml").write_text(spec.replace("  with: [deepspeed]\n", ""))
    assert run(["check", "--project-dir", str(tmp_path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any("envlock.with" in c["message"] for e in report["environments"] for c in e["changes"])


def test_a_channel_without_the_extra_for_the_exact_minor_moves_it_and_names_the_extra(tmp_path, capsys, make_channel) -> None:
    chan = make_channel(drop={("cuda-profiler-api", "12.6")}, subdirs=("linux-64",), with_pytorch=False)
    code, doc = resolve(tmp_path, capsys, "--torch", "2.7.1", "--platform", "linux-64", "--with", "deepspeed", "--mirror", f"conda-forge={chan.as_uri()}")
    assert code == 0, doc
    p = doc["platforms"]["linux-64"]
    assert p["cuda"] == "12.5" and p["skew"] == "minor-1"
    # 12.6 is tried once (its cuDNN variants cannot bring the extra); 12.5's attempts are the cuDNN pin's
    assert [a["cuda"] for a in p["attempts"]].count("12.6") == 1
    assert "--with deepspeed (profiler-api): cuda-profiler-api has no build for CUDA 12.6" in p["attempts"][0]["error"]


def test_a_channel_without_the_extra_anywhere_fails_naming_it_and_writes_nothing(tmp_path, capsys, make_channel) -> None:
    chan = make_channel(drop={("cuda-nvtx-dev", None)}, subdirs=("linux-64",), with_pytorch=False)
    code, doc = resolve(tmp_path, capsys, "--torch", "2.7.1", "--platform", "linux-64", "--with", "nvtx", "--mirror", f"conda-forge={chan.as_uri()}")
    assert code == 3
    assert "--with nvtx: cuda-nvtx-dev is not on the channel" in doc["error"] and "(CUDA 12.6, 12.5)" in doc["error"]  # both minors tried, said once
    assert "--with" in doc["hint"]
    # as data: the channel's name for the package and the user's own word for what they asked (--with nvtx)
    assert (doc["platform"], doc["package"], doc["asked"], doc["cause"]) == ("linux-64", "cuda-nvtx-dev", "nvtx", "lacking-extra")
    assert not (tmp_path / "locks").exists() and not (tmp_path / "environments").exists()


def test_cuda_11_8_with_deepspeed_comes_from_the_label(tmp_path, capsys, test_channel, nvidia_label_channel) -> None:
    args = ["--torch", "2.3.0+cu118", "--platform", "linux-64", "--toolchain-only", "--with", "deepspeed", "--mirror", f"conda-forge={test_channel.as_uri()}",
            "--mirror", f"nvidia/label/cuda-11.8.0={nvidia_label_channel.as_uri()}"]  # fmt: skip
    code, doc = resolve(tmp_path, capsys, *args)
    assert code == 0, doc
    lock = read_lock(tmp_path / "locks/torch2.3.0-cu118/conda-lock.yml")
    urls = {p.name: p.url for p in lock.packages}
    assert "nvidia/label/cuda-11.8.0" in urls["libcurand-dev"] and "nvidia/label/cuda-11.8.0" in urls["cuda-profiler-api"]


def test_cuda_tables_and_extras_agree_on_toolchains() -> None:
    used = {row.toolchain for row in cuda_tables().minors.values()}
    for extra in extras_tables().extras.values():
        missing = used - set(extra.packages)
        assert missing <= {"nvidia-label", "cudatoolkit-dev"}, (extra.name, missing)
