"""A project: its layout (environments/<name>.yml, locks/<name>/…) and the lock document.

    layout.py     paths, discovery of the environments, writing one environment's files under its file lock
    document.py   the hash inputs and content hash, envlock's custom metadata, every file a solve writes
    freshness.py  a lock against what its spec gives today (`check`), and the lock's own integrity
"""

from __future__ import annotations

from envlock.project.document import (
    PLAN_NAMES,
    anchor_json,
    content_hash,
    content_hashes,
    hash_inputs,
    ignored_toolchain_lines,
    plan_names,
    plan_options,
    render_files,
)
from envlock.project.freshness import (
    BLOCKING,
    RELOCK_HINT,
    Change,
    CheckReport,
    Current,
    EnvStatus,
    compare,
)
from envlock.project.layout import (
    LOCK_NAME,
    discover,
    locate,
    lock_dir,
    lock_path,
    rel,
    spec_path,
    writable_project,
    write_files,
)

__all__ = [
    "BLOCKING", "LOCK_NAME", "PLAN_NAMES", "RELOCK_HINT", "Change", "CheckReport", "Current", "EnvStatus",
    "anchor_json", "compare", "content_hash", "content_hashes", "discover", "hash_inputs",
    "ignored_toolchain_lines", "locate", "lock_dir", "lock_path", "plan_names", "plan_options", "rel",
    "render_files", "spec_path", "writable_project", "write_files",
]  # fmt: skip
