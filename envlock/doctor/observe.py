"""Everything doctor looks at, gathered once: every subprocess and every file probe is here.

What is diagnosed (the "toolkit under test"):
  * `-p PREFIX`, else the env `envlock run`/shell-hook marked (_ENVLOCK_PREFIX), else `$CONDA_PREFIX`: that
    prefix. When it is not the active env, it is activated as `conda activate` and `envlock run` do it
    (envlock.seams.activation.conda), so the checks see the same CUDA_HOME, CPATH, CC, CXX, NVCC_PREPEND_FLAGS
    ... and give the same verdict as `envlock run -p PREFIX -- envlock doctor`.
  * otherwise the system CUDA that torch's `_find_cuda_home()` would pick (CUDA_HOME, CUDA_PATH,
    dirname(dirname(which nvcc)), /usr/local/cuda).
Programs of the environment (nvcc, the host compilers, the env's python, nvidia-smi) run in subprocesses
with that environment (programs.py); nothing is imported into envlock's own process (no torch, no rattler).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.seams import envrecord
from envlock.seams.activation.model import HOOK_NAME
from envlock.doctor import programs
from envlock.doctor.data import Tables, header_names
from envlock.doctor.observation import (
    ACTIVE_VAR,
    NO_RECORD,
    Cudart,
    LibCopy,
    Nvcc,
    NvccBuild,
    Observation,
    compiler_cmd,
    extension_skip,
    flags_ccbin,
    missing_header,
    paths,
)
from envlock.doctor.probe import CUDA_LIB_PREFIXES
from envlock.errors import SpecError


@dataclass(frozen=True, slots=True)
class DoctorOptions:
    """What to diagnose and how."""

    prefix: Path | None = None
    compile: bool = False
    python_exe: str | None = None
    environ: Mapping[str, str] | None = None  # default: os.environ
    proc_driver_version: Path = Path("/proc/driver/nvidia/version")
    timeout_s: float = 900.0
    for_: tuple[str, ...] = ()  # `--for deepspeed`: the ops it would build
    scans: tuple[Any, ...] = ()  # `--for SOURCE`: envlock.sources.scan.Scan of each source read


def read_meta(prefix: Path) -> tuple[dict[str, Any] | None, str | None]:
    """What `envlock create` recorded (conda-meta/envlock), and why an envlock env's record cannot be read.

    An envlock env is recognised by its content: its record, else envlock's activation hook in
    etc/conda/activate.d. (None, reason) when it is one whose record is unreadable (a 0600 record of
    another user) or gone; (None, None) when it is not one.
    """
    doc, reason = envrecord.load(prefix)
    if doc is not None:
        return doc, None
    if reason is None and any((prefix / "etc" / "conda" / "activate.d").glob(f"{HOOK_NAME}.*")):
        reason = NO_RECORD
    return None, reason


def find_cuda_home(env: Mapping[str, str]) -> tuple[Path | None, str]:
    """torch.utils.cpp_extension._find_cuda_home(), evaluated for `env` (facts §7.1)."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            return Path(env[var]), f"${var}"
    nvcc = shutil.which("nvcc", path=env.get("PATH", ""))
    if nvcc:
        return Path(os.path.dirname(os.path.dirname(nvcc))), f"dirname(dirname({nvcc}))"
    if os.path.exists("/usr/local/cuda"):
        return Path("/usr/local/cuda"), "the default /usr/local/cuda"
    return None, "nothing (CUDA_HOME/CUDA_PATH unset, no nvcc on PATH, no /usr/local/cuda)"


def _target(options: DoctorOptions, base: Mapping[str, str]) -> Path | None:
    """The prefix to diagnose (None: the system CUDA); a -p that is not an environment is refused."""
    if (
        options.prefix is None
    ):  # `envlock run` / shell-hook mark their prefix in _ENVLOCK_PREFIX; conda in CONDA_PREFIX
        return next(
            (Path(base[v]) for v in (ACTIVE_VAR, "CONDA_PREFIX") if base.get(v) and Path(base[v]).is_dir()),
            None,
        )
    prefix = Path(options.prefix).expanduser().absolute()
    if not prefix.exists():
        raise SpecError(
            f"prefix {prefix} does not exist",
            hint="give an environment's path (envlock create -p PATH makes one), "
            "or leave -p out to check the active env or the system CUDA",
        )
    if not prefix.is_dir() or not any(prefix.iterdir()):
        raise SpecError(
            f"prefix {prefix} is empty or not a folder: there is nothing to diagnose",
            hint="create the environment first: envlock create --lock locks/<name>/conda-lock.yml -p PATH",
        )
    return prefix


def _python_for(options: DoctorOptions, env: Mapping[str, str]) -> tuple[str | None, str]:
    """The python whose torch is checked, by resolve's rule (envlock.seams.installed_torch.user_python) applied to
    the environment under test: a diagnosed env is activated first, so its own python is the active conda env's."""
    from envlock.seams.installed_torch import user_python

    chosen = user_python(options.python_exe, env)
    if options.python_exe and (chosen.exe is None or not os.path.exists(chosen.exe)):
        raise SpecError(
            f"--python-exe {options.python_exe} does not exist",
            hint="give the python that has torch, e.g. --python-exe ~/venvs/train/bin/python",
        )
    return chosen.exe, chosen.why


