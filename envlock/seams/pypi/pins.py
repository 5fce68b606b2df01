"""torch's CUDA pins out of a wheel's METADATA (pure). The Requires-Dist parser itself is the torch table's
(envlock.core.tables.torch.parse_cuda_pins): the table's quoted pins and a live wheel are read alike."""

from __future__ import annotations

import email.parser

from envlock.core.tables.torch import CudaPins, parse_cuda_pins

__all__ = ["CudaPins", "parse_cuda_pins", "requires_dist_of"]


def requires_dist_of(metadata: str) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA (PEP 658 file or the wheel's own)."""
    msg = email.parser.HeaderParser().parsestr(metadata)
    return [str(v) for v in (msg.get_all("Requires-Dist") or [])]
