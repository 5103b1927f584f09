"""Session: history, the current Turn, and the one place a turn ends.

:meth:`Session.apply_event` folds one agent event into the session and returns a
:class:`Signal` when the manager has to act (complete, fail, recover, ask the user);
:meth:`Session.end_turn` is the single end-turn path: flush first, record, drop the Turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Callable, Mapping, Protocol

from polypilot_tui.domain.events import USAGE_EVENT_TYPES, AgentEvent, EventType, tool_result_text
from polypilot_tui.domain.permissions import DenialWindow
from polypilot_tui.domain.text import one_line, strip_control
from polypilot_tui.domain.turn import EndCause, Outcome, PermissionPrompt, Phase, ToolCall, Turn

class WallClock(Protocol):
    """What event handling needs of the clock: wall time for history rows."""

    def wall(self) -> float: ...


#: Tools that only carry bookkeeping; they count as tool use but get no row (PolyPilot).
QUIET_TOOLS = frozenset({"report_intent", "skill", "store_memory"})

#: A closed turn may be re-armed by a late turn_start this long after it was cleared (#375).
REARM_AFTER = 5.0


class ItemKind(StrEnum):
    """Kinds of chat history rows."""

    USER = "user"
    ASSISTANT = "assistant"
    REASONING = "reasoning"
    TOOL = "tool"
    SYSTEM = "system"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ChatItem:
    """One row of chat history. Tool rows are replaced in place as their status changes."""

    kind: ItemKind
    text: str
    at: float
    """Wall-clock epoch seconds."""
    tool_call_id: str | None = None
    tool_name: str = ""
    tool_status: str = ""
    """running / waiting (its permission prompt is open) / completed / failed / rejected /
    interrupted / cancelled."""
    tool_detail: str = ""
    interrupted: bool = False
    """An assistant reply cut short (stop, watchdog, crash); the text is kept."""


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


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """How a finished turn went."""

    seq: int
    prompt: str
    outcome: Outcome
    reason: str
    """Why, for people (shown in the chat, the sidebar, ``status`` and ``run``)."""
    started_at: float
    ended_at: float
    tool_calls: int
    successful_tools: int
    detail: str = ""
    """The technical why (watchdog tier, last event type) for logs and replay; ``reason`` is for people."""
    refused: tuple[str, ...] = ()
    """Permission requests refused during the turn (their titles)."""
    cause: EndCause = EndCause.IDLE
    """Why, for code: what ended the turn."""


@dataclass(slots=True)
class Session:
    """One agent session: what was said, and the turn in flight (if any)."""

    id: str
    name: str
    agent: str
    created_wall: float = 0.0
    cwd: str = ""
    model: str = ""
    agent_session_id: str = ""
    title: str = ""
    history: list[ChatItem] = field(default_factory=list)
    turn: Turn | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    window: DenialWindow = field(default_factory=DenialWindow)
    permission_warning: bool = False
    last_activity_at: float | None = None
    last_prompt: str = ""
    connected: bool = False
    connecting: bool = False
    recovering: bool = False
    closed: bool = False
    consecutive_stuck: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    plan: tuple[tuple[str, str], ...] = ()
    cleared_at: float | None = None
    allow_rearm: bool = False
    user_aborted: bool = False
    interrupted_tool: bool = False
    """The agent's log ended inside a tool call: abort before the next send (#393)."""
    lost: str = ""
    """Why the agent connection died ("" while it is fine or not yet started)."""
    interrupted_prompt: str = ""
    """A turn lost to an app restart; the UI offers to resend it with one key."""
    queue: list[str] = field(default_factory=list)
    """Prompts typed while a turn was running; sent in order when it completes."""
    queue_held: bool = False
    """The queue waits for the user: the last turn was stopped or did not complete."""
    outcome_dismissed: bool = False
    """The last turn's outcome no longer sets the status (a reconnect since, say)."""
    seen_message_ids: set[str] = field(default_factory=set)
    revision: int = 0
    """Bumped on every change; views and listeners key off it."""
    on_item: Callable[[int, ChatItem, bool], None] | None = field(default=None, repr=False, compare=False)
    """The engine's: called with (index, item, replaced) whenever a history row is added or
    replaced, so the change stream carries every row (persistence writes them through)."""
    _turn_seq: int = 0

    # ---- history -------------------------------------------------------------------
    def add_item(self, kind: ItemKind, text: str, wall: float, **extra: Any) -> int:
        """Append a history row; returns its index."""
        item = ChatItem(kind, strip_control(text), wall, **extra)
        self.history.append(item)
        self.revision += 1
        index = len(self.history) - 1
        if self.on_item is not None:
            self.on_item(index, item, False)
        return index

    def system(self, text: str, wall: float) -> None:
        self.add_item(ItemKind.SYSTEM, text, wall)

    def error(self, text: str, wall: float) -> None:
        self.add_item(ItemKind.ERROR, text, wall)

    def flush(self, wall: float, interrupted: bool = False) -> None:
        """Move the streamed text of the turn into history (#158, #224): nothing is lost."""
        turn = self.turn
        if turn is None:
            return
        if turn.reasoning:
            self.add_item(ItemKind.REASONING, "".join(turn.reasoning), wall)
            turn.reasoning.clear()
        text = turn.response_text
        if text.strip():
            self.add_item(ItemKind.ASSISTANT, text, wall, interrupted=interrupted)
        turn.response.clear()

    # ---- turn lifecycle ------------------------------------------------------------
    def begin_turn(self, prompt: str, now: float, *, resumed: bool = False, rearmed: bool = False) -> Turn:
        """Start a turn (the caller has checked that none is running)."""
        self._turn_seq += 1
        self.turn = Turn(self._turn_seq, prompt, now, now, now, resumed=resumed, restored=resumed, rearmed=rearmed)
        self.window.clear()
        self.user_aborted = False
        self.allow_rearm = False
        if prompt:
            self.last_prompt = prompt
        self.revision += 1
        return self.turn

    def end_turn(self, outcome: Outcome, cause: EndCause, reason: str, now: float, wall: float,
                 detail: str = "") -> TurnRecord | None:
        """THE end-turn path: flush, close open tool rows, record, drop the Turn."""
        turn = self.turn
        if turn is None:
            return None
        self.flush(wall, interrupted=outcome is not Outcome.COMPLETED)
        closing = "cancelled" if outcome is Outcome.ABORTED else "interrupted"
        for call in list(turn.tools.values()):
            if call.status in ("running", "waiting"):
                self._set_tool_row(call, closing, "")
        record = TurnRecord(turn.seq, turn.prompt, outcome, reason, turn.started_at, now,
                            turn.tool_call_count, turn.successful_tools, detail, tuple(turn.refused), cause)
        self.turns.append(record)
        self.turn = None
        self.window.clear()
        self.permission_warning = False
        self.cleared_at = now
        self.allow_rearm = outcome is Outcome.COMPLETED
        self.user_aborted = outcome is Outcome.ABORTED
        self.outcome_dismissed = False
        if outcome is not Outcome.COMPLETED and outcome is not Outcome.RECOVERED:
            self.queue_held = bool(self.queue)  # after a stop or a failure the user decides
        self.consecutive_stuck = self.consecutive_stuck + 1 if outcome is Outcome.STUCK else 0
        self.revision += 1
        return record

    def permission_answered(self, request_id: str, answer: str, now: float,
                            tool_call_id: str | None = None) -> bool:
        """A permission prompt was answered (by the user, the policy, the agent or a Stop).

        ``answer`` is the option kind or the agent's result kind ("allow_once", "reject_once",
        "denied-interactively-by-user", "cancelled", …). The tool it was for stops "waiting";
        a refused one will read "rejected" when it fails. Returns False for an unknown prompt.
        """
        turn = self.turn
        if turn is None:
            return False
        prompt = turn.pending_permissions.pop(request_id, None)
        if prompt is not None:
            turn.resume_after_user(now)
            self.revision += 1
        refused = any(word in answer for word in ("denied", "reject"))
        if refused and prompt is not None:
            turn.refused.append(prompt.title)
        tool_call_id = tool_call_id or (prompt.tool_call_id if prompt else None)
        if tool_call_id:
            if refused or "cancel" in answer:
                turn.rejected_tools.add(tool_call_id)
            call = turn.tools.get(tool_call_id)
            if call is not None and call.status == "waiting":
                self._set_tool_row(call, "running", "")
        return prompt is not None

    def settle_open_tool_rows(self, now: float) -> None:
        """Tool rows a previous run left open (the app was killed mid-tool).

        With a restored turn in flight they belong to it again (a late completion updates
        its row; the turn's end closes what is left); otherwise they are closed as
        interrupted at once, never "running" forever.
        """
        turn = self.turn
        for row, item in enumerate(self.history):
            if item.kind is not ItemKind.TOOL or item.tool_status not in ("running", "waiting"):
                continue
            call = ToolCall(item.tool_call_id or f"restored-{row}", item.tool_name, now, row, item.tool_detail,
                            item.tool_status)
            if turn is None:
                self._set_tool_row(call, "interrupted", "")
            elif call.call_id not in turn.tools:
                # Known for its completion, but not "active": the restored turn keeps its
                # resume tiers until the agent says a tool really runs.
                turn.tools[call.call_id] = call

    @property
    def last_outcome(self) -> TurnRecord | None:
        return self.turns[-1] if self.turns else None

    # ---- events --------------------------------------------------------------------
    def apply_event(self, event: AgentEvent, now: float, clock: WallClock) -> Signal:
        """Fold one agent event into the session; returns what the manager must do.

        This is the hot path (every streamed token passes here): dispatch by table, read
        the wall clock only when a history row is written.
        """
        kind = event.type
        handler = _HANDLERS.get(kind)
        if handler is None:  # rare kinds: usage, session-level, unknown
            if kind in USAGE_EVENT_TYPES:
                self._note_usage(event.data)
                return _NONE  # metrics never count as progress (#230)
            session_handler = _SESSION_HANDLERS.get(kind)
            if session_handler is not None:
                self.revision += 1
                self.last_activity_at = now
                signal = session_handler(self, event)
                if signal is not _NONE:
                    return signal
        self.revision += 1
        self.last_activity_at = now
        turn = self.turn
        if turn is None:
            if kind == EventType.TURN_START and self._may_rearm(now):
                turn = self.begin_turn("", now, rearmed=True)
                turn.phase = Phase.THINKING
                return Signal.REARMED
            return _NONE  # late events for a closed turn are ignored
        # Liveness (inlined: this runs for every streamed token).
        turn.last_event_at = turn.watchdog_anchor = now
        turn.last_event_type = kind
        turn.event_count += 1
        if turn.case_a_resets or turn.case_b_resets or turn.case_b_stale_checks:
            turn.case_a_resets = turn.case_b_resets = turn.case_b_stale_checks = 0
        turn.reconnected_send = False
        turn.events_since_resume = True
        if turn.resumed:
            turn.clear_resumed_if_plain(kind.startswith("tool."))
        return handler(self, turn, event, now, clock) if handler is not None else _NONE

    def _may_rearm(self, now: float) -> bool:
        if self.user_aborted or self.closed:
            return False
        return self.allow_rearm or (self.cleared_at is not None and now - self.cleared_at >= REARM_AFTER)

    def _note_usage(self, data: Mapping[str, Any]) -> None:
        for key in ("currentTokens", "tokenLimit", "inputTokens", "outputTokens"):
            value = data.get(key)
            if isinstance(value, (int, float)):
                self.usage[key] = value

    def _note_plan(self, entries: Any) -> None:
        if isinstance(entries, list):
            self.plan = tuple(
                (one_line(str(e.get("content", "")), 120), str(e.get("status", "")))
                for e in entries if isinstance(e, Mapping)
            )

    def _set_tool_row(self, call: ToolCall, status: str, output: str) -> None:
        call.status = status
        if 0 <= call.row < len(self.history):
            old = self.history[call.row]
            text = strip_control(output) if output else old.text
            item = replace(old, tool_status=status, text=text)
            self.history[call.row] = item
            self.revision += 1
            if self.on_item is not None:
                self.on_item(call.row, item, True)