def _host_dirs(root: Path | None, env: Mapping[str, str]) -> tuple[tuple[str, Path], ...]:
    """Where a torch extension's .cpp files find headers: torch's -I dirs, then the host compiler's search."""
    dirs: list[tuple[str, Path]] = []
    if root is not None and os.path.normpath(root / "include") != "/usr/include":
        dirs.append(("$CUDA_HOME/include", root / "include"))
    dirs += [("$CUDA_INC_PATH", p) for p in paths(env.get("CUDA_INC_PATH"))]
    for var in ("CUDNN_HOME", "CUDNN_PATH"):
        if env.get(var):
            dirs.append((f"${var}/include", Path(env[var]) / "include"))
            break
    searched = programs.compiler_search_dirs(compiler_cmd(env, "CXX", "c++"), env)
    if searched is None:  # no working host compiler: what gcc would add from the environment and by default
        searched = tuple(
            paths(env.get("CPATH"))
            + paths(env.get("CPLUS_INCLUDE_PATH"))
            + [Path("/usr/local/include"), Path("/usr/include")]
        )
    cpath = {os.path.normpath(p) for p in paths(env.get("CPATH")) + paths(env.get("CPLUS_INCLUDE_PATH"))}
    dirs += [
        ("CPATH" if os.path.normpath(p) in cpath else "the host compiler's default", p) for p in searched
    ]
    return tuple(dirs)


def _nvcc_dirs(root: Path | None, nvcc: Nvcc | None) -> tuple[Path, ...]:
    """Where a header may exist without the host compiler seeing it (nvcc's own dirs, targets/)."""
    out = list(nvcc.includes) if nvcc else []
    for base in (root, nvcc.top if nvcc else None):
        if base is not None:
            out += sorted((base / "targets").glob("*/include")) + [base / "include"]
    return tuple(out)


def _cudart(root: Path | None, nvcc: Nvcc | None, env: Mapping[str, str]) -> Cudart | None:
    """The libcudart an extension links against ($CUDA_HOME/lib64 or lib: torch; targets/<arch>/lib: nvcc),
    loaded in a subprocess with the env's LD_LIBRARY_PATH (by soname, else by path)."""
    dirs: list[Path] = []
    for base in (b for b in (root, nvcc.top if nvcc else None) if b is not None):
        dirs += [base / "lib64", base / "lib", *sorted((base / "targets").glob("*/lib"))]
    lib = next(
        (
            d / name
            for d in dirs
            for name in ("libcudart.so", *sorted(p.name for p in d.glob("libcudart.so.*")))
            if (d / name).exists()
        ),
        None,
    )
    if lib is None:
        return None
    soname = programs.soname_of(lib)
    return Cudart(
        lib, soname, programs.run_probe(sys.executable, ["cudart", soname, str(lib)], env, timeout=120)
    )


def _lib_copies(env: Mapping[str, str], bundled: Mapping[str, Mapping[str, str]]) -> list[LibCopy]:
    """Other copies on LD_LIBRARY_PATH of the CUDA libraries torch's pip wheels bundle."""
    out = []
    for d in paths(env.get("LD_LIBRARY_PATH")):
        for name, own in sorted(bundled.items()):
            f = d / name
            if (
                name.startswith(CUDA_LIB_PREFIXES)
                and f.exists()
                and os.path.realpath(f) != os.path.realpath(own["path"])
            ):
                out.append(programs.lib_copy(f, name))
    return out


def _builds(
    options: DoctorOptions,
    nvcc: Nvcc | None,
    cudart: Cudart | None,
    python: str | None,
    py: Mapping[str, Any],
    env: Mapping[str, str],
) -> tuple[NvccBuild | None, dict[str, Any] | None, list[str]]:
    """`--compile`: probe.cu with the working nvcc, load_inline with a CUDA torch; and their build logs."""
    built = extension = None
    logs = []
    if nvcc is not None:
        built = programs.build_probe_cu(nvcc.path, cudart.file if cudart else None, env, options.timeout_s)
        logs.append(built.build.err + built.build.out)
    if python and extension_skip(python, py) is None:
        extension = programs.build_extension(python, py["torch"], env, options.timeout_s)
        logs.append(str(extension.get("error") or extension.get("probe_error") or ""))
    return built, extension, logs


