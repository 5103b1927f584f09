"""One status model for every surface: sidebar, chat status line, ``status --json``, ``run``.

A :class:`SessionView` is a frozen snapshot derived from a Session. It carries times, never
"ago" strings, so two views are equal exactly when nothing visible changed; the UI
heartbeat compares tuples of views and formats "ago" labels at render time.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from enum import StrEnum
from typing import Any

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.failures import Failure, classify, status_code
from polypilot_tui.domain.limits import (
    ID_CHARS,
    NAME_CHARS,
    PREVIEW_CHARS,
    QUEUE_PREVIEWS,
    REASON_CHARS,
    TITLE_CHARS,
    bounded,
)
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.prompt_queue import QueueEntry, entry
from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import Outcome, PermissionPrompt, Phase
from polypilot_tui.domain.usage import Usage
from polypilot_tui.domain.watchdog import WatchdogConfig, gives_up_at, waiting_for
from polypilot_tui.domain.workspace import Workspace

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a session id is (an engine makes 8 hex of a uuid4): safe in a terminal, a widget id and
a file name. An id another engine sends that is not one is refused where it arrives."""


class SessionStatus(StrEnum):
    """Where a session is, as a user needs to know it."""

    IDLE = "idle"
    CONNECTING = "connecting"
    SENDING = "sending"
    THINKING = "thinking"
    WRITING = "writing"
    """Reply text is streaming."""
    WORKING = "working"
    AWAITING_PERMISSION = "awaiting_permission"
    RECOVERING = "recovering"
    DISCONNECTED = "disconnected"
    ERROR = "error"
    STUCK = "stuck"
    STOPPED = "stopped"

    @property
    def busy(self) -> bool:
        """A turn is in flight."""
        return self in _BUSY

    @property
    def needs_user(self) -> bool:
        """The session waits for the user (permission) or is dead/broken until they act."""
        return self in (
            SessionStatus.AWAITING_PERMISSION,
            SessionStatus.DISCONNECTED,
            SessionStatus.ERROR,
            SessionStatus.STUCK,
        )


_BUSY = frozenset(
    {
        SessionStatus.SENDING,
        SessionStatus.THINKING,
        SessionStatus.WRITING,
        SessionStatus.WORKING,
        SessionStatus.AWAITING_PERMISSION,
        SessionStatus.RECOVERING,
    }
)

_PHASE_STATUS = {
    Phase.SENDING: SessionStatus.SENDING,
    Phase.THINKING: SessionStatus.THINKING,
    Phase.WORKING: SessionStatus.WORKING,
}

_OUTCOME_STATUS = {
    Outcome.FAILED: SessionStatus.ERROR,
    Outcome.STUCK: SessionStatus.STUCK,
    Outcome.ABORTED: SessionStatus.STOPPED,
}


