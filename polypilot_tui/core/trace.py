"""Traces: the JSONL lingua franca of recordings, fixtures and ``polypilot replay``.

Each line has ``at`` (seconds from the start) and exactly one of ``send`` (prompt text),
``event`` (an agent event in Copilot SDK naming), ``restore`` (the session comes back after
an app restart), ``stop`` or ``reconnect``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from polypilot_tui.core.events import AgentEvent

ACTIONS = ("send", "event", "restore", "stop", "reconnect")


class TraceError(ValueError):
    """A trace line is invalid; the message names the line."""


@dataclass(frozen=True)
class TraceEntry:
    """One parsed trace line."""

    line: int
    at: float
    action: str
    value: Any

    @property
    def event(self) -> AgentEvent:
        return self.value  # type: ignore[no-any-return]


def parse_line(text: str, line_no: int) -> TraceEntry | None:
    """Parse one line; blank lines and ``#`` comments give None."""
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return None
    try:
        obj = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise TraceError(f"line {line_no}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit number, nesting 100 000 deep
        raise TraceError(f"line {line_no}: not valid JSON ({type(exc).__name__}: {str(exc)[:80]})") from None
    if not isinstance(obj, dict):
        raise TraceError(f"line {line_no}: expected a JSON object, got {type(obj).__name__}")
    at = obj.get("at")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 <= at < math.inf:
        raise TraceError(f"line {line_no}: 'at' must be a number of seconds >= 0")
    present = [key for key in ACTIONS if key in obj]
    if len(present) != 1:
        raise TraceError(f"line {line_no}: needs exactly one of {', '.join(ACTIONS)} (found {present or 'none'})")
    action = present[0]
    value = obj[action]
    if action == "send" and (not isinstance(value, str) or not value.strip()):
        raise TraceError(f"line {line_no}: 'send' must be a non-empty string")
    if action == "event":
        if not isinstance(value, Mapping):
            raise TraceError(f"line {line_no}: 'event' must be an object")
        try:
            value = AgentEvent.from_json(value)
        except ValueError as exc:
            raise TraceError(f"line {line_no}: {exc}") from None
    if action == "restore" and not isinstance(value, Mapping):
        raise TraceError(f"line {line_no}: 'restore' must be an object such as {{\"mid_turn\": true}}")
    return TraceEntry(line_no, float(at), action, value)


def parse_trace(lines: Iterable[str]) -> list[TraceEntry]:
    """Parse a whole trace; times must not go backwards."""
    entries: list[TraceEntry] = []
    for number, text in enumerate(lines, start=1):
        entry = parse_line(text, number)
        if entry is None:
            continue
        if entries and entry.at < entries[-1].at:
            raise TraceError(f"line {number}: 'at' goes back in time ({entry.at} < {entries[-1].at})")
        entries.append(entry)
    return entries


def dump_entry(at: float, action: str, value: Any) -> str:
    """One trace line (the recorder's format)."""
    if isinstance(value, AgentEvent):
        value = value.to_json()
    obj: dict[str, Any] = {"at": round(at, 3), action: value}
    return json.dumps(obj, ensure_ascii=False, default=str)
