"""What the ACP agent says, read from the raw JSON-RPC stream and handed to the sink.

``session/update`` notifications are mapped from the raw messages (the SDK drops what
fails its schema), so is the prompt's stop reason when the SDK rejects the response. The
intake also notes when a prompt went out on the wire and when the agent last showed a sign
of life, and mutes the rest of a turn the engine has already closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from polypilot_tui.agents.acp.mapping import Emit, UpdateMapper
from polypilot_tui.agents.base import EventSink
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent, EventType

logger = logging.getLogger(__name__)


class StreamIntake:
    """Raw messages of the current agent process in, engine events out to the sink."""

    def __init__(self, sink: EventSink, clock: Clock, session_id: Callable[[], str | None]) -> None:
        self._sink = sink
        self._clock = clock
        self._session_id = session_id
        """The id of the open session: updates of any other session are dropped."""
        self._mapper = UpdateMapper(self.emit)
        self._replay: UpdateMapper | None = None
        self._raw_stop: Mapping[str, Any] | None = None
        self._last_inbound: float | None = None
        self._muted = False
        self.prompt_written = asyncio.Event()
        """Set when a ``session/prompt`` request has been written to the agent."""

    @property
    def mapper(self) -> UpdateMapper:
        """The live mapper of the current session's turns."""
        return self._mapper

    @property
    def last_inbound(self) -> float | None:
        """When (clock.now) the agent last sent something other than a usage update."""
        return self._last_inbound

    def mark_alive(self) -> None:
        """A process just started: that counts as a sign of life."""
        self._last_inbound = self._clock.now()

    def reset_mapper(self) -> None:
        """A session was (re)opened: its turns start from a clean mapper."""
        self._mapper = UpdateMapper(self.emit)

    @contextmanager
    def replaying(self, emit: Emit) -> Iterator[UpdateMapper]:
        """While inside, session updates are history (``session/load``) folded into ``emit``."""
        replay = self._replay = UpdateMapper(emit, replay=True, prefix="history")
        try:
            yield replay
        finally:
            self._replay = None

    @contextmanager
    def muted(self) -> Iterator[None]:
        """While inside, nothing but ``connection.lost`` reaches the sink (a closed turn's rest)."""
        self._muted = True
        try:
            yield
        finally:
            self._muted = False

    def clear_raw_stop(self) -> None:
        """A new prompt goes out: forget the stop reason seen for the last one."""
        self._raw_stop = None

    def raw_stop_reason(self) -> str | None:
        """The stop reason of the last prompt response as the agent sent it, if it had one."""
        stop = self._raw_stop.get("stopReason") if self._raw_stop is not None else None
        return stop if isinstance(stop, str) else None

    def on_message(self, message: Mapping[str, Any], incoming: bool) -> None:
        """One raw JSON-RPC message of the current process, in or out."""
        if not incoming:
            if message.get("method") == "session/prompt":
                self.prompt_written.set()
            return
        method = message.get("method")
        raw_params = message.get("params")
        params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
        update = params.get("update") if method == "session/update" else None
        if not (isinstance(update, Mapping) and update.get("sessionUpdate") == "usage_update"):
            self._last_inbound = self._clock.now()  # usage is no sign of life (#230)
        if method == "session/update":
            if not isinstance(update, Mapping):
                return
            session_id = self._session_id()
            if session_id is not None and params.get("sessionId") not in (None, session_id):
                return
            (self._replay or self._mapper).handle(update)
            return
        result = message.get("result")
        if method is None and isinstance(result, Mapping) and "stopReason" in result:
            self._raw_stop = result  # fallback when the SDK rejects the response

    def permission_tool(self, tool_call: Mapping[str, Any]) -> Mapping[str, Any]:
        """The tool call a permission request is about, as the live mapper knows it."""
        return self._mapper.note_permission_tool(tool_call)

    def connection_lost(self, reason: str) -> None:
        """Flush what the mapper holds, then report the loss."""
        self._mapper.finish()
        self.emit(AgentEvent(EventType.CONNECTION_LOST, {"reason": reason}))

    def emit(self, event: AgentEvent) -> None:
        """Hand ``event`` to the sink (which never raises), unless muted."""
        if self._muted and event.type != EventType.CONNECTION_LOST:
            return  # the rest of a turn the engine has already closed
        self._sink(event)
