"""How one agent event changes a session: :func:`apply_event` and its per-kind handlers.

It returns a :class:`Signal` when the engine has to act (complete, fail, recover, ask
the user); it never ends a turn itself (that is :meth:`Session.end_turn`, called by the engine).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Protocol

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.events import USAGE_EVENT_TYPES, AgentEvent, EventType, not_kept, tool_result_text
from polypilot_tui.domain.limits import (
    ID_CHARS,
    OPTION_LABEL_CHARS,
    PERMISSION_OPTIONS,
    PERMISSION_TEXT_CHARS,
    bounded,
)
from polypilot_tui.domain.sandbox import SandboxRules
from polypilot_tui.domain.sandbox_refusal import REFUSED, refused_by_sandbox
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line, strip_control
from polypilot_tui.domain.turn import PermissionPrompt, Phase, ToolCall, Turn


class WallClock(Protocol):
    """What event handling needs of the clock: wall time for history rows."""

    def wall(self) -> float: ...


#: Tools that only carry bookkeeping; they count as tool use but get no row (PolyPilot).
QUIET_TOOLS = frozenset({"report_intent", "skill", "store_memory"})


class Signal(StrEnum):
    """What an event asks of the manager."""

    NONE = "none"
    IDLE = "idle"
    IDLE_ABORTED = "idle-aborted"
    ERROR = "error"
    PERMISSION_TRIPPED = "permission-tripped"
    PERMISSION_REQUESTED = "permission-requested"
    CONNECTION_LOST = "connection-lost"
    REARMED = "rearmed"


def apply_event(session: Session, event: AgentEvent, now: float, clock: WallClock) -> Signal:
    """Fold one agent event into the session; returns what the manager must do.

    This is the hot path (every streamed token passes here): dispatch by table, read
    the wall clock only when a history row is written.
    """
    kind = event.type
    handler = _HANDLERS.get(kind)
    if handler is None:  # rare kinds: usage, session-level, unknown
        if kind in USAGE_EVENT_TYPES:
            session.note_usage(kind, event.data)
            return _NONE  # metrics never count as progress (#230)
        session_handler = _SESSION_HANDLERS.get(kind)
        if session_handler is not None:
            session.revision += 1
            if kind != EventType.CONNECTION_LOST:  # an agent going away is not its activity
                session.last_activity_at = now
            signal = session_handler(session, event)
            if signal is not _NONE:
                return signal
    session.revision += 1
    turn = session.turn
    if turn is not None or handler is not None:  # not the chatter of an idle agent shutting down
        session.last_activity_at = now
    if turn is None:
        if kind == EventType.TURN_START and session.may_rearm(now):
            turn = session.begin_turn("", now, rearmed=True)
            turn.phase = Phase.THINKING
            return Signal.REARMED
        return _NONE  # late events for a closed turn are ignored
    # Liveness (inlined: this runs for every streamed token).
    turn.last_event_at = turn.watchdog_anchor = now
    turn.last_event_type = kind
    if turn.case_a_resets or turn.case_b_resets or turn.case_b_stale_checks:
        turn.case_a_resets = turn.case_b_resets = turn.case_b_stale_checks = 0
    turn.reconnected_send = False
    turn.events_since_resume = True
    if turn.resumed:
        turn.clear_resumed_if_plain(kind.startswith("tool."))
    return handler(session, turn, event, now, clock) if handler is not None else _NONE


# ---- per-event handlers (one function per kind keeps the table explicit) -----------
def _on_delta(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    data = e.data
    mid = data.get("messageId")
    if mid and type(mid) is str and mid not in t.delta_message_ids:
        t.delta_message_ids.add(mid)
    text = data.get("deltaContent")
    if type(text) is not str:
        text = e.text("content")
    t.add_response(text, not_kept(e))
    return _NONE


def _on_message(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    mid = e.text("messageId")
    if not (mid and (mid in t.delta_message_ids or mid in s.seen_message_ids)):
        t.add_response(e.text("content"))  # no deltas streamed for it: the whole reply
    if mid:
        s.seen_message_ids.add(mid)
    reasoning = e.text("reasoningText")
    if reasoning and not t.reasoning:
        t.reasoning.add(reasoning)
    requests = e.get("toolRequests")
    has_text = bool(e.text("content").strip()) or bool(t.response_text.strip())
    t.final_message_at = now if (not requests and has_text) else None
    return Signal.NONE


def _on_reasoning(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    if e.type == EventType.REASONING and t.reasoning:
        return Signal.NONE  # the full text after deltas repeats them
    t.reasoning.add(e.text("deltaContent", "content"))
    t.reasoning.lost(not_kept(e))
    return Signal.NONE


def _on_turn_start(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    t.expect_abort_echo = False  # the agent is working on our prompt now
    t.phase = Phase.THINKING
    t.turn_end_at = None
    t.final_message_at = None
    t.active_tools.clear()  # the CLI resets its count between rounds; used_tools remembers
    return Signal.NONE


def _on_turn_end(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    s.flush(clock.wall())  # a 6 KB review was once lost on restart for want of this (#224)
    t.turn_end_at = now
    t.fallback_anchor = now
    return Signal.NONE


def _on_tool_start(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    call_id = e.text("toolCallId") or f"tool-{t.tool_call_count + len(t.tools) + 1}"
    name = e.text("toolName") or "tool"
    if call_id in t.tools:  # duplicated start, or a tool whose permission was refused: keep its row
        return Signal.NONE
    t.used_tools = True
    t.phase = Phase.WORKING
    t.final_message_at = None
    detail = _arguments_summary(e.get("arguments"))
    row = -1
    if name not in QUIET_TOOLS:
        s.flush(clock.wall())  # text before the tool row stays before it
        row = s.add_item(
            ItemKind.TOOL,
            "",
            clock.wall(),
            tool_call_id=call_id,
            tool_name=name,
            tool_status="running",
            tool_detail=detail,
        )
    call = ToolCall(call_id, name, now, row, detail)
    t.tools[call_id] = call
    t.active_tools[call_id] = call
    if any(p.tool_call_id == call_id for p in t.pending_permissions.values()):
        s.set_tool_row(call, "waiting", "")  # asked before it started (codex-acp does)
    return Signal.NONE


def _on_tool_progress(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    call = t.tools.get(e.text("toolCallId"))
    if call is not None:
        s.set_tool_row(call, call.status, e.text("progressMessage", "partialOutput"))
    return Signal.NONE


def _on_tool_complete(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    call_id = e.text("toolCallId") or f"tool-{len(t.tools) + 1}"
    call = t.tools.get(call_id)
    if call is None:  # a result for a tool we never saw start: show it anyway
        start = AgentEvent(EventType.TOOL_START, {"toolCallId": call_id, "toolName": e.text("toolName") or "tool"})
        _on_tool_start(s, t, start, now, clock)
        call = t.tools[call_id]
    if call.status not in ("running", "waiting"):
        return Signal.NONE  # duplicated completion
    t.active_tools.pop(call.call_id, None)
    success = e.get("success") is True  # "false" or [0] is not a success
    text = tool_result_text(e)
    t.tool_call_count += 1
    if success:
        t.successful_tools += 1
    status = "completed" if success else "rejected" if _was_rejected(t, call, e) else "failed"
    refused = status != "rejected" and (not success or _exit_code(e) != 0) and _sandbox_refused(s, text)
    s.set_tool_row(call, REFUSED if refused else status, text)
    if not t.active_tools:
        t.phase = Phase.THINKING
        if t.turn_end_at is not None:
            t.fallback_anchor = now  # the TurnEnd fallback waits while tools run; its window starts now
    # The sandbox's "Permission denied" is its rule at work, not a lost permission binding:
    # it must not trip the permission recovery (which would reconnect and resend).
    tripped = s.window.record(success or refused, text)
    if s.window.tripped:
        s.permission_warning = True
    return Signal.PERMISSION_TRIPPED if tripped else Signal.NONE


def _on_permission_requested(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    request_id = e.text("requestId")
    if not request_id or len(request_id) > ID_CHARS or len(e.text("toolCallId")) > ID_CHARS:
        return Signal.NONE  # ids the answer must name whole: none of ours is that long
    offered = e.get("options")
    options = tuple(
        (
            str(o.get("optionId", "")),
            one_line(str(o.get("name", o.get("optionId", ""))), OPTION_LABEL_CHARS),
            one_line(str(o.get("kind", "")), ID_CHARS),
        )
        for o in (offered if isinstance(offered, list) else [])
        if isinstance(o, Mapping) and isinstance(o.get("optionId"), str) and 0 < len(o["optionId"]) <= ID_CHARS
    )[:PERMISSION_OPTIONS]  # an answer names an option by its id: one too long to keep is not offered
    tool_call_id = e.text("toolCallId") or None
    t.pending_permissions[request_id] = PermissionPrompt(
        request_id,
        one_line(e.text("title") or e.text("kind") or "Permission requested", 120),
        bounded(strip_control(e.text("detail")), PERMISSION_TEXT_CHARS),
        one_line(e.text("kind"), ID_CHARS),
        tool_call_id,
        options,
    )
    t.pause_for_user(now)
    call = t.tools.get(tool_call_id) if tool_call_id else None
    if call is not None and call.status == "running":
        s.set_tool_row(call, "waiting", "")  # not running: it waits for the user
    return Signal.PERMISSION_REQUESTED


def _on_permission_completed(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    result = e.get("result")
    kind = result.get("kind") if isinstance(result, Mapping) else result
    s.permission_answered(
        e.text("requestId"), kind if isinstance(kind, str) else "", now, clock.wall(), e.text("toolCallId") or None
    )
    return Signal.NONE


def _sandbox_refused(s: Session, text: str) -> bool:
    """The tool of a sandboxed session failed because its sandbox refused a write."""
    if not s.sandbox.on or not text:
        return False
    if s.sandbox_rules is not None:  # its folder comes first (a `polypilot run` has no cwd: the agent's own)
        return refused_by_sandbox(text, s.sandbox_rules, s.cwd or next(iter(s.sandbox_rules.writable), ""))
    return bool(s.cwd) and refused_by_sandbox(text, SandboxRules(writable=(s.cwd,)), s.cwd)


def _exit_code(e: AgentEvent) -> int:
    """The exit code a shell tool's result reports (0 when it reports none): Copilot's
    ``shellExecution.exitCode``, an ACP agent's ``exit_code`` / ``exitCode``."""
    for holder in (e.get("shellExecution"), e.get("rawOutput"), e.data):
        if isinstance(holder, Mapping):
            for key in ("exitCode", "exit_code"):
                code = holder.get(key)
                if isinstance(code, int) and not isinstance(code, bool):
                    return code
    return 0


