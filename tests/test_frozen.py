"""``@frozen`` behaves as ``@dataclass(frozen=True, kw_only=True, slots=True)`` does.

It writes the methods itself, in one piece, for speed (issue 28): each is compared here with
what :mod:`dataclasses` writes for the same class, on generated values (``__init__`` with its
defaults, factories and ``init=False`` fields, ``__eq__``, ``__hash__``, ``__repr__``), along
with immutability, slots, ``replace``, ``fields``, pickling, ``__post_init__`` and a method the
class defines itself.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuda_resolve._frozen import frozen


@frozen
class Mine:
    """A class of every kind of field."""

    name: str
    number: int = 0
    label: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    parts: tuple[int, ...] = ()
    unhashed: str = field(default="", hash=False)
    made: list[int] = field(default_factory=list, compare=False)
    fixed: int = field(default=7, init=False)
    computed: list[int] = field(default_factory=lambda: [1], init=False, compare=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Theirs:
    """The same class, made by dataclasses alone."""

    name: str
    number: int = 0
    label: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    parts: tuple[int, ...] = ()
    unhashed: str = field(default="", hash=False)
    made: list[int] = field(default_factory=list, compare=False)
    fixed: int = field(default=7, init=False)
    computed: list[int] = field(default_factory=lambda: [1], init=False, compare=False)


@frozen
class Base:
    """A slotted base for a dataclass (pickled: defined at module level)."""

    name: str


@dataclass(frozen=True, kw_only=True)
class Derived(Base):
    """Copied and pickled with its own field too."""

    extra: int = 5


values = st.fixed_dictionaries(
    {
        "name": st.text(max_size=5),
        "number": st.integers(-3, 3),
        "label": st.sampled_from(["", "a"]),
        "secret": st.sampled_from(["", "s"]),
        "parts": st.lists(st.integers(0, 2), max_size=2).map(tuple),
        "unhashed": st.sampled_from(["", "u"]),
    }
)


@given(values, values)
def test_eq_hash_and_repr_are_those_dataclasses_writes(
    first: dict[str, object], second: dict[str, object]
) -> None:
    mine_a, mine_b = Mine(**first), Mine(**second)  # type: ignore[arg-type]
    theirs_a, theirs_b = Theirs(**first), Theirs(**second)  # type: ignore[arg-type]
    assert (mine_a == mine_b) == (theirs_a == theirs_b)
    assert (mine_a != mine_b) == (theirs_a != theirs_b)
    assert hash(mine_a) == hash(theirs_a)
    assert repr(mine_a).removeprefix("Mine") == repr(theirs_a).removeprefix("Theirs")
    assert dataclasses.astuple(mine_a) == dataclasses.astuple(theirs_a)


def test_init_takes_what_dataclasses_init_takes() -> None:
    mine, theirs = Mine(name="a"), Theirs(name="a")
    assert dataclasses.astuple(mine) == dataclasses.astuple(theirs)
    assert mine.made == [] and mine.made is not Mine(name="a").made  # a factory per call
    assert Mine(name="a", made=[3]).made == [3]
    for bad in ({}, {"name": "a", "fixed": 1}, {"name": "a", "nosuch": 1}):
        with pytest.raises(TypeError):
            Mine(**bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            Theirs(**bad)  # type: ignore[arg-type]


def test_post_init_runs_after_every_field_is_set() -> None:
    seen: list[tuple[str, int]] = []

    @frozen
    class Checked:
        """Its __post_init__ sees every field."""

        name: str
        size: int = 2

        def __post_init__(self) -> None:
            seen.append((self.name, self.size))

    Checked(name="a")
    assert seen == [("a", 2)]


def test_another_class_is_never_equal_and_is_left_to_the_other_side() -> None:
    assert Mine(name="a") != Theirs(name="a")
    assert Mine.__eq__(Mine(name="a"), "a") is NotImplemented


def test_what_dataclasses_still_does_is_unchanged() -> None:
    value = Mine(name="a", parts=(1,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del value.name  # type: ignore[misc]
    with pytest.raises(TypeError):
        Mine("a")  # type: ignore[misc]
    assert not hasattr(value, "__dict__")
    assert dataclasses.is_dataclass(value)
    assert [f.name for f in dataclasses.fields(value)] == [
        f.name for f in dataclasses.fields(Theirs)
    ]
    assert dataclasses.replace(value, number=2) == Mine(name="a", number=2, parts=(1,))
    assert pickle.loads(pickle.dumps(value)) == value
    assert Mine.__eq__.__qualname__ == "Mine.__eq__"


def test_methods_the_class_writes_are_kept() -> None:
    @frozen(kw_only=False)
    class Own:
        """Compares by its first field only, and says so."""

        key: str
        other: int = 0

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Own) and other.key == self.key

        def __hash__(self) -> int:
            return hash(self.key)

        def __repr__(self) -> str:
            return f"Own<{self.key}>"

    assert Own("a", 1) == Own("a", 2) and hash(Own("a", 1)) == hash("a")
    assert repr(Own("a")) == "Own<a>"


def test_eq_alone_gets_the_fields_hash_as_dataclasses_gives_it() -> None:
    @frozen
    class EqOnly:
        """Defines __eq__ alone: Python sets __hash__ to None, and dataclasses adds one."""

        key: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, EqOnly) and other.key == self.key

    @dataclass(frozen=True, kw_only=True, slots=True)
    class TheirEqOnly:
        key: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, TheirEqOnly) and other.key == self.key

    assert hash(EqOnly(key="a")) == hash(TheirEqOnly(key="a")) == hash(("a",))


def test_positional_and_with_a_dict() -> None:
    @frozen(kw_only=False, slots=False)
    class Loose:
        """Positional, and with a __dict__ (a cached property needs one)."""

        first: int
        second: int = 2

    value = Loose(1)
    assert value == Loose(1, 2) and repr(value) == f"{Loose.__qualname__}(first=1, second=2)"
    assert hasattr(value, "__dict__") and value.second == 2


def test_what_the_review_found_behaves_as_dataclasses_does() -> None:
    """A class's own __init__ is kept, an undocumented class gets its signature as __doc__, an
    abstract method @frozen writes is no longer abstract, and a dataclass deriving from a @frozen
    one copies and pickles with its own fields too."""
    import abc
    import copy

    @frozen
    class OwnInit:
        """Builds itself."""

        value: int

        def __init__(self, text: str) -> None:
            object.__setattr__(self, "value", int(text))

    assert OwnInit("3").value == 3  # type: ignore[call-arg]

    @frozen
    class Undocumented:
        size: int = 2

    @dataclass(frozen=True, kw_only=True, slots=True)
    class TheirUndocumented:
        size: int = 2

    assert Undocumented.__doc__ == "Undocumented(*, size: 'int' = 2)"
    assert TheirUndocumented.__doc__ == "TheirUndocumented(*, size: 'int' = 2)"

    class Shown(abc.ABC):
        @abc.abstractmethod
        def __repr__(self) -> str: ...

    @frozen
    class Concrete(Shown):
        """Its __repr__ is the one @frozen writes."""

        name: str

    assert repr(Concrete(name="a")).endswith("Concrete(name='a')")

    value = Derived(name="a", extra=6)
    assert copy.copy(value).extra == 6 and pickle.loads(pickle.dumps(value)).extra == 6


def test_a_dataclass_base_is_refused_with_what_to_use() -> None:
    with pytest.raises(TypeError, match="does not derive from a dataclass"):

        @frozen
        class Child(Mine):
            """Would inherit Mine's fields."""

            more: int = 0


