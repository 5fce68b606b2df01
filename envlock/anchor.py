"""torch -> the CUDA (and cuDNN) it was built with: the anchor every plan is derived from.

Sources, first match wins: --cuda override, a local label (+cu118), the installed torch of a python,
conda-forge's pytorch builds (via an injected lookup), envlock's shipped table, the user's index.
No typer, no rattler here (a test checks); the index client and subprocess are imported lazily.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from envlock import REINSTALL_HINT
from envlock.errors import AnchorError, SpecError
from envlock.models import CUDA_PLATFORMS, KNOWN_SUBDIRS, Anchor, TorchSource
from envlock.pypi import IndexSettings
from envlock.torch_support import check_cuda_major

SUPPORTED_TABLE_SCHEMA = 1
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)$")
_CU_TAG_RE = re.compile(r"^cu(\d+)(\d)$")  # cu118 -> 11.8, cu130 -> 13.0
_CONDA_BUILD_CUDA_RE = re.compile(r"^cuda(\d+?)(\d)(?:_|py)")  # cuda126_generic_py311_..., cuda118py310...
_INSTALLED_TIMEOUT_S = 120.0  # importing a real torch can take many seconds on a cold disk
_PROBE_MARK = "ENVLOCK-TORCH-PROBE "
CondaForgeLookup = Callable[[str], list[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class AnchorRequest:
    """Everything the anchor is derived from (what the user asked for)."""

    torch: str  # "2.3.0", "2.3.0+cu118" or "installed"
    cuda: str | None = None  # --cuda X.Y override
    torch_source: TorchSource = "pip"
    python_exe: str | None = None  # the python whose torch `installed` asks (None: this interpreter)
    offline: bool = False
    index: IndexSettings = field(default_factory=IndexSettings)
    # (torch version) -> [(version, build string)] of conda-forge `pytorch` records; given by solver.py
    conda_forge_lookup: CondaForgeLookup | None = None


# --------------------------------------------------------------------------- the shipped table


@dataclass(frozen=True, slots=True)
class TorchVariant:
    """One cuXYZ build of a torch minor on the PyTorch wheel index."""

    tag: str  # "cu118"
    cuda: str  # "11.8"
    cudnn: str | None


@dataclass(frozen=True, slots=True)
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

    def cudnn_for(self, cuda: str) -> str | None:
        """cuDNN of this minor's build for cuda (the PyPI wheel's METADATA wins for its own CUDA)."""
        if cuda == self.pypi_cuda and self.pypi_cudnn:
            return self.pypi_cudnn
        v = self.variant(cuda)
        return v.cudnn if v else None


@dataclass(frozen=True, slots=True)
class TorchTable:
    """The validated torch table (package data envlock/data/torch.yaml)."""

    schema_version: int
    table_version: int
    sources: tuple[tuple[str, str], ...]
    rows: tuple[TorchRow, ...]

    def row_for(self, version: Version) -> TorchRow | None:
        """The row listing exactly that release, else None."""
        return next((r for r in self.rows if any(Version(x) == version for x in r.releases)), None)

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

    class UniqueKeyLoader(base):  # type: ignore[valid-type,misc]
        pass

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
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
    return value


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
    from envlock.pypi import parse_cuda_pins  # noqa: PLC0415 - same parser as live metadata

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
    data = _yaml_load_unique(text)
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
        schema_version=SUPPORTED_TABLE_SCHEMA,
        table_version=table_version,
        sources=tuple((str(k), v) for k, v in sources.items()),
        rows=rows,
    )


@functools.cache
def load_torch_table() -> TorchTable:
    """The shipped table, validated once per process."""
    text = importlib.resources.files("envlock").joinpath("data", "torch.yaml").read_text(encoding="utf-8")
    return parse_torch_table(text)


def python_span(torch: str) -> tuple[str, str] | None:
    """(oldest, newest) CPython X.Y the table says torch has wheels for (None: not in the table)."""
    try:
        row = load_torch_table().row_for(Version(Version(torch).public))
    except InvalidVersion:
        return None
    return row.python if row is not None else None


# --------------------------------------------------------------------------- input parsing


def parse_torch_version(text: str) -> tuple[Version, str | None]:
    """'2.3.0+cu118' -> (Version('2.3.0'), 'cu118'); SpecError with a hint when malformed."""
    raw = text.strip()
    try:
        v = Version(raw)
    except InvalidVersion:
        v = None
    if v is None or not raw:
        raise SpecError(
            f"{text!r} is not a torch version",
            hint="give a torch release such as 2.3.0 or 2.3.0+cu118, or 'installed'",
        )
    if len(v.release) < 3:
        raise SpecError(
            f"{text!r} is not a full torch release (torch versions have three parts)",
            hint=f"give the release, e.g. {v.public}{'.0' * (3 - len(v.release))}, or 'installed'",
        )
    return Version(v.public), v.local


def parse_cuda(text: str) -> str:
    """'12.1' -> '12.1' (normalised); SpecError unless it is exactly major.minor."""
    m = _CUDA_RE.match(text.strip())
    if not m:
        raise SpecError(f"--cuda {text!r} is not a CUDA version of the form X.Y", hint="e.g. --cuda 12.1")
    return f"{int(m.group(1))}.{int(m.group(2))}"


def _normalise_runtime_cuda(text: str) -> str | None:
    """torch.version.cuda ('12.1', '12.1.105') -> '12.1'."""
    parts = text.strip().split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"{int(parts[0])}.{int(parts[1])}"
    return None


# --------------------------------------------------------------------------- the sources


def resolve_anchor(req: AnchorRequest) -> Anchor:
    """The anchor for a request: the first source in the documented order that knows it."""
    if req.torch_source not in ("pip", "conda-forge"):
        raise SpecError(
            f"unknown torch source {req.torch_source!r}", hint="use --torch-source pip or conda-forge"
        )
    override = parse_cuda(req.cuda) if req.cuda is not None else None
    if req.torch.strip() == "installed":
        return _from_installed(req, override)
    version, local = parse_torch_version(req.torch)
    if local and req.torch_source == "conda-forge":
        raise SpecError(
            f"torch {req.torch} names a pip wheel (+{local}); conda-forge builds have no local labels",
            hint=f"use --torch {version} --torch-source conda-forge, or --torch-source pip",
        )
    if override is not None:
        return _from_override(version, override, local, req.torch_source)
    if local:
        return _from_local_label(version, local)
    if req.torch_source == "conda-forge":
        return _from_conda_forge(version, req.conda_forge_lookup)
    row = load_torch_table().row_for(version)
    if row is not None:
        return _from_table(version, row)
    return _from_index(version, req)


def _release_name(version: Version, row: TorchRow | None) -> str:
    """The release string as the table spells it (2.3 never reaches here; keeps 2.3.0 as given)."""
    if row is not None:
        return next((x for x in row.releases if Version(x) == version), str(version))
    return str(version)


def _from_override(version: Version, cuda: str, local: str | None, source: TorchSource) -> Anchor:
    row = load_torch_table().row_for(version)
    if row is not None and row.variants is not None:  # an unverified variant list judges nothing
        check_cuda_major(_release_name(version, row), cuda, [v.cuda for v in row.variants],
                         [v.tag for v in row.variants])
    known = ", ".join(v.tag for v in row.variants or ()) if row else ""
    detail = f"CUDA {cuda} set by --cuda"
    if row is not None and row.variants is not None and row.variant(cuda) is None and cuda != row.pypi_cuda:
        detail += f" (torch {_release_name(version, row)} itself was built for {known})"
    return Anchor(
        torch=_release_name(version, row),
        cuda=cuda,
        cudnn=row.cudnn_for(cuda) if row else None,
        source="override",
        detail=detail,
        torch_source=source,
        local_label=local,
    )


def _from_local_label(version: Version, local: str) -> Anchor:
    cuda = cuda_of_tag(local)
    if cuda is None:
        kind = "a CPU" if local == "cpu" else ("a ROCm" if local.startswith("rocm") else f"a +{local}")
        if local == "xpu":
            kind = "an Intel XPU"
        raise AnchorError(
            f"torch {version}+{local} is {kind} build: it has no CUDA to match a toolchain to",
            hint=f"use a CUDA build (e.g. {version}+cu121 or plain {version}), or force one with --cuda X.Y",
        )
    row = load_torch_table().row_for(version)
    name = _release_name(version, row)
    if row is not None and row.variants is not None and row.variant(cuda) is None:
        raise AnchorError(
            f"torch {name} was never built as +{local}; its CUDA builds are "
            + ", ".join(v.tag for v in row.variants),
            hint=f"pick one of those labels, or force the toolchain with --torch {name} --cuda {cuda}",
        )
    where = "listed in envlock's table" if row is not None else "not in envlock's table"
    return Anchor(
        torch=name,
        cuda=cuda,
        cudnn=row.cudnn_for(cuda) if row else None,
        source="local-label",
        detail=f"local label +{local} of torch {name} means CUDA {cuda} ({where})",
        torch_source="pip",
        local_label=local,
    )


def _from_table(version: Version, row: TorchRow) -> Anchor:
    name = _release_name(version, row)
    table = load_torch_table()
    detail = (
        f"the default PyPI Linux x86_64 wheel of torch {name} requires {row.pypi_requires} "
        f"(envlock torch table v{table.table_version})"
    )
    if not row.pypi_verified:
        detail += "; unverified: inferred from the pin, torch.version.cuda was not checked"
    return Anchor(torch=name, cuda=row.pypi_cuda, cudnn=row.pypi_cudnn, source="table", detail=detail)


def _from_index(version: Version, req: AnchorRequest) -> Anchor:
    from envlock.pypi import torch_cuda_from_index  # noqa: PLC0415 - network client only when needed

    meta = torch_cuda_from_index(str(version), req.index, offline=req.offline)
    cached = " (cached)" if meta.cached else ""
    return Anchor(
        torch=str(version),
        cuda=meta.cuda,
        cudnn=meta.cudnn,
        source="pypi",
        detail=f"Requires-Dist of {meta.wheel} on the index {meta.index}: {meta.requirement}{cached}",
    )


def cuda_of_conda_build(build: str) -> str | None:
    """'cuda126_generic_py311_h1234_200' -> '12.6'; None for CPU (or unknown) builds."""
    m = _CONDA_BUILD_CUDA_RE.match(build)
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


def _from_conda_forge(version: Version, lookup: CondaForgeLookup | None) -> Anchor:
    if lookup is None:
        raise AnchorError(
            f"cannot look up conda-forge's pytorch {version} builds here",
            hint="use --torch-source pip, or pass the CUDA of the build as --cuda X.Y",
        )
    records = [(v, b) for v, b in lookup(str(version)) if _same_version(v, version)]
    builds = sorted(
        ((c, b) for _, b in records if (c := cuda_of_conda_build(b))), key=lambda cb: _cuda_key(cb[0])
    )
    if not builds:
        what = "only as " + ", ".join(sorted({b for _, b in records})[:5]) if records else "no build at all"
        raise AnchorError(
            f"conda-forge has pytorch {version} with {what}: no CUDA build to anchor on",
            hint="pick a version conda-forge builds with CUDA, use --torch-source pip, or pass --cuda X.Y",
        )
    cuda, build = builds[-1]
    all_cudas = ", ".join(sorted({c for c, _ in builds}, key=_cuda_key))
    return Anchor(
        torch=str(version),
        cuda=cuda,
        cudnn=None,  # conda-forge's libcudnn comes with the solve, not with the version
        source="conda-forge",
        detail=f"conda-forge pytorch {version} is built for CUDA {all_cudas}; newest: {cuda} ({build})",
        torch_source="conda-forge",
    )


def _same_version(text: str, version: Version) -> bool:
    try:
        return Version(text) == version
    except InvalidVersion:
        return False


# --------------------------------------------------------------------------- installed torch

_PROBE = f"""
import json, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # never a stray ./torch of the cwd
try:
    import torch
