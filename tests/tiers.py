"""How many cases a property test or a random-edit loop runs in each tier.

The default tier runs a fifth of the cases (the first ones the fixed draw gives, for a loop with its own seeded
random.Random), the slow tier the whole count: `.ci/run` runs both tiers, so every case still runs in CI, and a
developer's `pytest` stays fast. tests/reliability/test_fuzz.py has its own FAST/SLOW pair (40/1,200).
"""

from __future__ import annotations

from typing import Any

import pytest


def counts(slow: int, default: int | None = None) -> list[Any]:
    """Parameters for `n`: `default` (a fifth of `slow` unless given) by default, `slow` in the slow tier."""
    return [pytest.param(default or slow // 5, id="default"), pytest.param(slow, id="slow", marks=pytest.mark.slow)]
