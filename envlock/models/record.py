"""`record`, the decorator that makes envlock's frozen value classes (envlock.models), and its replace/asdict.

`record` is `@dataclass(frozen=True, slots=True)` without the dataclasses module: the same __init__ (positional or
keyword, defaults, `field(default_factory=...)`), __repr__, __eq__, __hash__, frozen fields (assigning raises
dataclasses.FrozenInstanceError), copy and pickle, and `replace()`. dataclasses compiles each generated method
with exec() (~0.2 ms each, six per class): `envlock check` made 40 such classes, a third of its start-up, and
imported dataclasses and inspect for them. Here the methods are shared functions over the class's field names:
nothing is compiled at import (tests/test_models_record.py compares both on the same classes).
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda fn: fn

_T = TypeVar("_T")
_MISSING: Any = object()
_set = object.__setattr__


class _Field:
    __slots__ = ("compare", "default", "factory", "repr")

    def __init__(self, default: Any, factory: Any, repr: bool, compare: bool) -> None:  # noqa: A002 - dataclasses' name
        self.default, self.factory, self.repr, self.compare = default, factory, repr, compare


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, repr: bool = True,  # noqa: A002 - dataclasses' name
          compare: bool = True) -> Any:
    """dataclasses.field for a `record`: a default or a factory of one, and whether repr/== (and hash) see it."""
    return _Field(default, _MISSING if default_factory is None else default_factory, repr, compare)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    from dataclasses import FrozenInstanceError  # only on the way to the error

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _make_init(qualname: str, names: tuple[str, ...], defaults: dict[str, Any], factories: dict[str, Any]) -> Any:
    count = len(names)
    tail = [(n, defaults.get(n, _MISSING), factories.get(n, _MISSING)) for n in names]

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        given = len(args)
        if given > count:
            raise TypeError(f"{qualname}.__init__() takes {count + 1} positional arguments but {given + 1} were given")
        for name, value in zip(names, args):
            _set(self, name, value)
        for name, default, factory in tail[given:] if given < count else ():
            if name in kwargs:
                _set(self, name, kwargs.pop(name))
            elif default is not _MISSING:
                _set(self, name, default)
            elif factory is not _MISSING:
                _set(self, name, factory())
            else:
                raise TypeError(f"{qualname}.__init__() missing 1 required argument: {name!r}")
        if kwargs:  # what is left names a field given positionally, or none
            name = next(iter(kwargs))
            said = "got multiple values for argument" if name in names else "got an unexpected keyword argument"
            raise TypeError(f"{qualname}.__init__() {said} {name!r}")

    return __init__


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if len(names) > 1:
        return attrgetter(*names)  # a tuple of the values, as dataclasses compares and hashes them
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _make_setstate(fields: tuple[str, ...]) -> Callable[[Any, list[Any]], None]:
    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(fields, state):
            _set(self, name, value)

    return __setstate__


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[_T]) -> type[_T]:
    """A frozen, slotted value class of the annotated fields (see the module's docstring)."""
    names, defaults, factories, shown, compared = [], {}, {}, [], []
    for base in reversed(cls.__mro__[1:]):
        for name in getattr(base, "__record_fields__", ()):
            names.append(name)
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - inspect is what this module avoids importing
    for name, kind in annotations.items():
        if str(kind).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, _Field) else _Field(value, _MISSING, True, True)
        if isinstance(spec.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is not allowed: use default_factory")
        if spec.default is not _MISSING:
            defaults[name] = spec.default
        elif spec.factory is not _MISSING:
            factories[name] = spec.factory
        elif defaults or factories:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        names.append(name)
        if spec.repr:
            shown.append(name)
        if spec.compare:
            compared.append(name)
    ns = {k: v for k, v in cls.__dict__.items() if k not in annotations and k not in ("__dict__", "__weakref__")}
    ns["__slots__"] = tuple(n for n in names if n in annotations)
    ns["__record_fields__"] = fields = tuple(names)
    ns["__match_args__"] = fields
    meta: Any = type(cls)
    new: Any = meta(cls.__name__, cls.__bases__, ns)
    key, shown_t = _key(tuple(compared)), tuple(shown)
    methods: dict[str, Any] = {
        "__init__": _make_init(cls.__qualname__, fields, defaults, factories),
        "__repr__": lambda self: f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown_t)})",
        "__eq__": lambda self, other: key(self) == key(other) if other.__class__ is self.__class__ else NotImplemented,
        "__getstate__": lambda self: [getattr(self, n) for n in fields],
        "__setstate__": _make_setstate(fields),
    }
    for name, fn in methods.items():
        if name not in ns:
            fn.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(new, name, fn)
    if "__hash__" not in ns or (ns["__hash__"] is None and "__eq__" not in ns):
        new.__hash__ = lambda self: hash(key(self))
    new.__setattr__ = _frozen_setattr
    new.__delattr__ = _frozen_delattr
    return cast("type[_T]", new)


def replace(obj: _T, /, **changes: Any) -> _T:
    """dataclasses.replace for a `record` (and, imported then, for a dataclass)."""
    fields = getattr(type(obj), "__record_fields__", None)
    if fields is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]  # a dataclass: _T does not say so
    unknown = [k for k in changes if k not in fields]
    if unknown:
        raise TypeError(f"{type(obj).__qualname__}.__init__() got an unexpected keyword argument {unknown[0]!r}")
    return type(obj)(**{n: changes[n] if n in changes else getattr(obj, n) for n in fields})


def asdict(obj: Any) -> Any:
    """dataclasses.asdict for a `record`: its fields as a dict, records, lists, tuples and dicts in them rebuilt."""
    fields = getattr(type(obj), "__record_fields__", None)
    if fields is not None:
        return {name: asdict(getattr(obj, name)) for name in fields}
    if isinstance(obj, (list, tuple)):
        return type(obj)(asdict(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((asdict(k), asdict(v)) for k, v in obj.items())
    return obj
