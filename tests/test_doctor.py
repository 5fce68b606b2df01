"""`envlock doctor` on constructed prefixes: real files, real shell-script tools, a real compiled libcudart stub.

The nvcc here is a tiny shell script that prints a real-looking `--version`; libcudart is a real shared
library built with the host gcc that answers cudaRuntimeGetVersion; headers are real files in the
conda-forge layout (targets/x86_64-linux/include). The doctor runs them all in subprocesses as it would
for a real environment. Exit codes and output are checked through the CLI in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.output import logical_lines, unfolded

from envlock.doctor import HEADERS, DoctorOptions, Finding, result_json, run_doctor

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("bash") is None,
    reason="needs gcc (to build a stub libcudart) and bash",
)
TARGET = "targets/x86_64-linux"
NO_DRIVER = Path("/nonexistent/proc/driver/nvidia/version")


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def fake_nvcc(path: Path, version: str) -> Path:
    """A shell-script nvcc that prints a `--version` banner shaped like the real one."""
    minor = ".".join(version.split(".")[:2])
    return _script(
        path,
        f"""\
        case "$1" in
          --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"
                     echo "Cuda compilation tools, release {minor}, V{version}";;
          *) echo "fake nvcc: only --version" >&2; exit 1;;
        esac
        """,
    )


@pytest.fixture(scope="session")
def cudart_stub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real shared library exporting cudaRuntimeGetVersion (reports 12.6), soname libcudart.so.12."""
    d = tmp_path_factory.mktemp("cudart")
    src = d / "cudart.c"
    src.write_text("int cudaRuntimeGetVersion(int *v) { *v = 12060; return 0; }\n")
    out = d / "libcudart.so.12.6.77"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(out), str(src)], check=True
    )
    return out


def make_prefix(
    root: Path,
    cudart_stub: Path,
    *,
    nvcc: str | None = "12.6.85",
    headers: tuple[str, ...] = tuple(HEADERS),
    cudart: bool = True,
    activation: bool = True,
    meta: dict | None = None,
) -> Path:
    """A conda-forge-shaped CUDA 12 prefix: bin/nvcc, targets/<arch>/{include,lib}, lib/ symlinks."""
    p = root / "env"
    (p / "conda-meta").mkdir(parents=True)
    (p / "conda-meta" / "history").write_text("")
    if nvcc:
        fake_nvcc(p / "bin" / "nvcc", nvcc)
    inc = p / TARGET / "include"
    inc.mkdir(parents=True)
    for h in headers:
        (inc / h).write_text(f"/* {h} */\n")
    if cudart:
        lib = p / TARGET / "lib"
        lib.mkdir(parents=True)
        shutil.copy(cudart_stub, lib / cudart_stub.name)
        (lib / "libcudart.so.12").symlink_to(cudart_stub.name)
        (lib / "libcudart.so").symlink_to("libcudart.so.12")
        (p / "lib").mkdir()
        for name in ("libcudart.so.12", "libcudart.so"):
            (p / "lib" / name).symlink_to(f"../{TARGET}/lib/{name}")
    if activation:  # what envlock's activation does (DESIGN §6): CUDA_HOME, CPATH, LD_LIBRARY_PATH appended
        act = p / "etc" / "conda" / "activate.d" / "envlock-cuda.sh"
        act.parent.mkdir(parents=True)
        act.write_text(
            textwrap.dedent(f"""\
            export CUDA_HOME="$CONDA_PREFIX"; export CUDA_PATH="$CONDA_PREFIX"
            export CPATH="$CONDA_PREFIX/{TARGET}/include${{CPATH:+:$CPATH}}"
            export LD_LIBRARY_PATH="${{LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}}$CONDA_PREFIX/lib"
            """)
        )
    if meta is not None:
        (p / "conda-meta" / "envlock").write_text(json.dumps(meta))  # what envlock create writes
    return p


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment: no system CUDA on PATH, no CUDA variables, no conda env active."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "LC_ALL", "TMPDIR")}
    return {**keep, "PATH": "/usr/bin:/bin", **extra}


