"""``@frozen``: a frozen dataclass that is quicker to define, and to import.

Every fact cuda-resolve passes on is a frozen dataclass, and ``plan`` loads about ninety of them.
:mod:`dataclasses` costs twice over (issue 28):

- importing it imports :mod:`inspect` (with ``ast``, ``dis`` and ``tokenize``): about 9 ms, an
  eighth of a warm ``doctor --json`` (2026-12-05, Python 3.12, the 2-core box);
- before Python 3.13 it compiles each method it writes on its own (``__init__``,
  ``__setattr__``, ``__delattr__``, ``__eq__``, ``__hash__``, ``__repr__``), about half a
  millisecond a class.

``frozen`` reads the class's fields itself (the annotations, defaults and :func:`field`
specifiers, as :mod:`dataclasses` does for ``frozen=True``), makes the slotted class, then writes
those six methods, and for a slotted class the two that pickling needs: ``__init__`` from one
small source, compiled when first used (a fact read back from a cache is unpickled, without it),
the others as closures over the field names, which need no compiling at all; with
``order=True`` also the four comparisons, as closures. Fields with ``compare=False`` are neither
compared, ordered nor hashed, ``repr=False`` ones not shown, ``init=False`` ones set from their
default; ``__post_init__`` is called; a method the class defines itself is kept.

The class is still a dataclass to whatever asks: ``__dataclass_fields__`` and
``__dataclass_params__`` are made by :mod:`dataclasses` itself the first time something reads
them (:func:`dataclasses.fields`, :func:`dataclasses.replace`, :func:`dataclasses.is_dataclass`,
a ``@dataclass`` deriving from it), and assigning to a field raises
:class:`dataclasses.FrozenInstanceError`. :func:`replace` here does what
:func:`dataclasses.replace` does without importing it. The differences: ``__repr__`` has no guard
against a value that contains itself (frozen facts are trees), and ``ClassVar``, ``InitVar`` and
``KW_ONLY`` annotations and dataclass bases are refused with what to use instead.
"""

from __future__ import annotations

import abc
import operator
import sys
from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any, TypeVar, overload

    from typing_extensions import dataclass_transform

    T = TypeVar("T")
else:  # what these do at run time, without importing typing

    def dataclass_transform(**_: object) -> Callable[[object], object]:
        return lambda function: function

    def overload(function: object) -> object:  # the implementation defined after replaces it
        return function


__all__ = ["field", "frozen", "replace"]


class _Missing:
    """No default (dataclasses' ``MISSING``, which is not imported here)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class _FactoryMarker:
    """The default an ``__init__`` parameter with a ``default_factory`` shows, as dataclasses'."""

    def __repr__(self) -> str:
        return "<factory>"


#: The default of an ``__init__`` parameter whose field has a ``default_factory``.
_FACTORY = _FactoryMarker()


#: What :func:`field` takes: the options of a field, as :func:`dataclasses.field` names them.
_OPTIONS = ("default", "default_factory", "init", "repr", "hash", "compare", "metadata", "kw_only")


