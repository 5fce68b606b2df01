"""The PyPI part's indexes and the variant check (the `- pip:` list and requirements files: envlock.formats).

Pure apart from the pypi table (envlock.core.tables) and the user's pip configuration (envlock.seams.pypi.pipconf).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envlock.errors import AnchorError, HintPart, SpecError, again
from envlock.models import PypiPackage
from envlock.seams.net import scrub

_RUNTIME = re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$")


@dataclass(frozen=True, slots=True)
class Index:
    """A package index: the URL uv fetches from and the one the lock records (mirrors differ)."""

    url: str
    canonical: str
    pytorch: bool = False  # the PyTorch wheel index of a +cuXYZ torch (it gives no upload times: undated.py)


def variant_index_url(variant: str) -> str:
    """The canonical PyTorch wheel index of a variant (cu126 -> …/whl/cu126): envlock.core.tables'."""
    from envlock.core.tables import variant_index_url as from_table

    return from_table(variant)


def python_platform(platform: str, glibc: str) -> str:
    """uv's --python-platform for a conda subdir (manylinux level = the spec's glibc)."""
    major, _, minor = glibc.partition(".")
    linux = f"manylinux_{int(major)}_{int(minor or 0)}"
    names = {"linux-64": f"x86_64-{linux}", "linux-aarch64": f"aarch64-{linux}", "win-64": "x86_64-pc-windows-msvc"}
    if platform not in names:
        raise SpecError(f"no PyPI platform for {platform}", hint="lock linux-64, linux-aarch64 or win-64")
    return names[platform]


def index_root(url: str) -> str:
    """`https://host/whl/cu126` and `…/simple/` -> the prefix its file URLs share (without `simple/`)."""
    url = url.rstrip("/")
    return (url.removesuffix("/simple") if url.endswith("/simple") else url) + "/"


# --------------------------------------------------------------------------- the variant check


def locked_cuda(packages: Sequence[PypiPackage]) -> tuple[str | None, str | None]:
    """(CUDA major.minor of the locked torch, its version) from its local label or its CUDA runtime pin."""
    torch = next((p for p in packages if p.name == "torch"), None)
    if torch is None:
        return None, None
    local = torch.version.partition("+")[2]
    if local.startswith("cu") and local[2:].isdigit() and len(local) >= 4:
        digits = local[2:]
        return f"{int(digits[:-1])}.{int(digits[-1])}", torch.version
    if local:
        return None, torch.version  # +cpu, +rocm…
    runtime = next((p for p in packages if _RUNTIME.match(p.name)), None)
    if runtime is None:
        return None, torch.version
    major, _, rest = runtime.version.partition(".")
    return f"{int(major)}.{int(rest.split('.')[0])}", torch.version


def check_variant(packages: Sequence[PypiPackage], anchor_cuda: str, anchor_torch: str, platform: str,
                  index: str) -> None:
    """The locked torch must be a CUDA build of the anchor's CUDA; a CPU build is refused, naming the fix."""
    cuda, version = locked_cuda(packages)
    if version is None:
        return  # the conda part provides torch (torch_source conda-forge)
    tag = "cu" + anchor_cuda.replace(".", "")
    release = anchor_torch.partition("+")[0]
    toolchain = again("--toolchain-only", drop=("--python", "--pip"))
    fix: tuple[HintPart, ...] = ("only the toolchain, beside the torch you have: ", toolchain)
    built = _variant_tags(release)
    if built is None or tag in built:  # never a label the release was not built as (it would be refused)
        fix = (f"the CUDA build from the PyTorch wheel index ({variant_index_url(tag)}): ",
               again("--torch", f"{release}+{tag}", drop=("--cuda",)), ", or only the toolchain: ", toolchain)
    if cuda is None:
        raise AnchorError(
            f"torch {version} for {platform} from {scrub(index)} is a CPU build (no CUDA runtime among "
            f"its dependencies), not CUDA {anchor_cuda}",
            hint=fix,
        )
    if cuda != anchor_cuda:
        raise AnchorError(
            f"the locked torch {version} on {platform} is a CUDA {cuda} build, but the anchor is CUDA {anchor_cuda}",
            hint=fix,
        )


def _variant_tags(release: str) -> tuple[str, ...] | None:
    """The cuXYZ builds envlock's torch table lists for a release (None: not in the table, or unverified)."""
    from packaging.version import InvalidVersion, Version

    from envlock.core.tables import torch_table

    try:
        row = torch_table().row_for(Version(release))
    except InvalidVersion:
        return None
    return None if row is None or row.variants is None else tuple(v.tag for v in row.variants)


def spec_indexes(label: str | None, torch_source: str, mirrors: Mapping[str, str]) -> tuple[Index, tuple[Index, ...]]:
    """(default index, extra indexes) for uv: the user's pip configuration, plus the variant index of a +cuXYZ torch
    (`label`: the spec's torch label, EnvSpec.torch_label).

    With a `pypi=` mirror every index is read from it (it holds the variant index's wheels too).
    """
    from envlock.seams.mirror_urls import PYPI
    from envlock.seams.pypi.pipconf import configured_extra_index_urls, configured_index_url

    default_url, _ = configured_index_url()
    mirror = mirrors.get(PYPI)
    extras = [] if mirror else [Index(u, u) for u in configured_extra_index_urls()[0]]
    if label and torch_source == "pip":
        canon = variant_index_url(label)
        fetch = next((v for k, v in mirrors.items() if k.rstrip("/") == canon.rstrip("/")), mirror or canon)
        extras.insert(0, Index(fetch, canon, pytorch=True))
    return Index(mirror or default_url, default_url), tuple(extras)


def canonical_wheel_urls(pypi_index: str) -> dict[str, str]:
    """file name -> canonical URL, from the wheels.json beside a `pypi=` mirror's simple index (re-locking;
    `envlock mirror` writes it: envlock/usecases/channeldir.py)."""
    from envlock.errors import ChannelError
    from envlock.names import file_url_path
    from envlock.seams.net import get_text
    from envlock.formats.untrusted import DOC_CAP, load_json, read_capped

    url = index_root(pypi_index) + "wheels.json"
    why = ("locking through a pypi= mirror needs the canonical URL of each wheel, which `envlock mirror` writes there")
    hint = "mirror the lock with `envlock mirror`, or lock against the index itself (PIP_INDEX_URL)"
    try:
        if url.startswith("file:"):
            text = read_capped(file_url_path(url), DOC_CAP, ChannelError)
        else:
            text = get_text(url, what=scrub(url), hint=hint)
        doc = load_json(text, scrub(url), ChannelError, hint=hint)
        return {str(fn): str(rec["url"]) for fn, rec in doc.items()}
    except ChannelError as exc:
        raise ChannelError(f"{exc.message}: {why}", hint=hint) from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:  # unreadable, or not wheels.json
        raise ChannelError(f"cannot read {scrub(url)} ({type(exc).__name__}): {why}", hint=hint) from None
