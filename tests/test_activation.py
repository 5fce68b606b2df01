"""Activation scripts: pure rendering, Python/shell agreement in real shells, goldens for Windows."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.seams.activation import (
    CHANGED,
    ActivationSpec,
    activate_environ,
    deactivate_environ,
    env_ops,
    hook_files,
    render_scripts,
    shell_hook,
)

GOLDEN = Path(__file__).parent / "data" / "golden" / "activation"
#: A prefix that breaks naive quoting: space, both quotes' worth of shell syntax, $, backticks.
NASTY = "env x'q$(touch PWNED)`touch PWNED2`$HOME"
POSIX_SHELLS = ["bash", "zsh", "dash", "fish"]


def _shell(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed here (.ci/run installs zsh and fish)")
    return path


def make_prefix(root: Path, name: str = NASTY, targets: str = "x86_64-linux") -> Path:
    """A directory shaped like a conda-forge CUDA env: conda-meta, bin, targets/<t>/include."""
    prefix = root / name
    for sub in ("conda-meta", "bin", "lib", f"targets/{targets}/include", f"targets/{targets}/lib/stubs"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    (prefix / f"targets/{targets}/include/cusparse.h").write_text("#define CUSPARSE_VER_MAJOR 12\n")
    return prefix


def snapshots(shell: str, steps: list[str], env: dict[str, str], tmp: Path) -> list[dict[str, str]]:
    """Run `steps` in ONE real shell process and return the exported environment after each step."""
    lines: list[str] = []
    for i, step in enumerate(steps):
        lines += [step, f"/usr/bin/env -0 > '{tmp}/snap{i}'"]
    proc = subprocess.run([shell, "-c", "\n".join(lines)], env=env, capture_output=True, text=True, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    out = []
    for i in range(len(steps)):
        raw = (tmp / f"snap{i}").read_bytes().decode()
        pairs = (item.split("=", 1) for item in raw.split("\0") if item)
        out.append({k: v for k, v in pairs if k not in ("_", "SHLVL", "PWD", "OLDPWD")})
    return out


def write_scripts(dest: Path, spec: ActivationSpec, shells: tuple[str, ...] = ("sh", "fish")) -> None:
    for name, text in render_scripts(spec, shells).items():
        (dest / name).write_text(text)


def _src(shell: str, script: str, *args: str) -> str:
    ext = "fish" if shell.endswith("fish") else "sh"
    return " ".join([".", f"./{script}.{ext}", *args])


BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/nonexistent-home",
    "CPATH": "",  # set but empty: must come back empty, not unset
    "LIBRARY_PATH": "/opt/other/lib",
    "CUDA_HOME": "/usr/local/cuda-11.8",  # an old value that deactivation must restore
    "CC": "x86_64-conda-linux-gnu-cc",
    "NVCC_PREPEND_FLAGS": "-ccbin=x86_64-conda-linux-gnu-c++",
}


# --------------------------------------------------------------------------- pure rules


def test_pip_torch_appends_libs_conda_forge_prepends() -> None:
    pip = {(o.var, o.action) for o in env_ops("linux-64", "pip")}
    cf = {(o.var, o.action) for o in env_ops("linux-64", "conda-forge")}
    assert ("LD_LIBRARY_PATH", "append") in pip and ("LIBRARY_PATH", "append") in pip
    assert ("LD_LIBRARY_PATH", "prepend") in cf and ("LIBRARY_PATH", "prepend") in cf
    env = activate_environ({"LD_LIBRARY_PATH": "/torch/nvidia/lib"}, "/p", "linux-64", torch_source="pip")
    assert env["LD_LIBRARY_PATH"] == "/torch/nvidia/lib:/p/lib"
    env = activate_environ({"LD_LIBRARY_PATH": "/torch/nvidia/lib"}, "/p", "linux-64", torch_source="conda-forge")
    assert env["LD_LIBRARY_PATH"] == "/p/lib:/torch/nvidia/lib"


def test_linux_values() -> None:
    env = activate_environ({"PATH": "/usr/bin"}, "/p/", "linux-aarch64", has_cudnn=True)
    assert env["CUDA_HOME"] == env["CUDA_PATH"] == env["CUDNN_HOME"] == "/p"
    assert env["PATH"] == "/p/bin:/usr/bin"
    assert env["CPATH"] == env["CUDA_INC_PATH"] == "/p/targets/sbsa-linux/include"
    assert env["LIBRARY_PATH"] == "/p/lib:/p/targets/sbsa-linux/lib:/p/targets/sbsa-linux/lib/stubs"
    assert "CUDNN_HOME" not in activate_environ({}, "/p", "linux-64", has_cudnn=False)


def test_windows_values() -> None:
    env = activate_environ({"PATH": r"C:\Windows"}, "C:\\envs\\cu 12\\", "win-64", has_cudnn=True)
    assert env["CUDA_HOME"] == env["CUDA_PATH"] == env["CUDNN_HOME"] == r"C:\envs\cu 12\Library"
    assert env["PATH"] == r"C:\envs\cu 12\Library\bin;C:\Windows"
    assert env["INCLUDE"] == r"C:\envs\cu 12\Library\include"
    assert env["LIB"] == r"C:\envs\cu 12\Library\lib"
    assert "LD_LIBRARY_PATH" not in env and "CPATH" not in env


def test_entry_on_path_already_is_not_added_twice() -> None:
    env = activate_environ({"PATH": "/p/bin:/usr/bin"}, "/p", "linux-64")
    assert env["PATH"] == "/p/bin:/usr/bin"
    assert deactivate_environ(env)["PATH"] == "/p/bin:/usr/bin"


def test_activation_leaves_compiler_variables_alone() -> None:
    """CC/CXX/NVCC_PREPEND_FLAGS belong to conda-forge's activation (see the module docstring)."""
    env = activate_environ(BASE_ENV, "/p", "linux-64")
    for var in ("CC", "NVCC_PREPEND_FLAGS"):
        assert env[var] == BASE_ENV[var]
    assert {"CC", "CXX", "NVCC_PREPEND_FLAGS"}.isdisjoint(env[CHANGED].split())


