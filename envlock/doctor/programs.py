"""The programs doctor runs and the files it reads for observe.py; each answer goes into the Observation.

Every program doctor runs starts here, through envlock.seams.proc (`run` never raises: 127 = not runnable, 124 = timed
out; Ctrl-C is Interrupted), with the
environment under test: nvcc, the host compilers, nvidia-smi, bash for the env's activation scripts, and
probe.py in the env's python (for torch) or in envlock's own (to load libcudart with ctypes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock.doctor.observation import (
    Ccbin,
    Compiler,
    Driver,
    LibCopy,
    Nvcc,
    NvccBuild,
    Ran,
    ccbin_of,
    parse_nvcc,
)
from envlock.doctor.probe import MARK, bundled_nvidia_libs

PROBE = Path(__file__).with_name("probe.py")

NVCC_PROBE_CU = r"""#include <cuda_runtime.h>
#include <cusparse.h>
#include <cstdio>
__global__ void add_one(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
int main() {
  int rt = 0;
  cudaError_t err = cudaRuntimeGetVersion(&rt);
  std::printf("cudart=%d cusparse_header=%d err=%d\n", rt, (int)CUSPARSE_VERSION, (int)err);
  return err == cudaSuccess ? 0 : 1;
}
"""


def run(
    cmd: Sequence[str],
    env: Mapping[str, str],
    timeout: float = 60,
    cwd: str | None = None,
    stdin: str | None = None,
) -> Ran:
    """Run a program through envlock.seams.proc; never raise but Interrupted (127 = not runnable, 124 = timed out)."""
    from envlock.seams import proc

    return Ran(*proc.attempt(cmd, what=f"running {os.path.basename(cmd[0])}", timeout=timeout, env=env, cwd=cwd,
                             input=stdin or ""))


def which(name: str, env: Mapping[str, str]) -> Path | None:
    """`name` on the env's PATH."""
    found = shutil.which(name, path=env.get("PATH", ""))
    return Path(found) if found else None


def activate(prefix: Path, base: Mapping[str, str], *, own_hook: bool = False,
             ) -> tuple[dict[str, str], tuple[str, ...], str | None]:
    """The environment `conda activate PREFIX` gives (for an envlock env also `envlock run`'s): conda's
    variables, then the env's activate.d scripts in conda's order, run in bash (envlock.seams.activation.conda).
    `own_hook`: envlock's activation where the env has no hook (a pixi env whose manifest applies it)."""
    from envlock.seams.activation.conda import activated_environ

    return activated_environ(base, prefix, own_hook=own_hook)


def run_probe(python: str, args: Sequence[str], env: Mapping[str, str], timeout: float) -> dict[str, Any]:
    """Run probe.py in `python`; return its JSON (or {'probe_error': ...})."""
    r = run([python, str(PROBE), *args], env, timeout=timeout)
    for line in reversed(r.out.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    return {"probe_error": (r.err or r.out).strip()[-600:] or f"exit {r.rc}"}


def nvcc_info(path: Path, env: Mapping[str, str]) -> Nvcc:
    """`nvcc --version`, and `nvcc --dryrun` for the include dirs and root its nvcc.profile sets."""
    version = run([str(path), "--version"], env, timeout=60)
    dryrun = None
    if version.rc == 0:
        dryrun = run([str(path), "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull], env, timeout=60)
    return parse_nvcc(path, version, dryrun, os.path.realpath(path))


def compiler_search_dirs(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[Path, ...] | None:
    """The #include <...> search list the host compiler really uses (CPATH included), from `-E -v`."""
    r = run([*cmd, "-xc++", "-E", "-v", "-"], env, timeout=60)
    text = r.err + r.out
    if "search starts here" not in text:
        return None
    block = text.split("#include <...> search starts here:", 1)[-1].split("End of search list.", 1)[0]
    return tuple(Path(os.path.normpath(ln.strip().split(" (")[0])) for ln in block.splitlines() if ln.strip())


def soname_of(lib: Path) -> str:
    """libcudart.so.12 for a libcudart.so(.12(.6.77)) file (from the real file's name)."""
    m = re.match(r"libcudart\.so\.(\d+)", Path(os.path.realpath(lib)).name)
    return f"libcudart.so.{m.group(1)}" if m else "libcudart.so"


def nvcc_host_compiler(env: Mapping[str, str]) -> tuple[str, str]:
    """The host compiler nvcc ends up with in a torch build: the last -ccbin wins (APPEND, torch's $CC, PREPEND)."""
    for value, why in (
        (ccbin_of(env.get("NVCC_APPEND_FLAGS", "")), "NVCC_APPEND_FLAGS"),
        (env.get("CC"), "torch's -ccbin $CC"),
        (ccbin_of(env.get("NVCC_PREPEND_FLAGS", "")), "NVCC_PREPEND_FLAGS"),
    ):
        if value:
            return (os.path.join(value, "gcc") if os.path.isdir(value) else value), why
    return "gcc", "nvcc's default (gcc on PATH)"


def identify(name: str, env: Mapping[str, str]) -> Compiler:
    """Ask the compiler `name` (a path, or a name on the env's PATH; a directory means its gcc) what it is."""
    if os.path.isdir(name):
        name = os.path.join(name, "gcc")
    path = (
        shutil.which(name, path=env.get("PATH", ""))
        if os.sep not in name
        else (name if os.access(name, os.X_OK) else None)
    )
    if path is None:
        return Compiler(name, None, None, None, None, False)

    def ask(*args: str) -> str | None:
        r = run([path, *args], env)
        first = (r.out.strip().splitlines() or [""])[0].strip()
        return first if r.rc == 0 and first else None

    banner = run([path, "--version"], env)
    # GCC's drivers print the program name they were called by (x86_64-conda-linux-gnu-cc ...), then the
    # FSF copyright; clang says clang.
    gcc = (
        banner.rc == 0
        and "clang" not in banner.out.lower()
        and ("Free Software Foundation" in banner.out or "gcc" in banner.out.split("\n", 1)[0].lower())
    )
    version = (ask("-dumpfullversion") if gcc else None) or ask("-dumpversion")
    return Compiler(name, path, os.path.dirname(os.path.realpath(path)), version, ask("-dumpmachine"), gcc)


def ccbin(nvcc: Path, cc: str, pre: str, env: Mapping[str, str]) -> Ccbin:
    """Ask nvcc itself what it does with torch's `-ccbin $CC` on top of NVCC_*_FLAGS' -ccbin; when it
    complains, ask both compilers what they are."""
    cmd = [str(nvcc), "-ccbin", cc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull]
    r = run(cmd, env, timeout=60)
    said = next((ln.strip() for ln in (r.err + r.out).splitlines() if "compiler-bindir" in ln), "")
    output = (r.err or r.out).strip()[-400:]
    if r.rc != 0 or not said:
        return Ccbin(r.rc, said, output)
    return Ccbin(r.rc, said, output, used=identify(cc, env), dropped=identify(pre, env))


def driver(env: Mapping[str, str], proc_version: Path) -> Driver:
    """nvidia-smi's driver version and GPU name, and /proc/driver/nvidia/version."""
    smi = which("nvidia-smi", env)
    answer = run([str(smi), "--query-gpu=driver_version,name", "--format=csv,noheader"], env) if smi else None
    try:
        text: str | None = proc_version.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = None
    return Driver(smi, answer, text)


def lib_copy(path: Path, soname: str) -> LibCopy:
    """A CUDA library copy and its version: from its real file name (conda: libnvJitLink.so.12.4.127), else
    from the RECORD of the pip wheel that owns it (site-packages/nvidia/*/lib holds only libnvJitLink.so.12)."""
    real = os.path.basename(os.path.realpath(path))
    base = soname.split(".so")[0] + ".so."
    if real != soname and real.startswith(base) and len(real) > len(base):
        return LibCopy(path, soname, real[len(base) :])
    parts = Path(os.path.realpath(path)).parts
    if len(parts) > 4 and parts[-4] == "nvidia" and parts[-2] == "lib":
        owned = bundled_nvidia_libs([str(Path(*parts[:-4]))])
        return LibCopy(path, soname, (owned.get(soname) or {}).get("version"))
    return LibCopy(path, soname, None)


def build_probe_cu(nvcc: Path, cudart: Path | None, env: Mapping[str, str], timeout: float) -> NvccBuild:
    """`--compile`: nvcc compiles and links probe.cu (against the env's own cudart), then it runs."""
    with tempfile.TemporaryDirectory(prefix="envlock-doctor-") as tmp:
        src, exe = Path(tmp) / "probe.cu", Path(tmp) / "probe"
        src.write_text(NVCC_PROBE_CU, encoding="utf-8")
        cmd = [str(nvcc), "-cudart", "shared", str(src), "-o", str(exe)]
        if cudart is not None:  # link against (and run with) the environment's own cudart
            libdir = str(cudart.parent)
            cmd += ["-L", libdir, "-Xlinker", "-rpath", "-Xlinker", libdir]
        start = time.monotonic()
        build = run(cmd, env, timeout=timeout, cwd=tmp)
        seconds = round(time.monotonic() - start, 2)
        ran = run([str(exe)], env, timeout=60, cwd=tmp) if build.rc == 0 else None
    return NvccBuild(tuple(cmd), seconds, build, ran)


def build_extension(
    python: str, torch: Mapping[str, Any], env: Mapping[str, str], timeout: float
) -> dict[str, Any]:
    """`--compile`: load_inline builds a kernel including ATen/cuda/CUDAContext.h in the env's python (probe.py)."""
    env = dict(env)
    if not torch.get("cuda_available") and not env.get("TORCH_CUDA_ARCH_LIST"):
        env["TORCH_CUDA_ARCH_LIST"] = (
            "8.0"  # no GPU to ask: build one arch rather than every arch torch knows
        )
    with tempfile.TemporaryDirectory(prefix="envlock-doctor-ext-") as tmp:
        return run_probe(python, ["extension", tmp], env, timeout=timeout)