def by_code(findings: list[Finding]) -> dict[str, Finding]:
    return {f.code: f for f in findings}


def doctor(prefix: Path | None, env: dict[str, str], **kw: object) -> dict[str, Finding]:
    opts = DoctorOptions(
        prefix=prefix, environ=env, python_exe=sys.executable, proc_driver_version=NO_DRIVER, **kw
    )
    return by_code(run_doctor(opts))


META = {
    "envlock_version": "0.1.0",
    "lock_path": "locks/train/conda-lock.yml",
    "content_hash": "abc",
    "platform": "linux-64",
    "env_name": "train",
    "anchor": {"torch": "2.6.0", "cuda": "12.6", "cudnn": None, "torch_source": "pip"},
}


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envlock", *args], env=env, capture_output=True, text=True, timeout=300
    )


# ------------------------------------------------------------------------------------------ green


def test_complete_prefix_is_green(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub, meta=META)
    f = doctor(p, base_env(tmp_path))
    errors = {c: x.message for c, x in f.items() if x.severity == "error"}
    assert errors == {}
    assert f["env.target"].details["activation_scripts"] and f["env.target"].details["envlock_env"]
    assert f["nvcc.found"].details["version"] == "12.6.85"
    assert f["nvcc.skew"].severity == "ok" and "matches CUDA 12.6" in f["nvcc.skew"].message
    assert f["cuda_home.consistent"].severity == "ok"
    for h in HEADERS:
        assert f[f"header.{h}"].severity == "ok" and f[f"header.{h}"].details["path"] == str(
            p / TARGET / "include" / h
        )
        assert "CPATH" in f[f"header.{h}"].message
    assert f["cudart.loadable"].severity == "ok" and "CUDA runtime 12.6" in f["cudart.loadable"].message
    assert f["cudart.loadable"].details["loaded_by"] == "soname"  # through the activation's LD_LIBRARY_PATH
    assert f["driver.present"].severity == "warning"  # no GPU here: a warning, never an error


def test_env_activated_by_envlocks_own_activation_is_green(tmp_path: Path, cudart_stub: Path) -> None:
    """`envlock run` applies envlock.seams.activation and marks the prefix in _ENVLOCK_PREFIX (no CONDA_PREFIX)."""
    from envlock.seams.activation import activate_environ

    p = make_prefix(tmp_path, cudart_stub, activation=False, meta=META)
    env = activate_environ(base_env(tmp_path), str(p), "linux-64", torch_source="pip", has_cudnn=False)
    f = doctor(None, env)
    assert f["env.target"].details["mode"] == "prefix" and f["env.target"].details["active"]
    assert {c for c, x in f.items() if x.severity == "error"} == set()
    assert f["header.cusparse.h"].details["path"] == str(p / TARGET / "include" / "cusparse.h")


# ------------------------------------------------------------------------------------------ headers


@pytest.mark.parametrize("missing", sorted(HEADERS))
def test_each_missing_header_is_named_with_its_package(
    tmp_path: Path, cudart_stub: Path, missing: str
) -> None:
    p = make_prefix(tmp_path, cudart_stub, headers=tuple(h for h in HEADERS if h != missing))
    f = doctor(p, base_env(tmp_path))
    bad = {c for c, x in f.items() if x.severity == "error"}
    assert bad == {f"header.{missing}"}
    assert f"{missing} not found" in f[f"header.{missing}"].message
    assert HEADERS[missing] in (f[f"header.{missing}"].hint or "")


def test_missing_header_in_envlock_env_names_the_envlock_command(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub, headers=("cuda_runtime.h", "cuda_runtime_api.h"), meta=META)
    f = doctor(p, base_env(tmp_path))
    assert f["header.cusparse.h"].severity == "error"
    assert f["header.cusparse.h"].hint.startswith(f"envlock create --lock locks/train/conda-lock.yml -p {p}")


