"""Pure text for the status surfaces: icons, durations, "ago" labels, status lines.

Every function takes ``now`` (the injected clock's reading) instead of reading the time, so
the same view and the same ``now`` always give the same words (snapshots, heartbeat diffs).
"""

from __future__ import annotations

from collections.abc import Sequence

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.sandbox import Sandbox
from polypilot_tui.domain.text import bound_lines, compact_duration, one_line, strip_control
from polypilot_tui.domain.view import SessionStatus, SessionView

S = SessionStatus

STATUS_ICONS: dict[SessionStatus, str] = {
    S.IDLE: "○",
    S.CONNECTING: "◌",
    S.SENDING: "↑",
    S.THINKING: "◐",
    S.WRITING: "✎",
    S.WORKING: "▶",
    S.AWAITING_PERMISSION: "?",
    S.RECOVERING: "↻",
    S.DISCONNECTED: "⊘",
    S.ERROR: "✕",
    S.STUCK: "⚑",
    S.STOPPED: "■",
}
"""One single-cell glyph per status (no emoji: their width differs between terminals)."""

STATUS_LABELS: dict[SessionStatus, str] = {
    S.IDLE: "Idle",
    S.CONNECTING: "Connecting…",
    S.SENDING: "Sending…",
    S.THINKING: "Thinking…",
    S.WRITING: "Writing…",
    S.WORKING: "Working…",
    S.AWAITING_PERMISSION: "Needs permission",
    S.RECOVERING: "Recovering…",
    S.DISCONNECTED: "Disconnected",
    S.ERROR: "Error",
    S.STUCK: "Stuck",
    S.STOPPED: "Stopped",
}
"""The one word for each status, on every surface (sidebar, chat line, details): a state shown
under two names ("Ready" and "Idle") reads as two states."""

UNREAD_MARK = "●"
"""Shown on a row whose turn finished while another session was on screen."""
WARNING_MARK = "⚠"
"""Shown on a row whose tools keep failing with permission errors, or whose folder is gone."""
BRANCH_MARK = "⎇"
"""Before the git branch a session works on."""
QUEUED_WORKER = "Queued: waits for a slot"
"""A worker's status line while its team holds its start (the bound of workers at once)."""
MARKED_MARK = "✓"
"""Before the name of a session marked for a broadcast (ctrl+t)."""
SANDBOX_MARK = "⊡"
"""After the name of a session whose agent runs in a sandbox (issue 27)."""
NET_RULE_MARK = "⊡⇄"
"""The same, when its sandbox lets it reach only the hosts it lists (a network rule)."""


def sandbox_mark(sandbox: Sandbox) -> str:
    """The sidebar's mark of a session's sandbox ("" when it runs unsandboxed)."""
    if not sandbox.on:
        return ""
    return SANDBOX_MARK if sandbox.network is None else NET_RULE_MARK


ELAPSED_FROM = 5.0
"""Elapsed turn time is shown from this many seconds (PolyPilot)."""
SIDEBAR_AGO_FROM = 30.0
"""The sidebar adds " · 45s ago" when the last activity is at least this old (PolyPilot)."""
IDLE_AGO_FROM = 60.0
"""An idle row shows its age from one minute (blank under 60 s, like PolyPilot)."""
GIVES_UP_FROM = 10.0
"""A busy turn quiet for this long says when the watchdog gives up on it."""


def precise_duration(seconds: float) -> str:
    """``45s``, ``2m 5s``, ``1h 3m``: two units at most."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {(s % 3600) // 60}m"


def plural(count: int, word: str) -> str:
    """``1 tool``, ``8 tools``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def session_names(views: Sequence[SessionView]) -> str:
    """The first few sessions' names, for a question about them (``a, b, c, d …``)."""
    return ", ".join(one_line(v.name, 30) for v in views[:4]) + (" …" if len(views) > 4 else "")


def _age(view: SessionView, now: float) -> float | None:
    return None if view.last_activity_at is None else max(0.0, now - view.last_activity_at)


def _elapsed(view: SessionView, now: float) -> float:
    return 0.0 if view.turn_started_at is None else max(0.0, now - view.turn_started_at)


def sidebar_status(view: SessionView, now: float) -> str:
    """The compact second line of a sidebar row, e.g. ``2m · 8 tools · 45s ago``."""
    status = view.status
    age = _age(view, now)
    if status.busy:
        elapsed = _elapsed(view, now)
        if status in (S.AWAITING_PERMISSION, S.RECOVERING):
            parts = [STATUS_LABELS[status]]
        elif view.tool_calls:
            parts = [compact_duration(elapsed), plural(view.tool_calls, "tool")]
        else:
            parts = [STATUS_LABELS[status]] + ([compact_duration(elapsed)] if elapsed >= ELAPSED_FROM else [])
        quiet = min(age, elapsed) if age is not None else 0.0  # silence before this turn is not its own
        if quiet >= SIDEBAR_AGO_FROM:
            parts.append(f"quiet {compact_duration(quiet)}")
        return " · ".join(parts)
    if status is S.IDLE:
        parts = [STATUS_LABELS[status]]  # one word for the state, fresh or not ("Ready" was a second)
    elif view.failure is not None:
        parts = [view.failure.title]
    else:
        parts = [STATUS_LABELS[status]]
        if view.reason and status in (S.STUCK, S.ERROR, S.DISCONNECTED):
            parts.append(one_line(view.reason, 60))
    if age is not None and age >= IDLE_AGO_FROM and status not in (S.CONNECTING, S.RECOVERING):
        parts.append(f"{compact_duration(age)} ago")
    return " · ".join(parts)


