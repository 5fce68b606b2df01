"""envlock.models.record against the @dataclass(frozen=True, slots=True) it stands for: the same class, made both
ways, behaves the same (construction, defaults and factories, errors, repr, ==, hash, frozen fields, copy, pickle,
replace), and envlock's own value classes are records (nothing on check's path compiles methods at import)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, Callable

import pytest

from envlock import models
from envlock.errors import Retry, Setting, again
from envlock.models import asdict, field, record, replace


def _both() -> list[type]:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Item:
        """An item."""

        name: str
        version: str
        build: str = "0"
        tags: tuple[str, ...] = ()
        meta: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
        note: str = dataclasses.field(default="", repr=False, compare=False)

        @property
        def label(self) -> str:
            return f"{self.name}={self.version}"

    @record
    class Item2:  # the same class, as a record
        """An item."""

        name: str
        version: str
        build: str = "0"
        tags: tuple[str, ...] = ()
        meta: dict[str, Any] = field(default_factory=dict, compare=False)
        note: str = field(default="", repr=False, compare=False)

        @property
        def label(self) -> str:
            return f"{self.name}={self.version}"

    Item2.__qualname__ = Item.__qualname__  # (repr prints the qualified name)
    return [Item, Item2]


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
        return ("raised", type(exc))


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("a", "1"), {}),
    (("a", "1", "2", ("x",)), {}),
    (("a",), {"version": "1", "note": "n"}),
    ((), {"name": "a", "version": "1", "meta": {"k": 1}}),
    (("a",), {}),  # missing a field
    (("a", "1"), {"name": "b"}),  # given twice
    (("a", "1"), {"bogus": 1}),  # no such field
    (("a", "1", "2", (), {}, "n", "extra"), {}),  # too many
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_a_record_is_built_as_its_dataclass_is(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    dc, rec = _both()
    a, b = _outcome(lambda: dc(*args, **kwargs)), _outcome(lambda: rec(*args, **kwargs))
    assert a[0] == b[0], (a, b)
    if a[0] == "raised":
        assert a[1] is b[1] is TypeError
        return
    x, y = a[1], b[1]
    assert repr(x) == repr(y)
    assert [getattr(x, n) for n in ("name", "version", "build", "tags", "meta", "note", "label")] == \
        [getattr(y, n) for n in ("name", "version", "build", "tags", "meta", "note", "label")]
    assert type(y).__match_args__ == dc.__match_args__ and type(y).__slots__ == dc.__slots__


def test_a_record_compares_hashes_and_freezes_as_its_dataclass() -> None:
    dc, rec = _both()
    for cls in (dc, rec):
        one, same, other = cls("a", "1", note="x"), cls("a", "1", note="y"), cls("a", "2")
        assert one == same and one != other and hash(one) == hash(same)  # note is not compared
        assert one != ("a", "1") and len({one, same, other}) == 2
        assert cls("a", "1").meta is not cls("a", "1").meta  # a factory per instance
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'name'"):
            one.name = "b"  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'name'"):
            del one.name  # type: ignore[misc]
        with pytest.raises((AttributeError, TypeError)):
            one.other = 1  # type: ignore[attr-defined]  # slotted: no attribute besides the fields
        assert copy.copy(one) == one and copy.deepcopy(one) == one
        assert replace(one, version="2") == cls("a", "2", note="x") and replace(one, version="2").note == "x"
        with pytest.raises(TypeError):
            replace(one, bogus=1)
    assert hash(rec("a", "1", meta={"k": 1})) == hash(rec("a", "1"))  # meta is not compared, so not hashed
    for cls in (dc, rec):
        with pytest.raises(TypeError):
            hash(cls("a", "1", tags=[1]))  # a compared value that does not hash: refused alike


def test_a_record_refuses_what_a_dataclass_refuses() -> None:
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class Bad:
            items: list[str] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="non-default argument"):
        @record
        class Order:
            a: str = ""
            b: str


def test_asdict_of_a_record_is_its_dataclass_asdict() -> None:
    dc, rec = _both()
    for args in (("a", "1"), ("a", "1", "2", ("x", "y"), {"k": [1, (2, 3)]}, "n")):
        assert asdict(rec(*args)) == dataclasses.asdict(dc(*args))
    nested_dc, nested_rec = dc("a", "1", tags=(dc("b", "2"),)), rec("a", "1", tags=(rec("b", "2"),))
    assert asdict(nested_rec) == dataclasses.asdict(nested_dc) and asdict(nested_rec)["tags"][0]["name"] == "b"


def test_replace_still_takes_a_dataclass() -> None:
    dc, _ = _both()
    assert replace(dc("a", "1"), build="3") == dc("a", "1", "3")


def test_envlock_values_are_records_and_pickle() -> None:
    anchor = models.Anchor("2.3.0", "12.1", "8.9.2.26", "table", "the table")
    assert pickle.loads(pickle.dumps(anchor)) == anchor and replace(anchor, cuda="12.4").cuda_tag == "cu124"
    pkg = models.LockedPackage("nvcc", "12.1", "h0", "linux-64", "https://x/nvcc-12.1-h0.conda", "0" * 32, None)
    assert pkg.filename == "nvcc-12.1-h0.conda" and pickle.loads(pickle.dumps(pkg)) == pkg
    assert not dataclasses.is_dataclass(pkg) and models.LockedPackage.__record_fields__[:3] == ("name", "version", "build")
    retry, setting = again("--torch", "2.3.0", "--toolchain-only"), Setting("--cuda", "X.Y", "a CUDA")
    assert retry == Retry((("--torch", "2.3.0"),), (), ("--toolchain-only",)) and hash(retry) == hash(copy.copy(retry))
    assert repr(setting) == "Setting(option='--cuda', value='X.Y', what='a CUDA')"
    assert pickle.loads(pickle.dumps(setting)) == setting and setting != Setting("--cuda", "X.Y")
    with pytest.raises(dataclasses.FrozenInstanceError):
        retry.command = "resolve"  # type: ignore[misc]
