"""doctor's pure checks on hand-made Observations: driver, LD_LIBRARY_PATH, --compile, header groups,
--for deepspeed, the GPU targets; and what makes them pure: no subprocess, no file, no environment read,
no shared state (any order gives the same findings), no import of observe's modules.
"""

from __future__ import annotations

import ast
import builtins
import copy
import io
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from envlock.doctor import CHECKS, COMPILE_CHECKS, HEADERS, diagnose
from envlock.doctor.observation import Driver, LibCopy, Nvcc, NvccBuild, Observation, Ran
from tests.doctor_observations import (
    GREEN,
    INC,
    OBSERVED,
    TABLES,
    P,
    files,
    green,
    record,
    replay,
    run,
    torch_py,
)

# ------------------------------------------------------------------------------------- driver


def _smi(answer: str, rc: int = 0) -> Driver:
    return Driver(Path("/usr/bin/nvidia-smi"), Ran(rc, answer))


@pytest.mark.parametrize(
    ("driver", "present", "version"),
    [
        (Driver(), "warning", "skipped"),  # CPU-only CI: not a problem, nothing to compare
        (
            _smi("470.82.01, NVIDIA H200\n"),
            "ok",
            "error",
        ),  # below CUDA 12's minor-version-compatibility floor
        (_smi("550.54.14, NVIDIA H200\n"), "ok", "warning"),  # 12.6 runs only through minor-version compat
        (_smi("560.35.03, NVIDIA H200\n"), "ok", "ok"),
        (_smi("", 9), "warning", "skipped"),  # nvidia-smi there, no driver answering: not one either
        (
            Driver(
                proc_text="NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release Build\n"
            ),
            "ok",
            "ok",
        ),
    ],
)
def test_driver(driver: Driver, present: str, version: str) -> None:
    got = run(green(driver=driver, py=torch_py()))  # torch's CUDA 12.6 and the env's cudart 12.6
    assert (got["driver.present"].severity, got["driver.version"].severity) == (present, version)


def test_a_driver_against_a_cuda_the_table_does_not_know_is_a_warning() -> None:
    f = run(green(driver=_smi("580.1, X\n"), py=torch_py("9.0.0+cu990", "99.0"), cudart=None))[
        "driver.version"
    ]
    assert f.severity == "warning" and f.message == "no driver minimum known for torch's CUDA 99.0"


# ------------------------------------------------------------------------------------- LD_LIBRARY_PATH

SITE = "/venv/lib/python3.12/site-packages/nvidia/nvjitlink/lib"


def _shadowed(version: str | None, name: str = "libnvJitLink.so.12") -> Observation:
    py = {**torch_py(), "nvidia_libs": {name: {"path": f"{SITE}/{name}", "version": "12.6.85"}}, "loaded": {}}
    return green(py=py, lib_copies=(LibCopy(Path("/old/lib") / name, name, version),), meta=None)


@pytest.mark.parametrize(
    ("version", "severity", "says"),
    [
        ("12.4.127", "error", "undefined symbol: __nvJitLinkComplete_12_6"),
        ("12.6.20", "warning", "same minor, so the symbols match"),
        (None, "warning", "its version cannot be read"),
        ("1.1.0", "warning", "its version cannot be read"),  # another version scheme: not called older
        ("12.8.93", "ok", "nothing on LD_LIBRARY_PATH shadows torch's 1 bundled CUDA libraries"),
    ],
)
def test_ld_library_path(version: str | None, severity: str, says: str) -> None:
    f = run(_shadowed(version))["ld_library_path.shadowing"]
    assert f.severity == severity and says in f.message
    if severity != "ok":
        assert f.hint.startswith("remove that dir from LD_LIBRARY_PATH")


def test_no_bundled_libraries_nothing_to_shadow_and_an_envlock_env_gets_its_activation() -> None:
    assert (
        run(GREEN)["ld_library_path.shadowing"].message
        == "no pip-bundled CUDA libraries (site-packages/nvidia) to shadow"
    )
    f = run(green(py=_shadowed("12.4.127").py, lib_copies=_shadowed("12.4.127").lib_copies))[
        "ld_library_path.shadowing"
    ]
    assert (
        f.hint
        == f"envlock run -p {P} -- <your build command>  (or: eval \"$(envlock shell-hook -p {P})\") — envlock appends the env's lib dir after torch's"
    )