_values = st.one_of(st.none(), st.text(alphabet="/:ab $'", max_size=12))


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries({v: _values for v in ("PATH", "CPATH", "LIBRARY_PATH", "LD_LIBRARY_PATH", "CUDA_HOME",
                                                "CUDNN_HOME", "CUDA_INC_PATH")}),
    st.sampled_from(["linux-64", "linux-aarch64", "win-64"]),
    st.sampled_from(["pip", "conda-forge"]),
    st.booleans(),
)
def test_activate_deactivate_roundtrip(
    raw: dict[str, str | None], platform: str, torch_source: str, cudnn: bool
) -> None:
    environ = {k: v for k, v in raw.items() if v is not None}
    win = platform.startswith("win-")
    once = activate_environ(environ, "/p q", platform, torch_source=torch_source, has_cudnn=cudnn)
    assert activate_environ(once, "/p q", platform, torch_source=torch_source, has_cudnn=cudnn) == once
    if win:  # Windows has no empty variables: an empty list is gone after any round trip
        environ = {k: v for k, v in environ.items() if v or k not in ("PATH",)}
    assert deactivate_environ(once, win) == environ
    other = activate_environ(once, "/other", platform, torch_source=torch_source, has_cudnn=cudnn)
    assert other == activate_environ(environ, "/other", platform, torch_source=torch_source, has_cudnn=cudnn)
    assert deactivate_environ(other, win) == environ


def test_render_scripts_per_platform() -> None:
    assert set(render_scripts(ActivationSpec(("linux-64", "linux-aarch64")))) == {"activate.sh", "deactivate.sh"}
    both = render_scripts(ActivationSpec(("linux-64", "win-64")))
    assert set(both) == {"activate.sh", "deactivate.sh", "activate.ps1", "deactivate.ps1",
                         "activate.bat", "deactivate.bat"}
    assert set(render_scripts(ActivationSpec(("win-64",)))) == {"activate.ps1", "deactivate.ps1",
                                                                "activate.bat", "deactivate.bat"}
    assert "\r\n" in both["activate.bat"] and "\r\n" in both["activate.ps1"]


def test_hook_files_paths() -> None:
    assert set(hook_files("linux-64", "/p")) == {
        "etc/conda/activate.d/envlock-cuda.sh", "etc/conda/deactivate.d/envlock-cuda.sh",
        "etc/conda/activate.d/envlock-cuda.fish", "etc/conda/deactivate.d/envlock-cuda.fish",
    }
    assert set(hook_files("win-64", "C:\\p")) == {
        "etc/conda/activate.d/envlock-cuda.ps1", "etc/conda/deactivate.d/envlock-cuda.ps1",
        "etc/conda/activate.d/envlock-cuda.bat", "etc/conda/deactivate.d/envlock-cuda.bat",
    }


def test_shell_hook_refuses_mismatched_shell() -> None:
    with pytest.raises(ValueError):
        shell_hook("cmd", "linux-64", "/p")
    with pytest.raises(ValueError):
        shell_hook("bash", "win-64", "C:\\p")
    with pytest.raises(ValueError):
        shell_hook("tcsh", "linux-64", "/p")


# --------------------------------------------------------------------------- real shells


