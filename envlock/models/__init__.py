"""Plain frozen values passed between envlock's modules (no I/O here).

Each is a `record` (envlock.models.record: `@dataclass(frozen=True, slots=True)` without compiling a method at
import); `field`, `replace` and `asdict` are that module's, named here for the modules that build values.
"""

from __future__ import annotations

from typing import Literal

from envlock.models.record import asdict, field, record, replace

__all__ = ["asdict", "field", "record", "replace"]  # the rest of the names are this module's own

CUDA_PLATFORMS: tuple[str, ...] = ("linux-64", "linux-aarch64", "win-64")
#: Every conda subdir envlock knows by name (the others are refused with a reason).
KNOWN_SUBDIRS: tuple[str, ...] = (
    "linux-64",
    "linux-aarch64",
    "linux-ppc64le",
    "win-64",
    "osx-64",
    "osx-arm64",
)
TorchSource = Literal["pip", "conda-forge"]
TORCH_SOURCES: tuple[TorchSource, ...] = ("pip", "conda-forge")
Skew = Literal["exact", "minor-1", "minor+1"]
Severity = Literal["ok", "info", "skipped", "warning", "error"]  # info: optional, not a problem; skipped: not checked (doctor)

#: The conda-forge packages that ship cuDNN (its headers and libraries).
CUDNN_NAMES = frozenset({"cudnn", "libcudnn", "libcudnn-dev"})


@record
class Anchor:
    """What torch was built with: the fixed point every plan is derived from."""

    torch: str  # public version, e.g. "2.3.0" (no local label)
    cuda: str  # "12.1" (major.minor)
    cudnn: str | None  # "8.9.2.26", or None when unknown
    source: str  # override | local-label | installed | conda-forge | table | pypi
    detail: str  # one human sentence: where the answer came from
    torch_source: TorchSource = "pip"
    local_label: str | None = None  # "cu118" when the user gave 2.3.0+cu118
    # The CUDA torch itself was built with, where an override (--cuda) set the toolchain's elsewhere (None: the
    # same as `cuda`). The skew is measured from it: envlock.core.rules.torch_skew.
    torch_cuda: str | None = None
    # What envlock's torch table says of the release besides its CUDA (None: the table does not know it);
    # neither is recorded in a lock nor hashed.
    python_span: tuple[str, str] | None = None  # (oldest, newest) CPython X.Y with torch wheels
    aarch64_cuda_wheels: bool | None = None  # whether PyPI's linux-aarch64 wheels of the release have CUDA

    @property
    def env_name(self) -> str:
        """The default environment name: torch<version>-cu<XY>, e.g. torch2.3.0-cu121."""
        return f"torch{self.torch}-{self.cuda_tag}"

    @property
    def own_cuda(self) -> str:
        """The CUDA of torch's own build (`torch_cuda`, else the anchor's)."""
        return self.torch_cuda or self.cuda

    @property
    def cuda_major(self) -> int:
        return int(self.cuda.split(".")[0])

    @property
    def cuda_minor(self) -> int:
        return int(self.cuda.split(".")[1])

    @property
    def cuda_tag(self) -> str:
        return "cu" + self.cuda.replace(".", "")


@record
class InstalledTorch:
    """What the torch of a python said about itself (envlock.seams.installed_torch), for the `installed` anchor."""

    exe: str  # the python asked
    version: str | None = None  # torch.__version__
    cuda: str | None = None  # torch.version.cuda
    cudnn: int | None = None  # torch.backends.cudnn.version()
    file: str | None = None  # torch.__file__
    error: str | None = None  # why `import torch` failed there (the other fields are then None)
    chosen: str = "--python-exe"  # why this python (envlock.seams.installed_torch.user_python)


@record
class VirtualPackage:
    name: str  # "__cuda"
    version: str  # "12.1"
    build: str = "0"

    def __str__(self) -> str:
        return f"{self.name}={self.version}={self.build}"


@record
class Candidate:
    """One CUDA minor the solver may try for a platform, with everything needed to solve it."""

    cuda: str  # "12.6"
    skew: Skew
    specs: tuple[str, ...]  # match specs, sorted as they are solved
    channels: tuple[str, ...]  # canonical channel names/URLs, in priority order
    virtual_packages: tuple[VirtualPackage, ...]
    gcc_max: int | None  # None on win-64
    cudnn: str | None  # match spec of cudnn, e.g. "cudnn>=9.1,<9.2" or None
    notes: tuple[str, ...] = ()  # warnings the plan carries (cudatoolkit-dev downloads …)
    complaints: tuple[str, ...] = ()  # which tools would complain about this nvcc minor
    relaxed: bool = False  # cuDNN widened to any build of torch's cuDNN major (the pinned one failed)
    extras: tuple[tuple[str, str], ...] = ()  # (`--with` label, match spec) the extras added to `specs`
    optional_extras: tuple[str, ...] = ()  # those of a partial bundle (`all`): left out, with a note, where the channel lacks them