@dataclass(frozen=True)
class SessionView:
    """Everything a surface shows about one session, at one revision."""

    id: str
    name: str
    agent: str
    status: SessionStatus
    reason: str
    """Why the session is in this status (watchdog or recovery reason, error text)."""
    revision: int
    model: str = ""
    cwd: str = ""
    title: str = ""
    agent_session_id: str = ""
    turn_started_at: float | None = None
    last_activity_at: float | None = None
    tool_calls: int = 0
    """Tool calls started this turn."""
    active_tool: str = ""
    intent: str = ""
    permission_warning: bool = False
    pending_permission: PermissionPrompt | None = None
    pending_permissions: int = 0
    last_outcome: str = ""
    last_outcome_reason: str = ""
    turns: int = 0
    history_len: int = 0
    streaming_chars: int = 0
    consecutive_stuck: int = 0
    resumed: bool = False
    interrupted_prompt: str = ""
    """A turn lost to a restart: the first words of the prompt that one key resends ("" for none)."""
    queue: tuple[QueueEntry, ...] = ()
    """Prompts waiting for the current turn to end, oldest first: their keys, sizes and first
    words, never their text (a queue may hold megabytes; ``unqueue`` gives a prompt back whole)."""
    queue_held: bool = False
    """The queue waits for the user (the last turn was stopped or did not complete, or the app restarted)."""
    waiting_for: str = ""
    """What the running turn waits for, in words ("waiting for the model", "running bash")."""
    gives_up_at: float | None = None
    """When the watchdog ends the turn as stuck if nothing happens (clock seconds)."""
    branch: str = ""
    """The git branch the session works on ("" outside git)."""
    worktree: bool = False
    """The session works in a worktree of its own."""
    changes: ChangeStats = ChangeStats()
    """Files and lines the session changed against its base, as last counted."""
    workspace_problem: str = ""
    """Why its folder or worktree could not be read, or ""."""
    workspace: Workspace | None = None
    """Its folder, and for a worktree the repository, branch and base (None: the agent's own cwd)."""
    usage: Usage = Usage()
    """Tokens, context window and cost the agent reported (``usage.reported`` False: none)."""
    attempt_of: str = ""
    """The fan-out group it is an attempt of ("" for none)."""
    failure: Failure | None = None
    """Why it cannot work, named with the fix in words (derived from ``reason``; None: no known class)."""
    # ---- its team (issue 24, engine/teams.py) ----
    parent: str = ""
    """For a worker: its orchestrator's session id."""
    orchestrator: bool = False
    """The session is an orchestrator."""
    team_note: str = ""
    """On an orchestrator: a bound reached or a stall, in words ("" when none)."""
    sandbox: Sandbox = NO_SANDBOX
    """The sandbox its agent runs in (issue 27, domain/sandbox.py)."""

    @property
    def queued(self) -> int:
        """How many prompts wait for the current turn to end."""
        return len(self.queue)

    def to_json(self) -> dict[str, Any]:
        """JSON form (times are clock seconds; prompt texts are left out: they may hold secrets)."""
        data = asdict(self)
        data["status"] = self.status.value
        data.pop("queue")
        data.pop("interrupted_prompt")
        data["queued"] = self.queued
        data["usage"] = self.usage.to_json()
        if self.pending_permission is not None:
            data["pending_permission"] = {
                "request_id": self.pending_permission.request_id,
                "title": self.pending_permission.title,
            }
        data["failure"] = self.failure.to_json() if self.failure is not None else None
        return data


def derive_status(session: Session) -> tuple[SessionStatus, str]:
    """The status and its reason, from the session alone (never stored twice)."""
    turn = session.turn
    if session.recovering:
        return SessionStatus.RECOVERING, "reconnecting after permission errors"
    if turn is not None:
        if turn.pending_permissions:
            first = next(iter(turn.pending_permissions.values()))
            return SessionStatus.AWAITING_PERMISSION, first.title
        if turn.phase is Phase.THINKING and turn.response:
            return SessionStatus.WRITING, turn.last_decision
        return _PHASE_STATUS[turn.phase], turn.last_decision
    if session.connecting:
        return SessionStatus.CONNECTING, ""
    if session.lost:
        return SessionStatus.DISCONNECTED, session.lost
    record = session.last_outcome
    if record is not None and record.outcome in _OUTCOME_STATUS and not session.outcome_dismissed:
        return _OUTCOME_STATUS[record.outcome], record.reason
    return SessionStatus.IDLE, ""


def derive_failure(status: SessionStatus, reason: str, sign_in: str = "", code: int | None = None) -> Failure | None:
    """The named failure behind an error or disconnected status (None otherwise, or of no known
    class); ``sign_in`` is how the session's agent is signed in."""
    if status not in (SessionStatus.ERROR, SessionStatus.DISCONNECTED):
        return None
    return classify(reason, sign_in, code if status is SessionStatus.ERROR else None)  # the code is the turn's


