"""``@dataclass``, made the first time its class is used: the one way our records are declared.

Python 3.11's ``@dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__``,
``__hash__`` and (frozen) ``__setattr__``/``__delattr__`` as source and compiles them:
~0.5 ms a frozen class on this machine, ~60 ms for the ~130 our dashboard's first frame
imports, of which it uses ~25 (the engine's verbs declare forty requests and replies; a start
sends two). :func:`dataclass` takes the same options and, where it can, leaves the class as
written until its first use, then runs the real ``@dataclass`` on it (the same function, the
same options, bases first): the class is exactly the one ``@dataclass`` would have made.

First use is any of: an instance made, printed or compared, or the class's dataclass fields read
(``dataclasses.fields``, ``is_dataclass``, ``replace``, ``asdict``, msgspec — all read
``__dataclass_fields__``, which makes the class). Made now instead: a class that defines a method
``@dataclass`` would write, one with a metaclass or a base's ``__init_subclass__`` (they would
run for the bare subclass that writes its ``__init__``), and a ``slots=True`` one with a base,
``weakref_slot``, or an annotation that may not be a field (``ClassVar``, ``InitVar``,
``KW_ONLY``: the decorator decides). A class with no docstring gets the one ``@dataclass``
writes from its signature when it is made (until then its ``__doc__`` is None, as written).

``slots=True`` makes ``@dataclass`` return a new class: the one the module binds cannot be
swapped later. That new class is made at once instead (its ``__slots__`` its fields, its body
without their defaults, as ``@dataclass`` makes it), and the rest waits: when it is made, the
defaults stand in for the slots while ``@dataclass`` reads them, and frozen, it gets the
``__getstate__``/``__setstate__`` pair ``@dataclass`` gives a frozen class with slots.

Before its first use, the class itself reads as written: ``inspect.signature`` reads its
stub's, a field's class attribute is its ``field(…)``, ``__match_args__`` is missing and
``__hash__`` is object's; an instance made without ``__init__`` (``object.__new__``, an
unpickling in a fresh process) hashes by identity until its class is made. A class first used
after its module has left ``sys.modules`` cannot resolve ``ClassVar`` annotations. None of
ours does any of these (the test that compares every class with the real decorator's).

The Copilot SDK's generated protocol modules (~1,870 classes) are made the same way
(agents/copilot/sdk_import.py). A lock makes each class once when two threads first use it.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast, dataclass_transform, overload

T = TypeVar("T", bound=type)

STUBS = ("__init__", "__repr__", "__eq__")
"""What ``@dataclass`` writes that the first use of an instance goes through."""
MARKS = ("__dataclass_fields__", "__dataclass_params__")
"""What ``@dataclass`` sets that a reader of the class (not of an instance) goes through."""

_pending: dict[type, dict[str, Any]] = {}
"""Classes not made yet, with the options their ``@dataclass`` was given."""
_slot_defaults: dict[type, dict[str, Any]] = {}
"""The fields' defaults (or ``field(…)``) of slotted classes not made yet, as written."""
_MAYBE_NO_FIELD = re.compile(r"ClassVar|InitVar|KW_ONLY")
_lock = threading.RLock()


def make_now(cls: type) -> None:
    """Run the real ``@dataclass`` on ``cls`` and on its bases not made yet (bases first).

    Another thread using the class meanwhile waits for it: its ``__init__`` stub and its marks
    (which ``@dataclass`` overwrites) stay until it is made. ``@dataclass`` writes no method
    a class has, so the ``__repr__`` and ``__eq__`` stubs go first (only an instance made
    without ``__init__`` reaches them), and the ``__init__`` is written on a bare subclass of
    the made class (the same fields, options and module: the same function) and then put in
    place of its stub in one step."""
    with _lock:
        for klass in reversed(cls.__mro__):
            options = _pending.pop(klass, None)
            if options is None:
                continue
            written = dict(vars(klass))  # the decorator rewrites the class before it may refuse it
            delattr(klass, "__repr__")
            delattr(klass, "__eq__")
            try:
                _make(klass, options, written)
            except BaseException:  # a mistake the real decorator refuses: each use says it again
                _restore(klass, written)
                _pending[klass] = options
                raise


def _make(klass: type, options: dict[str, Any], written: dict[str, Any]) -> None:
    """Run ``@dataclass`` on ``klass`` (its ``__repr__``/``__eq__`` stubs gone) and put its
    ``__init__`` and docstring in place, its slots' too; anything raised leaves ``klass`` to be
    restored."""
    slots = {name: written[name] for name in _slot_defaults.get(klass, ())}
    for name, default in _slot_defaults.get(klass, {}).items():
        setattr(klass, name, default)  # read by @dataclass in place of the slot, as it was written
    try:
        init = _decorate(klass, options, written)
    finally:
        for name, slot in slots.items():
            setattr(klass, name, slot)
    _slot_defaults.pop(klass, None)
    if init is not None:  # last: a thread that takes it (without the lock) finds the class whole
        klass.__init__ = init  # type: ignore[misc]


