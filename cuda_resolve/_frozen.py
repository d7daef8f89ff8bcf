"""``@frozen``: a frozen dataclass that is quicker to define.

Every fact cuda-resolve passes on is a frozen dataclass, and ``plan`` loads about ninety of them.
Before Python 3.13, :mod:`dataclasses` compiles each method it writes on its own (``__init__``,
``__setattr__``, ``__delattr__``, ``__eq__``, ``__hash__``, ``__repr__``), about half a
millisecond a class (2026-12-05, Python 3.11, the 2-core box; issue 28). ``frozen`` lets
:func:`dataclasses.dataclass` make the class (its fields, slots, ``__match_args__``: what
:func:`dataclasses.fields` and :func:`dataclasses.replace` read) without writing methods, then
writes those six, and for a slotted class the two that pickling needs, as :mod:`dataclasses`
does for ``frozen=True``: ``__init__`` from one small source, the others as closures over the
field names, which need no compiling at all; with ``order=True`` also the four comparisons, as
closures (a stdlib ``order=True`` class costs three quarters of a millisecond more). Fields with
``compare=False`` are neither compared, ordered nor hashed, ``repr=False`` ones not shown,
``init=False`` ones set from their default; ``__post_init__`` is called; a method the class
defines itself is kept. The differences: ``__repr__`` has no guard against a value that contains
itself (frozen facts are trees), and ``InitVar`` fields and dataclass bases are refused.
"""

from __future__ import annotations

import abc
import dataclasses
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda function: function


__all__ = ["frozen"]

T = TypeVar("T")


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(
    *, kw_only: bool = True, slots: bool = True, order: bool = False
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def frozen(
    cls: type[T] | None = None,
    /,
    *,
    kw_only: bool = True,
    slots: bool = True,
    order: bool = False,
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@dataclass(frozen=True, kw_only=True, slots=True)``, faster to define (see above)."""

    def wrap(cls: type[T]) -> type[T]:
        for name in ("__setattr__", "__delattr__", *(_ORDER if order else ())):
            if name in cls.__dict__:
                raise TypeError(f"cannot overwrite attribute {name} in class {cls.__name__}")
        # dataclasses checks a frozen base against frozen=True, which is not passed here.
        if any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:]):
            raise TypeError(
                f"{cls.__name__}: @frozen does not derive from a dataclass; use "
                "@dataclass(frozen=True, ...) for a class hierarchy"
            )
        undocumented = cls.__dict__.get("__doc__") is None
        made = dataclasses.dataclass(
            cls, init=False, repr=False, eq=False, kw_only=kw_only, slots=slots
        )
        _add_methods(made, order=order)
        params = made.__dataclass_params__  # type: ignore[attr-defined]
        params.init = params.repr = params.eq = params.frozen = True  # what the class now is
        params.order = order
        if undocumented:  # as dataclasses: the signature (it read the one before __init__)
            import inspect

            made.__doc__ = made.__name__ + str(inspect.signature(made)).replace(" -> None", "")
        abc.update_abstractmethods(made)
        return made

    return wrap if cls is None else wrap(cls)


#: The default of an ``__init__`` parameter whose field has a ``default_factory``.
_FACTORY = object()


def _add_methods(cls: type[Any], *, order: bool) -> None:
    """``__init__`` compiled (its signature and speed need it); the others are closures over
    the field names, which cost no compile at all."""
    own = cls.__dict__
    every = cls.__dataclass_fields__.values()
    if any(f._field_type is dataclasses._FIELD_INITVAR for f in every):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: @frozen takes no InitVar field; use @dataclass")
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    methods: dict[str, Callable[..., Any]] = {}
    if "__init__" not in own:  # compiled only where it is used
        me = "__dataclass_self__" if "self" in names else "self"
        scope: dict[str, Any] = {
            "__dataclass_set__": object.__setattr__,
            "__dataclass_factory__": _FACTORY,
        }
        namespace: dict[str, Any] = {}
        exec(_init(cls, fields, me, scope), scope, namespace)  # noqa: S102 - from field names
        init = namespace["__init__"]
        init.__annotations__ = {f.name: f.type for f in fields if f.init}
        init.__annotations__["return"] = None
        methods["__init__"] = init
    methods.update(_frozen_methods(cls, frozenset(names)))
    if "__slots__" in own:  # dataclasses adds each for frozen=True where the class has none
        methods.update((k, v) for k, v in _pickling_methods().items() if k not in own)
    compared = _getter([f.name for f in fields if f.compare])
    hashed = _getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = tuple(f.name for f in fields if f.repr)
    if "__repr__" not in own:
        methods["__repr__"] = _repr(shown)
    if "__eq__" not in own:
        methods["__eq__"] = _eq(compared)
    if order:
        methods.update(_ordering(compared))
    # As dataclasses: a __hash__ the class wrote is kept; the None Python sets where the class
    # defines __eq__ alone is not one.
    if not ("__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)):
        methods["__hash__"] = _hash(hashed)
    for name, function in methods.items():
        function.__qualname__ = f"{cls.__qualname__}.{name}"
        function.__name__ = name
        function.__module__ = cls.__module__
        setattr(cls, name, function)


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """``self -> (self.a, self.b, ...)``: the tuple dataclasses compares and hashes."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


def _eq(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


#: The comparisons ``order=True`` writes (and refuses to overwrite, as dataclasses does).
_ORDER = ("__lt__", "__le__", "__gt__", "__ge__")


def _ordering(values: Callable[[Any], tuple[Any, ...]]) -> dict[str, Callable[[Any, Any], Any]]:
    """As dataclasses: the compared fields' tuples, against an instance of the same class only."""

    def __lt__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) < values(other)
        return NotImplemented

    def __le__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) <= values(other)
        return NotImplemented

    def __gt__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) > values(other)
        return NotImplemented

    def __ge__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) >= values(other)
        return NotImplemented

    return {"__lt__": __lt__, "__le__": __le__, "__gt__": __gt__, "__ge__": __ge__}


