"""A lock's `envlock.inputs.<platform>` is untrusted JSON: `envlock mirror` and `pack` read its cutoff (issue 33.8:
docs/security.md promise 5, never an internal error). Valid JSON of another shape (`[1]`, `{"inputs": 5}`, a
number for `exclude_newer`) ended `envlock mirror` in `internal error: AttributeError`; a string that is no time, or
one UTC cannot hold a second before, in ValueError/OverflowError. Any such value is no cutoff."""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.formats import read_lock
from envlock.models import replace
from envlock.usecases.channeldir import content_of

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "lock" / "conda-lock.yml"


@pytest.mark.parametrize("value", ['[1]', '{"inputs": 5}', '{"inputs": [1]}', '{"inputs": {"exclude_newer": 5}}',
                                   '{"inputs": {"exclude_newer": ["2024-01-01"]}}', '"x"', "5", "null", "{",
                                   '{"inputs": {"exclude_newer": "banana"}}',
                                   '{"inputs": {"exclude_newer": "0001-01-01T00:00:00Z"}}',
                                   "[" * 100_000 + "]" * 100_000],
                         ids=lambda v: v if len(v) < 60 else f"{len(v)} characters")  # fmt: skip
def test_any_inputs_value_is_read_as_a_cutoff_or_none_never_an_exception(value: str) -> None:
    lock = read_lock(GOLDEN)
    platforms = list(lock.platforms)
    meta = {**lock.custom_metadata, **{f"envlock.inputs.{p}": value for p in platforms}}
    content = content_of([(replace(lock, custom_metadata=meta), platforms)])
    assert content.upload_bound == {}  # no cutoff read from it
    assert content.packages  # the packages are still there


def test_a_well_formed_cutoff_still_bounds_the_wheels() -> None:
    lock = read_lock(GOLDEN)
    platforms = list(lock.platforms)
    meta = {**lock.custom_metadata,
            **{f"envlock.inputs.{p}": '{"inputs": {"exclude_newer": "2025-06-01T00:00:00Z"}}' for p in platforms}}
    content = content_of([(replace(lock, custom_metadata=meta), platforms)])
    assert all(v == "2025-05-31T23:59:59Z" for v in content.upload_bound.values())
    assert len(content.upload_bound) == len(content.wheels)