def _was_rejected(t: Turn, call: ToolCall, e: AgentEvent) -> bool:
    """A failed tool whose permission was refused (by the user, the policy or a Stop)."""
    if call.call_id in t.rejected_tools:
        return True
    error = e.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    return code in ("denied", "rejected")


def _on_intent(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    t.intent = one_line(e.text("intent"), 80)
    return Signal.NONE


def _on_idle(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    aborted = e.get("aborted") is True
    if aborted and t.expect_abort_echo:
        t.expect_abort_echo = False
        return Signal.NONE
    note = e.text("note")
    if note:  # ACP: the turn ended early (max_tokens, refusal, max_turn_requests)
        s.flush(clock.wall())
        s.system(f"⚠ The turn ended early: {one_line(note, 200)}.", clock.wall())
    return Signal.IDLE_ABORTED if aborted else Signal.IDLE


def _on_error(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    return Signal.ERROR


def _on_connection_lost(s: Session, e: AgentEvent) -> Signal:
    s.connected = False
    s.lost = one_line(e.text("reason") or "agent connection lost", 200)
    return Signal.CONNECTION_LOST


def _on_title(s: Session, e: AgentEvent) -> Signal:
    s.title = one_line(e.text("title"), 80)
    return Signal.NONE


def _on_model_change(s: Session, e: AgentEvent) -> Signal:
    s.model = one_line(e.text("newModel"), ID_CHARS) or s.model
    return Signal.NONE


def _on_session_start(s: Session, e: AgentEvent) -> Signal:
    s.model = s.model or one_line(e.text("selectedModel"), ID_CHARS)
    return Signal.NONE


def _on_plan(s: Session, e: AgentEvent) -> Signal:
    s.set_plan(e.get("entries"))
    return Signal.NONE


def _arguments_summary(arguments: Any) -> str:
    if isinstance(arguments, Mapping):
        for key in ("command", "cmd", "path", "file_path", "url", "query", "pattern"):
            value = arguments.get(key)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = " ".join(value)  # argv form (codex: ["/bin/bash", "-lc", "…"])
            if isinstance(value, str) and value:
                return one_line(value, 120)
        return one_line(", ".join(f"{k}={v}" for k, v in arguments.items()), 120)
    if isinstance(arguments, str):
        return one_line(arguments, 120)
    return ""


_SESSION_HANDLERS: dict[str, Callable[[Session, AgentEvent], Signal]] = {
    EventType.CONNECTION_LOST: _on_connection_lost,
    EventType.SESSION_TITLE_CHANGED: _on_title,
    EventType.SESSION_MODEL_CHANGE: _on_model_change,
    EventType.SESSION_START: _on_session_start,
    EventType.PLAN: _on_plan,
}

_HANDLERS: dict[str, Callable[[Session, Turn, AgentEvent, float, WallClock], Signal]] = {
    EventType.MESSAGE_DELTA: _on_delta,
    EventType.MESSAGE: _on_message,
    EventType.REASONING_DELTA: _on_reasoning,
    EventType.REASONING: _on_reasoning,
    EventType.TURN_START: _on_turn_start,
    EventType.TURN_END: _on_turn_end,
    EventType.TOOL_START: _on_tool_start,
    EventType.TOOL_PROGRESS: _on_tool_progress,
    EventType.TOOL_PARTIAL_RESULT: _on_tool_progress,
    EventType.TOOL_COMPLETE: _on_tool_complete,
    EventType.PERMISSION_REQUESTED: _on_permission_requested,
    EventType.PERMISSION_COMPLETED: _on_permission_completed,
    EventType.INTENT: _on_intent,
    EventType.SESSION_IDLE: _on_idle,
    EventType.SESSION_ERROR: _on_error,
}

# Exact-str keys: the hot-path lookups compare plain strings, not enum members.
_SESSION_HANDLERS = {str(k): v for k, v in _SESSION_HANDLERS.items()}
_HANDLERS = {str(k): v for k, v in _HANDLERS.items()}
_NONE = Signal.NONE
