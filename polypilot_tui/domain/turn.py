"""A turn is an object: all per-turn state lives here and dies with it.

``session.turn is None`` means idle. Ending a turn is replacing the object
(:meth:`polypilot_tui.domain.session.Session.end_turn`), so PolyPilot's nine-field cleanup
checklist cannot be half-done. Timers capture the Turn they were armed for and do nothing
once ``session.turn is not that_turn`` — the generation counter, for free.
"""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.gathered import Gathered
from polypilot_tui.domain.probes import Probes


class Phase(StrEnum):
    """Where a running turn is (PolyPilot's ProcessingPhase)."""

    SENDING = "sending"
    THINKING = "thinking"
    WORKING = "working"


class Outcome(StrEnum):
    """How a turn ended."""

    COMPLETED = "completed"
    ABORTED = "aborted"
    STUCK = "stuck"
    FAILED = "failed"
    RECOVERED = "recovered"


class EndCause(StrEnum):
    """Why a turn ended: what ended it, for code (the reason text is for people)."""

    IDLE = "idle"
    """The agent said it was done (``session.idle``)."""
    AGENT_ABORTED = "agent-aborted"
    """The agent ended the turn as aborted (``session.idle {aborted}``, ACP ``cancelled``)."""
    AGENT_ERROR = "agent-error"
    DISCONNECTED = "disconnected"
    """The agent process or its connection died."""
    USER_STOP = "user-stop"
    RECONNECT = "reconnect"
    """The user reconnected during the turn."""
    QUIT = "quit"
    """The dashboard quit with the turn in flight."""
    WATCHDOG = "watchdog"
    """The watchdog completed it (its end signal was lost) or gave up on it (stuck)."""
    LOST_IN_RESTART = "lost-in-restart"
    """Restored mid-turn, and the agent says it is no longer running that turn."""
    CONNECT_FAILED = "connect-failed"
    SEND_FAILED = "send-failed"
    RECOVERED = "recovered"
    """Permission recovery reconnected the agent (the prompt may be resent)."""
    RECOVERY_FAILED = "recovery-failed"
    INTERNAL = "internal-error"


@dataclass
class ToolCall:
    """A tool call of the current turn and the history row that shows it."""

    call_id: str
    name: str
    started_at: float
    row: int
    """Index of its row in the session history."""
    detail: str = ""
    status: str = "running"


@dataclass(frozen=True)
class PermissionPrompt:
    """A pending permission request, as the UI shows it."""

    request_id: str
    title: str
    detail: str = ""
    kind: str = ""
    tool_call_id: str | None = None
    options: tuple[tuple[str, str, str], ...] = ()
    """(option_id, label, kind) in the agent's order."""


@dataclass
class Turn:
    """One prompt's worth of work, from send to its single end."""

    seq: int
    prompt: str
    started_at: float
    last_event_at: float
    """Last real (non-usage) event; what "last activity Xs ago" shows."""
    watchdog_anchor: float
    """Start of the current watchdog window: last event, or the last liveness reset."""
    phase: Phase = Phase.SENDING
    last_event_type: str = ""
    tools: dict[str, ToolCall] = field(default_factory=dict)
    active_tools: dict[str, ToolCall] = field(default_factory=dict)
    used_tools: bool = False
    """Outranks the active-tool count, which resets at every turn_start (INV-5)."""
    tool_call_count: int = 0
    successful_tools: int = 0
    resumed: bool = False
    """Restored mid-turn after an app restart and no plain event since (drives the tier)."""
    restored: bool = False
    """Restored mid-turn after an app restart; unlike ``resumed`` it stays set, so a lost
    restored turn is still offered for resending after events came."""
    events_since_resume: bool = False
    reconnected_send: bool = False
    rearmed: bool = False
    """Re-armed by a turn_start that came after the turn had been closed (#375)."""
    case_a_resets: int = 0
    case_b_resets: int = 0
    case_b_last_size: int | None = None
    case_b_stale_checks: int = 0
    dead_send_abort_tried: bool = False
    log_size_at_send: int | None = None
    turn_end_at: float | None = None
    """Set by assistant.turn_end, cleared by turn_start: the TurnEnd→Idle fallback is armed."""
    fallback_anchor: float = 0.0
    final_message_at: float | None = None
    """A reply with no tool requests arrived: the post-completion watchdog is armed."""
    response: Gathered = field(default_factory=Gathered)
    """The reply since the last flush (at most limits.ROW_CHARS kept; the rest is counted)."""
    streamed_chars: int = 0
    """Every character streamed this turn, kept or not."""
    delta_message_ids: set[str] = field(default_factory=set)
    reasoning: Gathered = field(default_factory=Gathered)
    intent: str = ""
    pending_permissions: dict[str, PermissionPrompt] = field(default_factory=dict)
    waited_for_user: float = 0.0
    """Seconds spent waiting on permission prompts; they do not count toward the cap."""
    paused_since: float | None = None
    expect_abort_echo: bool = False
    """We aborted a wedged tool just before this turn's send (#393): the agent's
    ``session.idle {aborted}`` answer belongs to that abort, not to this turn."""
    last_decision: str = ""
    """The watchdog's last non-trivial reason (shown in the chat pane)."""
    rejected_tools: set[str] = field(default_factory=set)
    """Tool calls whose permission was refused: their failure reads "rejected"."""
    refused: list[str] = field(default_factory=list)
    """Titles of the permission requests refused this turn (by the user or the policy)."""

    @property
    def response_text(self) -> str:
        return self.response.text()

    def add_response(self, text: str, lost: int = 0) -> None:
        """More of the reply, of which ``lost`` characters were cut before (counted as
        streamed whether kept or not)."""
        self.streamed_chars += len(text) + lost
        self.response.add(text)
        self.response.lost(lost)

    def clear_resumed_if_plain(self, tool_related: bool) -> None:
        """A resumed turn whose events flow without tool activity is an ordinary turn again
        and gets the ordinary tiers (INV-6: clear early only when no tool is involved)."""
        if not tool_related and not self.active_tools and not self.used_tools:
            self.resumed = False

    def pause_for_user(self, now: float) -> None:
        """A permission prompt is open: the watchdog waits for the user, not the agent."""
        if self.paused_since is None:
            self.paused_since = now

    def resume_after_user(self, now: float) -> None:
        """The last open prompt was answered: a fresh window starts now."""
        if self.pending_permissions:
            return
        if self.paused_since is not None:
            self.waited_for_user += now - self.paused_since
            self.paused_since = None
        self.watchdog_anchor = now

    def note_reset(self, now: float, rule: str, probes: Probes | None) -> None:
        """The watchdog saw life without an event (case A/B or the fallback): new window."""
        self.watchdog_anchor = now
        if rule == "A-alive":
            self.case_a_resets = 0
        elif rule == "A":
            self.case_a_resets += 1
        elif rule == "B":
            self.case_b_resets += 1
            size = probes.log_size if probes else None
            if size is not None and self.case_b_last_size is not None and size <= self.case_b_last_size:
                self.case_b_stale_checks += 1
            self.case_b_last_size = size
        elif rule == "fallback":
            self.fallback_anchor = now