def test_header_only_in_targets_is_the_conda_forge_trap(tmp_path: Path, cudart_stub: Path) -> None:
    """Without the activation's CPATH the host compiler does not see targets/<arch>/include."""
    p = make_prefix(tmp_path, cudart_stub, activation=False)
    f = doctor(p, base_env(tmp_path, CUDA_HOME=str(tmp_path / "env")))
    trap = f["header.cusparse.h"]
    assert trap.severity == "error"
    assert str(p / TARGET / "include") in trap.message and "host compiler does not" in trap.message
    assert "CPATH" in (trap.hint or "")


def test_cudnn_header_is_checked_when_the_anchor_has_cudnn(tmp_path: Path, cudart_stub: Path) -> None:
    meta = {**META, "anchor": {**META["anchor"], "cudnn": "9.5.1.17"}}
    p = make_prefix(tmp_path, cudart_stub, meta=meta)
    f = doctor(p, base_env(tmp_path))
    assert f["header.cudnn.h"].severity == "error" and "cudnn" in (f["header.cudnn.h"].hint or "")


# ------------------------------------------------------------------------------------------ nvcc


def test_no_nvcc_in_prefix(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub, nvcc=None)
    f = doctor(p, base_env(tmp_path))
    assert f["nvcc.found"].severity == "error" and "cuda-nvcc" in (f["nvcc.found"].hint or "")


@pytest.mark.parametrize(
    ("nvcc", "anchor", "skew", "deepspeed"),
    [
        ("13.0.88", "12.6", "error", "warning"),  # major mismatch: torch's builder refuses
        ("12.9.86", "12.6", "warning", "ok"),  # 3 minors away: torch warns; DeepSpeed takes any 12.x pair
        ("12.8.93", "12.6", "warning", "ok"),  # 12.7 was never released, but the window stays ±1 numerically
        ("13.1.80", "13.0", "ok", "warning"),  # ±1 ok for torch, DeepSpeed wants an exact 13.x minor
        ("12.5.82", "12.6", "ok", "ok"),
    ],
)
def test_nvcc_skew_against_the_lock_anchor(
    tmp_path: Path, cudart_stub: Path, nvcc: str, anchor: str, skew: str, deepspeed: str
) -> None:
    meta = {**META, "anchor": {**META["anchor"], "cuda": anchor}}
    p = make_prefix(tmp_path, cudart_stub, nvcc=nvcc, meta=meta)
    f = doctor(p, base_env(tmp_path))
    assert (f["nvcc.skew"].severity, f["nvcc.deepspeed"].severity) == (skew, deepspeed)
    if skew != "ok":  # the prefix has no python of its own: the toolchain is re-planned beside torch
        assert f["nvcc.skew"].hint == "envlock resolve --torch 2.6.0 --toolchain-only && envlock create"


# ------------------------------------------------------------------------------------------ CUDA_HOME


def test_cuda_home_pointing_elsewhere_than_the_env(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub, activation=False)
    other = tmp_path / "stale-cuda"
    fake_nvcc(other / "bin" / "nvcc", "11.8.89")
    f = doctor(p, base_env(tmp_path, CUDA_HOME=str(other)))
    c = f["cuda_home.consistent"]
    assert c.severity == "error" and f"CUDA_HOME={other}" in c.message and str(p) in c.message
    assert c.details["picked_from"] == "$CUDA_HOME"
    assert "envlock run -p" in (c.hint or "")


def test_nvcc_on_path_from_another_toolkit_than_cuda_home(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub)
    other = tmp_path / "other-cuda"
    fake_nvcc(other / "bin" / "nvcc", "12.4.131")
    env = base_env(tmp_path, PATH=f"{other / 'bin'}:/usr/bin:/bin", CUDA_HOME=str(p), CONDA_PREFIX=str(p))
    f = doctor(p, env)  # active env (CONDA_PREFIX == p): the environment is taken as it is
    c = f["cuda_home.consistent"]
    assert c.severity == "warning" and str(other / "bin" / "nvcc") in c.message


