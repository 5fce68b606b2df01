"""The lock use cases: `resolve`, `lock` and `update` are options of one solve; `check` is its offline peer.

    asked.py    a request's inputs (torch, cuda, torch source, platforms, channels) read once into an Asked
    solve.py    the one solve: spec + anchor -> plan -> solve -> files (nothing written); the anchor's sources
    request.py  `envlock resolve`: the command's options -> anchor -> spec -> solve -> write
    relock.py   `envlock lock` (stale specs) and `envlock update PKG…` (every other package held)
    status.py   `envlock check`: every lock against its spec, offline; `create --locked` asks it too

A request's inputs are read once (asked.of_request for resolve's options, asked.of_spec for a spec's envlock
block) into a frozen Asked that flows down; the torch value is anchored once (envlock.core.anchor.derive, with the
sources that need the network or a process made here), and the Anchor carries what later steps need.
Names are loaded from their module on first use: a command pays only for the use case it runs. No
submodule is named like a name it exports (importing envlock.usecases.resolve.X sets the package's attribute X to
the module, which would hide a lazily loaded function X).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envlock import lazy_names

if TYPE_CHECKING:
    from envlock.usecases.resolve.status import assert_fresh, check, current, stale_warning, status_of
    from envlock.usecases.resolve.relock import LockOutcome, UpdateOutcome, lock, update
    from envlock.usecases.resolve.asked import Asked, check_platforms, of_request, of_spec
    from envlock.usecases.resolve.request import ResolveRequest, ResolveResult, resolve
    from envlock.usecases.resolve.solve import (
        SolveSettings,
        Tables,
        default_python,
        now_cutoff,
        plan_for,
        shipped_tables,
        spec_anchor,
    )

_WHERE = {
    "status": ("assert_fresh", "check", "current", "stale_warning", "status_of"),
    "relock": ("LockOutcome", "UpdateOutcome", "lock", "update"),
    "request": ("ResolveRequest", "ResolveResult", "resolve"),
    "asked": ("Asked", "check_platforms", "of_request", "of_spec"),
    "solve": ("SolveSettings", "Tables", "default_python", "now_cutoff", "plan_for", "shipped_tables", "spec_anchor"),
}
__all__, __getattr__, __dir__ = lazy_names(__name__, _WHERE)
