"""``@frozen``: a frozen dataclass whose value methods are compiled in one piece.

Every fact cuda-resolve passes on is a frozen dataclass, and ``plan`` loads about ninety of them.
Before Python 3.13, :mod:`dataclasses` compiles each method it writes on its own (``__init__``,
``__setattr__``, ``__delattr__``, ``__eq__``, ``__hash__``, ``__repr__``); measured on the 2-core
box (2026-12-05, Python 3.11), that took 40% of ``plan``'s time (issue 28). ``frozen`` lets
:func:`dataclasses.dataclass` make the class as usual (fields, ``__init__``, immutability,
slots, pickling, :func:`dataclasses.replace` and :func:`dataclasses.fields`) without ``__eq__``,
``__hash__`` and ``__repr__``, then writes those three as :mod:`dataclasses` does, from a single
source: fields with ``compare=False`` are neither compared nor hashed, ``repr=False`` ones not
shown, and a method the class defines itself is kept. The one difference: ``__repr__`` has no
guard against a value that contains itself (frozen facts are trees).
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
        made = dataclasses.dataclass(
            cls, frozen=True, kw_only=kw_only, slots=slots, eq=False, repr=False
        )
        _add_value_methods(made)
        return made

    return wrap if cls is None else wrap(cls)


def _add_value_methods(cls: type[Any]) -> None:
    own = cls.__dict__
    fields = dataclasses.fields(cls)
    compared = [f.name for f in fields if f.compare]
    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    shown = [f.name for f in fields if f.repr]
    source: list[str] = []
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
    exec("\n".join(source), {}, namespace)  # noqa: S102 - source made above from field names
    for name, function in namespace.items():
        function.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, function)


def _tuple(owner: str, names: list[str]) -> str:
    return "(" + "".join(f"{owner}.{name}," for name in names) + ")"