@pytest.mark.parametrize("shell", POSIX_SHELLS)
@pytest.mark.parametrize("torch_source", ["pip", "conda-forge"])
def test_real_shell_matches_python_and_restores(tmp_path: Path, shell: str, torch_source: str) -> None:
    """Installed hook: activate, activate again (no change), deactivate (back to the start, exactly)."""
    exe = _shell(shell)
    prefix = make_prefix(tmp_path)
    for rel, text in hook_files("linux-64", str(prefix), torch_source, True).items():
        kind = rel.split("/")[2].removesuffix(".d")
        (tmp_path / f"{kind}.{rel.rsplit('.', 1)[1]}").write_text(text)
    steps = ["true", _src(exe, "activate"), _src(exe, "activate"), _src(exe, "deactivate")]
    base, once, twice, after = snapshots(exe, steps, BASE_ENV, tmp_path)
    assert once == activate_environ(base, str(prefix), "linux-64", torch_source=torch_source, has_cudnn=True)
    assert once["CUDA_HOME"] == str(prefix)
    assert twice == once
    assert after == base
    assert after["CPATH"] == "" and "LD_LIBRARY_PATH" not in after
    assert not list(tmp_path.rglob("PWNED*")), "the prefix path was executed as code"


@pytest.mark.parametrize("shell", ["bash", "zsh", "dash"])
def test_sh_is_safe_under_set_u(tmp_path: Path, shell: str) -> None:
    exe = _shell(shell)
    prefix = make_prefix(tmp_path, "with space")
    write_scripts(tmp_path, ActivationSpec(("linux-64",), prefix=str(prefix)), ("sh",))
    env = {"PATH": "/usr/bin:/bin"}  # everything else unset
    steps = ["set -eu", ". ./activate.sh", ". ./activate.sh", ". ./deactivate.sh", ". ./deactivate.sh"]
    base, once, twice, after, again = snapshots(exe, steps, env, tmp_path)
    assert once["CPATH"] == f"{prefix}/targets/x86_64-linux/include" and twice == once
    assert after == base == again


def test_switching_prefix_restores_first(tmp_path: Path) -> None:
    bash = _shell("bash")
    a, b = make_prefix(tmp_path, "a"), make_prefix(tmp_path, "b b")
    write_scripts(tmp_path, ActivationSpec(("linux-64",)), ("sh",))
    steps = ["true", ". ./activate.sh " + str(a), f". ./activate.sh '{b}'", ". ./deactivate.sh"]
    base, in_a, in_b, after = snapshots(bash, steps, BASE_ENV, tmp_path)
    assert in_a["CUDA_HOME"] == str(a)
    assert in_b == activate_environ(base, str(b), "linux-64")
    assert str(a) not in in_b["PATH"]
    assert after == base


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_lock_script_takes_prefix_from_argument_env_or_conda(tmp_path: Path, shell: str) -> None:
    exe = _shell(shell)
    prefix = make_prefix(tmp_path, "p q")
    write_scripts(tmp_path, ActivationSpec(("linux-64",)))
    q = f"'{prefix}/'"  # a trailing slash is dropped
    set_var = f"set -gx ENVLOCK_PREFIX {q}; " if shell == "fish" else f"ENVLOCK_PREFIX={q}; "
    ways = [set_var + _src(exe, "activate")]
    if shell != "dash":  # POSIX `.` takes no arguments (documented in the script header)
        ways.append(_src(exe, "activate", q))
    for how in ways:
        (once,) = snapshots(exe, [how], {**BASE_ENV}, tmp_path)
        assert once["CUDA_HOME"] == str(prefix), how
    (once,) = snapshots(exe, [_src(exe, "activate")], {**BASE_ENV, "CONDA_PREFIX": str(prefix)}, tmp_path)
    assert once["CPATH"] == f"{prefix}/targets/x86_64-linux/include"


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_lock_script_without_prefix_fails_clearly(tmp_path: Path, shell: str) -> None:
    exe = _shell(shell)
    write_scripts(tmp_path, ActivationSpec(("linux-64",)))
    status = "$status" if shell == "fish" else "$?"
    env = {"PATH": "/usr/bin:/bin", "ENVLOCK_PREFIX": "/no/such/env"}
    proc = subprocess.run([exe, "-c", _src(exe, "activate") + f"; echo after={status}"],
                          env=env, capture_output=True, text=True, cwd=tmp_path)
    assert "no conda environment at '/no/such/env'" in proc.stderr
    assert "after=1" in proc.stdout
    assert "CUDA_HOME" not in proc.stdout