@frozen(kw_only=False, order=True)
class MineOrdered:
    """Ordered by its compared fields, positional, as the version classes are."""

    parts: tuple[int, ...]
    text: str = field(default="", compare=False)


@dataclass(frozen=True, order=True, slots=True)
class TheirsOrdered:
    """The same, made by dataclasses alone."""

    parts: tuple[int, ...]
    text: str = field(default="", compare=False)


@given(
    st.lists(st.integers(0, 2), max_size=3).map(tuple),
    st.lists(st.integers(0, 2), max_size=3).map(tuple),
    st.sampled_from(["", "x"]),
)
def test_order_compares_as_dataclasses_orders(
    first: tuple[int, ...], second: tuple[int, ...], text: str
) -> None:
    mine_a, mine_b = MineOrdered(first, text), MineOrdered(second)
    theirs_a, theirs_b = TheirsOrdered(first, text), TheirsOrdered(second)
    for compare in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__"):
        assert getattr(mine_a, compare)(mine_b) == getattr(theirs_a, compare)(theirs_b), compare
    assert sorted([mine_a, mine_b]) == [
        MineOrdered(t.parts, t.text) for t in sorted([theirs_a, theirs_b])
    ]
    assert dataclasses.fields(MineOrdered)[0].name == "parts" and MineOrdered.__match_args__ == (
        "parts",
        "text",
    )
    assert pickle.loads(pickle.dumps(mine_a)) == mine_a


