"""What `envlock doctor` saw: one frozen Observation per run, made by observe.py and read by the checks.

Everything here is a value or a pure function of values: no subprocess, no file system, no os.environ.
A test builds an Observation by hand (or from a recorded run) and hands it to the checks. Program
answers are kept as the program gave them (`Ran`); the probe's answers as the JSON it printed.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

ACTIVE_VAR = "_ENVLOCK_PREFIX"  # set by envlock's activation (envlock.seams.activation.ACTIVE)
#: Observation.meta_problem of an env with envlock's hook and no record: hook scripts copied in by hand (the lock's
#: activate.sh), or a record removed; `envlock hook -p` writes one.
NO_RECORD = "it has envlock's activation hook but no record conda-meta/envlock"


class FrozenDict(dict):  # type: ignore[type-arg]  # a plain dict of JSON values (json.dumps must see a dict)
    """A dict nobody can change (json.dumps still sees a dict): the probe's answers, the env, the record."""

    def _read_only(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("an Observation is read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]  # each mutator is replaced by one that raises, whatever its signature
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]  # each mutator is replaced by one that raises, whatever its signature

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: object) -> FrozenDict:
        return self


def freeze(value: Any) -> Any:
    """JSON-like data made read-only all the way down: dicts -> FrozenDict, lists -> tuples."""
    if isinstance(value, Mapping):
        return (
            value if isinstance(value, FrozenDict) else FrozenDict({k: freeze(v) for k, v in value.items()})
        )
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


@dataclass(frozen=True, slots=True)
class Ran:
    """A program's answer: its exit status and output (rc 127: not runnable, 124: timed out)."""

    rc: int
    out: str = ""
    err: str = ""