# ---- per-event handlers (module functions keep Session small and the table explicit) ---
def _on_delta(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    data = e.data
    mid = data.get("messageId")
    if mid and mid not in t.delta_message_ids:
        t.delta_message_ids.add(mid)
    text = data.get("deltaContent")
    if type(text) is not str:
        text = e.text("content")
    t.response.append(text)
    t.streamed_chars += len(text)
    return _NONE


def _on_message(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    mid = e.text("messageId")
    if not (mid and (mid in t.delta_message_ids or mid in s.seen_message_ids)):
        t.response.append(e.text("content"))  # no deltas streamed for it: the whole reply
        t.streamed_chars += len(e.text("content"))
    if mid:
        s.seen_message_ids.add(mid)
    reasoning = e.text("reasoningText")
    if reasoning and not t.reasoning:
        t.reasoning.append(reasoning)
    requests = e.get("toolRequests")
    has_text = bool(e.text("content").strip()) or bool(t.response_text.strip())
    t.final_message_at = now if (not requests and has_text) else None
    return Signal.NONE


def _on_reasoning(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    if e.type == EventType.REASONING and t.reasoning:
        return Signal.NONE  # the full text after deltas repeats them
    t.reasoning.append(e.text("deltaContent", "content"))
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
    t.used_tools = True
    t.phase = Phase.WORKING
    t.final_message_at = None
    if call_id in t.tools:  # duplicated start: keep the one row we have
        return Signal.NONE
    detail = _arguments_summary(e.get("arguments"))
    row = -1
    if name not in QUIET_TOOLS:
        s.flush(clock.wall())  # text before the tool row stays before it
        row = s.add_item(ItemKind.TOOL, "", clock.wall(), tool_call_id=call_id, tool_name=name,
                         tool_status="running", tool_detail=detail)
    call = ToolCall(call_id, name, now, row, detail)
    t.tools[call_id] = call
    t.active_tools[call_id] = call
    if any(p.tool_call_id == call_id for p in t.pending_permissions.values()):
        s._set_tool_row(call, "waiting", "")  # asked before it started (codex-acp does)
    return Signal.NONE


def _on_tool_progress(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    call = t.tools.get(e.text("toolCallId"))
    if call is not None:
        s._set_tool_row(call, call.status, e.text("progressMessage", "partialOutput"))
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
    success = bool(e.get("success", False))
    text = tool_result_text(e)
    t.tool_call_count += 1
    if success:
        t.successful_tools += 1
    s._set_tool_row(call, "completed" if success else "rejected" if _was_rejected(t, call, e) else "failed", text)
    if not t.active_tools:
        t.phase = Phase.THINKING
        if t.turn_end_at is not None:
            t.fallback_anchor = now  # the TurnEnd fallback waits while tools run; its window starts now
    tripped = s.window.record(success, text)
    if s.window.tripped:
        s.permission_warning = True
    return Signal.PERMISSION_TRIPPED if tripped else Signal.NONE


def _on_permission_requested(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    request_id = e.text("requestId")
    if not request_id:
        return Signal.NONE
    options = tuple(
        (str(o.get("optionId", "")), one_line(str(o.get("name", o.get("optionId", ""))), 40), str(o.get("kind", "")))
        for o in (e.get("options") or []) if isinstance(o, Mapping) and o.get("optionId")
    )
    tool_call_id = e.text("toolCallId") or None
    t.pending_permissions[request_id] = PermissionPrompt(
        request_id, one_line(e.text("title") or e.text("kind") or "Permission requested", 120),
        strip_control(e.text("detail"))[:2000], e.text("kind"), tool_call_id, options,
    )
    t.pause_for_user(now)
    call = t.tools.get(tool_call_id) if tool_call_id else None
    if call is not None and call.status == "running":
        s._set_tool_row(call, "waiting", "")  # not running: it waits for the user
    return Signal.PERMISSION_REQUESTED


def _on_permission_completed(s: Session, t: Turn, e: AgentEvent, now: float, clock: WallClock) -> Signal:
    result = e.get("result")
    kind = result.get("kind") if isinstance(result, Mapping) else result
    s.permission_answered(e.text("requestId"), kind if isinstance(kind, str) else "", now,
                          e.text("toolCallId") or None)
    return Signal.NONE


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
    if e.get("aborted") and t.expect_abort_echo:
        t.expect_abort_echo = False
        return Signal.NONE
    note = e.text("note")
    if note:  # ACP: the turn ended early (max_tokens, refusal, max_turn_requests)
        s.flush(clock.wall())
        s.system(f"⚠ The turn ended early: {one_line(note, 200)}.", clock.wall())
    return Signal.IDLE_ABORTED if e.get("aborted") else Signal.IDLE


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
    s.model = e.text("newModel") or s.model
    return Signal.NONE


def _on_session_start(s: Session, e: AgentEvent) -> Signal:
    s.model = s.model or e.text("selectedModel")
    return Signal.NONE


def _on_plan(s: Session, e: AgentEvent) -> Signal:
    s._note_plan(e.get("entries"))
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
