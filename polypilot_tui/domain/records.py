"""The one typed record stream: every way state leaves the engine, as records.

The dashboard, persistence, the recorder, ``polypilot run`` and ``polypilot replay`` all
read these and nothing else; the engine service sends the same records to clients in other
processes, so every record turns into JSON and back (``engine/codec.py``).

Records are small and frozen. :class:`ViewChanged` carries the session's revision, not its
view: a consumer that redraws builds the view when it draws (a burst of deltas costs one
view, not one per token).
"""

from __future__ import annotations

from enum import StrEnum

from polypilot_tui.domain.chat import ChatItem, TurnRecord
from polypilot_tui.domain.dataclass_on_use import dataclass
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


@dataclass(frozen=True, slots=True)
class HostChanged:
    """A machine of a fleet changed state (live, stale, unreachable…): ``Engine.hosts()`` has
    its new :class:`~polypilot_tui.domain.hosts.HostView`. Published by a fleet only."""

    host: str
    """The host's name ("" for Local)."""

    @property
    def session_id(self) -> str:
        """A host's record names no session."""
        return ""


Record = (
    SessionAdded
    | SessionRemoved
    | ViewChanged
    | ItemAdded
    | ItemReplaced
    | EventReceived
    | ActionTaken
    | TurnEnded
    | HostChanged
)
"""Every record of the stream."""

RECORD_TYPES: tuple[type[Record], ...] = (
    SessionAdded,
    SessionRemoved,
    ViewChanged,
    ItemAdded,
    ItemReplaced,
    EventReceived,
    ActionTaken,
    TurnEnded,
)
"""Every record an engine publishes (they travel to clients; HostChanged is a fleet's own, in
the front end's process)."""

STREAM_TYPES: tuple[type[Record], ...] = (*RECORD_TYPES, HostChanged)
"""Every record a record stream carries (an engine's, and a fleet's own)."""