def test_order_against_another_class_is_left_to_it_and_a_written_comparison_is_refused() -> None:
    assert MineOrdered((1,)).__lt__(TheirsOrdered((2,))) is NotImplemented
    with pytest.raises(TypeError):
        MineOrdered((1,)) < (2,)  # type: ignore[operator]  # noqa: B015
    assert MineOrdered.__dataclass_params__.order  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="__lt__"):

        @frozen(order=True)
        class Written:
            """Defines a comparison that order=True would overwrite."""

            value: int

            def __lt__(self, other: object) -> bool:
                return True


# -- without dataclasses imported (a warm doctor never imports it: issue 28) --------------------

_WITHOUT_DATACLASSES = '''
import copy, pickle, sys
from cuda_resolve._frozen import field, frozen, replace

@frozen
class Own:
    """Every kind of field, with the specifier of cuda_resolve._frozen."""

    name: str
    number: int = 0
    label: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)
    unhashed: str = field(default="", hash=False)
    made: list = field(default_factory=list, compare=False)
    fixed: int = field(default=7, init=False)

@frozen(kw_only=False, order=True)
class Ordered:
    parts: tuple
    text: str = field(default="", compare=False)

value = Own(name="a", made=[1])
checks = {
    "repr": repr(value),
    "eq": value == Own(name="a", label="other") and value != Own(name="b"),
    "hash": hash(value) == hash(("a", 0, "", 7)),  # name, number, secret, fixed
    "replace": replace(value, number=3) == Own(name="a", number=3),
    "replace_keeps": replace(value, number=3).made == [1],
    "pickle": pickle.loads(pickle.dumps(value)) == value,
    "copy": copy.copy(value) == value,
    "order": sorted([Ordered((2,)), Ordered((1,), "x")]) == [Ordered((1,)), Ordered((2,))],
    "match_args": Ordered.__match_args__ == ("parts", "text") and Own.__match_args__ == (),
    "slots": not hasattr(value, "__dict__"),
    "doc": Ordered.__doc__,
}
try:
    replace(value, fixed=1)
except ValueError as error:
    checks["replace_init_false"] = str(error)
checks["imported"] = [name for name in ("dataclasses", "inspect") if name in sys.modules]

import dataclasses  # what reads the fields afterwards gets dataclasses' own
checks["fields"] = [f.name for f in dataclasses.fields(value)]
checks["factory"] = dataclasses.fields(Own)[5].default_factory is list
checks["is_dataclass"] = dataclasses.is_dataclass(Own) and dataclasses.is_dataclass(value)
checks["dc_replace"] = dataclasses.replace(value, name="b") == Own(name="b", made=[1])
checks["params"] = [Own.__dataclass_params__.frozen, Ordered.__dataclass_params__.order]
try:
    value.name = "b"
except dataclasses.FrozenInstanceError as error:
    checks["frozen"] = str(error)
print(repr(checks))
'''