def chat_status(view: SessionView, now: float) -> str:
    """The chat pane's status line, in words a person reads at a glance.

    E.g. ``Thinking… · 1m 10s · waiting for the model · quiet for 1m · gives up in 50s``.
    """
    status = view.status
    reason = one_line(view.reason, 160) if view.reason else ""
    if status.busy:
        elapsed = _elapsed(view, now)
        parts = [STATUS_LABELS[status]]
        if elapsed >= ELAPSED_FROM:
            parts.append(precise_duration(elapsed))
        if view.tool_calls:
            parts.append(plural(view.tool_calls, "tool call"))
        age = _age(view, now)
        quiet = age is not None and age >= ELAPSED_FROM
        # What it waits for matters once it is quiet (a running tool's name always does).
        if view.waiting_for and status is not S.AWAITING_PERMISSION and (quiet or status is S.WORKING):
            parts.append(view.waiting_for)
        if quiet and age is not None:
            parts.append(f"quiet for {compact_duration(age)}")
        # A running tool may earn extensions while its agent shows life: no countdown for it.
        if age is not None and age >= GIVES_UP_FROM and view.gives_up_at is not None and status is not S.WORKING:
            left = view.gives_up_at - now
            parts.append(f"gives up in {precise_duration(left)}" if left > 0 else "giving up now")
        text = " · ".join(parts)
        return f"{text} — {reason}" if reason else text
    if status is S.IDLE:
        if not view.turns and not view.history_len:
            return f"{STATUS_LABELS[status]} — type a prompt below"
        text = f"{STATUS_LABELS[status]} · {plural(view.turns, 'turn')}" if view.turns else STATUS_LABELS[status]
        age = _age(view, now)
        if age is not None and age >= IDLE_AGO_FROM:
            text += f" · last activity {compact_duration(age)} ago"
        return text
    if view.failure is not None:
        # The fix first: the line is cut at the pane's width, and the chat row has the agent's words in full.
        return f"{view.failure.title.capitalize()} — Fix: {view.failure.fix} · {reason}"
    if status is S.DISCONNECTED:
        return f"Disconnected — {reason or 'agent not running'} · the next prompt reconnects (ctrl+r now)"
    if status is S.CONNECTING:
        return "Connecting to the agent…"
    return f"{STATUS_LABELS[status]} — {reason}" if reason else STATUS_LABELS[status]


def safe_text(text: str) -> str:
    """Agent text made safe to draw: control sequences removed, giant lines bounded."""
    return bound_lines(strip_control(text))


@dataclass(frozen=True)
class SessionEntry:
    """What one row shows, derived from a view and the time (equal entries draw the same)."""

    session_id: str
    status: SessionStatus
    name: str
    status_text: str
    """The compact status line as shown (e.g. ``2m · 8 tools · 45s ago``)."""
    unread: bool
    warning: bool
    """Tools keep failing with permission errors, or the workspace cannot be read (the ⚠ mark;
    the tooltip and F2 say which)."""
    tooltip: str
    added: int = 0
    """Lines the session added against its base (shown with ``removed`` when files changed)."""
    removed: int = 0
    changed: bool = False
    branch: str = ""
    marked: bool = False
    """Marked for a broadcast: a prompt sent now goes to every marked session."""
    depth: int = 0
    """How far under its orchestrator a worker is listed (0: not a worker shown under one)."""
    note: str = ""
    """An orchestrator's bound reached or stall, in words (drawn in the warning colour)."""
    stale: bool = False
    """Its host stopped answering: the row shows the session as last seen, dimmed."""
    sandbox: str = ""
    """Its sandbox's mark (:func:`sandbox_mark`; "" when it runs unsandboxed)."""

    @classmethod
    def of(
        cls,
        view: SessionView,
        now: float,
        unread: bool,
        marked: bool = False,
        depth: int = 0,
        workers: int = 0,
        queued: bool = False,
        stale: bool = False,
    ) -> SessionEntry:
        """The row for ``view`` at ``now`` (``depth``: under its orchestrator; ``workers``: listed
        under it; ``queued``: a worker its team holds until a slot frees; ``stale``: its host
        stopped answering)."""
        return cls(
            view.id,
            view.status,
            one_line(view.name, 60),
            cls.status_line(view, now, workers, queued),
            unread,
            view.permission_warning or bool(view.workspace_problem),
            f"{view.name} · {view.agent}"
            + (f" · {view.cwd}" if view.cwd else "")
            + (f" · {view.branch}" if view.branch else "")
            + (f" · {view.changes.short()}" if view.changes else "")
            + (f" · {view.workspace_problem}" if view.workspace_problem else "")
            + (f" · {view.team_note}" if view.team_note else "")
            + (f" · {view.sandbox.label()}" if view.sandbox.on else ""),
            view.changes.added,
            view.changes.removed,
            bool(view.changes),
            one_line(view.branch, 60),
            marked,
            depth,
            one_line(view.team_note, 160),
            stale,
            sandbox_mark(view.sandbox),
        )

    @staticmethod
    def status_line(view: SessionView, now: float, workers: int = 0, queued: bool = False) -> str:
        """The row's second line at ``now`` (the only part of a row that moves with the time)."""
        status = QUEUED_WORKER if queued and not view.status.busy else sidebar_status(view, now)
        return status + (f" · {plural(workers, 'worker')}" if workers else "")