def test_system_mode_follows_torch_find_cuda_home(tmp_path: Path, cudart_stub: Path) -> None:
    """No prefix: dirname(dirname(which nvcc)) is the toolkit, as in torch."""
    p = make_prefix(tmp_path, cudart_stub, activation=False)
    f = doctor(None, base_env(tmp_path, PATH=f"{p / 'bin'}:/usr/bin:/bin", CPATH=str(p / TARGET / "include")))
    assert f["env.target"].details["mode"] == "system"
    assert f["cuda_home.consistent"].details["torch_would_pick"] == str(p)
    assert f["header.cusparse.h"].severity == "ok"


# ------------------------------------------------------------------------------------------ cudart


def test_libcudart_absent(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub, cudart=False, meta=META)
    f = doctor(p, base_env(tmp_path))
    assert f["cudart.loadable"].severity == "error"
    assert f["cudart.loadable"].hint.startswith("envlock create --lock locks/train/conda-lock.yml")


def test_libcudart_not_on_the_loader_path_is_a_warning(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub, activation=False)
    f = doctor(p, base_env(tmp_path, CUDA_HOME=str(p), CPATH=str(p / TARGET / "include")))
    c = f["cudart.loadable"]
    assert c.severity == "warning" and c.details["loaded_by"] == "path" and "libcudart.so.12" in c.message


# ------------------------------------------------------------------------------------------ host compiler


@pytest.mark.parametrize("var", ["CXX", "CC"])
def test_gcc_too_new_for_nvcc(tmp_path: Path, cudart_stub: Path, var: str) -> None:
    p = make_prefix(tmp_path, cudart_stub)  # nvcc 12.6: gcc <= 13
    gxx = _script(
        tmp_path / "bin" / "g++-14",
        """\
        case "$1" in --version) echo "g++-14 (GCC) 14.2.0"; echo "Copyright (C) 2024 Free Software Foundation, Inc.";;
        *) exit 1;; esac
        """,
    )
    f = doctor(p, base_env(tmp_path, **{var: str(gxx)}))
    h = f["host_compiler.version"]
    assert h.severity == "error" and "14.2.0" in h.message and "gcc 13" in h.message
    assert h.details["gcc_max"] == 13
    assert "gxx_linux-64<14" in (h.hint or "")


# ------------------------------------------------------------------------------------------ LD_LIBRARY_PATH


def _fake_site(tmp_path: Path, version: str = "12.6.85") -> Path:
    """site-packages with pip's nvidia-nvjitlink-cu12 layout (nvidia/nvjitlink/lib + dist-info RECORD)."""
    site = tmp_path / "site"
    lib = site / "nvidia" / "nvjitlink" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvJitLink.so.12").write_bytes(b"\x7fELF pip copy")
    dist = site / f"nvidia_nvjitlink_cu12-{version}.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text("nvidia/nvjitlink/lib/libnvJitLink.so.12,sha256=x,14\n")
    return site


def _ld_dir(tmp_path: Path, real: str) -> Path:
    d = tmp_path / "old-cuda-lib"
    d.mkdir()
    (d / real).write_bytes(b"\x7fELF older copy")
    (d / "libnvJitLink.so.12").symlink_to(real)
    return d


def test_older_nvjitlink_on_ld_library_path_is_an_error(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub)
    site, old = _fake_site(tmp_path), _ld_dir(tmp_path, "libnvJitLink.so.12.4.127")
    f = doctor(p, base_env(tmp_path, PYTHONPATH=str(site), LD_LIBRARY_PATH=str(old)))
    s = f["ld_library_path.shadowing"]
    assert s.severity == "error"
    assert str(old / "libnvJitLink.so.12") in s.message and "12.4.127" in s.message and "12.6.85" in s.message
    assert "__nvJitLinkComplete_12_6" in s.message


def test_older_patch_of_the_same_minor_is_a_warning(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub)
    site, old = _fake_site(tmp_path), _ld_dir(tmp_path, "libnvJitLink.so.12.6.20")
    f = doctor(p, base_env(tmp_path, PYTHONPATH=str(site), LD_LIBRARY_PATH=str(old)))
    s = f["ld_library_path.shadowing"]
    assert s.severity == "warning" and "12.6.20" in s.message and "same minor" in s.message


