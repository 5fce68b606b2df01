"""A project: its layout (environments/<name>.yml, locks/<name>/…) and the lock document.

    layout.py     paths, discovery of the environments, writing one environment's files under its file lock
    document.py   the hash inputs and content hash, envlock's custom metadata, every file a solve writes
    freshness.py  a lock against what its spec gives today (`check`), and the lock's own integrity

Names are loaded from their module on first use (`check` needs freshness, `resolve` does not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envlock import lazy_names

if TYPE_CHECKING:
    from envlock.project.document import (
        OPTIONAL_NAMES,
        PLAN_NAMES,
        anchor_json,
        content_hash,
        content_hashes,
        hash_inputs,
        ignored_toolchain_lines,
        lines_written,
        plan_names,
        plan_options,
        render_files,
    )
    from envlock.project.freshness import BLOCKING, RELOCK_HINT, Change, CheckReport, Current, EnvStatus, compare
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

_WHERE = {
    "document": ("OPTIONAL_NAMES", "PLAN_NAMES", "anchor_json", "content_hash", "content_hashes", "hash_inputs",
                 "ignored_toolchain_lines", "lines_written", "plan_names", "plan_options", "render_files"),
    "freshness": ("BLOCKING", "RELOCK_HINT", "Change", "CheckReport", "Current", "EnvStatus", "compare"),
    "layout": ("LOCK_NAME", "discover", "locate", "lock_dir", "lock_path", "rel", "spec_path", "writable_project",
               "write_files"),
}
__all__, __getattr__, __dir__ = lazy_names(__name__, _WHERE)
