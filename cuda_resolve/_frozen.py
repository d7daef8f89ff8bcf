"""``@frozen``: a frozen dataclass whose methods are compiled in one piece.

Every fact cuda-resolve passes on is a frozen dataclass, and ``plan`` loads about ninety of them.
Before Python 3.13, :mod:`dataclasses` compiles each method it writes on its own (``__init__``,
``__setattr__``, ``__delattr__``, ``__eq__``, ``__hash__``, ``__repr__``), about half a
millisecond a class (2026-12-05, Python 3.11, the 2-core box; issue 28). ``frozen`` lets
:func:`dataclasses.dataclass` make the class (its fields, slots, ``__match_args__``: what
:func:`dataclasses.fields` and :func:`dataclasses.replace` read) without writing methods, then
writes those six, and for a slotted class the two that pickling needs, as :mod:`dataclasses`
does for ``frozen=True``, from a single source. Fields with ``compare=False`` are neither
compared nor hashed, ``repr=False`` ones not shown, ``init=False`` ones set from their default;
``__post_init__`` is called; a method the class defines itself is kept. Two differences:
``__repr__`` has no guard against a value that contains itself (frozen facts are trees), and
``InitVar`` fields are refused.
"""

from __future__ import annotations

import dataclasses
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
def frozen(*, kw_only: bool = True, slots: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def frozen(
    cls: type[T] | None = None, /, *, kw_only: bool = True, slots: bool = True
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@dataclass(frozen=True, kw_only=True, slots=True)``, faster to define (see above)."""

    def wrap(cls: type[T]) -> type[T]:
        for name in ("__setattr__", "__delattr__"):
            if name in cls.__dict__:
                raise TypeError(f"cannot overwrite attribute {name} in class {cls.__name__}")
        made = dataclasses.dataclass(
            cls, init=False, repr=False, eq=False, kw_only=kw_only, slots=slots
        )
        _add_methods(made)
        params = made.__dataclass_params__  # type: ignore[attr-defined]
        params.init = params.repr = params.eq = params.frozen = True  # what the class now is
        return made

    return wrap if cls is None else wrap(cls)


#: The default of an ``__init__`` parameter whose field has a ``default_factory``.
_FACTORY = object()


def _add_methods(cls: type[Any]) -> None:
    own = cls.__dict__
    every = cls.__dataclass_fields__.values()
    if any(f._field_type is dataclasses._FIELD_INITVAR for f in every):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: @frozen takes no InitVar field; use @dataclass")
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    me = "__dataclass_self__" if "self" in names else "self"
    scope: dict[str, Any] = {
        "__dataclass_cls__": cls,
        "__dataclass_fields__": frozenset(names),
        "__dataclass_set__": object.__setattr__,
        "__dataclass_frozen__": dataclasses.FrozenInstanceError,
        "__dataclass_factory__": _FACTORY,
    }
    source = [_init(cls, fields, me, scope)]
    source.append(
        "def __setattr__(self, name, value):\n"
        " if type(self) is __dataclass_cls__ or name in __dataclass_fields__:\n"
        "  raise __dataclass_frozen__(f'cannot assign to field {name!r}')\n"
        " super(__dataclass_cls__, self).__setattr__(name, value)\n"
        "def __delattr__(self, name):\n"
        " if type(self) is __dataclass_cls__ or name in __dataclass_fields__:\n"
        "  raise __dataclass_frozen__(f'cannot delete field {name!r}')\n"
        " super(__dataclass_cls__, self).__delattr__(name)\n"
    )
    if "__slots__" in own and "__getstate__" not in own:
        # Unpickling a slotted class assigns each slot: dataclasses adds these for frozen=True.
        source.append(
            "def __getstate__(self):\n"
            f" return [{''.join(f'self.{name},' for name in names)}]\n"
            "def __setstate__(self, state):\n"
            " for name, value in zip(__dataclass_names__, state):\n"
            "  __dataclass_set__(self, name, value)\n"
        )
        scope["__dataclass_names__"] = tuple(names)
    compared = [f.name for f in fields if f.compare]
    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    shown = [f.name for f in fields if f.repr]
    if "__repr__" not in own:
        parts = ", ".join(f"{name}={{self.{name}!r}}" for name in shown)
        source.append(f'def __repr__(self):\n return f"{{self.__class__.__qualname__}}({parts})"\n')
    if "__eq__" not in own:
        mine, theirs = _tuple("self", compared), _tuple("other", compared)
        source.append(
            "def __eq__(self, other):\n"
            " if other.__class__ is self.__class__:\n"
            f"  return {mine} == {theirs}\n"
            " return NotImplemented\n"
        )
    # As dataclasses: a __hash__ the class wrote is kept; the None Python sets where the class
    # defines __eq__ alone is not one.
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if not explicit_hash:
        source.append(f"def __hash__(self):\n return hash({_tuple('self', hashed)})\n")
    namespace: dict[str, Any] = {}
    exec("\n".join(source), scope, namespace)  # noqa: S102 - made above from field names
    for name, function in namespace.items():
        function.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, function)


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


def _tuple(owner: str, names: list[str]) -> str:
    return "(" + "".join(f"{owner}.{name}," for name in names) + ")"