# ------------------------------------------------------------------------------------- --compile

FATAL = "/tmp/envlock-doctor-x/probe.cu:2:10: fatal error: cusparse.h: No such file or directory\ncompilation terminated.\n"


def _built(build: Ran, ran: Ran | None = None) -> NvccBuild:
    return NvccBuild((f"{P}/bin/nvcc", "-cudart", "shared"), 0.5, build, ran)


@pytest.mark.parametrize(
    ("changes", "severity", "says", "hint"),
    [
        ({"nvcc": None}, "error", "not run: no working nvcc", "envlock create --lock"),
        ({"nvcc_build": _built(Ran(1, "", FATAL)), "meta": None, "files": files(INC / "cuda_runtime.h")}, "error",
         "fatal error: cusparse.h: No such file", f"add the conda-forge package libcusparse-dev cuda-version=12.6 to {P}"),
        ({"nvcc_build": _built(Ran(1, "", FATAL)), "meta": None, "prefix": None, "mode": "system",
          "host_dirs": ()}, "error", "after 0.5 s", f'export CPATH={INC}"${{CPATH:+:$CPATH}}"'),  # only nvcc's dirs have it
        ({"nvcc_build": _built(Ran(0), Ran(1, "", "libcudart.so.12: cannot open"))}, "error", "but does not run", None),
        ({"nvcc_build": _built(Ran(0), Ran(0, "cudart=12060 cusparse_header=12603 err=0\n"))}, "ok",
         "in 0.5 s; it runs: cudart=12060 cusparse_header=12603 err=0", None),
    ],
)  # fmt: skip
def test_compile_nvcc(changes: dict, severity: str, says: str, hint: str | None) -> None:
    f = run(green(compile=True, **changes))["compile.nvcc"]
    assert f.severity == severity and says in f.message
    if hint:
        assert f.hint.startswith(hint)


@pytest.mark.parametrize(
    ("py", "ext", "severity", "says"),
    [
        (GREEN.py, None, "skipped", "not run: torch is not importable here"),
        (torch_py("2.6.0+cpu", None), None, "skipped", "not run: torch is a CPU build"),
        (torch_py(), {"stage": "ran", "correct": True, "build_seconds": 40.1, "device": "NVIDIA H200"}, "ok", "ran correctly on NVIDIA H200"),
        (torch_py(), {"stage": "built", "build_seconds": 40.1}, "ok", "(no GPU: not run)"),
        (torch_py(), {"stage": "ran", "correct": False, "device": "NVIDIA H200"}, "error", "returned a wrong result"),
        (torch_py(), {"stage": "build", "seconds": 1.5, "error": FATAL}, "error", "load_inline failed after 1.5 s: /tmp/"),
        (torch_py(), {"probe_error": "Killed"}, "error", "load_inline failed: Killed"),
    ],
)  # fmt: skip
def test_compile_torch_extension(py: dict, ext: dict | None, severity: str, says: str) -> None:
    f = run(green(compile=True, py=py, torch_extension=ext))["compile.torch_extension"]
    assert f.severity == severity and says in f.message


def test_compile_checks_only_with_compile() -> None:
    assert not [c for c in run(GREEN) if c.startswith("compile.")]


# ------------------------------------------------------------------------------------- groups, --for

CUDART_LIKE = ("cuda.h", "cuda_fp16.h", "cuda_bf16.h", "cooperative_groups.h", "mma.h", "cuda/std/cassert")


def _with(*groups: str, **changes: object) -> Observation:
    extra = [h for g in groups for h in TABLES.extras.extras[g].headers]
    return green(files=files(*(INC / h for h in (*HEADERS, *CUDART_LIKE, *extra))), **changes)