def test_a_frozen_class_needs_no_dataclasses_until_something_asks_for_them() -> None:
    import ast
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_DATACLASSES], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    checks = ast.literal_eval(result.stdout.strip())
    assert checks.pop("imported") == []
    assert checks.pop("repr") == "Own(name='a', number=0, label='', unhashed='', made=[1], fixed=7)"
    assert checks.pop("doc") == "Ordered(parts: tuple, text: str = '')"
    assert checks.pop("replace_init_false") == (
        "field fixed is declared with init=False, it cannot be specified with replace()"
    )
    assert checks.pop("fields") == [
        "name", "number", "label", "secret", "unhashed", "made", "fixed"
    ]  # fmt: skip
    assert checks.pop("params") == [True, True]
    assert checks.pop("frozen") == "cannot assign to field 'name'"
    assert all(checks.values()), checks


def test_the_signature_doc_is_the_one_dataclasses_writes() -> None:
    @frozen(kw_only=False)
    class Mixed:
        first: int
        second: list[int] = field(default_factory=list)
        third: str = field(default="x", kw_only=True)
        hidden: int = field(default=0, init=False)

    @dataclass(frozen=True, slots=True)
    class TheirMixed:
        first: int
        second: list[int] = field(default_factory=list)
        third: str = field(default="x", kw_only=True)
        hidden: int = field(default=0, init=False)

    assert Mixed.__doc__ == TheirMixed.__doc__.replace("TheirMixed", "Mixed")  # type: ignore[union-attr]


def test_what_dataclasses_refuses_and_what_frozen_leaves_to_it_is_refused() -> None:
    from cuda_resolve._frozen import field as own_field

    with pytest.raises(ValueError, match="mutable default <class 'list'> for field parts"):

        @frozen
        class Mutable:
            parts: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="non-default argument 'second' follows default"):

        @frozen(kw_only=False)
        class Misordered:
            first: int = 0
            second: int

    with pytest.raises(ValueError, match="cannot specify both default and default_factory"):
        own_field(default=1, default_factory=int)
    for annotation in ("ClassVar[int]", "typing.ClassVar[int]", "InitVar[int]", "KW_ONLY"):
        with pytest.raises(TypeError, match=r"@frozen takes no .* annotation; use @dataclass"):
            frozen(type("Refused", (), {"__annotations__": {"x": annotation}}))


def test_init_is_compiled_when_first_looked_up_and_is_the_one_dataclasses_writes() -> None:
    import inspect

    @frozen(kw_only=False)
    class Lazy:
        """Restored first (as unpickling does), then made by its __init__."""

        first: int
        second: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class TheirLazy:
        first: int
        second: list[int] = field(default_factory=list)

    restored = Lazy.__new__(Lazy)  # as unpickling makes it
    restored.__setstate__([1, [2]])
    assert type(vars(Lazy)["__init__"]).__name__ == "_LazyInit"
    assert restored == Lazy(1, [2]) and type(vars(Lazy)["__init__"]).__name__ == "function"

    @frozen(kw_only=False)
    class Unused:
        """Never made: its __init__ is never compiled."""

        first: int

    assert type(vars(Unused)["__init__"]).__name__ == "_LazyInit"
    assert str(inspect.signature(Unused)) == "(first: 'int') -> None"
    assert str(inspect.signature(Lazy)) == str(inspect.signature(TheirLazy))
    assert Lazy.__init__.__qualname__.endswith("Lazy.__init__")


def test_what_the_second_review_found_behaves_as_dataclasses_does() -> None:
    """With slots=False a dataclasses.field() leaves its default on the class, a class's own
    __slots__ is refused, and an empty docstring is replaced by the signature."""

    @frozen(slots=False)
    class Loose:
        """Its fields' defaults stay on the class."""

        plain: int = 1
        theirs: int = field(default=2)
        required: int = field()

    @dataclass(frozen=True, kw_only=True)
    class TheirLoose:
        plain: int = 1
        theirs: int = field(default=2)
        required: int = field()

    for cls in (Loose, TheirLoose):
        assert cls.plain == 1 and cls.theirs == 2 and "required" not in vars(cls)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="already specifies __slots__"):

        @frozen
        class Slotted:
            __slots__ = ("value",)
            value: int

    @frozen
    class Blank:
        """"""

        size: int = 2

    assert Blank.__doc__ == "Blank(*, size: 'int' = 2)"