@dataclass(frozen=True, slots=True)
class Nvcc:
    """One nvcc: its version and the search paths its nvcc.profile gives it."""

    path: Path
    version: str | None = None  # "13.0.88"
    minor: str | None = None  # "13.0"
    top: Path | None = None  # the toolkit root nvcc itself uses (nvcc.profile TOP)
    includes: tuple[Path, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Compiler:
    """What a compiler name stands for, as the compiler itself says (host_compiler.ccbin)."""

    name: str  # as given (-ccbin value, $CC)
    path: str | None  # found on the env's PATH (None: not runnable)
    install: str | None  # the directory of the real file: one install keeps its drivers together
    version: str | None  # -dumpfullversion (gcc), else -dumpversion
    target: str | None  # -dumpmachine
    gcc: bool  # a GNU compiler driver (its --version banner)


@dataclass(frozen=True, slots=True)
class Ccbin:
    """nvcc's answer to torch's `-ccbin $CC` on top of the -ccbin in NVCC_*_FLAGS (and, when it complained,
    what the two compilers are)."""

    rc: int
    said: str  # nvcc's line about compiler-bindir ("" when silent)
    output: str
    used: Compiler | None = None  # $CC: the last -ccbin, the one nvcc uses
    dropped: Compiler | None = None  # the flags' -ccbin


@dataclass(frozen=True, slots=True)
class Cudart:
    """The libcudart an extension links against, and the probe's answer when loading it."""

    file: Path
    soname: str
    probe: Mapping[str, Any]  # loaded_by, version, rc, file; soname_error / path_error / probe_error

    def __post_init__(self) -> None:
        object.__setattr__(self, "probe", freeze(self.probe))

    @property
    def runtime(self) -> str | None:
        """The CUDA runtime version it reported ('12.6'; None when it did not load or said 0)."""
        version = (self.probe.get("version") or 0) if "loaded_by" in self.probe else 0
        return f"{version // 1000}.{(version % 1000) // 10}" if version else None


@dataclass(frozen=True, slots=True)
class LibCopy:
    """A copy on LD_LIBRARY_PATH of a CUDA library torch's pip wheels bundle (another file than torch's own)."""

    file: Path
    name: str  # the file name torch's copy has (libnvJitLink.so.13)
    version: str | None  # from its real file name, else from the RECORD of the wheel that owns it


@dataclass(frozen=True, slots=True)
class Driver:
    """nvidia-smi's answer, and /proc/driver/nvidia/version's text."""

    smi_path: Path | None = None
    smi: Ran | None = None
    proc_text: str | None = None  # None: absent or unreadable


@dataclass(frozen=True, slots=True)
class NvccBuild:
    """`--compile`: nvcc compiling+linking probe.cu, then running it."""

    command: tuple[str, ...]
    seconds: float
    build: Ran
    run: Ran | None = None  # None: the build failed


@dataclass(frozen=True)
class Observation:
    """Everything the checks look at, gathered once by observe.py; checks only read it."""

    # what was asked
    for_: tuple[str, ...] = ()
    scans: tuple[Any, ...] = ()  # `--for SOURCE`: envlock.sources.scan.Scan (frozen) of each source
    compile: bool = False
    proc_driver_version: Path = Path("/proc/driver/nvidia/version")
    # the target
    mode: str = "system"  # "prefix" | "system"
    prefix: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    active: bool = False
    scripts: tuple[str, ...] = ()
    activation_error: str | None = None
    conda_meta: bool = False  # PREFIX/conda-meta/ is a folder
    meta: Mapping[str, Any] | None = None  # conda-meta/envlock, as `envlock create` wrote it
    meta_problem: str | None = None  # an envlock env whose record cannot be read: why
    # a pixi env (envlock.seams.pixienv): manifest, environment, envlock_activation (its manifest applies envlock's
    # activation, as `envlock export pixi` writes it), cuda (its system-requirements.cuda)
    pixi: Mapping[str, Any] | None = None
    hook: bool = False  # envlock's activation hook is in PREFIX/etc/conda/activate.d
    # the toolkit
    torch_home: Path | None = None  # what torch's _find_cuda_home() picks
    torch_home_source: str = ""
    root: Path | None = None  # the toolkit under test
    nvcc: Nvcc | None = None
    path_nvcc: Path | None = None  # `which nvcc` in the env
    path_nvcc_top: Path | None = None  # the toolkit root that nvcc uses
    # torch (the probe's answer in the env's python)
    python: str | None = None
    python_why: str = ""  # why that python (envlock.seams.installed_torch.user_python): "the active venv $VIRTUAL_ENV"
    py: Mapping[str, Any] = field(default_factory=dict)
    # headers: where a .cpp finds them (labelled), where only nvcc does, and which files exist there
    host_dirs: tuple[tuple[str, Path], ...] = ()
    nvcc_dirs: tuple[Path, ...] = ()
    files: frozenset[str] = frozenset()
    cudart: Cudart | None = None
    compilers: tuple[tuple[str, tuple[str, ...], Ran], ...] = ()  # (role, command, its --version answer)
    nvcc_host_compiler_from: str = ""
    ccbin: Ccbin | None = None  # None: no -ccbin in NVCC_*_FLAGS, no CC, or no working nvcc
    driver: Driver = field(default_factory=Driver)
    lib_copies: tuple[LibCopy, ...] = ()
    gpu_arch_list: Ran | None = None  # `nvcc --list-gpu-arch` (None: no working nvcc)
    smi_gpu: Ran | None = None  # nvidia-smi's name,compute_cap (None: torch gave the capability)
    nvcc_build: NvccBuild | None = None  # --compile
    torch_extension: Mapping[str, Any] | None = None  # --compile: the probe's load_inline answer
    realpaths: Mapping[str, str] = field(default_factory=dict)  # path -> os.path.realpath, as observed

    def __post_init__(self) -> None:
        # read-only all the way down: no check can change what another one sees
        for name in ("env", "meta", "pixi", "py", "torch_extension", "realpaths"):
            object.__setattr__(self, name, freeze(getattr(self, name)))

    def real(self, path: Path | str | None) -> str | None:
        """The real path of `path` as observed (normalised when it was not resolved)."""
        if not path:
            return None
        return self.realpaths.get(str(path), os.path.normpath(str(path)))

    def has_file(self, directory: Path, name: str) -> bool:
        """Whether `directory/name` is a file (observe looked for every header name a check asks about)."""
        return str(directory / name) in self.files

    @property
    def torch(self) -> Mapping[str, Any]:
        """The probe's `torch` answer ({} when torch is not importable)."""
        return self.py.get("torch") or {}

    @property
    def anchor(self) -> Mapping[str, Any]:
        """The lock's anchor from the env's record, else a pixi env's CUDA ({} when there is none)."""
        anchor = (self.meta or {}).get("anchor")
        if not isinstance(anchor, dict) and self.pixi is not None and self.pixi.get("cuda"):
            return {"cuda": self.pixi["cuda"]}
        return anchor if isinstance(anchor, dict) else {}


# ----------------------------------------------------------------------------- pure helpers


def vtuple(version: str) -> tuple[int, ...]:
    """'525.60.13' -> (525, 60, 13); stops at the first non-numeric part."""
    out: list[int] = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def minor_of(version: str | None) -> str | None:
    """'12.6.85' -> '12.6'."""
    parts = vtuple(version or "")
    return f"{parts[0]}.{parts[1]}" if len(parts) >= 2 else None


def paths(value: str | None) -> list[Path]:
    """A PATH-like variable's entries."""
    return [Path(p) for p in (value or "").split(os.pathsep) if p]


def compiler_cmd(env: Mapping[str, str], var: str, default: str) -> list[str]:
    """$CC / $CXX as a command (default when unset). A value that is one existing file is that file, spaces
    and all (conda's activation sets CXX=$PREFIX/bin/…-c++ unquoted, and torch runs $CXX as one path);
    else it is split as a shell would (`ccache g++`)."""
    value = env.get(var) or default
    if os.path.isfile(value):
        return [value]
    try:
        return shlex.split(value) or [default]
    except ValueError:  # an unpaired quote: the value as one word
        return [value]


def split_flags(text: str) -> list[str]:
    """Compiler flags as words: as a shell splits them, else (an unpaired quote, as an unquoted path with an
    apostrophe leaves in NVCC_PREPEND_FLAGS) at whitespace, never an error."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def ccbin_of(flags: str) -> str | None:
    """The last -ccbin/--compiler-bindir value in an NVCC_*_FLAGS string."""
    tokens, value = split_flags(flags or ""), None
    for i, tok in enumerate(tokens):
        for opt in ("-ccbin", "--compiler-bindir"):
            if tok == opt and i + 1 < len(tokens):
                value = tokens[i + 1]
            elif tok.startswith(opt + "="):
                value = tok.split("=", 1)[1]
    return value


def flags_ccbin(env: Mapping[str, str]) -> str | None:
    """The -ccbin conda-forge's cuda-nvcc activation puts in NVCC_PREPEND_FLAGS (else NVCC_APPEND_FLAGS)."""
    return ccbin_of(env.get("NVCC_PREPEND_FLAGS", "")) or ccbin_of(env.get("NVCC_APPEND_FLAGS", ""))


def extension_skip(python: str | None, py: Mapping[str, Any]) -> str | None:
    """Why `--compile` cannot build a torch extension here (None: it can try)."""
    torch = py.get("torch") or {}
    if not python or not torch:
        return "not run: torch is not importable here (see torch.found)"
    if not torch.get("cuda"):
        return "not run: torch is a CPU build"
    return None


def missing_header(log: str) -> str | None:
    """The header a failed build could not find ('cusparse.h' from '...: fatal error: cusparse.h: No such ...')."""
    m = re.search(r"([\w./+-]+): No such file or directory", log)
    return os.path.basename(m.group(1)) if m and m.group(1).endswith(".h") else None


def parse_nvcc(path: Path, version: Ran, dryrun: Ran | None, real_path: str) -> Nvcc:
    """`nvcc --version` and `nvcc --dryrun`'s answers -> Nvcc (real_path: where the nvcc file really is)."""
    m = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)", version.out + version.err)
    if version.rc != 0 or not m:
        return Nvcc(path=path, error=(version.err or version.out).strip()[-300:] or f"exit {version.rc}")
    values: dict[str, str] = {}
    text = (dryrun.out + "\n" + dryrun.err) if dryrun else ""
    for line in text.splitlines():
        m2 = re.match(r"#\$ (\w+)=(.*)$", line.strip())
        if m2:
            values[m2.group(1)] = m2.group(2)
    top = Path(os.path.normpath(values["TOP"])) if values.get("TOP") else Path(real_path).parent.parent
    tokens = split_flags(values.get("INCLUDES", "")) + split_flags(values.get("SYSTEM_INCLUDES", ""))
    dirs = [t[2:] for t in tokens if t.startswith("-I")]
    dirs += [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t == "-isystem"]
    includes = tuple(Path(os.path.normpath(d)) for d in dirs)
    return Nvcc(path=path, version=m.group(2), minor=m.group(1), top=top, includes=includes)
