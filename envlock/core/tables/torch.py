"""The torch table (package data data/torch.yaml): torch release -> the CUDA and cuDNN of its builds.

Validated into frozen rows when loaded; the pins it quotes are read with the same parser as a wheel's
live Requires-Dist metadata (parse_cuda_pins, used by the index client too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from packaging.version import InvalidVersion, Version

from envlock.models import record
from envlock import REINSTALL_HINT
from envlock.errors import AnchorError, Setting

#: The hint when a wheel's CUDA cannot be read: the user says it (as --cuda, or `cuda:` in a spec).
BUILT_WITH = Setting("--cuda", "X.Y", "the CUDA torch was built with")

SUPPORTED_TABLE_SCHEMA = 1
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)$")
_CU_TAG_RE = re.compile(r"^cu(\d+)(\d)$")  # cu118 -> 11.8, cu130 -> 13.0
_CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime-cu\d+$")
_CUDNN = re.compile(r"^nvidia-cudnn(-cu\d+)?$")
_NVIDIA = re.compile(r"^(nvidia-|cuda-toolkit$)")
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PLAIN_PIN = re.compile(  # name[extra, …]==version, no marker: what the table's pins and most wheel lines are
    rf"^\s*({_NAME})\s*(?:\[\s*((?:{_NAME}(?:\s*,\s*{_NAME})*)?)\s*\])?\s*==\s*([0-9]+(?:\.[0-9]+)*(?:\.\*)?)\s*$"
)


# --------------------------------------------------------------------------- Requires-Dist pins


@record
class CudaPins:
    """What a wheel's Requires-Dist says about CUDA (cuda None: no CUDA dependency at all)."""

    cuda: str | None  # "12.1"
    cudnn: str | None  # "8.9.2.26"
    requirement: str | None  # the pin that decided the CUDA, e.g. "nvidia-cuda-runtime-cu12==12.1.105"


