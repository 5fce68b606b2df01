"""Plain frozen values passed between envlock's modules (no I/O here), and `record`, the decorator that makes them.

`record` is `@dataclass(frozen=True, slots=True)` without the dataclasses module: the same __init__ (positional or
keyword, defaults, `field(default_factory=...)`), __repr__, __eq__, __hash__, frozen fields (assigning raises
dataclasses.FrozenInstanceError), copy and pickle, and `replace()`. dataclasses compiles each generated method
with exec() (~0.2 ms each, six per class): `envlock check` made 40 such classes, a third of its start-up, and
imported dataclasses and inspect for them. Here the methods are shared functions over the class's field names:
nothing is compiled at import (tests/test_models_record.py compares both on the same classes).
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Literal, TypeVar, cast

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda fn: fn

_T = TypeVar("_T")
_MISSING: Any = object()
_set = object.__setattr__


class _Field:
    __slots__ = ("compare", "default", "factory", "repr")

    def __init__(self, default: Any, factory: Any, repr: bool, compare: bool) -> None:  # noqa: A002 - dataclasses' name
        self.default, self.factory, self.repr, self.compare = default, factory, repr, compare


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, repr: bool = True,  # noqa: A002 - dataclasses' name
          compare: bool = True) -> Any:
    """dataclasses.field for a `record`: a default or a factory of one, and whether repr/== (and hash) see it."""
    return _Field(default, _MISSING if default_factory is None else default_factory, repr, compare)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    from dataclasses import FrozenInstanceError  # only on the way to the error

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _make_init(qualname: str, names: tuple[str, ...], defaults: dict[str, Any], factories: dict[str, Any]) -> Any:
    count = len(names)
    tail = [(n, defaults.get(n, _MISSING), factories.get(n, _MISSING)) for n in names]

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        given = len(args)
        if given > count:
            raise TypeError(f"{qualname}.__init__() takes {count + 1} positional arguments but {given + 1} were given")
        for name, value in zip(names, args):
            _set(self, name, value)
        for name, default, factory in tail[given:] if given < count else ():
            if name in kwargs:
                _set(self, name, kwargs.pop(name))
            elif default is not _MISSING:
                _set(self, name, default)
            elif factory is not _MISSING:
                _set(self, name, factory())
            else:
                raise TypeError(f"{qualname}.__init__() missing 1 required argument: {name!r}")
        if kwargs:  # what is left names a field given positionally, or none
            name = next(iter(kwargs))
            said = "got multiple values for argument" if name in names else "got an unexpected keyword argument"
            raise TypeError(f"{qualname}.__init__() {said} {name!r}")

    return __init__


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if len(names) > 1:
        return attrgetter(*names)  # a tuple of the values, as dataclasses compares and hashes them
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _make_setstate(fields: tuple[str, ...]) -> Callable[[Any, list[Any]], None]:
    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(fields, state):
            _set(self, name, value)

    return __setstate__


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[_T]) -> type[_T]:
    """A frozen, slotted value class of the annotated fields (see the module's docstring)."""
    names, defaults, factories, shown, compared = [], {}, {}, [], []
    for base in reversed(cls.__mro__[1:]):
        for name in getattr(base, "__record_fields__", ()):
            names.append(name)
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - inspect is what this module avoids importing
    for name, kind in annotations.items():
        if str(kind).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, _Field) else _Field(value, _MISSING, True, True)
        if isinstance(spec.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is not allowed: use default_factory")
        if spec.default is not _MISSING:
            defaults[name] = spec.default
        elif spec.factory is not _MISSING:
            factories[name] = spec.factory
        elif defaults or factories:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        names.append(name)
        if spec.repr:
            shown.append(name)
        if spec.compare:
            compared.append(name)
    ns = {k: v for k, v in cls.__dict__.items() if k not in annotations and k not in ("__dict__", "__weakref__")}
    ns["__slots__"] = tuple(n for n in names if n in annotations)
    ns["__record_fields__"] = fields = tuple(names)
    ns["__match_args__"] = fields
    meta: Any = type(cls)
    new: Any = meta(cls.__name__, cls.__bases__, ns)
    key, shown_t = _key(tuple(compared)), tuple(shown)
    methods: dict[str, Any] = {
        "__init__": _make_init(cls.__qualname__, fields, defaults, factories),
        "__repr__": lambda self: f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown_t)})",
        "__eq__": lambda self, other: key(self) == key(other) if other.__class__ is self.__class__ else NotImplemented,
        "__getstate__": lambda self: [getattr(self, n) for n in fields],
        "__setstate__": _make_setstate(fields),
    }
    for name, fn in methods.items():
        if name not in ns:
            fn.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(new, name, fn)
    if "__hash__" not in ns or (ns["__hash__"] is None and "__eq__" not in ns):
        new.__hash__ = lambda self: hash(key(self))
    new.__setattr__ = _frozen_setattr
    new.__delattr__ = _frozen_delattr
    return cast("type[_T]", new)


def replace(obj: _T, /, **changes: Any) -> _T:
    """dataclasses.replace for a `record` (and, imported then, for a dataclass)."""
    fields = getattr(type(obj), "__record_fields__", None)
    if fields is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]  # a dataclass: _T does not say so
    unknown = [k for k in changes if k not in fields]
    if unknown:
        raise TypeError(f"{type(obj).__qualname__}.__init__() got an unexpected keyword argument {unknown[0]!r}")
    return type(obj)(**{n: changes[n] if n in changes else getattr(obj, n) for n in fields})

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


def asdict(obj: Any) -> Any:
    """dataclasses.asdict for a `record`: its fields as a dict, records, lists, tuples and dicts in them rebuilt."""
    fields = getattr(type(obj), "__record_fields__", None)
    if fields is not None:
        return {name: asdict(getattr(obj, name)) for name in fields}
    if isinstance(obj, (list, tuple)):
        return type(obj)(asdict(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((asdict(k), asdict(v)) for k, v in obj.items())
    return obj


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
    # What envlock's torch table says of the release besides its CUDA (None: the table does not know it);
    # neither is recorded in a lock nor hashed.
    python_span: tuple[str, str] | None = None  # (oldest, newest) CPython X.Y with torch wheels
    aarch64_cuda_wheels: bool | None = None  # whether PyPI's linux-aarch64 wheels of the release have CUDA

    @property
    def env_name(self) -> str:
        """The default environment name: torch<version>-cu<XY>, e.g. torch2.3.0-cu121."""
        return f"torch{self.torch}-{self.cuda_tag}"

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
