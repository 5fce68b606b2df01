"""doctor's pure checks on hand-made Observations: the target, torch, nvcc, CUDA_HOME, headers, libcudart and
the host compilers. No gcc, bash, nvcc or GPU: an Observation is what observe.py would have seen, and it
is all a check reads (tests/test_doctor.py proves observe sees it for real, on constructed prefixes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.doctor import HEADERS
from envlock.doctor.observation import Ccbin, Cudart, Nvcc, Ran
from tests.doctor_observations import (
    GREEN,
    INC,
    META,
    NVCC_12_6,
    P,
    files,
    gcc,
    green,
    run,
    same_gcc,
    torch_py,
)

SYSTEM = Path("/usr/local/cuda")


def test_the_green_observation_is_green() -> None:
    got = run(GREEN)
    problems = {c for c, f in got.items() if f.severity in ("error", "warning")}
    assert problems == {"driver.present"}  # no driver seen: fine for CPU-only CI
    target = f"{P}: envlock environment, not active; evaluated with its 1 activation script(s) applied"
    assert got["env.target"].message == target
    assert got["header.cusparse.h"].message == f"cusparse.h: {INC}/cusparse.h (via CPATH)"


# ------------------------------------------------------------------------------------- env.target


@pytest.mark.parametrize(
    ("changes", "severity", "says"),
    [
        ({"prefix": None, "mode": "system"}, "ok", "no -p and no active env: checking the system CUDA"),
        ({"activation_error": "exit 3"}, "warning", "an activation script failed: exit 3"),
        ({"conda_meta": False}, "warning", "has no conda-meta/: not a conda environment"),
        (
            {"meta": {**META, "state": "incomplete"}},
            "error",
            "an `envlock create` stopped before it finished",
        ),
        (
            {"meta": None, "meta_problem": "its record x is not valid JSON"},
            "warning",
            "envlock environment, but its record x",
        ),
        ({"meta": None, "active": True}, "ok", "conda environment (not made by envlock), active"),
    ],
)
def test_target(changes: dict, severity: str, says: str) -> None:
    f = run(green(**changes))["env.target"]
    assert f.severity == severity and says in f.message
    assert f.details["envlock_env"] == (changes.get("meta", META) is not None or "meta_problem" in changes)


# ------------------------------------------------------------------------------------- torch.found


@pytest.mark.parametrize(
    ("changes", "severity", "says"),
    [
        ({"python": None}, "skipped", "no python found to ask for torch"),
        ({"py": {"probe_error": "SyntaxError: x"}}, "warning", "could not run the probe: SyntaxError: x"),
        ({"py": torch_py()}, "ok", "torch 2.6.0+cu126 (CUDA 12.6) in /usr/bin/python3"),
        ({"py": torch_py("2.6.0+cpu", None)}, "ok", "(CUDA none (CPU build))"),
        (
            {"py": {"torch_error": "OSError: undefined symbol: __nvJitLinkComplete_12_6"}},
            "error",
            "import torch fails",
        ),
        (
            {},
            "ok",
            "torch is not installed in /usr/bin/python3; nvcc is checked against the lock's anchor CUDA 12.6",
        ),
    ],
)
def test_torch(changes: dict, severity: str, says: str) -> None:
    f = run(green(**changes))["torch.found"]
    assert f.severity == severity and says in f.message


# ------------------------------------------------------------------------------------- nvcc


def test_no_nvcc_names_the_envlock_repair_or_the_package_or_a_toolkit() -> None:
    assert run(green(nvcc=None))["nvcc.found"].hint == (
        f"envlock create --lock locks/train/conda-lock.yml -p {P}   (the lock has cuda-nvcc; recreating restores nvcc)"
    )
    assert (
        run(green(nvcc=None, meta=None))["nvcc.found"].hint == f"add the conda-forge package cuda-nvcc to {P}"
    )
    system = run(green(nvcc=None, meta=None, prefix=None, mode="system", root=None))["nvcc.found"]
    assert system.severity == "error" and system.message == "no nvcc at CUDA_HOME, PATH or /usr/local/cuda"
    from envlock.core.tables import torch_for_hint

    assert system.hint.startswith(  # no nvcc: the table's newest torch, a value (issue 34.5), not VERSION
        f"install a CUDA toolkit and set CUDA_HOME to it, or: envlock resolve --torch {torch_for_hint()[0]} && "
    )


def test_an_nvcc_that_does_not_run_is_an_error_and_its_root_is_said_when_elsewhere() -> None:
    broken = run(green(nvcc=Nvcc(P / "bin/nvcc", error="exec format error")))
    assert (
        broken["nvcc.found"].severity == "error"
        and "does not run: exec format error" in broken["nvcc.found"].message
    )
    assert broken["nvcc.skew"].severity == "skipped" and broken["nvcc.deepspeed"].severity == "skipped"
    wrapped = green(
        nvcc=Nvcc(P / "bin/nvcc", "12.6.85", "12.6", SYSTEM, ())
    )  # bin/nvcc runs from another root
    assert run(wrapped)["nvcc.found"].message == f"nvcc 12.6.85 at {P}/bin/nvcc (toolkit root {SYSTEM})"
    symlinked = green(
        nvcc=Nvcc(P / "bin/nvcc", "12.6.85", "12.6", SYSTEM, ()), realpaths={str(P): str(SYSTEM)}
    )
    assert run(symlinked)["nvcc.found"].message == f"nvcc 12.6.85 at {P}/bin/nvcc"  # the same dir, really


@pytest.mark.parametrize(
    ("nvcc", "reference", "skew", "deepspeed"),
    [
        ("13.0", "12.6", "error", "warning"),  # major mismatch: torch's builder refuses
        ("12.9", "12.6", "warning", "ok"),  # 3 minors away: torch warns; DeepSpeed takes any 12.x pair
        ("12.8", "12.6", "warning", "ok"),  # 12.7 was never released, but the window stays ±1 numerically
        ("13.1", "13.0", "ok", "warning"),  # ±1 ok for torch, DeepSpeed wants an exact 13.x minor
        ("12.5", "12.6", "ok", "ok"),
    ],
)
def test_skew_against_the_lock_anchor(nvcc: str, reference: str, skew: str, deepspeed: str) -> None:
    obs = green(
        nvcc=Nvcc(P / "bin/nvcc", f"{nvcc}.1", nvcc, P),
        meta={**META, "anchor": {"torch": "2.6.0", "cuda": reference}},
    )
    got = run(obs)
    assert (got["nvcc.skew"].severity, got["nvcc.deepspeed"].severity) == (skew, deepspeed)
    assert got["nvcc.skew"].details["reference_from"] == "the lock's anchor (torch 2.6.0)"
    if skew != "ok":  # torch lives outside the env (/usr/bin/python3): the toolchain is re-planned beside it
        assert got["nvcc.skew"].hint == "envlock resolve --torch 2.6.0 --toolchain-only && envlock create"


def test_torch_is_the_reference_before_the_anchor_and_without_either_nothing_is_compared() -> None:
    got = run(green(py=torch_py("2.11.0+cu130", "13.0")))
    assert (
        got["nvcc.skew"].severity == "error"
        and got["nvcc.skew"].details["reference_from"] == "torch 2.11.0+cu130"
    )
    # the fix plans from the torch that is the reference (the lock's 2.6.0 would make the same mismatch again)
    assert got["nvcc.skew"].hint == ("envlock resolve --torch installed --python-exe /usr/bin/python3 "
                                     "--toolchain-only && envlock create")
    none = run(green(meta=None))
    assert (
        none["nvcc.skew"].severity == "skipped"
        and none["nvcc.skew"].message == "no torch and no envlock anchor to compare with"
    )


# ------------------------------------------------------------------------------------- CUDA_HOME


def test_cuda_home_elsewhere_than_the_env_is_an_error_unless_it_is_the_same_dir() -> None:
    elsewhere = green(torch_home=SYSTEM, env={**GREEN.env, "CUDA_HOME": str(SYSTEM)})
    f = run(elsewhere)["cuda_home.consistent"]
    assert (
        f.severity == "error" and f"CUDA_HOME={SYSTEM}" in f.message and f"the environment {P}" in f.message
    )
    assert f.hint.startswith(f"envlock run -p {P} -- <your build command>")
    assert (
        run(green(torch_home=SYSTEM, realpaths={str(SYSTEM): str(P)}))["cuda_home.consistent"].severity
        == "ok"
    )


@pytest.mark.parametrize(
    ("changes", "severity", "says"),
    [
        (
            {"torch_home": None, "torch_home_source": "nothing (CUDA_HOME/CUDA_PATH unset, …)"},
            "error",
            "torch finds no CUDA_HOME",
        ),
        (
            {"path_nvcc": SYSTEM / "bin/nvcc", "path_nvcc_top": SYSTEM},
            "warning",
            f"`nvcc` on PATH ({SYSTEM}/bin/nvcc) belongs to {SYSTEM}",
        ),
        (
            {"env": {**GREEN.env, "CUDA_PATH": str(SYSTEM)}},
            "warning",
            f"CUDA_HOME={P} and CUDA_PATH={SYSTEM} differ",
        ),
        ({}, "ok", f"torch picks CUDA_HOME={P} (from $CUDA_HOME), the same toolkit as nvcc"),
    ],
)
def test_cuda_home(changes: dict, severity: str, says: str) -> None:
    f = run(green(**changes))["cuda_home.consistent"]
    assert f.severity == severity and says in f.message


def test_system_mode_compares_with_the_toolkit_nvcc_really_runs_from() -> None:
    wrapper = green(prefix=None, mode="system", meta=None, root=Path("/usr/local"), torch_home=Path("/usr/local"),
                    torch_home_source="dirname(dirname(/usr/local/bin/nvcc))",
                    nvcc=Nvcc(Path("/usr/local/bin/nvcc"), "13.0.88", "13.0", SYSTEM))  # fmt: skip
    f = run(wrapper)["cuda_home.consistent"]
    assert f.severity == "error" and f"the toolkit nvcc really runs from ({SYSTEM})" in f.message
    assert f.hint == f"export CUDA_HOME={SYSTEM}"


# ------------------------------------------------------------------------------------- headers


@pytest.mark.parametrize("missing", sorted(HEADERS))
def test_a_missing_header_is_named_with_its_package(missing: str) -> None:
    obs = green(meta=None, files=files(*(INC / h for h in HEADERS if h != missing)))
    got = run(obs)
    assert {c for c, f in got.items() if f.severity == "error"} == {f"header.{missing}"}
    f = got[f"header.{missing}"]
    assert (
        f"{missing} not found" in f.message
        and f.hint == f"add the conda-forge package {HEADERS[missing]} cuda-version=12.6 to {P}"
    )


def test_a_missing_header_on_the_system_names_conda_forge_and_the_nvidia_apt_package() -> None:
    obs = green(prefix=None, mode="system", meta=None, files=files(INC / "cuda_runtime.h"), py=torch_py())
    f = run(obs)["header.cusparse.h"]
    assert f.hint == (
        "install libcusparse-dev cuda-version=12.6 (conda-forge) (NVIDIA apt repo: libcusparse-dev-12-6), "
        "or let envlock build a matched env: envlock resolve --torch installed --python-exe /usr/bin/python3 "
        "--toolchain-only && envlock create"  # the python doctor asked, named (issue 34 item 1): no venv to re-pick
    )


def test_a_header_only_nvcc_sees_is_the_conda_forge_trap() -> None:
    hidden = green(meta=None, host_dirs=(("the host compiler's default", Path("/usr/include")),))
    f = run(hidden)["header.cusparse.h"]
    assert (
        f.severity == "error"
        and f"is in {INC}, which nvcc searches but the host compiler does not" in f.message
    )
    assert f.hint == f'export CPATH="{INC}${{CPATH:+:$CPATH}}"  (or CUDA_INC_PATH={INC})'
    assert run(green(host_dirs=hidden.host_dirs))["header.cusparse.h"].hint.startswith(
        f"envlock run -p {P} --"
    )


@pytest.mark.parametrize(
    ("changes", "checked"),
    [
        ({}, False),
        ({"meta": {**META, "anchor": {**META["anchor"], "cudnn": "9.5.1.17"}}}, True),
        (
            {"meta": {**META, "anchor": {"cudnn": "9.5"}, "activation": {"has_cudnn": False}}},
            False,
        ),  # what create locked
        ({"env": {**GREEN.env, "CUDNN_HOME": "/opt/cudnn"}}, True),
    ],
)
def test_cudnn_h_is_checked_when_the_env_has_cudnn(changes: dict, checked: bool) -> None:
    got = run(green(**changes))
    assert ("header.cudnn.h" in got) == checked
    if checked:
        assert got["header.cudnn.h"].severity == "error"


# ------------------------------------------------------------------------------------- cudart


def _cudart(**probe: object) -> Cudart:
    return Cudart(P / "lib/libcudart.so", "libcudart.so.12", probe)


@pytest.mark.parametrize(
    ("cudart", "severity", "says"),
    [
        (None, "error", f"no libcudart.so under {P} (lib64, lib, targets/*/lib)"),
        (_cudart(soname_error="x", path_error="wrong ELF class"), "error", "does not load: wrong ELF class"),
        (
            _cudart(loaded_by="soname", rc=0, version=13000),
            "error",
            "is CUDA runtime 13.0 but nvcc is 12.6: a mixed toolkit",
        ),
        (_cudart(loaded_by="path", rc=0, version=12060), "warning", "does not find libcudart.so.12 by name"),
        (
            _cudart(loaded_by="soname", rc=0, version=12060),
            "ok",
            f"{P}/lib/libcudart.so loads (CUDA runtime 12.6)",
        ),
        (_cudart(loaded_by="soname", rc=35, version=0), "ok", "loads (cudaRuntimeGetVersion rc=35)"),
    ],
)
def test_cudart(cudart: Cudart | None, severity: str, says: str) -> None:
    f = run(green(cudart=cudart))["cudart.loadable"]
    assert f.severity == severity and says in f.message


# ------------------------------------------------------------------------------------- host compilers


def test_a_gcc_newer_than_nvcc_accepts_is_an_error_with_the_conda_forge_cap() -> None:
    obs = green(
        meta=None,
        compilers=(
            ("nvcc's host compiler", ("gcc",), gcc()),
            ("torch's CXX", ("g++-14",), gcc("14.2.0", "g++-14")),
        ),
    )
    f = run(obs)["host_compiler.version"]
    assert (
        f.severity == "error"
        and f.message == "torch's CXX: g++-14 14.2.0 is newer than gcc 13, the newest nvcc 12.6 accepts"
    )
    assert (
        f.hint
        == "use gcc <= 13: export CC=gcc-13 CXX=g++-13, or add gcc_linux-64<14 gxx_linux-64<14 (conda-forge)"
    )
    assert run(green(compilers=obs.compilers))["host_compiler.version"].hint.startswith(f"envlock run -p {P}")


@pytest.mark.parametrize(
    ("answer", "nvcc", "severity"),
    [
        (Ran(127, "", "FileNotFoundError: cc"), NVCC_12_6, "error"),  # does not run
        (Ran(0, "clang version 19.1.0\n"), NVCC_12_6, "ok"),  # not a gcc: no gcc limit applies
        (gcc(), Nvcc(P / "bin/nvcc", "99.0.1", "99.0", P), "warning"),  # no limit known for this nvcc
    ],
)
def test_host_compiler(answer: Ran, nvcc: Nvcc, severity: str) -> None:
    obs = green(
        nvcc=nvcc, compilers=(("nvcc's host compiler", ("cc",), answer), ("torch's CXX", ("c++",), gcc()))
    )
    assert run(obs)["host_compiler.version"].severity == severity


CXX, CC = "/envs/train/bin/x86_64-conda-linux-gnu-c++", "/envs/train/bin/x86_64-conda-linux-gnu-cc"
SAID = "nvcc warning : incompatible redefinition for option 'compiler-bindir', the last value of this option was used"
CLASH = {**GREEN.env, "NVCC_PREPEND_FLAGS": f"-ccbin={CXX}", "CC": CC}


@pytest.mark.parametrize(
    ("changes", "severity", "says"),
    [
        ({}, "ok", "no -ccbin clash"),
        ({"env": CLASH, "ccbin": Ccbin(0, SAID, "")}, "ok", "but torch is not importable here"),
        ({"env": CLASH, "py": torch_py(), "ccbin": Ccbin(1, "nvcc fatal : redefinition", "")}, "error", "refuses two -ccbin"),
        ({"env": CLASH, "py": torch_py(), "ccbin": Ccbin(0, "", "")}, "ok", "silently"),
        ({"env": CLASH, "py": torch_py(), "ccbin": Ccbin(0, SAID, "", same_gcc(CC), same_gcc(CXX))}, "ok", "same gcc install"),
        ({"env": CLASH, "py": torch_py(), "ccbin": Ccbin(0, SAID, "", same_gcc(CC), same_gcc("/usr/bin/g++", "12.2.0"))},
         "warning", "a different compiler (gcc 13.3.0 in /envs/train/bin vs gcc 12.2.0 in /usr/bin)"),
    ],
)  # fmt: skip
def test_ccbin(changes: dict, severity: str, says: str) -> None:
    f = run(green(**changes))["host_compiler.ccbin"]
    assert f.severity == severity and says in f.message
