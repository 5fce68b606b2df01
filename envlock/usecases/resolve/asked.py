"""A request's inputs read once into a frozen `Asked`, which flows down: nothing below parses them again.

`of_request` reads resolve's inputs (the --torch value with its local label, --cuda, --torch-source, the
platforms, the channels) — the command adapter calls it once, and `resolve()` only when an API caller handed no
Asked in; `of_spec` reads the same inputs of a spec's envlock block for `lock`, `update` and `check` (the
spec's torch_source was checked when the spec was read, formats/spec.py). The anchor's sources, the anchor and
the spec a resolve writes take the Asked: the torch value is split into release and label once (by
envlock.core.anchor.read_torch), the platforms are checked once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from envlock.core import anchor as anchors
from envlock.errors import AnchorError, SpecError, UsageError
from envlock.formats.spec import EnvSpec, check_torch_source
from envlock.models import KNOWN_SUBDIRS, TorchSource, default_platform, record

MACOS = ("osx-64", "osx-arm64")


@record
class Asked:
    """What a request asks for, each input read once."""

    torch: anchors.TorchAsk  # the release and its local label (+cu121), or `installed`
    cuda: str | None  # X.Y, normalised (--cuda, a spec's `cuda:`); None: the anchor decides
    torch_source: TorchSource
    platforms: tuple[str, ...]  # checked, each once, in the order given
    channels: tuple[str, ...]  # as given; none: conda-forge

    @property
    def label(self) -> str | None:
        """The torch's local label ('cu121' of 2.3.0+cu121): a PyTorch-index wheel."""
        return self.torch.local

    @property
    def channel_names(self) -> tuple[str, ...]:
        return self.channels or ("conda-forge",)


def check_platforms(platforms: Sequence[str]) -> tuple[str, ...]:
    """Validate --platform values; macOS and unknown subdirs are refused."""
    out: list[str] = []
    for p in platforms:
        if p in MACOS:
            raise AnchorError(
                f"{p}: torch on macOS has no CUDA, so there is no CUDA toolchain to lock",
                hint="lock linux-64, linux-aarch64 or win-64 (e.g. --platform linux-64)",
            )
        if p not in KNOWN_SUBDIRS or p == "linux-ppc64le":
            raise SpecError(
                f"unknown or unsupported platform {p!r}",
                hint="use linux-64, linux-aarch64 or win-64",
            )
        if p not in out:
            out.append(p)
    return tuple(out)


def of_request(torch: str, *, cuda: str | None = None, torch_source: str = "pip", platforms: Sequence[str] = (),
                 channels: Sequence[str] = ()) -> Asked:
    """resolve's inputs, read: SpecError/AnchorError/UsageError naming the one that is malformed."""
    source = check_torch_source(torch_source, "--torch-source", UsageError)
    return Asked(
        torch=anchors.read_torch(torch),
        cuda=anchors.parse_cuda(cuda) if cuda is not None else None,
        torch_source=source,
        platforms=check_platforms(platforms or (default_platform(),)),
        channels=tuple(channels),
    )


def of_spec(spec: EnvSpec) -> Asked:
    """A spec's inputs, read (its torch_source and platforms as the spec reader left them)."""
    return Asked(
        torch=anchors.read_torch(spec.torch),
        cuda=anchors.parse_cuda(spec.cuda) if spec.cuda is not None else None,
        torch_source=cast(TorchSource, spec.torch_source),
        platforms=tuple(spec.platforms),
        channels=tuple(spec.channels),
    )