def observe(options: DoctorOptions, tables: Tables) -> Observation:
    """Resolve the target and its environment, run every program and probe every file the checks read."""
    base = dict(options.environ if options.environ is not None else os.environ)
    prefix = _target(options, base)
    real = os.path.realpath
    active = prefix is not None and real(prefix) in tuple(
        real(v) if v else None for v in (base.get(ACTIVE_VAR), base.get("CONDA_PREFIX"))
    )
    meta, meta_problem = read_meta(prefix) if prefix is not None else (None, None)
    pixi = None
    if prefix is not None and meta is None and meta_problem is None:
        from envlock.seams.pixienv import pixi_env

        pixi = pixi_env(prefix)
    own_hook = pixi is not None and pixi.envlock_activation  # `pixi run` applies envlock's, from the manifest
    env, scripts, act_err = ((base, (), None) if prefix is None or active
                             else programs.activate(prefix, base, own_hook=own_hook))
    torch_home, source = find_cuda_home(env)
    root = prefix if prefix is not None else torch_home
    path_nvcc = programs.which("nvcc", env)
    nvcc_path = root / "bin" / "nvcc" if root is not None and (root / "bin" / "nvcc").exists() else None
    if nvcc_path is None and prefix is None:
        nvcc_path = path_nvcc
    python, python_why = _python_for(options, env)
    py = programs.run_probe(python, ["torch"], env, timeout=300) if python else {}
    nvcc = programs.nvcc_info(nvcc_path, env) if nvcc_path else None
    # the toolkit `nvcc` on PATH belongs to (the same answer when it is the nvcc under test)
    path_top = None
    if path_nvcc is not None:
        same = nvcc is not None and path_nvcc == nvcc_path
        path_top = nvcc.top if same and nvcc is not None else programs.nvcc_info(path_nvcc, env).top
    working = nvcc if nvcc is not None and not nvcc.error else None
    cudart = _cudart(root, nvcc, env)
    host_dirs, nvcc_dirs = _host_dirs(root, env), _nvcc_dirs(root, nvcc)
    nvcc_cc, nvcc_cc_from = programs.nvcc_host_compiler(env)
    compilers = tuple(
        (role, tuple(cmd), programs.run([*cmd, "--version"], env, timeout=30))
        for role, cmd in (
            ("nvcc's host compiler", [nvcc_cc]),
            ("torch's CXX", compiler_cmd(env, "CXX", "c++")),
        )
    )
    pre = flags_ccbin(env)
    ccbin = programs.ccbin(working.path, env["CC"], pre, env) if working and pre and env.get("CC") else None
    gpu_arch_list = programs.run([str(working.path), "--list-gpu-arch"], env, timeout=60) if working else None
    smi_gpu = None
    if not (py.get("torch") or {}).get("capability"):  # no torch answer: ask nvidia-smi for GPU 0
        smi_gpu = programs.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"], env, timeout=30
        )
    nvcc_build, torch_extension, logs = (
        _builds(options, working, cudart, python, py, env) if options.compile else (None, None, [])
    )
    names = [*header_names(tables), *(n for n in map(missing_header, logs) if n)]
    needed = [n for scan in options.scans for u in scan.units for n in u.needs if n.provider.kind == "cuda"
              and n.what == "header"]  # fmt: skip
    subdirs = {g: e.include_dir for g, e in tables.extras.extras.items() if e.include_dir}
    names += [n.name for n in needed] + [f"{subdirs[g]}/{n.name}" for n in needed if (g := n.provider.group) in subdirs]
    files = frozenset(
        str(d / n)
        for d in dict.fromkeys([d for _, d in host_dirs] + list(nvcc_dirs))
        for n in names
        if (d / n).is_file()
    )
    seen = [prefix, torch_home, path_top, env.get("CUDA_HOME"), env.get("CUDA_PATH")]
    seen += [nvcc.top, nvcc.path.parent.parent] if nvcc else []
    return Observation(
        for_=tuple(options.for_),
        scans=tuple(options.scans),
        compile=options.compile,
        proc_driver_version=options.proc_driver_version,
        mode="prefix" if prefix is not None else "system",
        prefix=prefix,
        env=env,
        active=active,
        scripts=tuple(scripts),
        activation_error=act_err,
        conda_meta=prefix is not None and (prefix / "conda-meta").is_dir(),
        meta=meta,
        meta_problem=meta_problem,
        pixi=None if pixi is None else {"manifest": str(pixi.manifest), "environment": pixi.name,
                                        "envlock_activation": pixi.envlock_activation, "cuda": pixi.cuda},
        hook=prefix is not None and any((prefix / "etc" / "conda" / "activate.d").glob(f"{HOOK_NAME}.*")),
        torch_home=torch_home,
        torch_home_source=source,
        root=root,
        nvcc=nvcc,
        path_nvcc=path_nvcc,
        path_nvcc_top=path_top,
        python=python,
        python_why=python_why,
        py=py,
        host_dirs=host_dirs,
        nvcc_dirs=nvcc_dirs,
        files=files,
        cudart=cudart,
        compilers=compilers,
        nvcc_host_compiler_from=nvcc_cc_from,
        ccbin=ccbin,
        driver=programs.driver(env, options.proc_driver_version),
        lib_copies=tuple(_lib_copies(env, py.get("nvidia_libs") or {})),
        gpu_arch_list=gpu_arch_list,
        smi_gpu=smi_gpu,
        nvcc_build=nvcc_build,
        torch_extension=torch_extension,
        realpaths={str(p): real(p) for p in seen if p},
    )