def make_view(session: Session, cfg: WatchdogConfig | None = None, probes: Probes | None = None) -> SessionView:
    """Snapshot a session (with ``cfg``, also when the watchdog would give up on its turn).

    Every text is bounded (domain/limits.py): a view travels on every change, hundreds in one
    snapshot; an agent's long text is cut with a marker, a queued prompt is named, not carried."""
    status, reason = derive_status(session)
    reason = bounded(reason, REASON_CHARS)
    turn = session.turn
    record = session.last_outcome
    pending = next(iter(turn.pending_permissions.values()), None) if turn else None
    active = ""
    if turn and turn.active_tools:
        active = list(turn.active_tools.values())[-1].name
    return SessionView(
        id=session.id,
        name=bounded(session.name, NAME_CHARS),
        agent=session.agent,
        status=status,
        reason=reason,
        revision=session.revision,
        model=bounded(session.model, ID_CHARS),
        cwd=session.cwd,
        branch=session.workspace.branch if session.workspace else "",
        worktree=bool(session.workspace and session.workspace.owned),
        changes=session.changes,
        workspace_problem=bounded(session.workspace_problem, REASON_CHARS),
        workspace=session.workspace,
        title=bounded(session.title, TITLE_CHARS),
        agent_session_id=bounded(session.agent_session_id, ID_CHARS),
        turn_started_at=turn.started_at if turn else None,
        last_activity_at=session.last_activity_at,
        tool_calls=len(turn.tools) if turn else 0,
        active_tool=bounded(active, ID_CHARS),
        intent=turn.intent if turn else "",
        permission_warning=session.permission_warning,
        pending_permission=pending,
        pending_permissions=len(turn.pending_permissions) if turn else 0,
        last_outcome=record.outcome.value if record else "",
        last_outcome_reason=bounded(record.reason, REASON_CHARS) if record else "",
        turns=session.earlier_turns + len(session.turns),
        history_len=len(session.history),
        streaming_chars=turn.streamed_chars if turn else 0,
        consecutive_stuck=session.consecutive_stuck,
        resumed=bool(turn and turn.resumed),
        interrupted_prompt=one_line(session.interrupted_prompt, PREVIEW_CHARS),
        queue=tuple(entry(p, i < QUEUE_PREVIEWS) for i, p in enumerate(session.queue)),
        queue_held=session.queue_held,
        waiting_for=bounded(waiting_for(turn), ID_CHARS) if turn else "",
        gives_up_at=gives_up_at(turn, cfg, probes) if turn and cfg else None,
        usage=session.usage,
        attempt_of=session.attempt_of,
        failure=derive_failure(
            status, reason, bounded(session.sign_in, REASON_CHARS), status_code(record.detail) if record else None
        ),
        parent=session.team_parent,
        orchestrator=session.orchestrator,
        team_note=bounded(session.team_note, REASON_CHARS),
        sandbox=session.sandbox,
    )


@dataclass(frozen=True)
class SessionDetails:
    """Everything the session details view shows: where the agent runs and what it said last."""

    view: SessionView
    agent_kind: str
    command: str
    """How the agent is started (argv), or a note for an in-process agent."""
    folder: str
    """The folder the agent works in."""
    state_folder: str
    """The session's own folder under the state directory (agent logs, transcripts)."""
    connected_how: str = ""
    """How the agent session was attached last ("new session", "resumed", …)."""
    log_paths: tuple[tuple[str, str], ...] = ()
    stderr_tail: tuple[str, ...] = ()
    plan: tuple[tuple[str, str], ...] = ()
    """The agent's latest plan (ACP plan entries): (what, status)."""
    sandbox_rules: tuple[str, ...] = ()
    """What its sandbox allows, one rule per line (``SandboxRules.lines``; empty: no sandbox)."""
    permission_policy: str = ""
    """The permission policy its requests are answered by (engine/turns.py ``policy_of``)."""