@pytest.mark.parametrize("shell", ["bash", "fish"])
def test_multi_platform_lock_script_asks_the_machine(tmp_path: Path, shell: str) -> None:
    """A lock for linux-64 + linux-aarch64: `uname -m` picks targets/sbsa-linux on aarch64."""
    exe = _shell(shell)
    prefix = make_prefix(tmp_path, "arm", targets="sbsa-linux")
    write_scripts(tmp_path, ActivationSpec(("linux-64", "linux-aarch64")))
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "uname").write_text("#!/bin/sh\necho aarch64\n")
    (fake / "uname").chmod(0o755)
    env = {**BASE_ENV, "PATH": f"{fake}:/usr/bin:/bin"}
    (arm,) = snapshots(exe, [_src(exe, "activate", str(prefix))], env, tmp_path)
    assert arm["CPATH"] == f"{prefix}/targets/sbsa-linux/include"
    (x86,) = snapshots(exe, [_src(exe, "activate", str(prefix))], BASE_ENV, tmp_path)
    assert x86["CPATH"] == f"{prefix}/targets/x86_64-linux/include"


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_gcc_finds_cusparse_only_while_active(tmp_path: Path, shell: str) -> None:
    exe = _shell(shell)
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    prefix = make_prefix(tmp_path)
    write_scripts(tmp_path, ActivationSpec(("linux-64",), prefix=str(prefix)))
    probe = "printf '#include <cusparse.h>\\n' | gcc -E -x c - > /dev/null 2>&1; echo gcc=$status"
    if shell != "fish":
        probe = probe.replace("$status", "$?")
    script = "\n".join([probe, _src(exe, "activate"), probe, _src(exe, "deactivate"), probe])
    out = subprocess.run([exe, "-c", script], env=BASE_ENV, capture_output=True, text=True, cwd=tmp_path).stdout
    assert out.split() == ["gcc=1", "gcc=0", "gcc=1"]


# --------------------------------------------------------------------------- golden files (PowerShell, cmd, sh)

GOLDEN_CASES = {
    "win-fixed": ActivationSpec(("win-64",), "pip", True, "C:\\Users\\O'Brien\\envs\\cu 12 100%&(x86)\\"),
    "win-lock": ActivationSpec(("linux-64", "win-64"), "pip", False, None),
    "linux-lock": ActivationSpec(("linux-64", "linux-aarch64"), "conda-forge", True, None),
}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(case: str) -> None:
    """Byte-for-byte goldens; regenerate with ENVLOCK_UPDATE_GOLDEN=1 after reviewing the diff."""
    rendered = render_scripts(GOLDEN_CASES[case], ("sh", "fish", "powershell", "cmd"))
    rewritten = []
    for name, text in rendered.items():
        path = GOLDEN / case / name
        data = text.encode()
        if os.environ.get("ENVLOCK_UPDATE_GOLDEN") and (not path.exists() or path.read_bytes() != data):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            rewritten.append(name)
            continue
        assert path.read_bytes() == data, f"{path} differs from the renderer"
    if rewritten:  # a rewritten golden proves nothing: fail, so the diff is reviewed and the test rerun
        pytest.fail(f"{case}: {', '.join(rewritten)} rewritten (ENVLOCK_UPDATE_GOLDEN): review `git diff`, rerun")


def test_golden_windows_escaping() -> None:
    """The fixed prefix is a literal in both Windows shells: ' doubled for PowerShell, % doubled for cmd."""
    ps1 = (GOLDEN / "win-fixed" / "activate.ps1").read_text()
    bat = (GOLDEN / "win-fixed" / "activate.bat").read_text()
    assert "$_envlock_p = 'C:\\Users\\O''Brien\\envs\\cu 12 100%&(x86)'" in ps1
    assert '@set "_ENVLOCK_P=C:\\Users\\O\'Brien\\envs\\cu 12 100%%&(x86)"' in bat
    # No ( ) blocks in cmd: an expanded "(x86)" would close them early.
    assert not any(line.rstrip().endswith("(") for line in bat.splitlines())


# --------------------------------------------------------------------------- -ccbin (facts §9.4)


def test_nvcc_accepts_prepend_ccbin_plus_torch_ccbin(tmp_path: Path) -> None:
    """cuda-nvcc's NVCC_PREPEND_FLAGS=-ccbin=$CXX plus torch's `-ccbin $CC`: why envlock leaves both alone.

    Measured with the system nvcc (13.0 here): a different second value is a warning and the last
    (torch's) wins; the same value is silent. Old nvcc releases made it fatal (nvcc-feedstock#34).
    """
    nvcc = shutil.which("nvcc")
    gcc, gxx = shutil.which("gcc"), shutil.which("g++")
    if nvcc is None or gcc is None or gxx is None:
        pytest.skip("needs nvcc, gcc and g++ on PATH")
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\nint main() { k<<<1, 1>>>(); return 0; }\n")
    env = {**os.environ, "NVCC_PREPEND_FLAGS": f"-ccbin={gxx}"}
    cmd = [nvcc, "-ccbin", gcc, "-c", str(src), "-o", str(tmp_path / "k.o")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "compiler-bindir" in proc.stderr  # the warning, not an error
    env["NVCC_PREPEND_FLAGS"] = f"-ccbin={gcc}"
    same = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert same.returncode == 0 and "compiler-bindir" not in same.stderr