def test_pip_copy_on_ld_library_path_is_versioned_from_its_record(tmp_path: Path, cudart_stub: Path) -> None:
    """Another venv's site-packages/nvidia/*/lib has no version in file names: the wheel's RECORD says it."""
    p = make_prefix(tmp_path, cudart_stub)
    site = _fake_site(tmp_path)
    other = _fake_site(tmp_path / "other-venv", version="12.3.101")
    lib = other / "nvidia" / "nvjitlink" / "lib"
    f = doctor(p, base_env(tmp_path, PYTHONPATH=str(site), LD_LIBRARY_PATH=str(lib)))
    s = f["ld_library_path.shadowing"]
    assert s.severity == "error" and "12.3.101" in s.message and "__nvJitLinkComplete_12_6" in s.message


def test_libraries_of_another_version_scheme_are_not_called_older(tmp_path: Path, cudart_stub: Path) -> None:
    """Seen on the H200: libnvtx3interop.so.1.1.0 (own scheme) beside wheel 13.0.85 is no hazard."""
    p = make_prefix(tmp_path, cudart_stub)
    site = _fake_site(tmp_path, version="13.0.88")
    nvtx = site / "nvidia" / "nvjitlink" / "lib" / "libnvtx3interop.so.1"
    nvtx.write_bytes(b"\x7fELF")
    rec = site / "nvidia_nvjitlink_cu12-13.0.88.dist-info" / "RECORD"
    rec.write_text(rec.read_text() + "nvidia/nvjitlink/lib/libnvtx3interop.so.1,sha256=x,4\n")
    d = tmp_path / "sys-cuda-lib"
    d.mkdir()
    (d / "libnvtx3interop.so.1.1.0").write_bytes(b"\x7fELF")
    (d / "libnvtx3interop.so.1").symlink_to("libnvtx3interop.so.1.1.0")
    f = doctor(p, base_env(tmp_path, PYTHONPATH=str(site), LD_LIBRARY_PATH=str(d)))
    assert f["ld_library_path.shadowing"].severity == "ok"


def test_newer_lib_on_ld_library_path_is_fine(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub)
    site, new = _fake_site(tmp_path), _ld_dir(tmp_path, "libnvJitLink.so.12.8.93")
    f = doctor(p, base_env(tmp_path, PYTHONPATH=str(site), LD_LIBRARY_PATH=str(new)))
    assert f["ld_library_path.shadowing"].severity == "ok"


# ------------------------------------------------------------------------------------------ driver


def test_no_nvidia_smi_is_a_warning(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub)
    f = doctor(p, base_env(tmp_path))
    assert f["driver.present"].severity == "warning" and "no NVIDIA driver" in f["driver.present"].message
    assert f["driver.version"].severity == "skipped"  # not checked: its own state, not "ok"


@pytest.mark.parametrize(
    ("driver", "severity"), [("470.82.01", "error"), ("550.54.14", "warning"), ("560.35.03", "ok")]
)
def test_driver_version_against_the_cuda_runtime(
    tmp_path: Path, cudart_stub: Path, driver: str, severity: str
) -> None:
    p = make_prefix(tmp_path, cudart_stub)  # cudart reports 12.6: minor compat from 525, full from 560.28.03
    smi = _script(tmp_path / "drv" / "nvidia-smi", f'echo "{driver}, NVIDIA H200"\n')
    f = doctor(p, base_env(tmp_path, PATH=f"{smi.parent}:/usr/bin:/bin"))
    assert f["driver.present"].severity == "ok" and driver in f["driver.present"].message
    assert f["driver.version"].severity == severity


def test_driver_from_proc_when_nvidia_smi_is_absent(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub)
    proc = tmp_path / "version"
    proc.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release Build  (dvs-builder)\n"
    )
    opts = DoctorOptions(
        prefix=p, environ=base_env(tmp_path), python_exe=sys.executable, proc_driver_version=proc
    )
    f = by_code(run_doctor(opts))
    assert f["driver.present"].severity == "ok" and "580.159.03" in f["driver.present"].message