class _Field:
    """One field, as :class:`dataclasses.Field` holds it."""

    __slots__ = (
        "compare",
        "default",
        "default_factory",
        "hash",
        "init",
        "kw_only",
        "metadata",
        "name",
        "repr",
        "type",
    )

    def __init__(
        self,
        *,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        init: bool = True,
        repr: bool = True,
        hash: bool | None = None,
        compare: bool = True,
        metadata: Mapping[Any, Any] | None = None,
        kw_only: Any = MISSING,
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.metadata = metadata
        self.kw_only = kw_only

    def __repr__(self) -> str:
        return f"field(name={self.name!r}, default={self.default!r}, ...)"


@overload
def field(
    *,
    default: T,
    init: bool = ...,
    repr: bool = ...,
    hash: bool | None = ...,
    compare: bool = ...,
    metadata: Mapping[Any, Any] | None = ...,
    kw_only: bool = ...,
) -> T: ...


@overload
def field(
    *,
    default_factory: Callable[[], T],
    init: bool = ...,
    repr: bool = ...,
    hash: bool | None = ...,
    compare: bool = ...,
    metadata: Mapping[Any, Any] | None = ...,
    kw_only: bool = ...,
) -> T: ...


@overload
def field(
    *,
    init: bool = ...,
    repr: bool = ...,
    hash: bool | None = ...,
    compare: bool = ...,
    metadata: Mapping[Any, Any] | None = ...,
    kw_only: bool = ...,
) -> Any: ...


def field(**options: Any) -> Any:
    """:func:`dataclasses.field` for a ``@frozen`` class (the same parameters)."""
    return _Field(**options)


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(
    *, kw_only: bool = True, slots: bool = True, order: bool = False
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
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
        # Read from each class's own namespace: a lazy __dataclass_fields__ is not made here.
        if any("__dataclass_fields__" in vars(base) for base in cls.__mro__[1:]):
            raise TypeError(
                f"{cls.__name__}: @frozen does not derive from a dataclass; use "
                "@dataclass(frozen=True, ...) for a class hierarchy"
            )
        fields = _read_fields(cls, kw_only=kw_only)
        made = _slotted(cls, fields) if slots else _with_defaults(cls, fields)
        if "__match_args__" not in made.__dict__:
            match_args = tuple(f.name for f in fields if f.init and not f.kw_only)
            type.__setattr__(made, "__match_args__", match_args)
        made.__frozen_fields__ = fields  # type: ignore[attr-defined]
        options = {"kw_only": kw_only, "slots": slots, "order": order}
        for attribute in ("__dataclass_fields__", "__dataclass_params__"):
            setattr(made, attribute, _DataclassView(made, attribute, options))
        _add_methods(made, fields, order=order)
        if not cls.__dict__.get("__doc__"):  # as dataclasses: the signature
            made.__doc__ = made.__name__ + _signature(fields)
        abc.update_abstractmethods(made)
        return made

    return wrap if cls is None else wrap(cls)


def replace(obj: T, /, **changes: Any) -> T:
    """:func:`dataclasses.replace`: a copy of *obj* with *changes*; for a ``@frozen`` class
    without importing :mod:`dataclasses`."""
    fields: tuple[_Field, ...] | None = vars(type(obj)).get("__frozen_fields__")
    if fields is None:  # another dataclass (one deriving from a @frozen class included)
        import dataclasses

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    for f in fields:
        if not f.init:
            if f.name in changes:
                raise ValueError(
                    f"field {f.name} is declared with init=False, it cannot be specified with "
                    "replace()"
                )
        elif f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


# -- reading the fields -------------------------------------------------------------------------

#: Annotations @frozen does not take (as text: the modules use ``from __future__ import
#: annotations``), each with what dataclasses would make of it.
_REFUSED = ("ClassVar", "InitVar", "KW_ONLY")


def _annotations(cls: type[Any]) -> dict[str, Any]:
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063 - inspect is what is not imported
    if own is not None:
        return dict(own)
    if sys.version_info >= (3, 14):  # annotations made on first use (PEP 649)
        import annotationlib

        return dict(annotationlib.get_annotations(cls, format=annotationlib.Format.FORWARDREF))
    return {}


def _refused(annotation: Any) -> str | None:
    if type(annotation).__name__ == "_KW_ONLY_TYPE":
        return "KW_ONLY"
    text = annotation if isinstance(annotation, str) else repr(annotation)
    if not any(name in text for name in _REFUSED):  # the usual case, decided in one pass
        return None
    bare = text.strip().removeprefix("typing.").removeprefix("dataclasses.")
    return next((name for name in _REFUSED if bare == name or bare.startswith(name + "[")), None)


def _read_fields(cls: type[Any], *, kw_only: bool) -> tuple[_Field, ...]:
    """The class's fields in order, as :mod:`dataclasses` reads them for ``frozen=True``."""
    fields: list[_Field] = []
    for name, annotation in _annotations(cls).items():
        refused = _refused(annotation)
        if refused is not None:
            raise TypeError(
                f"{cls.__name__}.{name}: @frozen takes no {refused} annotation; use @dataclass"
            )
        value = cls.__dict__.get(name, MISSING)
        if isinstance(value, _Field):
            made = value
        elif _is_field_spec(value):  # dataclasses.field(): its options, but for MISSING
            made = _Field(
                **{
                    option: getattr(value, option)
                    for option in _OPTIONS
                    if getattr(value, option) is not sys.modules["dataclasses"].MISSING
                }
            )
        else:
            made = _Field(default=value)
        made.name, made.type = name, annotation
        if made.kw_only is MISSING:
            made.kw_only = kw_only
        if made.metadata is None:
            made.metadata = {}
        default = made.default
        if default is not MISSING and type(default).__hash__ is None:  # list, dict, set ...
            raise ValueError(
                f"mutable default {type(default)} for field {name} is not allowed: use "
                "default_factory"
            )
        fields.append(made)
    defaulted: str | None = None
    for f in fields:
        if not f.init or f.kw_only:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            defaulted = f.name
        elif defaulted is not None:
            raise TypeError(
                f"{cls.__name__}: non-default argument {f.name!r} follows default argument "
                f"{defaulted!r}"
            )
    return tuple(fields)


def _is_field_spec(value: object) -> bool:
    """What :func:`field` or :func:`dataclasses.field` returned."""
    dataclasses = sys.modules.get("dataclasses")  # a dataclasses.Field can only come from it
    return isinstance(value, _Field) or (
        dataclasses is not None and isinstance(value, dataclasses.Field)
    )


def _slotted(cls: type[T], fields: tuple[_Field, ...]) -> type[T]:
    """A new class with a slot for each field, as ``@dataclass(slots=True)`` makes it."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    names = tuple(f.name for f in fields)
    inherited = {
        slot
        for base in cls.__mro__[1:-1]
        for slot in _slots_of(base)  # a base's own slots are not made again
    }
    namespace = dict(cls.__dict__)
    namespace["__slots__"] = tuple(name for name in names if name not in inherited)
    for name in names:
        namespace.pop(name, None)  # a default, or field(): the slot's descriptor goes there
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    metaclass: Any = type(cls)
    made: type[T] = metaclass(cls.__name__, cls.__bases__, namespace)
    made.__qualname__ = cls.__qualname__
    return made


def _slots_of(cls: type[Any]) -> tuple[str, ...]:
    slots = cls.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _with_defaults(cls: type[T], fields: tuple[_Field, ...]) -> type[T]:
    """Without slots: each field's class attribute is its default, as dataclasses leaves it."""
    for f in fields:
        if _is_field_spec(cls.__dict__.get(f.name)):
            if f.default is MISSING:
                delattr(cls, f.name)
            else:
                setattr(cls, f.name, f.default)
    return cls


def _signature(fields: tuple[_Field, ...]) -> str:
    """``(a: 'int', *, b: 'str' = 'x')``: what ``str(inspect.signature(cls))`` gives for the
    ``__init__`` written here, without importing :mod:`inspect`."""

    def annotation(value: Any) -> str:
        if isinstance(value, str):
            return repr(value)
        if isinstance(value, type):
            name = value.__qualname__
            return name if value.__module__ == "builtins" else f"{value.__module__}.{name}"
        return repr(value).replace("typing.", "")

    def parameter(f: _Field) -> str:
        text = f"{f.name}: {annotation(f.type)}"
        if f.default_factory is not MISSING:
            return f"{text} = {_FACTORY!r}"
        return text if f.default is MISSING else f"{text} = {f.default!r}"

    shown = [f for f in fields if f.init]
    positional = [parameter(f) for f in shown if not f.kw_only]
    keywords = [parameter(f) for f in shown if f.kw_only]
    return "(" + ", ".join([*positional, *(["*", *keywords] if keywords else [])]) + ")"


class _DataclassView:
    """``__dataclass_fields__`` or ``__dataclass_params__`` of a ``@frozen`` class, made by
    :mod:`dataclasses` itself when first read (then kept in the class in place of both views):
    what reads them has imported :mod:`dataclasses` already, and a warm ``doctor`` never does."""

    def __init__(self, owner: type[Any], attribute: str, options: dict[str, bool]) -> None:
        self.owner, self.attribute, self.options = owner, attribute, options

    def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
        fields, params = _made_by_dataclasses(self.owner, **self.options)
        type.__setattr__(self.owner, "__dataclass_fields__", fields)
        type.__setattr__(self.owner, "__dataclass_params__", params)
        return fields if self.attribute == "__dataclass_fields__" else params


def _made_by_dataclasses(
    cls: type[Any], *, kw_only: bool, slots: bool, order: bool
) -> tuple[dict[str, Any], Any]:
    """The fields and parameters :mod:`dataclasses` gives a class of the same fields (made
    on a stand-in, so that nothing of *cls* is written again)."""
    import dataclasses

    namespace: dict[str, Any] = {"__module__": cls.__module__, "__annotations__": {}}
    for f in cls.__frozen_fields__:
        namespace["__annotations__"][f.name] = f.type
        options = {option: getattr(f, option) for option in _OPTIONS}
        namespace[f.name] = dataclasses.field(
            **{key: value for key, value in options.items() if value is not MISSING}
        )
    stand_in: Any = dataclasses.dataclass(
        type(cls.__name__, (), namespace), init=False, repr=False, eq=False, kw_only=kw_only
    )
    params = stand_in.__dataclass_params__
    params.init = params.repr = params.eq = params.frozen = True  # what the class is
    params.order = order
    if hasattr(params, "slots"):  # Python 3.12 and later
        params.slots = slots
    return dict(stand_in.__dataclass_fields__), params


# -- the methods --------------------------------------------------------------------------------


def _add_methods(cls: type[Any], fields: tuple[_Field, ...], *, order: bool) -> None:
    """``__init__`` compiled (its signature and speed need it), when first looked up; the others
    are closures over the field names, which cost no compile at all."""
    own = cls.__dict__
    names = tuple(f.name for f in fields)
    methods: dict[str, Callable[..., Any]] = {}
    if "__init__" not in own:  # compiled when first looked up (see _LazyInit)
        type.__setattr__(cls, "__init__", _LazyInit(cls, fields))
    methods.update(_frozen_methods(cls, frozenset(names)))
    if "__slots__" in own:  # dataclasses adds each for frozen=True where the class has none
        methods.update((k, v) for k, v in _pickling_methods(cls, names).items() if k not in own)
    if sys.version_info >= (3, 13) and "__replace__" not in own:  # copy.replace(), as dataclasses
        methods["__replace__"] = replace
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
        if function is not replace:
            function.__qualname__ = f"{cls.__qualname__}.{name}"
            function.__name__ = name
            function.__module__ = cls.__module__
        setattr(cls, name, function)


class _LazyInit:
    """A class's ``__init__``, compiled the first time it is looked up (an instance made, the
    signature read), then in the class in its place. Compiling costs about 0.1 ms a class, and a
    warm command makes many of its facts by unpickling them, which never calls ``__init__``."""

    __slots__ = ("fields", "owner")

    def __init__(self, owner: type[Any], fields: tuple[_Field, ...]) -> None:
        self.owner, self.fields = owner, fields

    def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
        init = _compiled_init(self.owner, self.fields)
        type.__setattr__(self.owner, "__init__", init)
        # Bound to whatever asks as an instance: Python 3.13's inspect.signature(cls) asks with
        # the class itself, and takes a bound method (the signature without self).
        return init if instance is None else init.__get__(instance, owner)


def _compiled_init(cls: type[Any], fields: tuple[_Field, ...]) -> Callable[..., None]:
    me = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    scope: dict[str, Any] = {
        "__dataclass_set__": object.__setattr__,
        "__dataclass_factory__": _FACTORY,
    }
    namespace: dict[str, Any] = {}
    exec(_init(cls, fields, me, scope), scope, namespace)  # noqa: S102 - from field names
    init: Callable[..., None] = namespace["__init__"]
    init.__annotations__ = {f.name: f.type for f in fields if f.init}
    init.__annotations__["return"] = None
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


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


def _frozen_error(message: str) -> Exception:
    """dataclasses' own error, imported only when one is raised."""
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def _frozen_methods(cls: type[Any], names: frozenset[str]) -> dict[str, Callable[..., Any]]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return {"__setattr__": __setattr__, "__delattr__": __delattr__}


def _pickling_methods(cls: type[Any], names: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    """As dataclasses writes them: the instance's own fields (a subclass's too), in order."""

    def field_names(self: Any) -> tuple[str, ...]:
        if type(self) is cls:
            return names
        import dataclasses  # a dataclass deriving from this one: its fields

        return tuple(f.name for f in dataclasses.fields(self))

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in field_names(self)]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(field_names(self), state, strict=False):  # as dataclasses does
            object.__setattr__(self, name, value)

    return {"__getstate__": __getstate__, "__setstate__": __setstate__}


def _init(cls: type[Any], fields: tuple[_Field, ...], me: str, scope: dict[str, Any]) -> str:
    """``__init__``'s source, as dataclasses writes it for a frozen class; defaults go in
    *scope*."""
    positional: list[str] = []
    keywords: list[str] = []
    body: list[str] = []
    for f in fields:
        default = f"__dataclass_default_{f.name}__"
        if f.default_factory is not MISSING:
            scope[default] = f.default_factory
            value = (
                f"{default}() if {f.name} is __dataclass_factory__ else {f.name}"
                if f.init
                else f"{default}()"
            )
            parameter = f"{f.name}=__dataclass_factory__"
        elif f.default is not MISSING:
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
