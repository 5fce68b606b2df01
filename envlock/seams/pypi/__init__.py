"""The PyPI seam: the package index the user's pip is configured with, and uv (the one owner of uv as a subprocess).

    pipconf.py  which index pip would use (PIP_INDEX_URL, pip's config files, pip's default)
    pins.py     torch's CUDA pins out of Requires-Dist (pure)
    simple.py   PEP 691/503 project pages (their files; which torch wheel to read first)
    index.py    the index client: PEP 658 metadata of torch's wheel, cached (the anchor)
    uv.py       uv itself: its binary, its environment, running it (envlock.seams.proc: timeout, Ctrl-C)
    part.py     the PyPI part's inputs and checks: `- pip:` lines, indexes, the variant check, requirements files
    compile.py  locking the PyPI part per platform with `uv pip compile`
    choose.py   which wheel of each locked package the lock records, at which URL
    undated.py  indexes without upload times (PEP 700), where the resolution cutoff cannot select
    uvreport.py uv's report in envlock's words: its error, the files it dropped for want of a date
    wheels.py   create's side: each locked wheel fetched once (envlock.seams.net), sha256-checked, installed by uv

HTTP goes through envlock.seams.net; nothing here imports requests before the network is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envlock import lazy_names

if TYPE_CHECKING:
    from envlock.seams.pypi.index import IndexSettings, TorchMetadata, cache_root, redact, torch_cuda_from_index
    from envlock.seams.pypi.pins import CudaPins, parse_cuda_pins, requires_dist_of
    from envlock.seams.pypi.pipconf import configured_extra_index_urls, configured_index_url, pip_config_files

# Loaded from their module on first use (as envlock.usecases.resolve's names): a full environment's resolve that
# the torch table anchors never asks the index, so it pays neither index.py nor simple.py's html.parser (~8 ms).
# No submodule is named like a name exported here.
_WHERE = {
    "index": ("IndexSettings", "TorchMetadata", "cache_root", "redact", "torch_cuda_from_index"),
    "pins": ("CudaPins", "parse_cuda_pins", "requires_dist_of"),
    "pipconf": ("configured_extra_index_urls", "configured_index_url", "pip_config_files"),
}
__all__, __getattr__, __dir__ = lazy_names(__name__, _WHERE)
