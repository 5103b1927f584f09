"""The engine's JSON codec: frozen domain records to JSON-ready values and back (msgspec).

:func:`encode` turns a record (nested records, enums, tuples) into dicts, tuples, strings and
numbers; :func:`decode` rebuilds a value of a given type from such values and raises
ValueError naming the path of the bad field — what arrives from another process is untrusted
like any other input. The domain's dataclasses stay plain: the adapters live here.

Values are checked by JSON's rules: objects become records, arrays tuples and strings enums,
but a string is never read as a number nor a number as a string (``"7"`` is no ``int``), and
a bool is no int. That is msgspec's strict conversion (``msgspec.convert``); the text itself
is parsed by :func:`~polypilot_tui.domain.safe_json.load_json` first, whose bounds (depth,
numbers) hold on the raw input, and which reads what a UTF-8 parser refuses (a lone surrogate
an agent sent: msgspec takes the string as it is). :func:`decode_text` reads values that come
as text (a query string) and takes numbers written as text (the lax conversion).

Where msgspec differs from pydantic, which this codec used until the dashboard's first frame
could not afford it (issue 25: its import ~100 ms, the view's validator 16-30 ms):

- an error names the first bad field only: msgspec stops at it (pydantic named up to three);
- :func:`encode` leaves arrays as the tuples the records hold (JSON text writes them as arrays,
  as it did the lists pydantic gave), and a ``float`` field that holds an int writes the int
  (JSON has one kind of number; :func:`decode` reads it back as a float);
- a record is built without its ``__init__`` (its ``__post_init__`` runs), and a field missing
  from the input whose default the class holds as an attribute is not stored on the instance,
  where msgspec's encoder does not look for it: :func:`decode` stores those defaults, so a
  record decoded from a shorter object (an older engine's) encodes whole again.

Measured on 200 views and 20,000 history rows (bench/codec.py, medians of 7 runs alternated
with pydantic's): views encode in 1.7 ms and decode in 2.4 ms (pydantic: 3.2, 4.2), rows in
22 ms and 16 ms (22, 35); a view event's four fields apply in 3.4 µs (4.9). The attached
dashboard's first view costs the codec ~10 ms (msgspec's import ~6, the view ~3), pydantic's
~14 with pydantic already imported for the settings (medians of 10 fresh processes; making the
view's record classes, ~15 ms, is the same for both).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import MISSING, fields, is_dataclass, replace
from enum import Enum
from functools import cache
from typing import Any, TypeVar, Union, cast, get_args, get_origin, get_type_hints, overload

import msgspec

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.records import RECORD_TYPES, EventReceived, Record
from polypilot_tui.domain.view import SessionView
from polypilot_tui.infra.conversion_errors import read_problem

T = TypeVar("T")

Complete = Callable[[Any], None]
"""Stores the defaults msgspec left on the class in a decoded value's records (see the top)."""


def encode(value: Any, form: Any = None) -> Any:
    """``value`` as JSON-ready values. ``form`` (the type ``value`` was declared as) is taken
    for the callers that know it: msgspec writes a value by its own type."""
    del form  # every record of ours is written by its own fields
    return msgspec.to_builtins(value)


@overload
def decode(form: type[T], obj: Any, where: str = "") -> T: ...
@overload
def decode(form: Any, obj: Any, where: str = "") -> Any: ...
def decode(form: Any, obj: Any, where: str = "") -> Any:
    """The ``form`` value that :func:`encode` wrote as ``obj``; ValueError naming the bad field."""
    return _convert(form, obj, True, where)


def decode_text(form: type[T], obj: Any, where: str = "") -> T:
    """Like :func:`decode`, for values that arrive as text: ``"7"`` reads as 7."""
    return cast(T, _convert(form, obj, False, where))


def _convert(form: Any, obj: Any, strict: bool, where: str) -> Any:
    try:
        value = msgspec.convert(obj, form, strict=strict)
    except msgspec.ValidationError as exc:
        raise ValueError(_say(form, str(exc), where or _name(form))) from None
    complete = _completer(form)
    if complete is not None:
        complete(value)
    return value