# ------------------------------------------------------------------------------------------ CLI


def test_cli_json_schema_and_exit_codes(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub, meta=META)
    env = base_env(tmp_path, PYTHONPATH=os.pathsep.join(sys.path))
    green = cli("doctor", "-p", str(p), "--json", "--python-exe", sys.executable, env=env)
    assert green.returncode == 0, green.stderr
    doc = json.loads(green.stdout)
    assert doc["doctor_result_version"] == 2 and doc["exit_code"] == 0
    codes = [f["code"] for f in doc["findings"]]
    assert len(codes) == len(set(codes))
    for f in doc["findings"]:
        assert set(f) == {"code", "severity", "message", "hint", "details"}
        assert f["severity"] in ("ok", "info", "skipped", "warning", "error") and isinstance(f["details"], dict)
    assert {
        "env.target",
        "torch.found",
        "nvcc.found",
        "nvcc.skew",
        "nvcc.deepspeed",
        "cuda_home.consistent",
        "header.cusparse.h",
        "cudart.loadable",
        "host_compiler.version",
        "driver.present",
        "driver.version",
        "ld_library_path.shadowing",
    } <= set(codes)
    assert doc["summary"]["error"] == 0 and sum(doc["summary"].values()) == len(codes)

    (p / TARGET / "include" / "cusparse.h").unlink()
    broken = cli("doctor", "-p", str(p), "--python-exe", sys.executable, env=env)
    assert broken.returncode == 1
    line = next(ln for ln in broken.stdout.splitlines() if "header.cusparse.h" in ln)
    assert line.startswith("error")
    # one line per check; the whole message and the fix under "what to do", said once
    advice = " ".join(broken.stdout.split("what to do:", 1)[1].split())
    fix = advice.split("header.cusparse.h (error):", 1)[1].split("fix: ", 1)[1]
    assert fix.startswith("envlock create --lock locks/train/conda-lock.yml")
    assert max(len(ln) for ln in broken.stdout.splitlines()) <= 80


