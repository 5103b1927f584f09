"""An agent's ``events.jsonl``, read: parsing a tail window and PolyPilot's restore/resume
heuristics over it.

The log is written by another process while we read it, so the parser tolerates a partial
last line, garbage, non-object JSON, entries without ``type``, CRLF and huge lines.
``session.idle`` is ephemeral and never on disk, so none of these rules can wait for it.
Pure: the file itself is read by :mod:`polypilot_tui.agents.agent_log`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polypilot_tui.domain.events import USAGE_EVENT_TYPES, EventType
from polypilot_tui.domain.safe_json import ParseError, load_json

#: PolyPilot's scans only look at the last 30 lines (a ring buffer in Utilities.cs).
SCAN_WINDOW = 30

#: The last event proves nothing is running any more.
_NOT_PROCESSING = frozenset(
    {
        EventType.SESSION_IDLE,
        EventType.SESSION_ERROR,
        EventType.SESSION_SHUTDOWN,
        EventType.SESSION_START,
        EventType.ABORT,
    }
)
_TOOL_TYPES = frozenset(
    {
        EventType.TOOL_START,
        EventType.TOOL_PROGRESS,
        EventType.TOOL_PARTIAL_RESULT,
        EventType.TOOL_COMPLETE,
    }
)
#: Where a sub-turn begins, walking backwards. user.message is ours: it opens a new turn,
#: so tool events before it belong to an earlier turn even if no turn_start was persisted.
_SUB_TURN_BOUNDARY = frozenset(
    {
        EventType.TURN_START,
        EventType.TURN_END,
        EventType.SESSION_RESUME,
        EventType.SESSION_START,
        EventType.USER_MESSAGE,
    }
)
#: A turn is over once one of these is on disk.
_TURN_ENDED = frozenset(
    {
        EventType.TURN_END,
        EventType.SESSION_IDLE,
        EventType.ABORT,
        EventType.SESSION_ERROR,
    }
)
#: Evidence of a turn in flight (assistant.message is judged by its content instead).
_TURN_IN_FLIGHT = _TOOL_TYPES | {
    EventType.USER_MESSAGE,
    EventType.TURN_START,
    EventType.REASONING,
    EventType.REASONING_DELTA,
    EventType.MESSAGE_DELTA,
    EventType.INTENT,
}
#: Bookkeeping that says nothing about whether a turn ended (skipped by lost_turn).
_NOISE = USAGE_EVENT_TYPES | {
    EventType.SESSION_RESUME,
    EventType.SESSION_SHUTDOWN,
    EventType.PERMISSION_REQUESTED,
    EventType.PERMISSION_COMPLETED,
    EventType.SESSION_MODEL_CHANGE,
    EventType.SESSION_TITLE_CHANGED,
    EventType.SESSION_BACKGROUND_TASKS_CHANGED,
}


def parse_window(chunk: bytes, starts_on_boundary: bool, max_lines: int) -> list[dict[str, Any]]:
    """The last ``max_lines`` events (oldest first) of a byte window cut from the end of a log.

    ``starts_on_boundary``: the window begins at the start of a line; otherwise its first
    (partial) line is dropped. Lines that are not JSON objects with a non-empty string
    ``type`` are skipped.
    """
    if max_lines <= 0:
        return []
    if not starts_on_boundary:
        newline = chunk.find(b"\n")
        if newline < 0:
            return []  # the whole window is the middle of one huge line
        chunk = chunk[newline + 1 :]
    entries: list[dict[str, Any]] = []
    # Parse from the end so garbage earlier in the window costs nothing once we have enough.
    for raw in reversed(chunk.split(b"\n")):
        if len(entries) >= max_lines:
            break
        entry = _parse_line(raw)
        if entry is not None:
            entries.append(entry)
    entries.reverse()
    return entries


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    """One event, or None for blank, partial, malformed, non-object or type-less lines."""
    raw = raw.strip()  # also drops the \r of CRLF files
    if not raw:
        return None
    try:
        obj = load_json(raw, "events.jsonl")  # bounded: deep nesting, bad UTF-8 or bad JSON is skipped
    except ParseError:
        return None
    if not isinstance(obj, dict) or not _type_of(obj):
        return None
    return obj


def _type_of(entry: object) -> str | None:
    """The entry's ``type`` if it is a non-empty string (callers may pass anything)."""
    if isinstance(entry, dict):
        kind = entry.get("type")
        if isinstance(kind, str) and kind:
            return kind
    return None