def _hash(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _repr(shown: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        parts = ", ".join([f"{name}={getattr(self, name)!r}" for name in shown])
        return f"{self.__class__.__qualname__}({parts})"

    return __repr__


def _frozen_methods(cls: type[Any], names: frozenset[str]) -> dict[str, Callable[..., Any]]:
    frozen_error = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return {"__setattr__": __setattr__, "__delattr__": __delattr__}


def _pickling_methods() -> dict[str, Callable[..., Any]]:
    """As dataclasses writes them: the instance's own fields (a subclass's too), in order."""

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]

    def __setstate__(self: Any, state: list[Any]) -> None:
        fields = dataclasses.fields(self)
        for field, value in zip(fields, state, strict=False):  # as dataclasses does
            object.__setattr__(self, field.name, value)

    return {"__getstate__": __getstate__, "__setstate__": __setstate__}


def _init(
    cls: type[Any], fields: tuple[dataclasses.Field[Any], ...], me: str, scope: dict[str, Any]
) -> str:
    """``__init__``'s source, as dataclasses writes it for a frozen class; defaults go in
    *scope*."""
    positional: list[str] = []
    keywords: list[str] = []
    body: list[str] = []
    missing = dataclasses.MISSING
    for f in fields:
        default = f"__dataclass_default_{f.name}__"
        if f.default_factory is not missing:
            scope[default] = f.default_factory
            value = (
                f"{default}() if {f.name} is __dataclass_factory__ else {f.name}"
                if f.init
                else f"{default}()"
            )
            parameter = f"{f.name}=__dataclass_factory__"
        elif f.default is not missing:
            scope[default] = f.default
            value = f.name if f.init else default
            parameter = f"{f.name}={default}"
        else:
            if not f.init:
                continue  # read from nowhere: left unset, as dataclasses leaves it
            value = parameter = f.name
        if f.init:
            (keywords if f.kw_only else positional).append(parameter)
        body.append(f" __dataclass_set__({me}, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append(f" {me}.__post_init__()")
    parameters = [me, *positional, *(["*", *keywords] if keywords else [])]
    return f"def __init__({', '.join(parameters)}):\n" + ("\n".join(body) or " pass") + "\n"