def test_one_finding_per_group_and_how_each_env_gets_one() -> None:
    got = run(_with("curand"))
    groups = {c: f for c, f in got.items() if c.startswith("header_group.")}
    assert set(groups) == {f"header_group.{n}" for n, e in TABLES.extras.extras.items() if not e.beside}
    assert groups["header_group.curand"].severity == "ok" and groups["header_group.nvtx"].severity == "info"

    def hint(**changes: object) -> str | None:
        return run(_with(**changes))["header_group.nvtx"].hint

    assert hint() == (f"add nvtx to `with:` in environments/train.yml, then: envlock lock && "
                      f"envlock create --lock locks/train/conda-lock.yml -p {P}  (adds cuda-nvtx-dev)")  # fmt: skip
    # as create records it (absolute): the project is said, so the hint works from any folder
    lock = "/srv/my proj/locks/train/conda-lock.yml"
    assert hint(meta={"env_name": "train", "lock_path": lock, "anchor": {"torch": "2.6.0"}}) == (
        "add nvtx to `with:` in '/srv/my proj/environments/train.yml', then: envlock lock --project-dir '/srv/my proj' "
        f"&& envlock create --lock '{lock}' -p {P}  (adds cuda-nvtx-dev)")  # fmt: skip
    assert (
        hint(meta={"anchor": {"torch": "2.6.0"}})
        == "envlock resolve --torch 2.6.0 --with nvtx && envlock create  (adds cuda-nvtx-dev)"
    )
    # its headers are absent: activating the env would show nothing more (only headers nvcc alone sees need it)
    assert hint(meta=None) == f"add the conda-forge package cuda-nvtx-dev to {P}"
    from envlock.core.tables import torch_for_hint

    torch, why = torch_for_hint("12.6")  # a release the table has built for the nvcc here: no VERSION (issue 34.5)
    assert hint(meta=None, prefix=None, mode="system") == (
        "install cuda-nvtx-dev (conda-forge, or the CUDA toolkit's component), or: "
        f"envlock resolve --torch {torch} --with nvtx  ({why}; or the torch you will use)"
    )
    assert why == "the newest torch built for CUDA 12.6"


def test_a_group_only_nvcc_sees_is_said() -> None:
    obs = _with("curand", host_dirs=(("the host compiler's default", Path("/usr/include")),))
    f = run(obs)["header_group.curand"]
    assert f.severity == "info" and "only where nvcc looks (targets/<arch>/include)" in f.message


def test_for_deepspeed_without_curand_and_profiler_names_the_ops_that_fail() -> None:
    got = run(_with(for_=("deepspeed",)))
    failing = {
        c.split(".", 2)[2]
        for c, f in got.items()
        if c.startswith("deepspeed.op.") and f.severity == "warning"
    }
    assert failing == {"transformer", "stochastic_transformer", "random_ltd", "transformer_inference", "fp_quantizer",
                       "evoformer_attn", "gds", "async_io"}  # fmt: skip
    ti = got["deepspeed.op.transformer_inference"]
    assert "cuda_profiler_api.h (--with profiler-api)" in ti.message and ti.hint.endswith(
        "(adds cuda-profiler-api)"
    )
    assert not [c for c in run(_with()) if c.startswith("deepspeed.op.")]  # only with --for deepspeed


