"""torch -> the CUDA (and cuDNN) it was built with: the anchor every plan is derived from. PURE.

Sources, first match wins: a --cuda override, a local label (+cu118), the installed torch of a python,
conda-forge's pytorch builds, envlock's torch table, the user's package index. The table is an argument,
and so is every source that needs a process or the network (`Sources`: the installed torch's answer, a
lookup of conda-forge's builds, a lookup on the index), made by the caller: no network, no subprocess
and no file read here (tests/test_purity.py checks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from packaging.version import InvalidVersion, Version

from envlock.errors import AnchorError, HintPart, Setting, SpecError, again
from envlock.models import Anchor, InstalledTorch, TorchSource, record, replace
from envlock.core.tables import TorchRow, TorchTable, cuda_of_tag
from envlock.core.torch_support import check_cuda_major

_CUDA_RE = re.compile(r"^(\d+)\.(\d+)$")
_CONDA_BUILD_CUDA_RE = re.compile(r"^cuda(\d+?)(\d)(?:_|py)")  # cuda126_generic_py311_..., cuda118py310...
#: The sources that need a process or the network: a lock records their answer, which `check` reuses.
EXTERNAL_SOURCES = frozenset({"installed", "conda-forge", "pypi"})


class IndexAnswer(Protocol):
    """What the package index says of a torch release (envlock.seams.pypi.TorchMetadata)."""

    cuda: str
    cudnn: str | None
    requirement: str
    wheel: str
    index: str
    cached: bool


CondaForgeLookup = Callable[[str], list[tuple[str, str]]]  # release -> [(version, build)] of `pytorch`
IndexLookup = Callable[[str], IndexAnswer]


@record
class Sources:
    """The answers that need a process or the network; None: not available here (`check` has none)."""

    installed: InstalledTorch | None = None  # the probe's answer (envlock.seams.installed_torch), for `installed`
    conda_forge: CondaForgeLookup | None = None
    index: IndexLookup | None = None


@record
class TorchAsk:
    """A `--torch` value (or a spec's `envlock.torch`), read once: every later step uses these parts."""

    text: str  # as given, stripped: what a spec records
    version: Version | None  # the public release; None for `installed`
    local: str | None = None  # "cu118" of 2.3.0+cu118

    @property
    def installed(self) -> bool:
        return self.version is None

    @property
    def public(self) -> str:
        """The release as written, without its label ('2.3.0' of '2.3.0+cu118')."""
        return self.text.partition("+")[0]


# --------------------------------------------------------------------------- reading the inputs


def read_torch(text: str) -> TorchAsk:
    """'2.3.0+cu118' -> TorchAsk; 'installed' -> the installed torch; SpecError with a hint when malformed."""
    raw = text.strip()
    if raw == "installed":
        return TorchAsk(raw, None)
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
        full = f"{v.public}{'.0' * (3 - len(v.release))}" + (f"+{v.local}" if v.local else "")
        raise SpecError(
            f"{text!r} is not a full torch release (torch versions have three parts)",
            hint=("the release: ", again("--torch", full), ", or 'installed'"),
        )
    return TorchAsk(raw, Version(v.public), v.local)


def parse_cuda(text: str) -> str:
    """'12.1' -> '12.1' (normalised); SpecError unless it is exactly major.minor."""
    m = _CUDA_RE.match(text.strip())
    if not m:
        raise SpecError(f"--cuda {text!r} is not a CUDA version of the form X.Y", hint="e.g. --cuda 12.1")
    return f"{int(m.group(1))}.{int(m.group(2))}"


def source_of(ask: TorchAsk, cuda: str | None, torch_source: TorchSource, table: TorchTable) -> str:
    """Which source answers (the order `derive` follows): override, local-label, installed, conda-forge,
    table or pypi. An EXTERNAL_SOURCES answer needs `Sources`."""
    if ask.installed:
        return "installed"
    if cuda is not None:
        return "override"
    if ask.local:
        return "local-label"
    if torch_source == "conda-forge":
        return "conda-forge"
    assert ask.version is not None
    return "table" if table.row_for(ask.version) is not None else "pypi"


# --------------------------------------------------------------------------- the anchor


def derive(
    ask: TorchAsk, *, cuda: str | None, torch_source: TorchSource, table: TorchTable, sources: Sources = Sources()
) -> Anchor:
    """The anchor: the first source in the documented order that knows it (`cuda`: parse_cuda's answer)."""
    source = source_of(ask, cuda, torch_source, table)
    if source == "installed":
        return _from_installed(sources.installed, cuda, torch_source, table)
    assert ask.version is not None
    version = ask.version
    if ask.local and torch_source == "conda-forge":
        raise SpecError(
            f"torch {ask.text} names a pip wheel (+{ask.local}); conda-forge builds have no local labels",
            hint=("conda-forge's build of the release: ", again("--torch", str(version)), ", or the wheel: ",
                  again(drop=("--torch-source",))),
        )
    if source == "override":
        assert cuda is not None
        return _from_override(version, cuda, ask.local, torch_source, table)
    if source == "local-label":
        return _from_local_label(version, str(ask.local), table)
    if source == "conda-forge":
        return _from_conda_forge(version, sources.conda_forge, table)
    row = table.row_for(version)
    if row is not None:
        return _from_table(version, row, table)
    if sources.index is None:
        raise AnchorError(
            f"torch {version} is not in envlock's table and its package index cannot be asked here",
            hint=(Setting("--cuda", "X.Y", "the CUDA torch was built with"),),
        )
    return _from_index(version, sources.index(str(version)), table)


def _facts(torch: str, table: TorchTable) -> dict[str, Any]:
    """What the table says of the release besides its CUDA: its wheels' python span, aarch64 CUDA wheels."""
    try:
        row = table.row_for(Version(torch))
    except InvalidVersion:
        row = None
    if row is None:
        return {}
    return {"python_span": row.python, "aarch64_cuda_wheels": row.aarch64_pypi_cuda}


def _anchor(table: TorchTable, **fields: Any) -> Anchor:
    return Anchor(**fields, **_facts(fields["torch"], table))


def _release_name(version: Version, row: TorchRow | None) -> str:
    """The release string as the table spells it (keeps 2.3.0 as given)."""
    if row is not None:
        return next((x for x in row.releases if Version(x) == version), str(version))
    return str(version)


def _from_override(version: Version, cuda: str, local: str | None, source: TorchSource, table: TorchTable) -> Anchor:
    row = table.row_for(version)
    if row is not None and row.variants is not None:  # an unverified variant list judges nothing
        check_cuda_major(_release_name(version, row), cuda, [v.cuda for v in row.variants],
                         [v.tag for v in row.variants])
    known = ", ".join(v.tag for v in row.variants or ()) if row else ""
    detail = f"CUDA {cuda} set by --cuda"
    own = None  # the CUDA of torch's own build, where it is known and not the override's
    if local is not None:
        own = cuda_of_tag(local)  # the build the label names
    elif row is not None and row.variants is not None and row.variant(cuda) is None and cuda != row.pypi_cuda:
        own = row.pypi_cuda  # no build of that CUDA: torch's is the default wheel's
    if row is not None and row.variants is not None and row.variant(cuda) is None and cuda != row.pypi_cuda:
        detail += f" (torch {_release_name(version, row)} itself was built for {known})"
    return _anchor(
        table,
        torch=_release_name(version, row),
        cuda=cuda,
        cudnn=row.cudnn_for(own or cuda) if row else None,  # the cuDNN torch itself loads
        source="override",
        detail=detail,
        torch_source=source,
        local_label=local,
        torch_cuda=own if own != cuda else None,
    )


def _from_local_label(version: Version, local: str, table: TorchTable) -> Anchor:
    cuda = cuda_of_tag(local)
    if cuda is None:
        kind = "a CPU" if local == "cpu" else ("a ROCm" if local.startswith("rocm") else f"a +{local}")
        if local == "xpu":
            kind = "an Intel XPU"
        row = table.row_for(version)
        name = _release_name(version, row)
        fix: tuple[HintPart, ...] = ("the default wheel (a CUDA build on linux-64): ", again("--torch", name))
        tag = row.nearest_tag(row.pypi_cuda) if row is not None else None
        if tag:
            fix = ("a CUDA build: ", again("--torch", f"{name}+{tag}"), ", or ", *fix)
        raise AnchorError(f"torch {version}+{local} is {kind} build: it has no CUDA to match a toolchain to", hint=fix)
    row = table.row_for(version)
    name = _release_name(version, row)
    if row is not None and row.variants is not None and row.variant(cuda) is None:
        nearest = row.nearest_tag(cuda)
        fix = ("only CUDA ", cuda, "'s toolchain, beside a torch you have: ",
               again("--torch", name, "--cuda", cuda, "--toolchain-only", drop=("--python", "--pip")))
        if nearest:
            fix = ("a build it has: ", again("--torch", f"{name}+{nearest}"), ", or ", *fix)
        raise AnchorError(
            f"torch {name} was never built as +{local}; its CUDA builds are "
            + ", ".join(v.tag for v in row.variants),
            hint=fix,
        )
    where = "listed in envlock's table" if row is not None else "not in envlock's table"
    return _anchor(
        table,
        torch=name,
        cuda=cuda,
        cudnn=row.cudnn_for(cuda) if row else None,
        source="local-label",
        detail=f"local label +{local} of torch {name} means CUDA {cuda} ({where})",
        torch_source="pip",
        local_label=local,
    )


def _from_table(version: Version, row: TorchRow, table: TorchTable) -> Anchor:
    name = _release_name(version, row)
    detail = (
        f"the default PyPI Linux x86_64 wheel of torch {name} requires {row.pypi_requires} "
        f"(envlock torch table v{table.table_version})"
    )
    if not row.pypi_verified:
        detail += "; unverified: inferred from the pin, torch.version.cuda was not checked"
    return _anchor(table, torch=name, cuda=row.pypi_cuda, cudnn=row.pypi_cudnn, source="table", detail=detail)


def _from_index(version: Version, meta: IndexAnswer, table: TorchTable) -> Anchor:
    cached = " (cached)" if meta.cached else ""
    return _anchor(
        table,
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


def _cuda_key(cuda: str) -> tuple[int, int]:
    major, minor = cuda.split(".")
    return int(major), int(minor)


def _from_conda_forge(version: Version, lookup: CondaForgeLookup | None, table: TorchTable) -> Anchor:
    if lookup is None:
        raise AnchorError(
            f"cannot look up conda-forge's pytorch {version} builds here",
            hint=("torch from the package index: ", again(drop=("--torch-source",)),
                  ", or ", Setting("--cuda", "X.Y", "the CUDA of the build")),
        )
    records = [(v, b) for v, b in lookup(str(version)) if _same_version(v, version)]
    builds = sorted(
        ((c, b) for _, b in records if (c := cuda_of_conda_build(b))), key=lambda cb: _cuda_key(cb[0])
    )
    if not builds:
        what = "only as " + ", ".join(sorted({b for _, b in records})[:5]) if records else "no build at all"
        raise AnchorError(
            f"conda-forge has pytorch {version} with {what}: no CUDA build to anchor on",
            hint=("torch from the package index: ", again(drop=("--torch-source",)),
                  ", or a version conda-forge builds with CUDA"),
        )
    cuda, build = builds[-1]
    all_cudas = ", ".join(sorted({c for c, _ in builds}, key=_cuda_key))
    return _anchor(
        table,
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


def _normalise_runtime_cuda(text: str) -> str | None:
    """torch.version.cuda ('12.1', '12.1.105') -> '12.1'."""
    parts = text.strip().split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"{int(parts[0])}.{int(parts[1])}"
    return None


def _cudnn_text(value: Any) -> str | None:
    """torch.backends.cudnn.version() (8902 / 90100) -> '8.9.2' / '9.1.0'."""
    if not isinstance(value, int) or value <= 0:
        return None
    if value >= 90000:  # cuDNN 9 encodes major*10000 + minor*100 + patch
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def _from_installed(found: InstalledTorch | None, override: str | None, source: TorchSource,
                    table: TorchTable) -> Anchor:
    if found is None:
        raise AnchorError("the installed torch cannot be asked here", hint="give --torch VERSION")
    exe = f"{found.exe} ({found.chosen})" if found.chosen != "--python-exe" else found.exe
    if found.error is not None:
        raise AnchorError(
            f"torch cannot be imported by {exe}: {found.error}",
            hint="install torch there, point --python-exe at the python that has it, or give --torch VERSION",
        )
    try:
        v = Version(str(found.version))
    except InvalidVersion:
        raise AnchorError(
            f"the torch of {exe} reports an unreadable version {found.version!r}",
            hint="give --torch VERSION instead",
        ) from None
    version, local = Version(v.public), v.local
    built = _normalise_runtime_cuda(found.cuda) if found.cuda else None
    if override is not None:
        if built:  # what this torch itself was built for, whatever the table says of the release
            check_cuda_major(str(v), override, [built])
        anchor = _from_override(version, override, local, source, table)
        return replace(anchor, detail=anchor.detail + f" (torch {v} installed in {exe})",
                       torch_cuda=built if built and built != override else None,
                       cudnn=_cudnn_text(found.cudnn) or (None if built else anchor.cudnn))
    if built is None:
        raise AnchorError(
            f"the torch {v} of {exe} is a CPU build (torch.version.cuda is None): it has no CUDA to match",
            hint=("install a CUDA build of torch there, or ", Setting("--cuda", "X.Y", "the toolchain's CUDA")),
        )
    return _anchor(
        table,
        torch=str(version),
        cuda=built,
        cudnn=_cudnn_text(found.cudnn),
        source="installed",
        detail=f"torch.version.cuda of torch {v} installed in {exe} ({found.file})",
        torch_source=source,
        local_label=local,
    )


# --------------------------------------------------------------------------- a lock's anchor


def recorded(data: Any, table: TorchTable) -> Anchor | None:
    """The anchor a lock records (its `envlock.anchor` JSON, already parsed), if readable."""
    if not isinstance(data, Mapping):
        return None
    try:
        return _anchor(
            table,
            torch=str(data["torch"]),
            cuda=str(data["cuda"]),
            cudnn=data.get("cudnn"),
            source=str(data.get("source", "")),
            detail=str(data.get("detail", "")),
            torch_source=data.get("torch_source", "pip"),
            local_label=data.get("local_label"),
            torch_cuda=str(data["torch_cuda"]) if data.get("torch_cuda") else None,
        )
    except KeyError:
        return None


def reusable(ask: TorchAsk, cuda: str | None, torch_source: str, lock_anchor: Anchor | None) -> bool:
    """Whether a lock's anchor stands for what a spec asks and cannot be re-derived offline (re-asking the
    network or a python would make `check` flaky, and an installed torch is not in the spec at all)."""
    if lock_anchor is None or lock_anchor.source not in EXTERNAL_SOURCES or cuda is not None or ask.local:
        return False
    return lock_anchor.torch == ask.public and lock_anchor.torch_source == torch_source
