"""The one typed change stream: every way state leaves the engine, as records.

The dashboard, persistence, the recorder, ``polypilot run`` and ``polypilot replay`` all
read these and nothing else; an engine service will send the same records to clients in
other processes, so every record turns into JSON and back (:func:`change_to_json`,
:func:`change_from_json`, which checks every field of what it is given).

Records are small and frozen. :class:`ViewChanged` carries the session's revision, not its
view: a consumer that redraws builds the view when it draws (a burst of deltas costs one
view, not one per token).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from polypilot_tui.domain.chat import ChatItem, TurnRecord
from polypilot_tui.domain.events import AgentEvent


class EngineAction(StrEnum):
    """What the engine did to an agent (the recorder writes these, replay plays them)."""

    SEND = "send"
    RESEND = "resend"
    ABORT = "abort"
    KILL = "kill"
    RECONNECT = "reconnect"


@dataclass(frozen=True, slots=True)
class SessionAdded:
    """A session exists now (created, restored or reopened)."""

    session_id: str
    restored: bool = False
    mid_turn: bool = False
    """Restored with a turn in flight (it reconnects at once and may be resumed)."""
    prompt: str = ""
    """The prompt of that turn."""


@dataclass(frozen=True, slots=True)
class SessionRemoved:
    """A session was closed."""

    session_id: str


@dataclass(frozen=True, slots=True)
class ViewChanged:
    """Something the session shows changed; its view is now at ``revision``."""

    session_id: str
    revision: int


@dataclass(frozen=True, slots=True)
class ItemAdded:
    """A history row was appended at ``index``."""

    session_id: str
    index: int
    item: ChatItem


@dataclass(frozen=True, slots=True)
class ItemReplaced:
    """The history row at ``index`` changed (a tool that completed)."""

    session_id: str
    index: int
    item: ChatItem


@dataclass(frozen=True, slots=True)
class EventReceived:
    """An agent event, as the backend delivered it (before the engine acted on it)."""

    session_id: str
    event: AgentEvent


@dataclass(frozen=True, slots=True)
class ActionTaken:
    """The engine sent, aborted, killed or reconnected (with the reason, for people)."""

    session_id: str
    action: EngineAction
    reason: str = ""
    detail: str = ""
    """The technical why (watchdog tier, last event type)."""
    prompt: str = ""
    """For SEND and RESEND: what went out."""
    attempt: int = 0
    """For a permission-recovery RECONNECT: which attempt."""
    by_user: bool = False
    """The user asked for it (send, stop, reconnect); otherwise the engine did it on its own
    (a watchdog abort, a recovery's reconnect and resend), which a replay re-derives."""


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn ended, for good: how and why (``record.cause`` names the cause)."""

    session_id: str
    record: TurnRecord


Change = (
    SessionAdded | SessionRemoved | ViewChanged | ItemAdded | ItemReplaced | EventReceived | ActionTaken | TurnEnded
)
"""Every record of the stream."""

CHANGE_TYPES: tuple[type[Change], ...] = (
    SessionAdded,
    SessionRemoved,
    ViewChanged,
    ItemAdded,
    ItemReplaced,
    EventReceived,
    ActionTaken,
    TurnEnded,
)


def change_to_json(change: Change) -> dict[str, Any]:
    """The wire form: ``{"change": "TurnEnded", ...fields}`` with nested records as objects."""
    out: dict[str, Any] = {"change": type(change).__name__}
    for f in fields(change):
        out[f.name] = _plain(getattr(change, f.name))
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, AgentEvent):
        return value.to_json()
    if isinstance(value, StrEnum):
        return value.value
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


CHANGES_BY_NAME: dict[str, type[Change]] = {cls.__name__: cls for cls in CHANGE_TYPES}


def change_from_json(obj: Mapping[str, Any]) -> Change:
    """The record :func:`change_to_json` wrote; ValueError (naming the field) on any other shape."""
    name = obj.get("change")
    cls = CHANGES_BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown change {name!r}")
    return _record(cls, obj, name or "")  # type: ignore[no-any-return]


def _record(cls: type, obj: Any, where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected an object")
    values = {}
    for f in fields(cls):
        if f.name in obj:
            values[f.name] = _value(_hints(cls)[f.name], obj[f.name], f"{where}.{f.name}")
    try:
        return cls(**values)
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"{where}: {exc}") from None


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _value(hint: Any, value: Any, where: str) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):  # X | None
        options = [h for h in get_args(hint) if h is not type(None)]
        return None if value is None else _value(options[0], value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list")
        return tuple(_value(get_args(hint)[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if hint is AgentEvent:
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an event object")
        return AgentEvent.from_json(value)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        try:
            return hint(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not a {hint.__name__}") from None
    if hasattr(hint, "__dataclass_fields__"):
        return _record(hint, value, where)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not hint:
        raise ValueError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
    return value