def test_result_json_matches_findings() -> None:
    findings = [Finding("a.b", "ok", "fine"), Finding("c.d", "warning", "hmm", hint="do x", details={"k": 1})]
    doc = result_json(findings)
    assert doc["exit_code"] == 0 and doc["summary"] == {"ok": 1, "info": 0, "skipped": 0, "warning": 1, "error": 0}
    assert doc["findings"][1] == {
        "code": "c.d",
        "severity": "warning",
        "message": "hmm",
        "hint": "do x",
        "details": {"k": 1},
    }


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_bad_prefix_is_an_error_line_not_a_traceback(tmp_path: Path, kind: str, as_json: bool) -> None:
    prefix = tmp_path / "nope"
    if kind == "empty":
        prefix.mkdir()
    r = cli(
        "doctor",
        "-p",
        str(prefix),
        *(["--json"] if as_json else []),
        env=base_env(tmp_path, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert r.returncode == 1
    assert "Traceback" not in r.stdout + r.stderr
    if as_json:
        doc = json.loads(r.stdout)
        assert str(prefix) in doc["error"] and doc["hint"]
    else:
        assert unfolded(r.stderr).startswith(f"error: prefix {prefix}") and "\nhint: " in r.stderr


def test_doctor_never_imports_rattler_or_conda_lock(tmp_path: Path, cudart_stub: Path) -> None:
    p = make_prefix(tmp_path, cudart_stub)
    code = (
        "import sys, json\nfrom envlock.cli import run\n"
        f"rc = run(['doctor', '-p', {str(p)!r}, '--json', '--python-exe', sys.executable])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('rattler', 'conda_lock', 'torch', 'requests'))\n"
        "print('HEAVY=' + json.dumps(heavy))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=base_env(tmp_path, PYTHONPATH=os.pathsep.join(sys.path)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    heavy = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("HEAVY="))[len("HEAVY=") :])
    assert heavy == []


# ------------------------------------------------------- not checked: its own state, -n, hints without torch


def test_checks_that_could_not_run_are_skipped_not_ok_in_text_and_json(tmp_path: Path, cudart_stub: Path) -> None:
    """No driver, no GPU, no torch: those checks say `skipped` with the reason; the exit code does not change."""
    p = make_prefix(tmp_path, cudart_stub, meta=META)
    env = base_env(tmp_path, PYTHONPATH=os.pathsep.join(sys.path))  # this python: no torch
    text = cli("doctor", "-p", str(p), "--python-exe", sys.executable, "--compile", env=env)
    doc = json.loads(cli("doctor", "-p", str(p), "--python-exe", sys.executable, "--compile", "--json", env=env).stdout)
    skipped = {f["code"]: f["message"] for f in doc["findings"] if f["severity"] == "skipped"}
    assert {"driver.version", "compile.torch_extension", "gpu.arch.nvcc"} <= set(skipped), skipped
    assert "torch is not importable" in skipped["compile.torch_extension"]
    assert doc["summary"]["skipped"] == len(skipped) and doc["doctor_result_version"] == 2
    lines = text.stdout.splitlines()

    def says(ln: str, code: str, message: str) -> bool:  # a line is cut to 80 columns with "…" (--json has it all)
        shown = ln.split(code, 1)[1].strip() if code in ln else ""
        return ln.startswith("skipped") and bool(shown) and message.startswith(shown.removesuffix("…"))

    for code, message in skipped.items():
        assert any(says(ln, code, message) for ln in lines), (code, text.stdout)
    assert lines[-1].endswith(f"{len(skipped)} skipped")
    # Not a problem: skipped checks leave the verdict (and the exit code) to the others.
    assert text.returncode == doc["exit_code"] == (1 if doc["summary"]["error"] else 0)
    assert not any(f["severity"] == "ok" and "not checked" in f["message"] for f in doc["findings"])


def test_doctor_n_names_an_env_under_the_envs_dir(tmp_path: Path, cudart_stub: Path) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    p = make_prefix(tmp_path, cudart_stub, meta=META)
    p.rename(envs / "train")
    env = base_env(tmp_path, PYTHONPATH=os.pathsep.join(sys.path), ENVLOCK_ENVS_DIR=str(envs))
    by_n = json.loads(cli("doctor", "-n", "train", "--json", "--python-exe", sys.executable, env=env).stdout)
    by_p = json.loads(cli("doctor", "-p", str(envs / "train"), "--json", "--python-exe", sys.executable, env=env).stdout)
    assert by_n["findings"] == by_p["findings"]
    assert by_n["findings"][0]["details"]["prefix"] == str(envs / "train")
    missing = cli("doctor", "-n", "nope", env=env)
    assert missing.returncode == 1 and logical_lines(missing.stderr)[0] == f"error: no environment named nope in {envs}"
    both = cli("doctor", "-n", "train", "-p", str(envs / "train"), env=env)
    assert both.returncode == 2 and both.stderr.startswith("error: give either -p/--prefix or -n/--name")


def test_without_torch_the_hint_does_not_say_torch_installed(tmp_path: Path) -> None:
    """No toolkit and no torch: `--torch installed` would fail (nothing installed to ask), so name a version."""
    toolkit = tmp_path / "cuda"  # CUDA_HOME at a folder without nvcc (system mode, no conda env)
    (toolkit / "include").mkdir(parents=True)
    env = base_env(tmp_path, PYTHONPATH=os.pathsep.join(sys.path), CUDA_HOME=str(toolkit))
    doc = json.loads(cli("doctor", "--json", "--python-exe", sys.executable, env=env).stdout)
    nvcc = next(f for f in doc["findings"] if f["code"] == "nvcc.found")
    assert nvcc["severity"] == "error"
    from envlock.core.tables import torch_for_hint

    torch = torch_for_hint()[0]  # a release envlock knows (issue 34.5: no VERSION placeholder)
    assert f"envlock resolve --torch {torch} " in nvcc["hint"] and "--torch installed" not in nvcc["hint"]
