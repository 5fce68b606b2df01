"""doctor's optional header groups (one finding per `--with` group) and `--for deepspeed` (which ops build).

Constructed prefixes as in tests/test_doctor.py (real header files in targets/x86_64-linux/include, a real
compiled libcudart stub, envlock's activation). The op table is data/deepspeed_ops.yaml, made from
DeepSpeed 0.19.8's op builders; its shape is checked against what issue 17 measured on an H200.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.doctor import HEADERS
from envlock.core.tables import deepspeed_ops_table as deepspeed_ops
from envlock.core.tables import extras_tables
from tests.test_doctor import META, TARGET, base_env, cudart_stub, doctor, make_prefix  # noqa: F401 - fixture

#: What CUDA headers DeepSpeed's ops include beyond torch's set, in the default set (cuda-cudart-dev, cccl).
CUDART_LIKE = ("cuda.h", "cuda_fp16.h", "cuda_bf16.h", "cooperative_groups.h", "mma.h", "cuda/std/cassert")


def prefix_with(tmp_path: Path, stub: Path, *groups: str, meta: dict | None = META) -> Path:
    p = make_prefix(tmp_path, stub, meta=meta)
    inc = p / TARGET / "include"
    table = extras_tables().extras
    for h in [*CUDART_LIKE, *(h for g in groups for h in table[g].headers)]:
        (inc / h).parent.mkdir(parents=True, exist_ok=True)
        (inc / h).write_text(f"/* {h} */\n")
    return p


def test_the_op_table_says_what_the_h200_run_measured() -> None:
    """Issue 17: without curand and the profiler API, exactly transformer, stochastic_transformer, random_ltd
    and transformer_inference fail; fused_adam, fused_lamb, fused_lion, quantizer, spatial_inference and
    inference_core_ops build."""
    ops = deepspeed_ops()["ops"]
    assert deepspeed_ops()["deepspeed"] == "0.19.8"
    for op in ("fused_adam", "fused_lamb", "fused_lion", "quantizer", "spatial_inference", "inference_core_ops"):
        assert ops[op]["needs"] == [], op
    assert "curand" in ops["transformer"]["needs"] and "curand" in ops["stochastic_transformer"]["needs"]
    assert "curand" in ops["random_ltd"]["needs"]
    assert ops["transformer_inference"]["needs"] == ["profiler-api"]
    assert ops["gds"]["needs"] == ["cufile", "libaio"]
    # CUTLASS and libaio are groups (conda-forge's cutlass, libaio): the ops that include them say so
    assert "cutlass" in ops["evoformer_attn"]["needs"] and ops["async_io"]["needs"] == ["libaio"]
    bundle = set(extras_tables().bundles["deepspeed"].extras)
    needed = {g for name, row in ops.items() if name not in ("gds", "async_io", "evoformer_attn") for g in row["needs"]}
    assert needed <= bundle  # `--with deepspeed` covers every op but those three (cuFile, libaio, CUTLASS)


def test_one_finding_per_group_ok_or_info(tmp_path: Path, cudart_stub: Path) -> None:
    p = prefix_with(tmp_path, cudart_stub, "curand", "nvtx", "nccl")
    got = doctor(p, base_env(tmp_path))
    groups = {c: f for c, f in got.items() if c.startswith("header_group.")}
    # every toolkit group; a group beside the toolkit (NCCL, Eigen, …) only when the env has it
    toolkit = {n for n, e in extras_tables().extras.items() if not e.beside}
    assert set(groups) == {f"header_group.{n}" for n in [*toolkit, "nccl"]}
    assert groups["header_group.nccl"].severity == "ok"
    assert groups["header_group.curand"].severity == "ok" and groups["header_group.nvtx"].severity == "ok"
    prof = groups["header_group.profiler-api"]
    assert prof.severity == "info" and "cuda_profiler_api.h" in prof.message
    assert prof.hint == (
        f"add profiler-api to `with:` in environments/train.yml, then: envlock lock && "
        f"envlock create --lock locks/train/conda-lock.yml -p {p}  (adds cuda-profiler-api)"
    )
    assert all(f.severity in ("ok", "info") for f in groups.values())


def test_a_group_only_nvcc_sees_is_said(tmp_path: Path, cudart_stub: Path) -> None:
    p = prefix_with(tmp_path, cudart_stub, "curand", meta=None)
    (p / "etc/conda/activate.d/envlock-cuda.sh").unlink()  # no CPATH: targets/ include is nvcc's only
    f = doctor(p, base_env(tmp_path))["header_group.curand"]
    assert f.severity == "info" and "only where nvcc looks" in f.message
    assert f.hint.startswith(f"add the conda-forge package libcurand-dev to {p}")


def test_for_deepspeed_without_curand_and_profiler_names_the_four_ops(tmp_path: Path, cudart_stub: Path) -> None:
    p = prefix_with(tmp_path, cudart_stub)  # the pre-issue-17 default set: no curand, no profiler API
    got = doctor(p, base_env(tmp_path), for_=("deepspeed",))
    failing = {c.split(".", 2)[2] for c, f in got.items() if c.startswith("deepspeed.op.") and f.severity == "warning"}
    assert failing == {"transformer", "stochastic_transformer", "random_ltd", "transformer_inference", "fp_quantizer",
                       "evoformer_attn", "gds", "async_io"}  # fmt: skip
    ti = got["deepspeed.op.transformer_inference"]
    assert "cuda_profiler_api.h (--with profiler-api)" in ti.message
    assert ti.hint.startswith("add deepspeed to `with:` in environments/train.yml, then: envlock lock && envlock create")
    assert ti.hint.endswith("(adds cuda-profiler-api)")
    assert "curand.h" in got["deepspeed.op.transformer"].message
    for op in ("fused_adam", "fused_lamb", "fused_lion", "quantizer", "spatial_inference", "inference_core_ops"):
        assert got[f"deepspeed.op.{op}"].severity == "ok", got[f"deepspeed.op.{op}"].message


def test_for_deepspeed_with_the_bundle_everything_but_the_outside_needs_is_ok(tmp_path: Path, cudart_stub: Path) -> None:
    p = prefix_with(tmp_path, cudart_stub, "curand", "profiler-api")
    got = doctor(p, base_env(tmp_path), for_=("deepspeed",))
    ops = {c.split(".", 2)[2]: f for c, f in got.items() if c.startswith("deepspeed.op.")}
    assert set(ops) == set(deepspeed_ops()["ops"])
    assert {o for o, f in ops.items() if f.severity == "warning"} == {"gds", "async_io", "evoformer_attn"}
    # and `--with cufile` alone would not make gds build (it failed against the H200's full toolkit: no libaio)
    assert "cufile.h (--with cufile)" in ops["gds"].message and "libaio.h (--with libaio)" in ops["gds"].message
    evo = ops["evoformer_attn"].message  # CUTLASS's headers, a few named and the rest counted
    assert "cutlass/aligned_buffer.h, cutlass/arch/arch.h, cutlass/arch/cache_operation.h and 59 more (--with cutlass)" in evo
    more = doctor(prefix_with(tmp_path / "more", cudart_stub, "curand", "profiler-api", "cutlass", "libaio", "cufile"),
                  base_env(tmp_path), for_=("deepspeed",))  # fmt: skip
    assert {c.split(".", 2)[2]: f.severity for c, f in more.items() if c.startswith("deepspeed.op.")}["evoformer_attn"] == "warning"
    assert ops["fp_quantizer"].severity == "ok"  # nvcc 12.6: the CUDA 13 template error does not apply


def test_a_missing_torch_header_points_at_the_header_findings(tmp_path: Path, cudart_stub: Path) -> None:
    p = prefix_with(tmp_path, cudart_stub, "curand", "profiler-api")
    (p / TARGET / "include" / "cusparse.h").unlink()
    got = doctor(p, base_env(tmp_path), for_=("deepspeed",))
    fa = got["deepspeed.op.fused_adam"]
    assert fa.severity == "warning" and "cusparse.h" in fa.message and fa.hint == "see the header.* findings above"
    assert got["header.cusparse.h"].severity == "error"
    assert set(HEADERS) <= set(fa.details["headers"])


def test_without_for_no_op_findings(tmp_path: Path, cudart_stub: Path) -> None:
    got = doctor(prefix_with(tmp_path, cudart_stub), base_env(tmp_path))
    assert not [c for c in got if c.startswith("deepspeed.op.")]


def test_an_installed_deepspeed_turns_the_arch_suffix_into_a_warning_and_its_version_is_said(
    tmp_path: Path, cudart_stub: Path
) -> None:
    site = tmp_path / "site"  # a real (tiny) installed distribution the env's python finds
    (site / "deepspeed").mkdir(parents=True)
    (site / "deepspeed" / "__init__.py").write_text("")
    (site / "deepspeed-0.20.1.dist-info").mkdir()
    (site / "deepspeed-0.20.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.20.1\n")
    p = prefix_with(tmp_path, cudart_stub, "curand", "profiler-api")
    env = base_env(tmp_path, PYTHONPATH=str(site), TORCH_CUDA_ARCH_LIST="9.0a")
    plain = doctor(p, base_env(tmp_path, TORCH_CUDA_ARCH_LIST="9.0a"))
    assert plain["arch_list.deepspeed"].severity == "info"  # no DeepSpeed, no --for: worth a mention only
    got = doctor(p, env, for_=("deepspeed",))
    assert got["arch_list.deepspeed"].severity == "warning"
    assert "DeepSpeed 0.20.1 is installed" in got["deepspeed.op.fused_adam"].details["source"]
    assert doctor(p, env)["arch_list.deepspeed"].severity == "warning"  # installed DeepSpeed, even without --for


@pytest.mark.slow
def test_the_op_table_is_what_the_scanner_makes_from_deepspeed_0_19_8(tmp_path: Path) -> None:
    """tools/deepspeed_op_headers.py (envlock's source scanner, the `deepspeed` profile) on the 0.19.8 sdist from
    the configured index reproduces data/deepspeed_ops.yaml byte for byte; nothing of DeepSpeed runs, no torch."""
    import subprocess
    import sys

    from tests.sdists import fetch_sdist

    try:
        sdist = fetch_sdist("deepspeed==0.19.8", tmp_path)
    except Exception as exc:  # noqa: BLE001 - no index here: said, not failed
        pytest.skip(f"cannot download the DeepSpeed sdist: {exc}")
    repo = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, str(repo / "tools" / "deepspeed_op_headers.py"), str(sdist)],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == (repo / "envlock" / "data" / "deepspeed_ops.yaml").read_text()