def _slots_state(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _set_slots_state(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=True):
        object.__setattr__(self, f.name, value)  # frozen: as @dataclass's own does


def _decorate(klass: type, options: dict[str, Any], written: dict[str, Any]) -> Callable[..., None] | None:
    """``@dataclass`` on ``klass`` as given (its slots aside) and its docstring; the ``__init__``
    to put in place of its stub (None: none is written, and the stub is gone)."""
    # Without an __init__ (the stub's place): @dataclass compiles one even where it keeps the
    # class's own, and the bare subclass below writes the one to keep.
    dataclasses.dataclass(klass, **(options | {"init": False, "slots": False}))
    init: Callable[..., None] | None = None
    if not options.get("init", True):
        delattr(klass, "__init__")
    else:
        klass.__dataclass_params__.init = True  # type: ignore[attr-defined]  # as given
        # a docstring, so that @dataclass does not write the bare class one (a signature)
        names = {"__module__": klass.__module__, "__qualname__": klass.__qualname__, "__doc__": "-"}
        bare = type(klass.__name__, (klass,), names)
        frozen = options.get("frozen", False)
        writer: type = dataclasses.dataclass(bare, repr=False, eq=False, frozen=frozen, match_args=False)
        init = writer.__dict__["__init__"]
    if not written.get("__doc__"):  # @dataclass wrote it from the stub's signature: again, from the real one
        klass.__doc__ = klass.__name__ + _signature_text(klass, init)
    return init


def _signature_text(klass: type, init: Callable[..., None] | None) -> str:
    """The signature ``@dataclass`` writes into a class's missing docstring (its own words), of
    ``init`` when it is the ``__init__`` to be (the stub's is ``*args, **kwargs``)."""
    try:
        signature = inspect.signature(klass) if init is None else inspect.signature(init)
    except (TypeError, ValueError):
        return ""
    if init is not None:  # as a class's signature reads: without self
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return str(signature).replace(" -> None", "")


def _restore(klass: type, written: dict[str, Any]) -> None:
    """Put ``klass``'s attributes back as they were written (its stubs and marks with them)."""
    for name in set(vars(klass)) - set(written):
        delattr(klass, name)
    for name, value in written.items():
        if vars(klass).get(name) is not value:
            setattr(klass, name, value)


def pending_count() -> int:
    """How many classes are not made yet (for the bench and the tests)."""
    return len(_pending)


class _MadeOnRead:
    """A class's ``__dataclass_fields__`` (or params) before it is made: reading it makes it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type) -> Any:
        make_now(owner)
        for klass in owner.__mro__:  # now the real one, set by @dataclass (no descriptor lookup again)
            value = klass.__dict__.get(self.name)
            if value is not None and not isinstance(value, _MadeOnRead):
                return value
        raise AttributeError(self.name)


def _stubs(klass: Any) -> dict[str, Callable[..., Any]]:
    """Stand-ins for ``klass``'s dataclass methods that make it, then call the real one
    (``klass``'s own: a subclass calling ``super().__init__`` gets its base's)."""

    def first_init(self: Any, *args: Any, **kwargs: Any) -> None:
        make_now(klass)
        klass.__init__(self, *args, **kwargs)

    def first_repr(self: Any) -> str:
        make_now(klass)
        text: str = klass.__repr__(self)
        return text

    def first_eq(self: Any, other: Any) -> Any:
        make_now(klass)
        return klass.__eq__(self, other)

    return {"__init__": first_init, "__repr__": first_repr, "__eq__": first_eq}


def _slotted(klass: type, options: dict[str, Any]) -> type | None:
    """The class ``@dataclass(slots=True)`` will make of ``klass``, made now and not yet a
    dataclass; None when it cannot wait (see the module's docstring)."""
    annotations = klass.__dict__.get("__annotations__", {})
    if (
        options.get("weakref_slot")
        or klass.__bases__ != (object,)
        or "__slots__" in klass.__dict__
        or any(not isinstance(hint, str) or _MAYBE_NO_FIELD.search(hint) for hint in annotations.values())
    ):
        return None
    names = tuple(annotations)
    body = {key: value for key, value in klass.__dict__.items() if key not in {*names, "__dict__", "__weakref__"}}
    body |= {"__slots__": names, "__qualname__": klass.__qualname__}
    if options.get("frozen"):  # as @dataclass gives a frozen class with slots, for pickle (an
        # instance pickled elsewhere may be read back before this process first uses the class)
        body = {"__getstate__": _slots_state, "__setstate__": _set_slots_state} | body
    slotted = type(klass.__name__, klass.__bases__, body)
    _slot_defaults[slotted] = {name: klass.__dict__[name] for name in names if name in klass.__dict__}
    return slotted


def _defer(klass: T, options: dict[str, Any]) -> T:
    slotted: type | None = klass
    if (
        any(name in klass.__dict__ for name in STUBS)
        or type(klass) is not type
        or any("__init_subclass__" in vars(base) for base in klass.__mro__[1:-1])
        or (options.get("slots") and (slotted := _slotted(klass, options)) is None)
    ):
        # a metaclass or an __init_subclass__ would also run for the bare subclass that writes
        # the __init__ (a registry by name would keep it)
        return cast(T, dataclasses.dataclass(klass, **options))
    klass = cast(T, slotted)
    with _lock:
        _pending[klass] = options
        for name, stub in _stubs(klass).items():
            setattr(klass, name, stub)
        for name in MARKS:
            setattr(klass, name, _MadeOnRead(name))
    return klass


@overload
def dataclass(cls: T, /) -> T: ...
@overload
def dataclass(
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    order: bool = False,
    unsafe_hash: bool = False,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
    weakref_slot: bool = False,
) -> Callable[[T], T]: ...
@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: Any = None, /, **options: Any) -> Any:
    """``@dataclass`` and ``@dataclass(…)``, the class made on its first use."""
    if cls is None:
        return lambda klass: _defer(klass, options)
    return _defer(cls, options)