except BaseException as exc:
    print({_PROBE_MARK!r} + json.dumps({{"error": type(exc).__name__ + ": " + str(exc)}}))
    raise SystemExit(0)
cudnn = None
try:
    cudnn = torch.backends.cudnn.version()
except BaseException:
    pass
print({_PROBE_MARK!r} + json.dumps({{
    "version": str(torch.__version__),
    "cuda": getattr(torch.version, "cuda", None),
    "cudnn": cudnn,
    "file": getattr(torch, "__file__", None),
}}))
"""


def _probe_installed(python_exe: str) -> Mapping[str, Any]:
    """Run the probe in that python and return what it printed (AnchorError when it cannot run)."""
    import subprocess  # noqa: PLC0415 - only this source runs a process

    hint = "pass --python-exe PATH of the python that has torch, or give --torch VERSION"
    try:
        proc = subprocess.run(
            [python_exe, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=_INSTALLED_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise AnchorError(f"python {python_exe} does not exist", hint=hint) from None
    except PermissionError:
        raise AnchorError(f"python {python_exe} cannot be run (permission denied)", hint=hint) from None
    except subprocess.TimeoutExpired:
        raise AnchorError(
            f"`import torch` in {python_exe} did not finish within {_INSTALLED_TIMEOUT_S:.0f} s", hint=hint
        ) from None
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith(_PROBE_MARK)), None)
    if line is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise AnchorError(f"cannot ask the torch of {python_exe} (exit {proc.returncode}: {tail})", hint=hint)
    return json.loads(line[len(_PROBE_MARK) :])


def _cudnn_text(value: Any) -> str | None:
    """torch.backends.cudnn.version() (8902 / 90100) -> '8.9.2' / '9.1.0'."""
    if not isinstance(value, int) or value <= 0:
        return None
    if value >= 90000:  # cuDNN 9 encodes major*10000 + minor*100 + patch
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def _from_installed(req: AnchorRequest, override: str | None) -> Anchor:
    import sys  # noqa: PLC0415

    exe = req.python_exe or sys.executable
    found = _probe_installed(exe)
    if "error" in found:
        raise AnchorError(
            f"torch cannot be imported by {exe} ({found['error']})",
            hint="install torch there, point --python-exe at the python that has it, or give --torch VERSION",
        )
    try:
        v = Version(str(found["version"]))
    except InvalidVersion:
        raise AnchorError(
            f"the torch of {exe} reports an unreadable version {found['version']!r}",
            hint="give --torch VERSION instead",
        ) from None
    version, local = Version(v.public), v.local
    if override is not None:
        built = _normalise_runtime_cuda(str(found["cuda"])) if found.get("cuda") else None
        if built:  # what this torch itself was built for, whatever the table says of the release
            check_cuda_major(str(v), override, [built])
        anchor = _from_override(version, override, local, req.torch_source)
        return dataclasses.replace(anchor, detail=anchor.detail + f" (torch {v} installed in {exe})")
    cuda = _normalise_runtime_cuda(str(found["cuda"])) if found.get("cuda") else None
    if cuda is None:
        raise AnchorError(
            f"the torch {v} of {exe} is a CPU build (torch.version.cuda is None): it has no CUDA to match",
            hint="install a CUDA build of torch there, or force the toolchain with --cuda X.Y",
        )
    return Anchor(
        torch=str(version),
        cuda=cuda,
        cudnn=_cudnn_text(found.get("cudnn")),
        source="installed",
        detail=f"torch.version.cuda of torch {v} installed in {exe} ({found.get('file')})",
        torch_source=req.torch_source,
        local_label=local,
    )


# --------------------------------------------------------------------------- helpers for the caller


def default_env_name(anchor: Anchor) -> str:
    """torch<version>-cu<XY>, e.g. torch2.3.0-cu121."""
    return f"torch{anchor.torch}-{anchor.cuda_tag}"


def require_cuda_platform(platform: str) -> str:
    """The platform if envlock can lock a CUDA toolchain for it, else SpecError/AnchorError with a hint."""
    choose = ", ".join(CUDA_PLATFORMS)
    if platform in ("osx-64", "osx-arm64"):
        raise AnchorError(
            f"torch on macOS has no CUDA ({platform})",
            hint=f"lock for the machines that build CUDA extensions: --platform one of {choose}",
        )
    if platform not in KNOWN_SUBDIRS:
        raise SpecError(f"unknown platform {platform!r}", hint=f"use --platform with one of {choose}")
    if platform not in CUDA_PLATFORMS:
        raise AnchorError(
            f"envlock locks CUDA toolchains for {choose} only, not {platform}",
            hint=f"use --platform with one of {choose}",
        )
    return platform
