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

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from polypilot_tui.domain.chat import ChatItem, TurnRecord
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.wire import from_plain, to_plain


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
    rows_kept: bool = False
    """Some of its saved chat rows could not be read at the close: they stay on disk (where an
    undo finds them) instead of being deleted with the session."""


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
    return {"change": type(change).__name__, **to_plain(change)}


CHANGES_BY_NAME: dict[str, type[Change]] = {cls.__name__: cls for cls in CHANGE_TYPES}


def change_from_json(obj: Mapping[str, Any]) -> Change:
    """The record :func:`change_to_json` wrote; ValueError (naming the field) on any other shape."""
    name = obj.get("change")
    cls = CHANGES_BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown change {name!r}")
    return from_plain(cls, obj, name or "")