def decode_fields(record: T, changes: Mapping[str, Any], where: str = "") -> T:
    """``record`` with the fields ``changes`` names set to its values (as :func:`encode` wrote
    them), each decoded as its field's type; ValueError on an unknown field or a bad value.

    A mirror applies one of these for every view event (hundreds a second while replies stream).
    A value that is already of its field's type (an int for an int, a float or null for a
    ``float | None``) is taken as it is and a string named as an enum's value looked up; the
    others are read in one conversion to a struct of the record's fields, each optional
    (msgspec keeps what it learnt of a struct; a type on its own, an enum or ``X | None``, it
    learns again at each conversion: 3-7 µs a field). The copy skips ``__init__`` where the
    record's ``__init__`` only sets its fields (``dataclasses.replace`` took half the time)."""
    cls: type = type(record)
    form, known = _changes_form(cls)
    values = {}
    slow: dict[str, Any] = {}
    for name, value in changes.items():
        field = known.get(name)
        if field is None:
            raise ValueError(f"{where or cls.__name__}: no field {name!r}")
        as_is, members, _ = field
        if type(value) in as_is:
            values[name] = value
        elif members is not None and type(value) is str and value in members:
            values[name] = members[value]
        else:
            slow[name] = value
    if slow:
        try:
            read: Any = msgspec.convert(slow, form, strict=True)
        except msgspec.ValidationError as exc:
            raise ValueError(_say(cls, str(exc), where or cls.__name__)) from None
        for name in slow:
            values[name] = value = getattr(read, name)
            complete = known[name][2]
            if complete is not None:
                complete(value)
    if not _plain_fields(cls):
        return cast(T, replace(cast(Any, record), **values))
    copy_: Any = object.__new__(cls)
    copy_.__dict__.update(record.__dict__)
    copy_.__dict__.update(values)
    return cast(T, copy_)


_Field = tuple[frozenset[type], dict[str, Any] | None, Complete | None]
"""How :func:`decode_fields` reads a field: the types taken as they are, an enum's members by
their string values, and the field's completer."""
_AS_IS = frozenset({int, str, bool, float, type(None)})


@cache
def _changes_form(cls: type) -> tuple[type, dict[str, _Field]]:
    """A struct of ``cls``'s fields, each unset unless given, and how each field is read."""
    hints = _hints(cls)
    names = [f.name for f in fields(cls)]
    either: Any = Union  # a Union of types known only now
    optional = [(name, either[hints[name], msgspec.UnsetType], msgspec.UNSET) for name in names]
    form = msgspec.defstruct(f"{cls.__name__}Changes", optional, kw_only=True)
    return form, {name: _field_reading(hints[name]) for name in names}


def _field_reading(hint: Any) -> _Field:
    arms = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    # exactly: an int for a float field is converted, a bool for an int refused (msgspec says why)
    as_is = frozenset(arm for arm in arms if arm in _AS_IS)
    enums = [arm for arm in arms if isinstance(arm, type) and issubclass(arm, Enum)]
    members = None
    if len(enums) == 1 and all(type(member.value) is str for member in enums[0]):
        members = {member.value: member for member in enums[0]}
    return as_is, members, _completer(hint)


@cache
def _plain_fields(cls: type) -> bool:
    """The dataclass's ``__init__`` only sets its fields: every field is an argument of it, it
    has no ``__post_init__``, and its fields live in its ``__dict__`` (no slots)."""
    return (
        all(f.init for f in fields(cls))
        and not hasattr(cls, "__post_init__")
        and not hasattr(cls, "__slots__")
        and hasattr(cls, "__dict__")
    )


def from_text(cls: type, texts: Mapping[str, str]) -> dict[str, Any]:
    """The fields of the record ``cls`` among ``texts`` (path and query parameters), read from
    text; the other texts are left out."""
    hints = _hints(cls)
    return {name: decode_text(hints[name], text, name) for name, text in texts.items() if name in hints}


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


# ---- the defaults msgspec leaves on the class --------------------------------------------------
_completers: dict[Any, Complete | None] = {}


def _completer(form: Hashable) -> Complete | None:
    """What stores, in a decoded value of type ``form``, each of its records' defaults that
    msgspec left on the class (None when no record inside ``form`` can miss one)."""
    if form in _completers:
        return _completers[form]

    def later(value: Any) -> None:  # a type inside itself: its completer is there once used
        complete = _completers[form]
        if complete is not None:
            complete(value)

    _completers[form] = later
    made = _completers[form] = _make_completer(form)
    return made