def _canon(name: str) -> str:
    """A project name in PEP 503 normal form (what packaging.utils.canonicalize_name gives)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _cuda_of(pin: str, requirement: str) -> str:
    """'12.1.105' -> '12.1'."""
    parts = pin.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        raise AnchorError(
            f"cannot read a CUDA version from the requirement {requirement!r}",
            hint=(BUILT_WITH,),
        )
    return f"{int(parts[0])}.{int(parts[1])}"


def _marker_env(python: str) -> dict[str, str]:
    """A Linux x86_64 CPython install of that python, as requirement markers see it."""
    return {
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "sys_platform": "linux",
        "os_name": "posix",
        "python_version": python,
        "python_full_version": python + ".0",
        "platform_python_implementation": "CPython",
        "implementation_name": "cpython",
        "extra": "",
    }


def _read(line: str, python: str) -> tuple[str, str | None, str] | None:
    """(PEP 503 name, exact pin or None, the requirement without its marker) of one Requires-Dist line;
    None when it does not apply to a Linux x86_64 CPython of `python`, or does not parse.

    A plain `name==version` line (the table's pins, most of a wheel's) is read without packaging's
    requirement parser, whose import alone costs ~40 ms of every `check` and `resolve`.
    """
    m = _PLAIN_PIN.match(line)
    if m:
        name, extras, version = m.groups()
        listed = sorted(e.strip() for e in (extras or "").split(",") if e.strip())
        text = f"{name}[{','.join(listed)}]=={version}" if listed else f"{name}=={version}"  # as packaging writes it
        return _canon(name), version.removesuffix(".*"), text
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None  # a line we cannot read cannot be a CUDA pin we understand
    if req.marker is not None:
        try:
            if not req.marker.evaluate(_marker_env(python)):
                return None
        except Exception:  # noqa: BLE001, S110 - an odd marker must not hide a CUDA pin
            pass
    pin = next((sp.version.removesuffix(".*") for sp in req.specifier if sp.operator in ("==", "===")), None)
    return _canon(req.name), pin, str(req).split(";")[0].strip()


def parse_cuda_pins(requires_dist: Iterable[str], python: str = "3.11") -> CudaPins:
    """CUDA/cuDNN pins of Requires-Dist lines (facts 1.3: runtime-cu1X, then cuda-toolkit, then runtime)."""
    runtime: tuple[str | None, str] | None = None
    toolkit: tuple[str | None, str] | None = None
    bare_runtime: tuple[str | None, str] | None = None
    cudnn: str | None = None
    nvidia_seen: list[str] = []
    for line in requires_dist:
        read = _read(line, python)
        if read is None:
            continue
        name, pin, text = read
        if _NVIDIA.match(name):
            nvidia_seen.append(name)
        if _CUDA_RUNTIME.match(name):
            runtime = runtime or (pin, text)
        elif name == "cuda-toolkit":
            toolkit = toolkit or (pin, text)
        elif name == "nvidia-cuda-runtime":
            bare_runtime = bare_runtime or (pin, text)
        elif _CUDNN.match(name):
            cudnn = cudnn or pin
    chosen = runtime or toolkit or bare_runtime
    if chosen is None:
        if nvidia_seen:
            raise AnchorError(
                f"the wheel depends on {', '.join(sorted(set(nvidia_seen)))} but names no CUDA runtime",
                hint=(BUILT_WITH,),
            )
        return CudaPins(cuda=None, cudnn=None, requirement=None)
    pin, text = chosen
    if pin is None:
        raise AnchorError(
            f"the CUDA requirement {text!r} is not an exact pin",
            hint=(BUILT_WITH,),
        )
    return CudaPins(cuda=_cuda_of(pin, text), cudnn=cudnn, requirement=text)


# --------------------------------------------------------------------------- the table


@record
class TorchVariant:
    """One cuXYZ build of a torch minor on the PyTorch wheel index."""

    tag: str  # "cu118"
    cuda: str  # "11.8"
    cudnn: str | None


@record
class TorchRow:
    """One torch minor of the table."""

    minor: str  # "2.3"
    releases: tuple[str, ...]
    pypi_cuda: str  # CUDA of the plain PyPI Linux x86_64 wheel
    pypi_requires: str  # the Requires-Dist pin that says so
    pypi_cudnn: str | None
    pypi_verified: bool
    variants: tuple[TorchVariant, ...] | None  # None: variant list unverified
    aarch64_pypi_cuda: bool
    python: tuple[str, str] | None = None  # (oldest, newest) CPython X.Y with wheels; None: not in the table

    def variant(self, cuda: str) -> TorchVariant | None:
        """The cuXYZ build for that CUDA, if the table lists one."""
        return next((v for v in self.variants or () if v.cuda == cuda), None)

    def nearest_tag(self, cuda: str) -> str | None:
        """The cuXYZ build nearest to `cuda` (its own when built; None: no verified variants)."""
        (major, minor), variants = _cuda_key(cuda), self.variants or ()
        best = min(variants, default=None, key=lambda v: (abs(_cuda_key(v.cuda)[0] - major),
                                                          abs(_cuda_key(v.cuda)[1] - minor), -_cuda_key(v.cuda)[1]))
        return best.tag if best else None

    def cudnn_for(self, cuda: str) -> str | None:
        """cuDNN of this minor's build for cuda (the PyPI wheel's METADATA wins for its own CUDA)."""
        if cuda == self.pypi_cuda and self.pypi_cudnn:
            return self.pypi_cudnn
        v = self.variant(cuda)
        return v.cudnn if v else None


@record
class TorchTable:
    """The validated torch table (package data envlock/data/torch.yaml)."""

    table_version: int
    sources: tuple[tuple[str, str], ...]
    rows: tuple[TorchRow, ...]

    def row_for(self, version: Version) -> TorchRow | None:
        """The row listing exactly that release, else None."""
        return next((r for r in self.rows if any(Version(x) == version for x in r.releases)), None)

    def python_span(self, torch: str) -> tuple[str, str] | None:
        """(oldest, newest) CPython X.Y torch has wheels for (None: not in the table, or no range known)."""
        try:
            row = self.row_for(Version(Version(torch).public))
        except InvalidVersion:
            return None
        return row.python if row is not None else None

    def releases(self) -> tuple[str, ...]:
        """Every release the table knows, oldest first."""
        return tuple(x for r in self.rows for x in r.releases)


def _table_error(msg: str) -> AnchorError:
    return AnchorError(
        f"envlock's torch table is invalid: {msg}",
        hint=f"{REINSTALL_HINT}; if you edited envlock/data/torch.yaml, fix it (tests/test_torch_table.py)",
    )


def _yaml_load_unique(text: str) -> Any:
    """YAML -> Python, refusing duplicate mapping keys (PyYAML keeps the last one silently)."""
    import yaml  # noqa: PLC0415 - lazy, only the table needs it

    # libyaml's parser when PyYAML has it (~10x faster; the table is read on every resolve and check).
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class UniqueKeyLoader(base):  # type: ignore[valid-type,misc]  # the loader base is chosen at run time (libyaml's when PyYAML has it)
        pass

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
        dups = sorted({str(k) for k in keys if keys.count(k) > 1})
        if dups:
            raise _table_error(f"duplicate keys {', '.join(dups)} (line {node.start_mark.line + 1})")
        return loader.construct_mapping(node, deep=deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _table_error(f"not valid YAML ({exc})") from None


def cuda_of_tag(tag: str) -> str | None:
    """'cu118' -> '11.8'; None for anything that is not a cuXYZ tag."""
    m = _CU_TAG_RE.match(tag)
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


def _cuda_key(cuda: str) -> tuple[int, int]:
    major, minor = cuda.split(".")
    return int(major), int(minor)


def _check_cudnn(value: Any, where: str) -> str | None:
    if value is None:
        return None
    try:
        ok = isinstance(value, str) and len(Version(value).release) >= 3 and Version(value).local is None
    except InvalidVersion:
        ok = False
    if not ok:
        raise _table_error(f"{where}: cuDNN {value!r} is not a version like 8.9.2.26")
    return str(value)


def _parse_row(minor: Any, raw: Any) -> TorchRow:
    """One validated row."""
    if not isinstance(minor, str) or not _CUDA_RE.match(minor) or not isinstance(raw, dict):
        raise _table_error(f"torch minor {minor!r} must be a quoted 'X.Y' key with a mapping")
    releases = raw.get("releases")
    if not isinstance(releases, list) or not releases or not all(isinstance(x, str) for x in releases):
        raise _table_error(f"{minor}: releases must be a non-empty list of strings")
    try:
        parsed = [Version(x) for x in releases]
    except InvalidVersion as exc:
        raise _table_error(f"{minor}: {exc}") from None
    for x, v in zip(releases, parsed, strict=True):
        if v.local or v.is_prerelease or len(v.release) != 3 or f"{v.major}.{v.minor}" != minor:
            raise _table_error(f"{minor}: release {x!r} is not a plain {minor}.N release")
    if parsed != sorted(set(parsed)):
        raise _table_error(f"{minor}: releases must be sorted without duplicates")
    pypi = raw.get("pypi")
    if not isinstance(pypi, dict):
        raise _table_error(f"{minor}: pypi must be a mapping")
    cuda = pypi.get("cuda")
    if not isinstance(cuda, str) or not _CUDA_RE.match(cuda):
        raise _table_error(f"{minor}: pypi.cuda {cuda!r} is not 'X.Y'")
    requires = pypi.get("requires")
    if not isinstance(requires, str):
        raise _table_error(f"{minor}: pypi.requires must be the Requires-Dist pin")
    if parse_cuda_pins([requires]).cuda != cuda:
        raise _table_error(f"{minor}: pypi.requires {requires!r} does not say CUDA {cuda}")
    verified = pypi.get("verified")
    aarch64 = raw.get("aarch64_pypi_cuda")
    if not isinstance(verified, bool) or not isinstance(aarch64, bool):
        raise _table_error(f"{minor}: pypi.verified and aarch64_pypi_cuda must be true/false")
    return TorchRow(
        minor=minor,
        releases=tuple(releases),
        pypi_cuda=cuda,
        pypi_requires=requires,
        pypi_cudnn=_check_cudnn(pypi.get("cudnn"), f"{minor} pypi"),
        pypi_verified=verified,
        variants=_parse_variants(minor, raw.get("variants"), cuda),
        aarch64_pypi_cuda=aarch64,
        python=_parse_python(minor, raw.get("python")),
    )


def _parse_python(minor: str, raw: Any) -> tuple[str, str] | None:
    """[oldest, newest] CPython X.Y (optional key)."""
    if raw is None:
        return None
    ok = isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, str) and _CUDA_RE.match(x) for x in raw)
    if not ok or _cuda_key(raw[0]) > _cuda_key(raw[1]):
        raise _table_error(f"{minor}: python must be [oldest, newest] as 'X.Y' strings")
    return raw[0], raw[1]


def _parse_variants(minor: str, raw: Any, default_cuda: str) -> tuple[TorchVariant, ...] | None:
    """The cuXYZ -> cuDNN map of a row, sorted by CUDA and containing the PyPI default."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        raise _table_error(f"{minor}: variants must be a cuXYZ -> cuDNN mapping or null")
    out = []
    for tag, cudnn in raw.items():
        cuda = cuda_of_tag(str(tag))
        if cuda is None:
            raise _table_error(f"{minor}: variant {tag!r} is not a cuXYZ tag")
        out.append(TorchVariant(tag=str(tag), cuda=cuda, cudnn=_check_cudnn(cudnn, f"{minor} {tag}")))
    keys = [_cuda_key(v.cuda) for v in out]
    if keys != sorted(set(keys)):
        raise _table_error(f"{minor}: variants must be sorted by CUDA without duplicates")
    if default_cuda not in {v.cuda for v in out}:
        raise _table_error(f"{minor}: the PyPI default CUDA {default_cuda} is not among its variants")
    return tuple(out)


