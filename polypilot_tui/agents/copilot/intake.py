"""What the Copilot CLI says, as engine events: SDK callbacks in, :class:`AgentEvent` out.

Everything here runs on the loop: the SDK's reader thread, the process watcher and the
JSON-RPC close hook all hop onto it before calling in. Besides translating, the intake
keeps the bookkeeping the events need: permission prompts shown and answered (the CLI
repeats both), tools still open (an abort leaves them without a completion), whether the
CLI is in a turn, and whether the CLI is gone (reported once, as ``connection.lost``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from polypilot_tui.agents.base import EventSink
from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.events import (
    PromptInfo,
    aborted_completion,
    event_from_dict,
    event_from_sdk,
    is_unknown,
    permission_fields,
)
from polypilot_tui.domain.events import AgentEvent, EventType

log = logging.getLogger(__name__)

MODEL_CALL_FAILURE = "model.call_failure"
"""The CLI's report of one failed model call (``failureKind: transport``: it could not connect)."""


class EventIntake:
    """The SDK's event, permission and close callbacks for one session, feeding the sink."""

    def __init__(self, sink: EventSink, busy: BusyFlag) -> None:
        self._sink = sink
        self._busy = busy
        self._session_id = ""
        self._open_tools: dict[str, str] = {}
        """toolCallId -> tool name, for tools started live and not completed yet."""
        self._prompts: dict[str, PromptInfo] = {}
        self._shown_prompts: set[str] = set()
        self._completed_prompts: set[str] = set()
        self._lost = False
        self._closing = False
        self._muted = 0
        """While > 0, events (of a leftover turn being ended before a send) are not emitted."""
        self.on_unreachable: Callable[[], None] | None = None
        """Called when the CLI reports a model call that could not connect (it then retries)."""

    @property
    def lost(self) -> bool:
        """The CLI died or its connection closed while we were not closing it."""
        return self._lost

    def attach(self, session_id: str) -> None:
        """Events are for ``session_id`` from now on (raw events of other sessions are dropped).
        Called before create/resume, with the id asked for, and again with the one adopted."""
        self._session_id = session_id

    def closing_on_purpose(self) -> None:
        """We are stopping the CLI: its death from now on is no ``connection.lost``."""
        self._closing = True

    def prompt(self, request_id: str) -> PromptInfo | None:
        """What we know of a permission request still waiting for an answer."""
        return self._prompts.get(request_id)

    @contextmanager
    def muted(self) -> Iterator[None]:
        """Drop events (except ``connection.lost``) while an earlier turn is being ended."""
        self._muted += 1
        try:
            yield
        finally:
            self._muted -= 1

    # -- SDK callbacks ----------------------------------------------------------------------

    def on_sdk_event(self, event: Any) -> None:
        """SDK ``on_event`` handler: runs on the loop; nothing may escape into the SDK."""
        try:
            if is_unknown(event):
                log.debug("copilot: passing through unknown event type %s", getattr(event, "raw_type", "?"))
            self.handle(event_from_sdk(event))
        except Exception:  # the SDK's callback: a bug of ours is logged in full, not dropped by the SDK
            log.exception("copilot: event handling failed")

    def on_raw_event(self, session_id: str, raw: dict[str, Any]) -> None:
        """An event as the CLI sent it: one the SDK does not act on (runtime.install_hooks),
        or one its parser failed on (seen on resume)."""
        if session_id != self._session_id or not session_id:
            # another session's, on the CLI this one shares; or one that names no session (the
            # hook makes a missing or null id ""), which must not reach an intake not attached yet
            return
        try:
            self.handle(event_from_dict(raw))
        except Exception:  # the SDK's callback (its JSON-RPC hook): a bug of ours is logged in full
            log.exception("copilot: raw event handling failed")

    def on_permission_request(self, request: Any, invocation: Any) -> Any:
        """Leave every request pending: the event already reached the sink with its options."""
        from copilot import PermissionNoResult

        return PermissionNoResult()

    def on_transport_closed(self) -> None:
        """The JSON-RPC close hook (already hopped onto the loop)."""
        self.mark_lost("Copilot CLI connection closed")

    # -- bookkeeping ------------------------------------------------------------------------

    def handle(self, event: AgentEvent) -> None:
        """Note what ``event`` changes (prompts, open tools, busy), then emit it unless a repeat."""
        kind = event.type
        if kind == EventType.PERMISSION_REQUESTED:
            data, info = permission_fields(event.data)
            if info is not None:
                if info.request_id in self._shown_prompts or info.request_id in self._completed_prompts:
                    return
                self._shown_prompts.add(info.request_id)
                self._prompts[info.request_id] = info
            event = AgentEvent(kind, data)
        elif kind == EventType.PERMISSION_COMPLETED:
            request_id = event.text("requestId")
            if request_id in self._completed_prompts:
                return  # ours went out first; the CLI's echo adds nothing
            self._completed_prompts.add(request_id)
            self._prompts.pop(request_id, None)
        elif kind == EventType.TOOL_START:
            self._open_tools[event.text("toolCallId")] = event.text("toolName")
        elif kind == EventType.TOOL_COMPLETE:
            self._open_tools.pop(event.text("toolCallId"), None)
        elif kind == EventType.SESSION_IDLE:
            self._busy.set(False)
        elif kind in (EventType.USER_MESSAGE, EventType.TURN_START):
            self._busy.set(True)
        elif kind == MODEL_CALL_FAILURE and (notify := self._unreachable_hook(event)) is not None:
            notify()
        self._emit(event)
        if kind == EventType.ABORT:
            self.close_open_tools()

    def _unreachable_hook(self, event: AgentEvent) -> Callable[[], None] | None:
        """Who wants to know that this model call of the live turn could not connect, if any."""
        return self.on_unreachable if event.get("failureKind") == "transport" and not self._muted else None

    def close_open_tools(self) -> None:
        """Synthetic failed completions for tools an abort cut off (the CLI sends none)."""
        tools, self._open_tools = self._open_tools, {}
        for call_id, name in tools.items():
            self._emit(aborted_completion(call_id, name))

    def mark_lost(self, reason: str) -> None:
        """Emit connection.lost once, unless we are closing on purpose."""
        if self._lost or self._closing:
            return
        self._lost = True
        log.warning("copilot: session %s lost its CLI: %s", self._session_id or "?", reason)
        self._open_tools.clear()
        self._busy.set(False)  # nothing will end the turn now; waiters must not wait for it
        self._emit(AgentEvent(EventType.CONNECTION_LOST, {"reason": reason}))

    def _emit(self, event: AgentEvent) -> None:
        if self._muted and event.type != EventType.CONNECTION_LOST:
            log.debug("copilot: muted %s of an earlier turn", event.type)
            return
        self._sink(event)  # the engine's sink never raises
