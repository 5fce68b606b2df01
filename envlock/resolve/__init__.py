"""The lock use cases: `resolve`, `lock` and `update` are options of one solve; `check` is its offline peer.

    solve.py    the one solve: spec + anchor -> plan -> solve -> files (nothing written); the anchor's sources
    request.py  `envlock resolve`: the command's options -> anchor -> spec -> solve -> write
    relock.py   `envlock lock` (stale specs) and `envlock update PKG…` (every other package held)
    check.py    `envlock check`: every lock against its spec, offline; `create --locked` asks it too

The value of `--torch` is read once (envlock.anchor.read_torch), anchored once (envlock.anchor.derive, with
the sources that need the network or a process made here), and the Anchor carries what later steps need.
"""

from __future__ import annotations

from envlock.resolve.check import assert_fresh, check, current, stale_warning, status_of
from envlock.resolve.relock import LockOutcome, UpdateOutcome, lock, update
from envlock.resolve.request import ResolveRequest, ResolveResult, check_platforms, host_platform, resolve
from envlock.resolve.solve import (
    SolveSettings,
    Tables,
    default_python,
    now_cutoff,
    plan_for,
    shipped_tables,
    spec_anchor,
)

__all__ = [
    "LockOutcome", "ResolveRequest", "ResolveResult", "SolveSettings", "Tables", "UpdateOutcome",
    "assert_fresh", "check", "check_platforms", "current", "default_python", "host_platform", "lock",
    "now_cutoff", "plan_for", "resolve", "shipped_tables", "spec_anchor", "stale_warning", "status_of", "update",
]  # fmt: skip
