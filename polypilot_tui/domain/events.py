"""The normalized event vocabulary every backend emits.

Names follow the GitHub Copilot SDK (``session.idle``, ``tool.execution_start`` …) and
payloads use the camelCase field names of ``events.jsonl``. The ACP and demo backends map
their own messages onto the same names, so the engine, the recorder and ``polypilot replay``
speak one language. Unknown types are kept as they are and ignored safely by the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from polypilot_tui.domain.limits import ROW_CHARS, bounded_texts, has_longer_text

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_new_tuple = tuple.__new__


class EventType(StrEnum):
    """Event types the engine understands (Copilot SDK naming)."""

    SESSION_START = "session.start"
    SESSION_RESUME = "session.resume"
    SESSION_IDLE = "session.idle"
    SESSION_ERROR = "session.error"
    SESSION_SHUTDOWN = "session.shutdown"
    SESSION_USAGE_INFO = "session.usage_info"
    SESSION_TITLE_CHANGED = "session.title_changed"
    SESSION_MODEL_CHANGE = "session.model_change"
    SESSION_BACKGROUND_TASKS_CHANGED = "session.background_tasks_changed"
    USER_MESSAGE = "user.message"
    TURN_START = "assistant.turn_start"
    TURN_END = "assistant.turn_end"
    MESSAGE = "assistant.message"
    MESSAGE_DELTA = "assistant.message_delta"
    REASONING = "assistant.reasoning"
    REASONING_DELTA = "assistant.reasoning_delta"
    INTENT = "assistant.intent"
    ASSISTANT_USAGE = "assistant.usage"
    TOOL_START = "tool.execution_start"
    TOOL_PROGRESS = "tool.execution_progress"
    TOOL_PARTIAL_RESULT = "tool.execution_partial_result"
    TOOL_COMPLETE = "tool.execution_complete"
    PERMISSION_REQUESTED = "permission.requested"
    PERMISSION_COMPLETED = "permission.completed"
    ABORT = "abort"
    SYSTEM_MESSAGE = "system.message"
    PLAN = "plan"
    CONNECTION_LOST = "connection.lost"
    """Ours, not the SDK's: the agent process or its connection died (data: reason)."""


#: Metrics-only events. They never count as progress (PolyPilot #230: a session sat
#: "Thinking…" for 361 minutes because usage events kept resetting the timer).
USAGE_EVENT_TYPES: frozenset[str] = frozenset(
    {EventType.SESSION_USAGE_INFO.value, EventType.ASSISTANT_USAGE.value, "session.usage_record"}
)

KNOWN_TYPES: frozenset[str] = frozenset(t.value for t in EventType)


class AgentEvent(NamedTuple):
    """One event from an agent, in Copilot SDK naming with camelCase ``data``.

    A NamedTuple rather than a dataclass: millions of these flow through the manager and
    tuple construction is the cheapest immutable record Python has.
    """

    type: str
    data: Mapping[str, Any] = _EMPTY

    @property
    def is_usage(self) -> bool:
        """True for metrics-only events, which never count as progress."""
        return self.type in USAGE_EVENT_TYPES

    def get(self, key: str, default: Any = None) -> Any:
        """A field of ``data`` by its camelCase name."""
        return self.data.get(key, default)

    def text(self, *keys: str) -> str:
        """The first string field among ``keys`` ("" when none is a string)."""
        data = self.data
        for key in keys:
            value = data.get(key)
            if type(value) is str:
                return value
        return ""

    def to_json(self) -> dict[str, Any]:
        """The trace form: ``{"type": ..., "data": {...}}``."""
        return {"type": self.type, "data": dict(self.data)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AgentEvent:
        """Parse the trace / events.jsonl form; raises ValueError on a bad shape."""
        kind = obj.get("type")
        if type(kind) is not str or not kind:
            raise ValueError("event needs a non-empty string 'type'")
        data = obj.get("data")
        if type(data) is dict:  # the common case straight from json.loads: no copy, no ABC check
            return _new_tuple(cls, (kind, data))  # skips the NamedTuple __new__ frame (hot path)
        if data is None:
            return cls(kind, {})
        if not isinstance(data, Mapping):
            raise ValueError("event 'data' must be an object")
        return cls(kind, dict(data))


def tool_result_text(event: AgentEvent) -> str:
    """The human text of a ``tool.execution_complete`` result or error."""
    error = event.get("error")
    if isinstance(error, Mapping):
        message = error.get("message")
        if isinstance(message, str) and message:
            return message
    elif isinstance(error, str) and error:
        return error
    result = event.get("result")
    if isinstance(result, Mapping):
        for key in ("detailedContent", "content"):
            value = result.get(key)
            if isinstance(value, str) and value:
                return value
    elif isinstance(result, str):
        return result
    return ""


def kept(event: AgentEvent) -> AgentEvent:
    """``event`` with every text longer than limits.ROW_CHARS cut (what the engine keeps,
    records and sends of an agent's text is bounded from here on). A streamed piece is cut
    to the limit and says how much it lost in ``notKept`` (its reply says it where it ends);
    any other text says it where it is cut.

    The hot path: a streamed delta costs one look."""
    data = event.data
    delta = data.get("deltaContent")
    if type(delta) is str:
        if len(delta) <= ROW_CHARS:
            return event if len(data) <= 3 or not has_longer_text(data, ROW_CHARS, depth=2) else _cut(event)
        return AgentEvent(event.type, {**data, "deltaContent": delta[:ROW_CHARS], "notKept": len(delta) - ROW_CHARS})
    return _cut(event) if has_longer_text(data, ROW_CHARS, depth=2) else event


def _cut(event: AgentEvent) -> AgentEvent:
    return AgentEvent(event.type, bounded_texts(event.data, ROW_CHARS, depth=2))


def not_kept(event: AgentEvent) -> int:
    """Characters a streamed piece lost to :func:`kept` (0 for one kept whole)."""
    lost = event.data.get("notKept")
    return lost if type(lost) is int and lost > 0 else 0