@record
class PlatformPlan:
    platform: str
    candidates: tuple[Candidate, ...]  # in the order they are tried


@record
class PlanOptions:
    """Everything besides the anchor that decides a plan."""

    platforms: tuple[str, ...]
    python: str | None = None  # "3.11"
    channels: tuple[str, ...] = ("conda-forge",)
    glibc: str = "2.28"
    with_cudnn: bool = True
    extra_specs: tuple[str, ...] = ()
    with_extras: tuple[str, ...] = ()  # `--with NAME` (extras and bundles of data/extras.yaml)
    toolchain_only: bool = False  # beside a torch installed elsewhere: no pytorch from conda-forge either


@record
class Plan:
    anchor: Anchor
    options: PlanOptions
    platforms: tuple[PlatformPlan, ...]
    rules_version: str  # version of the rule tables that made it


@record
class LockedPackage:
    """One conda package pinned for one platform, as written in conda-lock v1."""

    name: str
    version: str
    build: str
    platform: str  # the lock platform this entry is for (linux-64 for a noarch package too)
    url: str  # canonical URL (mirrors are never written)
    md5: str
    sha256: str | None
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    subdir: str = ""  # the package's own subdir (noarch, linux-64 …)
    size: int | None = None
    channel: str = ""

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@record
class PypiPackage:
    """One wheel locked for one platform (conda-lock v1 `manager: pip`)."""

    name: str  # canonical (PEP 503) name
    version: str
    platform: str
    url: str  # canonical URL (mirrors are never written)
    sha256: str
    dependencies: tuple[str, ...] = ()  # canonical names of the locked packages it requires
    # (name, PEP 440 specifier) from the wheel's Requires-Dist for those names ('' or absent: any version)
    requires: tuple[tuple[str, str], ...] = ()

    def specifier(self, dependency: str) -> str:
        """What this wheel's metadata requires of `dependency` ('' when it names no version)."""
        return next((spec for name, spec in self.requires if name == dependency), "")

    @property
    def filename(self) -> str:
        from urllib.parse import unquote

        return unquote(self.url.rsplit("/", 1)[-1].split("#", 1)[0])


@record
class PlatformResult:
    """What a solve of one platform produced."""

    platform: str
    chosen: Candidate
    packages: tuple[LockedPackage, ...]  # in dependency order
    attempts: tuple[tuple[str, str], ...] = ()  # (cuda minor, why it failed) for candidates tried before

    @property
    def nvcc(self) -> str | None:
        """The version of the locked nvcc (cuda-nvcc, or cudatoolkit-dev up to CUDA 11.7)."""
        return self.version_of("cuda-nvcc") or self.version_of("cudatoolkit-dev")

    def version_of(self, name: str) -> str | None:
        for p in self.packages:
            if p.name == name:
                return p.version
        return None


@record
class Finding:
    """One doctor check result."""

    code: str
    severity: Severity
    message: str
    hint: str | None = None
    details: dict[str, object] = field(default_factory=dict)


# --------------------------------------------------------------------------- the host

#: The platforms envlock locks (a CUDA toolchain exists for them).
CUDA_PLATFORMS = ("linux-64", "linux-aarch64", "win-64")


def host_platform() -> str:
    """This machine's conda subdir (linux-64, linux-aarch64, win-64, osx-arm64 …), without importing rattler."""
    import platform as _platform
    import sys

    machine = _platform.machine().lower()
    if sys.platform.startswith("linux"):
        return {"x86_64": "linux-64", "amd64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64",
                "ppc64le": "linux-ppc64le"}.get(machine, f"linux-{machine}")
    if sys.platform == "win32":
        return "win-64"
    if sys.platform == "darwin":
        return "osx-arm64" if machine == "arm64" else "osx-64"
    return f"{sys.platform}-{machine}"


def default_platform() -> str:
    """The platform a lock is for when none is given (README: the host's if it has CUDA, else linux-64)."""
    host = host_platform()
    return host if host in CUDA_PLATFORMS else "linux-64"