def _types(entries: Sequence[object]) -> list[str]:
    return [t for t in map(_type_of, entries) if t is not None]


def last_event_type(entries: Sequence[dict[str, Any]]) -> str | None:
    """The ``type`` of the newest entry that has one (PolyPilot ``GetLastEventType``)."""
    types = _types(entries)
    return types[-1] if types else None


def _sub_turn_had_tools(types: list[str]) -> bool:
    """Whether the sub-turn that ends with ``types[-1]`` ran any tool.

    Any tool event counts, matched or not: the agent loop always calls the model again
    with tool results, so a sub-turn that ran tools is never the last one of its turn
    (a turn_end there is "between tool rounds"). Walks back at most 30 types and stops at
    the sub-turn's start: turn_start, an earlier turn_end, resume, start or user.message.
    """
    for kind in reversed(types[-SCAN_WINDOW:-1]):
        if kind in _SUB_TURN_BOUNDARY:
            return False
        if kind in _TOOL_TYPES:
            return True
    return False


def is_still_processing(
    entries: Sequence[dict[str, Any]], age_seconds: float | None, stale_after: float = 600.0
) -> bool:
    """Was the agent mid-turn when the log was last written? (``IsSessionStillProcessing``)"""
    # `not <=` also rejects NaN. A log untouched for 10 min is idle whatever it says (#163).
    if age_seconds is None or not age_seconds <= stale_after:
        return False
    last = last_event_type(entries)
    if last is None or last in _NOT_PROCESSING:
        return False
    if last in (EventType.MESSAGE, EventType.TURN_END):
        return _sub_turn_had_tools(_types(entries))
    return True  # turn_start, tool events, user.message, unknown types: assume work continues


_TOOL_LIFECYCLE = frozenset(
    {
        EventType.PERMISSION_REQUESTED.value,
        EventType.PERMISSION_COMPLETED.value,
        "tool.execution_progress",
        "tool.execution_partial_result",
        "tool.shell_output",
    }
)


def has_interrupted_tool(entries: Sequence[dict[str, Any]]) -> bool:
    """Did the agent die with a tool still running? (``HasInterruptedToolExecution``, #393)

    Walking backwards a completion is seen before its start, so completions are counted
    first and each start consumes one; only a start with nothing left to consume is
    unmatched. (Counting starts first flagged every matched pair: the #393 false positive.)
    """
    unmatched = pending_completions = 0
    saw_shutdown = False
    only_control = True
    for kind in reversed(_types(entries)[-SCAN_WINDOW:]):
        if kind == EventType.SESSION_RESUME or kind in _TOOL_LIFECYCLE:
            # A permission prompt sits between a tool's start and its completion in the
            # Copilot CLI's log; it is part of the tool run, not a boundary of it.
            continue
        if kind == EventType.SESSION_SHUTDOWN:
            saw_shutdown = True
            continue
        only_control = False
        if kind == EventType.TOOL_COMPLETE:
            pending_completions += 1
        elif kind == EventType.TOOL_START:
            if pending_completions:
                pending_completions -= 1
            else:
                unmatched += 1
        else:
            break  # the tool run is bounded by the first non-tool event
    return unmatched > 0 and (saw_shutdown or not only_control)


def lost_turn(entries: Sequence[dict[str, Any]]) -> bool:
    """The last persisted turn started but never ended: the agent lost it entirely.

    Skips bookkeeping (usage, permission, resume, shutdown...) and judges the newest
    meaningful event: user.message, turn_start, tool or reasoning events mean a turn in
    flight; an assistant.message with text means the answer reached disk (not lost), one
    without text (tool requests only) does not; anything else (turn_end, abort,
    session.error, session.start, unknown types) means no turn was lost.
    """
    for entry in reversed(entries[-SCAN_WINDOW:]):
        kind = _type_of(entry)
        if kind is None or kind in _NOISE:
            continue
        if kind in _TURN_ENDED:
            return False
        if kind == EventType.MESSAGE:
            data = entry.get("data")
            content = data.get("content") if isinstance(data, dict) else None
            return not (isinstance(content, str) and content.strip())
        return kind in _TURN_IN_FLIGHT
    return False