def _make_completer(form: Any) -> Complete | None:
    origin, args = get_origin(form), get_args(form)
    if origin in (Union, types.UnionType):
        arms = {get_origin(arm) or arm: c for arm in args if (c := _completer(arm)) is not None}
        if not arms:
            return None

        def one_of(value: Any) -> None:
            complete = arms.get(type(value))
            if complete is not None:
                complete(value)

        return one_of
    if origin in (tuple, list, set, frozenset, dict):
        fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
        items = [_completer(arg) for arg in args] if fixed else [_completer(args[0] if origin is tuple else args[-1])]
        if not any(items):
            return None
        if fixed:

            def in_place(value: Any) -> None:
                for complete, item in zip(items, value, strict=True):
                    if complete is not None:
                        complete(item)

            return in_place
        each = cast(Complete, items[0])

        def every(value: Any) -> None:
            for item in value.values() if origin is dict else value:
                each(item)

        return every
    if isinstance(form, type) and is_dataclass(form):
        return _record_completer(form)
    return None


def _record_completer(cls: type) -> Complete | None:
    hints = _hints(cls)
    own = [(f.name, f.default) for f in fields(cls) if f.default is not MISSING] if cls.__dictoffset__ else []
    children = [(f.name, c) for f in fields(cls) if (c := _completer(hints[f.name])) is not None]
    if not own and not children:
        return None
    count = len(fields(cls))
    checks_itself = hasattr(cls, "__post_init__")  # it may set attributes that are no fields

    def complete(record: Any) -> None:
        if own:
            state = record.__dict__
            if len(state) < count or checks_itself:
                for name, default in own:
                    if name not in state:
                        state[name] = default
        for name, child in children:
            value = getattr(record, name)
            if value is not None:
                child(value)

    return complete


# ---- stream records ------------------------------------------------------------------------
RECORDS_BY_NAME: dict[str, type[Record]] = {cls.__name__: cls for cls in RECORD_TYPES}


def record_to_json(change: Record) -> dict[str, Any]:
    """The wire form: ``{"change": "TurnEnded", ...fields}`` with nested records as objects."""
    if isinstance(change, EventReceived):  # an agent event keeps its trace form
        return {"change": "EventReceived", "session_id": change.session_id, "event": change.event.to_json()}
    return {"change": type(change).__name__, **encode(change)}


def record_from_json(obj: Mapping[str, Any]) -> Record:
    """The record :func:`record_to_json` wrote; ValueError (naming the field) on any other shape."""
    name = obj.get("change")
    cls = RECORDS_BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown change {name!r}")
    if cls is EventReceived:
        event = obj.get("event")
        if not isinstance(event, Mapping):
            raise ValueError("EventReceived.event: expected an object")
        return EventReceived(
            decode(str, obj.get("session_id"), "EventReceived.session_id"), AgentEvent.from_json(event)
        )
    return decode(cls, {k: v for k, v in obj.items() if k != "change"}, cls.__name__)


# ---- a session's state, as the service sends it -------------------------------------------------
def session_state(view: SessionView, history: Sequence[ChatItem] | None, streaming: str) -> dict[str, Any]:
    """One session: its view, the reply streaming now and, unless None, its history (a client
    that attaches to hundreds of sessions fetches a history when it shows it)."""
    state = {"view": encode(view), "streaming": streaming}
    if history is not None:
        state["history"] = encode(tuple(history), tuple[ChatItem, ...])
    return state


def view_from_json(obj: Any) -> SessionView:
    """A view as :func:`session_state` or a view event sent it; ValueError on any other shape."""
    return decode(SessionView, obj, "view")


def items_from_json(obj: Any) -> list[ChatItem]:
    """History rows; ValueError on any other shape."""
    return list(decode(tuple[ChatItem, ...], obj, "history"))


# ---- errors in our words ---------------------------------------------------------------------
def _say(form: Any, said: str, where: str) -> str:
    """msgspec's message ``said`` about a ``form`` value, in our words: the path of the bad field
    (``where`` for the value itself), then what is wrong with it."""
    problem = read_problem(form, said)
    if problem.kind == "missing":
        return f"{problem.where(where)}: {problem.said!r} is missing"
    if problem.kind == "choice":
        if problem.choices() and not isinstance(problem.hint, type):  # a Literal: its values
            return f"{problem.where(where)}: {problem.said} is not one of {problem.choices()}"
        return f"{problem.where(where)}: {problem.said} is not a {getattr(problem.hint, '__name__', 'known value')}"
    return f"{problem.where(where)}: {problem.said}"  # expected …, or a record's own check said it


def _name(form: Any) -> str:
    return str(getattr(form, "__name__", form))