def test_for_deepspeed_with_the_bundle_and_the_outside_needs() -> None:
    ops = {c.split(".", 2)[2]: f for c, f in run(_with("curand", "profiler-api", for_=("deepspeed",))).items()
           if c.startswith("deepspeed.op.")}  # fmt: skip
    assert {o for o, f in ops.items() if f.severity == "warning"} == {"gds", "async_io", "evoformer_attn"}
    assert "(--with cutlass)" in ops["evoformer_attn"].message and "(--with libaio)" in ops["async_io"].message
    ops = {c.split(".", 2)[2]: f for c, f in run(_with("curand", "profiler-api", "cutlass", "libaio", for_=("deepspeed",))).items()
           if c.startswith("deepspeed.op.")}  # fmt: skip
    assert {o for o, f in ops.items() if f.severity == "warning"} == {"gds", "evoformer_attn"}  # cufile.h: not asked for
    assert ops["async_io"].severity == "ok"
    # the files here are only the group's marker headers: the rest of CUTLASS is named, and as CUTLASS's
    assert "(--with cutlass)" in ops["evoformer_attn"].message and "default set" not in ops["evoformer_attn"].message
    assert ops["fp_quantizer"].severity == "ok"  # nvcc 12.6: the CUDA 13 template error does not apply
    cuda13 = _with(
        "curand", "profiler-api", for_=("deepspeed",), nvcc=Nvcc(P / "bin/nvcc", "13.0.88", "13.0", P)
    )
    assert run(cuda13)["deepspeed.op.fp_quantizer"].severity == "info"
    broken = run(green(files=files(INC / "cuda_runtime.h"), for_=("deepspeed",)))["deepspeed.op.fused_adam"]
    assert broken.severity == "warning" and broken.hint == "see the header.* findings above"
    # only a default-set header no header.* finding is about (cooperative_groups.h): the fix is its package,
    # never "see above" with nothing above (issue 34)
    lamb = run(green(files=files(*(INC / h for h in (*HEADERS, *CUDART_LIKE) if h != "cooperative_groups.h")),
                     for_=("deepspeed",)))["deepspeed.op.fused_lamb"]  # fmt: skip
    assert lamb.severity == "warning" and "cooperative_groups.h" in lamb.message and "see header" not in lamb.message
    assert "above" not in (lamb.hint or "") and "cuda-cudart-dev" in (lamb.hint or ""), lamb.hint


# ------------------------------------------------------------------------------------- GPU targets

NVCC_13_0 = Nvcc(P / "bin/nvcc", "13.0.88", "13.0", P)
LIST_13_0 = Ran(0, (OBSERVED / "nvcc-13.0.88-list-gpu-arch.txt").read_text())


def test_the_gpu_comes_from_torch_else_from_nvidia_smi_else_it_is_skipped() -> None:
    rtx = green(nvcc=NVCC_13_0, gpu_arch_list=LIST_13_0, smi_gpu=Ran(0, "NVIDIA RTX PRO 6000, 12.0\n"))
    got = run(rtx)
    assert (
        got["gpu.arch.nvcc"].severity == "ok" and got["gpu.arch.nvcc"].details["gpu"] == "NVIDIA RTX PRO 6000"
    )
    assert "gpu.arch.torch" not in got  # no torch to ask
    volta = run(
        green(
            gpu_arch_list=LIST_13_0,
            nvcc=NVCC_13_0,
            py=torch_py("2.11.0+cu130", "13.0", capability=[7, 0], device="Tesla V100", arch_list=["sm_75"]),
        )
    )
    assert (
        volta["gpu.arch.nvcc"].severity == "error"
        and "sm_70 (Volta) builds with CUDA 9.0 to 12.9 only" in volta["gpu.arch.nvcc"].hint
    )
    assert volta["gpu.arch.torch"].severity == "error" and volta["gpu.arch.torch"].hint.endswith(
        "use a torch built for CUDA ≤ 12.9, then re-plan this env: envlock resolve --torch installed "
        "--python-exe /usr/bin/python3 --toolchain-only && envlock create"
    )
    assert run(GREEN)["gpu.arch.nvcc"].severity == "skipped"  # nvidia-smi did not run: no GPU to check for


def test_the_arch_list_against_deepspeed_and_the_nvcc_list() -> None:
    obs = green(
        nvcc=NVCC_13_0, gpu_arch_list=LIST_13_0, env={**GREEN.env, "TORCH_CUDA_ARCH_LIST": "7.0;9.0a"}
    )
    got = run(obs)
    assert got["arch_list.deepspeed"].severity == "info"  # no DeepSpeed here, no --for deepspeed
    assert got["arch_list.nvcc"].severity == "error" and "entries 7.0 " in got["arch_list.nvcc"].message
    assert (
        run(green(py={**GREEN.py, "deepspeed": "0.19.8"}, env=obs.env))["arch_list.deepspeed"].severity
        == "warning"
    )
    unlisted = run(green(env=obs.env, gpu_arch_list=Ran(1, "", "nvcc fatal : Unknown option")))
    assert "arch_list.nvcc" not in unlisted  # an nvcc too old to list its targets: not judged


# ------------------------------------------------------------------------------------- purity


