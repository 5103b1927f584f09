"""Streamed text that arrives in a burst reaches the reducer as one delta.

An agent that streams fast, or an engine catching up after a busy moment, hands over many
``assistant.message_delta`` events in one pass of the event loop. Folding each of them into
the session separately costs a reducer pass, a revision and a view change (a redraw, a frame
to every attached dashboard) per token; folding the burst costs one of each.

The rules keep what a session sees exactly as before:

- A delta is held until the end of the loop iteration it arrived in; the deltas of the same
  message that follow it in that iteration join it, and the joined text is folded in then.
- Anything else of that session applies what is held first: its next event of another kind
  or message, and the end of its turn (the engine calls :meth:`DeltaBursts.flush` there). So
  the order never changes, no text waits longer than one iteration, and none is lost when a
  turn ends under it.
- Without a running event loop nothing is held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from polypilot_tui.domain.events import AgentEvent, EventType, delta_text

_DELTA = str(EventType.MESSAGE_DELTA)


class _Held:
    """Deltas of one message waiting for the end of the iteration."""

    __slots__ = ("events", "message_id")

    def __init__(self, first: AgentEvent) -> None:
        self.events = [first]
        self.message_id = first.data.get("messageId")

    def event(self) -> AgentEvent:
        first = self.events[0]
        if len(self.events) == 1:
            return first
        return AgentEvent(_DELTA, {**first.data, "deltaContent": "".join(map(delta_text, self.events))})


class DeltaBursts:
    """Holds stream deltas until the end of the loop iteration they arrived in (see the module)."""

    def __init__(self, apply_now: Callable[[str, AgentEvent], None]) -> None:
        self._apply_now = apply_now
        self._held: dict[str, _Held] = {}
        self._scheduled = False

    def take(self, session_id: str, event: AgentEvent) -> bool:
        """True when ``event`` is held for later; False: the caller applies it now.

        The hot path (every streamed token passes here): kept flat on purpose.
        """
        held = self._held
        if event.type != _DELTA:
            if held and session_id in held:
                self.flush(session_id)
            return False
        burst = held.get(session_id)
        if burst is not None:
            if burst.message_id == event.data.get("messageId"):
                burst.events.append(event)
                return True
            self.flush(session_id)
        if not self._scheduled:
            try:
                asyncio.get_running_loop().call_soon(self._end_of_iteration)
            except RuntimeError:  # no loop: every event is applied as it comes
                return False
            self._scheduled = True
        held[session_id] = _Held(event)
        return True

    def flush(self, session_id: str) -> None:
        """Apply what is held for ``session_id`` now."""
        burst = self._held.pop(session_id, None)
        if burst is not None:
            self._apply_now(session_id, burst.event())

    def _end_of_iteration(self) -> None:
        self._scheduled = False
        while self._held:
            self.flush(next(iter(self._held)))
