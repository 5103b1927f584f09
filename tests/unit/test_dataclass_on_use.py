"""Our records' ``@dataclass``, made on first use (domain/dataclass_on_use.py).

Each record class of polypilot_tui is described in two fresh interpreters, one where every
module gets the real ``@dataclass``, one as shipped: fields, defaults, ``__init__``, hashing,
match arguments, params, repr and equality of an instance must agree. The rest are the uses
that make a class: an instance, a repr, ``==``, reading its fields (``fields``, ``replace``,
``asdict``, the engine's codec), and two threads at once.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import subprocess
import sys
import threading
from dataclasses import asdict, field, fields, is_dataclass, replace
from typing import Any, ClassVar

import pytest

from polypilot_tui.domain.dataclass_on_use import dataclass, make_now, pending_count
from polypilot_tui.engine.codec import decode, encode
from tests.support.dataclass_description import ROOT, described_both_ways

DESCRIBE = r"""
import dataclasses, importlib, pkgutil, sys
import polypilot_tui
from polypilot_tui.domain import dataclass_on_use
from tests.support.dataclass_description import report
if sys.argv[1] == "real":
    dataclass_on_use.dataclass = dataclasses.dataclass  # before any module takes the name
names = [m.name for m in pkgutil.walk_packages(polypilot_tui.__path__, "polypilot_tui.")]
modules = [importlib.import_module(n) for n in names if not n.endswith("__main__")]
report(dataclass_on_use.pending_count(), modules)
"""


@pytest.mark.timeout(120)
def test_every_record_class_is_made_as_the_real_decorator_makes_it() -> None:
    real, ours = described_both_ways(DESCRIBE, 110)
    assert real["pending"] == 0 and ours["pending"] > 50  # most wait for their first use
    assert len(real["classes"]) > 150
    assert ours["classes"] == real["classes"]


def test_a_subclass_a_repr_and_an_equality_before_any_instance() -> None:
    @dataclass(frozen=True)
    class Base:
        """A base."""

        a: int
        b: str = "b"

    @dataclass(frozen=True)
    class Child(Base):
        """A child."""

        c: int = 3

    class Plain(Base):  # not a dataclass: its own __init__ reaches the base's
        def __init__(self) -> None:
            super().__init__(1)

    assert "__match_args__" not in vars(Base)  # nothing made yet
    child = Child(1)
    assert (child.a, child.b, child.c) == (1, "b", 3) and hash(child) == hash(Child(1))
    assert repr(child).endswith("Child(a=1, b='b', c=3)") and child == Child(1) and child != Child(2)
    assert Plain().a == 1 and Base(5) == Base(5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.a = 2  # type: ignore[misc]

    @dataclass
    class Lonely:
        """Alone."""

        x: int = 0

    instance = object.__new__(Lonely)  # made without __init__ (copy, unpickling): repr and == still make it
    instance.x = 4
    assert repr(instance).endswith("Lonely(x=4)") and instance == Lonely(4)
    make_now(Lonely)  # again: nothing left to make


@dataclass(frozen=True)
class Inner:
    """Inside (module-level: the codec resolves the annotations by the module's names)."""

    n: int


@dataclass(frozen=True)
class Outer:
    """Outside."""

    inner: Inner
    tags: tuple[str, ...] = field(default_factory=tuple)


def test_reading_a_class_fields_makes_it_before_any_instance() -> None:
    waiting = pending_count()
    assert "__match_args__" not in vars(Outer) and "__match_args__" not in vars(Inner)
    assert is_dataclass(Outer) and [f.name for f in fields(Outer)] == ["inner", "tags"]
    assert pending_count() == waiting - 1 and "__match_args__" not in vars(Inner)  # Outer only
    # msgspec (the engine's codec) reads the nested class's fields the same way
    decoded = decode(Outer, {"inner": {"n": 2}, "tags": ["a"]})
    assert "__match_args__" in vars(Inner) and pending_count() == waiting - 2
    assert decoded == Outer(Inner(2), ("a",)) and encode(decoded) == {"inner": {"n": 2}, "tags": ("a",)}
    assert replace(decoded, tags=()) == Outer(Inner(2)) and asdict(decoded) == {"inner": {"n": 2}, "tags": ("a",)}
    assert decode(Outer, {"inner": {"n": 2}}) == Outer(Inner(2))  # the default factory's value


@dataclass(frozen=True)
class Checked:
    """A plain default and a check of its own."""

    low: int
    high: int = 10

    def __post_init__(self) -> None:
        if self.high < self.low:
            raise ValueError("high is below low")


def test_the_codec_builds_a_class_not_made_yet_with_its_defaults_and_its_check() -> None:
    """msgspec builds a record without its ``__init__``: the class is made when msgspec reads its
    fields, a missing field gets its default (and encodes again), and ``__post_init__`` runs."""
    assert "__match_args__" not in vars(Checked)
    decoded = decode(Checked, {"low": 1})
    assert "__match_args__" in vars(Checked)
    assert decoded == Checked(1) and hash(decoded) == hash(Checked(1)) and encode(decoded) == {"low": 1, "high": 10}
    with pytest.raises(ValueError, match=r"^Checked: high is below low$"):
        decode(Checked, {"low": 20})


def test_what_cannot_wait_is_made_at_once() -> None:
    @dataclass(frozen=True)
    class OwnRepr:  # its own method: nothing to gain
        """With its own repr."""

        a: int

        def __repr__(self) -> str:
            return "mine"

    @dataclass(frozen=True)
    class Base:
        a: int

    @dataclass(frozen=True, slots=True)
    class SlottedChild(Base):  # slots after a base's fields: the decorator's to lay out
        b: int = 2

    @dataclass(frozen=True, slots=True)
    class SlottedClassVar:  # a ClassVar is no field, and no slot: the decorator decides
        a: int
        LIMIT: ClassVar[int] = 3

    @dataclass(frozen=True, slots=True, weakref_slot=True)
    class Weak:
        a: int

    made = (OwnRepr, SlottedChild, SlottedClassVar, Weak)
    assert all("__match_args__" in vars(cls) for cls in made)
    assert repr(OwnRepr(1)) == "mine" and SlottedChild.__slots__ == ("a", "b") and SlottedClassVar.__slots__ == ("a",)


@dataclass(frozen=True, slots=True)
class Point:
    """A slotted record of this module (pickle finds it by name)."""

    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


def test_a_slotted_class_waits_and_is_then_what_the_decorator_makes() -> None:
    """``@dataclass(slots=True)`` returns a new class: that one is made at import (its slots,
    its body without the defaults), the rest when first used."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Real:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)

    assert "__match_args__" not in vars(Point) and Point.__slots__ == Real.__slots__ == ("x", "y", "tags")
    point = Point(1)
    assert "__match_args__" in vars(Point)
    assert (point.x, point.y, point.tags) == (1, 0, []) and point == Point(1, 0, [])
    assert repr(point) == "Point(x=1, y=0, tags=[])" and hash(Point(1, 2, ())) == hash(Point(1, 2, ()))  # type: ignore[arg-type]
    assert not hasattr(point, "__dict__") and isinstance(vars(Point)["x"], type(vars(Real)["x"]))  # slots, no dict
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(Point(3, 4, ["a"]))) == Point(3, 4, ["a"])
    assert [f.name for f in fields(Point)] == [f.name for f in fields(Real)]
    assert [(f.default, f.default_factory) for f in fields(Point)] == [
        (f.default, f.default_factory) for f in fields(Real)
    ]
    assert Point.__match_args__ == Real.__match_args__ and str(inspect.signature(Point)) == str(inspect.signature(Real))


def test_a_class_with_no_docstring_waits_and_gets_the_one_dataclass_writes() -> None:
    # the Copilot SDK's generated root class (1,865 fields, ~0.25 s to make) has none
    @dataclass(frozen=True)
    class Undocumented:
        a: int
        b: str = "x"

    @dataclass(init=False)
    class NoInit:
        a: int

    @dataclass
    class Empty:
        """"""

        a: int

    assert "__match_args__" not in vars(Undocumented) and Undocumented.__doc__ is None
    assert Undocumented(1).a == 1
    assert Undocumented.__doc__ == "Undocumented(a: 'int', b: 'str' = 'x')"
    assert dataclasses.fields(NoInit)[0].name == "a"
    assert NoInit.__doc__ == "NoInit()"  # object's signature, as @dataclass(init=False) writes it
    assert Empty(1).a == 1 and Empty.__doc__ == "Empty(a: 'int')"  # an empty docstring is none


class _HeldDefault:
    """A field's default that holds the thread making its class until released: ``@dataclass``
    reads a class attribute through its ``__get__`` while it makes the class."""

    def __init__(self) -> None:
        self.inside, self.release = threading.Event(), threading.Event()

    def __get__(self, instance: object, owner: type) -> int:
        if instance is None and not self.inside.is_set():
            self.inside.set()
            assert self.release.wait(10)
        return 7


def test_two_threads_first_using_a_class_at_once_make_it_once() -> None:
    held = _HeldDefault()

    @dataclass
    class Contended:
        """Wanted by two threads."""

        a: int = held  # type: ignore[assignment]

    made: dict[str, Any] = {}
    first = threading.Thread(target=lambda: made.setdefault("first", Contended()))
    second = threading.Thread(target=lambda: made.setdefault("second", Contended(1)))
    first.start()
    assert held.inside.wait(10)  # the first thread is making the class
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waits for it to be made, rather than reaching a stub again
    held.release.set()
    first.join(10)
    second.join(10)
    assert made == {"first": Contended(7), "second": Contended(1)}


def test_threads_first_using_slotted_classes_at_once_find_them_whole() -> None:
    """The ``__init__`` a class gets is put in place last: a thread that takes it without the
    lock finds the slots back (their defaults stood in while the class was made)."""
    failures: list[BaseException] = []
    for _ in range(300):

        @dataclass(slots=True)
        class Open:
            x: int
            y: int = 2

        @dataclass(frozen=True, slots=True)
        class Frozen:
            x: int
            y: int = 2

        start = threading.Barrier(6)

        def use(cls: Any, start: threading.Barrier = start) -> None:
            start.wait(5)
            try:
                assert cls(1).y == 2
            except BaseException as exc:  # noqa: BLE001 - counted below
                failures.append(exc)

        threads = [threading.Thread(target=use, args=(cls,)) for cls in (Open, Frozen) * 3]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert failures == []


class Holder:
    @dataclass(frozen=True, slots=True)
    class Nested:
        """A slotted record nested in a class: named by its qualified name."""

        x: int


def test_a_nested_slotted_class_keeps_its_qualified_name() -> None:
    assert Holder.Nested.__qualname__ == "Holder.Nested"
    assert repr(Holder.Nested(1)) == "Holder.Nested(x=1)"
    assert pickle.loads(pickle.dumps(Holder.Nested(2))) == Holder.Nested(2)


def test_a_frozen_slotted_instance_pickled_elsewhere_reads_back_before_its_class_is_used() -> None:
    pickled = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pickle, sys; from tests.unit.test_dataclass_on_use import Point; "
            "sys.stdout.buffer.write(pickle.dumps(Point(3, 4, ['a'])))",
        ],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    read_back = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pickle, sys; from tests.unit.test_dataclass_on_use import Point; "
            "made = '__match_args__' in vars(Point); "
            "print('made' if made else 'waiting', repr(pickle.loads(sys.stdin.buffer.read())))",
        ],
        cwd=ROOT,
        input=pickled,
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert read_back.split(" ", 1) == ["waiting", "Point(x=3, y=4, tags=['a'])\n"]


def test_a_class_the_real_decorator_refuses_says_so_at_each_use() -> None:
    @dataclass
    class Misordered:
        """A field without a default after one with."""

        a: int = 0
        b: int  # type: ignore[misc]

    for _ in range(2):  # the same clear error each time, never a stub calling itself
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            Misordered(1, 2)
    with pytest.raises(TypeError, match="non-default argument"):
        fields(Misordered)


def test_a_refused_class_is_left_as_it_was_written() -> None:
    """The decorator rewrites a field's default before it refuses the class: a second use must
    not find a class it would accept."""

    @dataclass
    class Rewritten:
        """A factory field, then one without a default."""

        a: list[int] = field(default_factory=list)
        b: int  # type: ignore[misc]

    for _ in range(2):
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            Rewritten(5, 6)


class _Registered:
    """A base that registers each subclass by name."""

    registry: dict[str, type] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _Registered.registry[cls.__name__] = cls


def test_a_class_with_a_metaclass_or_a_subclass_hook_is_made_at_once() -> None:
    @dataclass
    class Listed(_Registered):
        """Registered by name."""

        a: int

    assert _Registered.registry["Listed"] is Listed and Listed(1).a == 1
    assert _Registered.registry["Listed"] is Listed  # no second class of its name was made
    assert "__match_args__" in vars(Listed)


class _Unprintable:
    """A field's default whose repr fails: the real decorator fails writing the docstring."""

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_class_that_fails_after_the_decorator_ran_is_left_as_it_was_written() -> None:
    """The real decorator refuses it at definition (its docstring shows the default); ours each
    use, never a class left made with its ``__init__`` stub, which would call itself."""
    unprintable = _Unprintable()

    with pytest.raises(RuntimeError, match="no repr"):

        @dataclasses.dataclass
        class Real:
            a: object = unprintable

    @dataclass
    class Undocumented:
        a: object = unprintable

    for _ in range(2):
        with pytest.raises(RuntimeError, match="no repr"):
            Undocumented()
    assert Undocumented.__doc__ is None and "__match_args__" not in vars(Undocumented)