class _NoEnviron(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: object) -> str:
        raise AssertionError(f"a check read os.environ[{key!r}]")

    get = __contains__ = __getitem__  # type: ignore[assignment]


@contextmanager
def no_io(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any subprocess, file-system call or environment read inside fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a check did I/O: {args[:2]}")

    with monkeypatch.context() as m:
        m.setattr(subprocess.Popen, "__init__", refuse)
        for name in ("stat", "lstat", "scandir", "listdir", "access", "open", "getcwd", "readlink"):
            m.setattr(os, name, refuse)
        m.setattr(builtins, "open", refuse)
        m.setattr(io, "open", refuse)
        m.setattr(os, "environ", _NoEnviron())
        yield


OBSERVATIONS = {
    "green": green(compile=True, for_=("deepspeed",), py=torch_py(), torch_extension={"stage": "built", "build_seconds": 1.0},
                   nvcc_build=_built(Ran(1, "", FATAL)), driver=_smi("550.54.14, NVIDIA H200\n"),
                   env={**GREEN.env, "TORCH_CUDA_ARCH_LIST": "9.0a"}, gpu_arch_list=LIST_13_0),
    "shadowed": _shadowed("12.4.127"),
    "no-cusparse (H200 record)": replay(record("2026-11-30-nvidia-h200-doctor-no-cusparse.json")["result"]),
    "bare system": Observation(),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(OBSERVATIONS))
def test_checks_run_no_program_read_no_file_and_no_environment(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    obs = OBSERVATIONS[name]
    with no_io(monkeypatch):
        findings = diagnose(obs, TABLES)
    assert findings and len({f.code for f in findings}) == len(findings)


@pytest.mark.parametrize("name", sorted(OBSERVATIONS))
def test_checks_share_no_state_any_order_gives_the_same_findings(name: str) -> None:
    obs, checks = OBSERVATIONS[name], list(CHECKS + COMPILE_CHECKS)
    before = {f.code: f for f in diagnose(obs, TABLES, checks)}
    for seed in range(5):
        random.Random(seed).shuffle(checks)
        assert {f.code: f for f in diagnose(obs, TABLES, checks)} == before
    alone = {f.code: f for check in CHECKS + COMPILE_CHECKS for f in check(obs, TABLES)}
    assert alone == before


def test_an_observation_cannot_be_changed_by_a_check() -> None:
    obs = green(py=torch_py(arch_list=["sm_90"]))
    with pytest.raises(AttributeError):
        obs.prefix = None  # type: ignore[misc]
    for change in (lambda: obs.env.__setitem__("CUDA_HOME", "/x"), lambda: obs.py["torch"].update(cuda="11.8"),
                   lambda: obs.meta.pop("anchor")):  # type: ignore[union-attr]  # fmt: skip
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert obs.py["torch"]["arch_list"] == ("sm_90",)  # lists are tuples
    assert copy.deepcopy(obs) == obs and copy.copy(obs.env) is obs.env  # nothing to copy in a read-only value


PURE = ("observation.py", "hints.py", "result.py", "checks_env.py", "checks_build.py", "checks_runtime.py",
        "checks_compile.py", "checks_gpu.py", "checks_groups.py")  # fmt: skip
IMPURE = {"subprocess", "shutil", "tempfile", "time", "glob", "ctypes", "envlock.doctor.observe",
          "envlock.doctor.programs", "envlock.doctor.probe", "envlock.seams.activation"}  # fmt: skip


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_nothing_that_runs_programs_or_reads_files(module: str) -> None:
    tree = ast.parse((Path(__file__).resolve().parent.parent / "envlock" / "doctor" / module).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m in IMPURE or m.startswith(tuple(f"{i}." for i in IMPURE))}
    assert module == "observation.py" or "os" not in imported  # observation: os.path / os.pathsep only


def test_envlock_help_imports_none_of_doctors_modules() -> None:
    for args in (["--help"], ["doctor", "--help"]):
        code = (f"import sys; from envlock.cli import run; run({args!r}); "
                "print(sorted(m for m in sys.modules if m.startswith('envlock.doctor')))")  # fmt: skip
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        ).stdout
        assert out.strip().splitlines()[-1] == "[]", args
