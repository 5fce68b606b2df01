"""Are two host-compiler names one gcc toolchain? (doctor's `host_compiler.ccbin` check)

conda-forge's cuda-nvcc activation sets NVCC_PREPEND_FLAGS=-ccbin=$CXX and torch's extension builder
adds -ccbin $CC: nvcc warns about the second -ccbin and uses torch's $CC. In an env with conda-forge's
compilers those are the C and C++ drivers of one gcc install (x86_64-conda-linux-gnu-cc and -c++ in
$CONDA_PREFIX/bin, one version, one target), and nvcc compiling with either gives the same build.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Run = Callable[[Sequence[str], Mapping[str, str]], tuple[int, str, str]]


@dataclass(frozen=True, slots=True)
class Compiler:
    """What a compiler name stands for, as the compiler itself says."""

    name: str  # as given (-ccbin value, $CC)
    path: str | None  # found on the env's PATH (None: not runnable)
    install: str | None  # the directory of the real file: one install keeps its drivers together
    version: str | None  # -dumpfullversion (gcc), else -dumpversion
    target: str | None  # -dumpmachine
    gcc: bool  # a GNU compiler driver (its --version banner)


def identify(name: str, env: Mapping[str, str], run: Run) -> Compiler:
    """Ask the compiler `name` (a path, or a name on the env's PATH; a directory means its gcc)."""
    if os.path.isdir(name):
        name = os.path.join(name, "gcc")
    path = shutil.which(name, path=env.get("PATH", "")) if os.sep not in name else (name if os.access(name, os.X_OK) else None)
    if path is None:
        return Compiler(name, None, None, None, None, False)

    def ask(*args: str) -> str | None:
        rc, out, _ = run([path, *args], env)
        first = (out.strip().splitlines() or [""])[0].strip()
        return first if rc == 0 and first else None

    rc, banner, _ = run([path, "--version"], env)
    # GCC's drivers print the program name they were called by (x86_64-conda-linux-gnu-cc ...), then the
    # FSF copyright; clang says clang.
    gcc = rc == 0 and "clang" not in banner.lower() and (
        "Free Software Foundation" in banner or "gcc" in banner.split("\n", 1)[0].lower()
    )
    version = (ask("-dumpfullversion") if gcc else None) or ask("-dumpversion")
    return Compiler(name, path, os.path.dirname(os.path.realpath(path)), version, ask("-dumpmachine"), gcc)


def one_gcc_toolchain(a: Compiler, b: Compiler) -> bool:
    """Both are drivers of the same gcc install: same directory, same full version, same target."""
    return (
        a.gcc and b.gcc
        and a.install is not None and a.install == b.install
        and a.version is not None and a.version == b.version
        and a.target is not None and a.target == b.target
    )  # fmt: skip