def parse_torch_table(text: str) -> TorchTable:
    """Validate the table's YAML text into frozen rows (AnchorError on any defect)."""
    return torch_table_of(_yaml_load_unique(text))


def torch_table_of(data: Any) -> TorchTable:
    """Validate the table's document (YAML's, or the compiled copy's: envlock/core/tables/compiled.py) into frozen rows."""
    if not isinstance(data, dict):
        raise _table_error("the top level must be a mapping")
    if data.get("schema_version") != SUPPORTED_TABLE_SCHEMA:
        raise _table_error(f"schema_version {data.get('schema_version')!r} is not {SUPPORTED_TABLE_SCHEMA}")
    table_version, sources, torch = data.get("table_version"), data.get("sources"), data.get("torch")
    if not isinstance(table_version, int) or isinstance(table_version, bool) or table_version < 1:
        raise _table_error("table_version must be a positive integer")
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise _table_error("sources must map names to strings")
    if not isinstance(torch, dict) or not torch:
        raise _table_error("torch must be a non-empty mapping of minors")
    rows = tuple(_parse_row(minor, raw) for minor, raw in torch.items())
    minors = [_cuda_key(r.minor) for r in rows]
    if minors != sorted(minors):
        raise _table_error("torch minors must be sorted oldest first")
    return TorchTable(
        table_version=table_version,
        sources=tuple((str(k), v) for k, v in sources.items()),
        rows=rows,
    )
