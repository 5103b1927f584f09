"""Traces: the JSONL lingua franca of recordings, fixtures and ``polypilot replay``.

Each line has ``at`` (seconds from the start) and exactly one of ``send`` (prompt text),
``event`` (an agent event in Copilot SDK naming), ``restore`` (the session comes back after
an app restart), ``stop`` or ``reconnect``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json

ACTIONS = ("send", "event", "restore", "stop", "reconnect")
MAX_AT = 10 * 365 * 86400.0
"""Ten years of seconds: later times are typos (or attacks on float conversion), not traces."""
MAX_ENTRIES = 100_000
"""Entries a trace may hold (a 5 MB recording of small deltas has ~60 000)."""
MAX_BYTES = 64_000_000
"""Bytes a trace file may hold (a recording stops at 5 MB by default)."""


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
    try:  # bounded: nesting 100 000 deep or a 5000-digit number is an error or a null, not a crash
        obj = load_json(stripped, "trace", first_line=line_no)
    except ParseError as exc:
        raise TraceError(f"line {line_no}: {exc.reason}") from None
    if not isinstance(obj, dict):
        raise TraceError(f"line {line_no}: expected a JSON object, got {type(obj).__name__}")
    at = obj.get("at")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 <= at <= MAX_AT or not math.isfinite(at):
        raise TraceError(f"line {line_no}: 'at' must be a number of seconds from 0 to {MAX_AT:.0f}")
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


def parse_trace(lines: Iterable[str], max_entries: int = MAX_ENTRIES) -> list[TraceEntry]:
    """Parse a whole trace; times must not go backwards, and it holds at most ``max_entries``."""
    entries: list[TraceEntry] = []
    for number, text in enumerate(lines, start=1):
        entry = parse_line(text, number)
        if entry is None:
            continue
        if len(entries) >= max_entries:
            raise TraceError(f"line {number}: more than {max_entries:,} entries; split the trace")
        if entries and entry.at < entries[-1].at:
            raise TraceError(f"line {number}: 'at' goes back in time ({entry.at} < {entries[-1].at})")
        entries.append(entry)
    return entries


def dump_entry(at: float, action: str, value: Any) -> str:
    """One trace line (the recorder's format)."""
    if isinstance(value, AgentEvent):
        value = value.to_json()
    return dump_json({"at": round(at, 3), action: value})
