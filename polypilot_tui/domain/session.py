"""Session: history, the current Turn, and the one place a turn ends.

:meth:`Session.end_turn` is the single end-turn path: flush first, record, drop the Turn.
How agent events change a session lives in :mod:`polypilot_tui.domain.reducer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field, replace
from typing import Any

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.chat import ChatItem, ItemKind, TurnRecord
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.history import UNREADABLE, History
from polypilot_tui.domain.limits import CUT_NOTE_CHARS, ROW_CHARS, TOOL_TEXT_CHARS, bounded, saved_bytes
from polypilot_tui.domain.permissions import DenialWindow
from polypilot_tui.domain.prompt_queue import QueuedPrompt
from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxRules
from polypilot_tui.domain.text import one_line, strip_control
from polypilot_tui.domain.turn import EndCause, Outcome, ToolCall, Turn
from polypilot_tui.domain.usage import Usage
from polypilot_tui.domain.workspace import Workspace

#: A closed turn may be re-armed by a late turn_start this long after it was cleared (#375).
REARM_AFTER = 5.0


@dataclass
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
    history: History = field(default_factory=History)
    """Rows saved before a restart are read from disk when first looked at (domain/history.py)."""
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
    usage: Usage = Usage()
    """Tokens, context and cost the agent reported (domain/usage.py)."""
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
    queue: list[QueuedPrompt] = field(default_factory=list)
    """Prompts typed while a turn was running; sent in order when it completes."""
    queue_held: bool = False
    """The queue waits for the user: the last turn was stopped or did not complete, or the app restarted."""
    outcome_dismissed: bool = False
    """The last turn's outcome no longer sets the status (a reconnect since, say)."""
    seen_message_ids: set[str] = field(default_factory=set)
    revision: int = 0
    """Bumped on every change; views and listeners key off it."""
    on_item: Callable[[int, ChatItem, bool], None] | None = field(default=None, repr=False, compare=False)
    """The engine's: called with (index, item, replaced) whenever a history row is added or
    replaced, so the record stream carries every row (persistence writes them through)."""
    earlier_turns: int = 0
    """Turns finished before the last restart (their records are not kept, only the count)."""
    workspace: Workspace | None = None
    """The session's folder and, for git, its branch and base (None: the agent's own cwd)."""
    changes: ChangeStats = field(default_factory=ChangeStats)
    """What the session changed in its workspace, as last counted."""
    sandbox: Sandbox = NO_SANDBOX
    """The sandbox its agent runs in, as chosen when it was made (saved; never widened by recovery)."""
    sandbox_rules: SandboxRules | None = None
    """The rules its agent was started with (the launcher's; not saved): a failed tool's text
    is read against them (domain/sandbox_refusal.py). None: only its folder is known writable."""
    sign_in: str = ""
    """How its agent is signed in, in words (its catalog entry's): the fix a refused sign-in names."""
    workspace_problem: str = ""
    """Why the workspace could not be read last time (its folder deleted, say), or ""."""
    model_choice: str = ""
    """The model the user switched this session to ("" for none): set again after every connect."""
    team_parent: str = ""
    """For a worker of a team: the session that started it (its orchestrator)."""
    orchestrator: bool = False
    """It leads a team (engine/teams.py)."""
    team_note: str = ""
    """On an orchestrator: the last bound reached or stall, in words."""
    attempt_of: str = ""
    """The fan-out group it is an attempt of ("" for none; kept in the groups' own file)."""
    _turn_seq: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.history, History):  # a plain list of rows (a test, a replay)
            self.history = History(self.history)

    def held_prompt_bytes(self) -> int:
        """The prompt text this session holds, as saved: its queue, the prompt in flight and
        the one interrupted by a restart (each is in the registry; limits.HELD_BYTES)."""
        held = sum(p.size for p in self.queue)
        if self.turn is not None:
            held += saved_bytes(self.turn.prompt or self.last_prompt)
        return held + (saved_bytes(self.interrupted_prompt) if self.interrupted_prompt else 0)

    # ---- history -------------------------------------------------------------------
    def add_item(self, kind: ItemKind, text: str, wall: float, **extra: Any) -> int:
        """Append a history row; returns its index. Its text is kept up to limits.ROW_CHARS
        (a prompt always fits; an agent's text past it is cut with a marker saying how much)."""
        item = ChatItem(kind, bounded(strip_control(text), ROW_CHARS + CUT_NOTE_CHARS), wall, **extra)
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
            self.add_item(ItemKind.REASONING, turn.reasoning.take(), wall)
        text = turn.response.take()
        if text.strip():
            self.add_item(ItemKind.ASSISTANT, text, wall, interrupted=interrupted)

    # ---- turn lifecycle ------------------------------------------------------------
    def begin_turn(self, prompt: str, now: float, *, resumed: bool = False, rearmed: bool = False) -> Turn:
        """Start a turn (the caller has checked that none is running)."""
        self._turn_seq = max(self._turn_seq, self.earlier_turns) + 1
        self.turn = Turn(self._turn_seq, prompt, now, now, now, resumed=resumed, restored=resumed, rearmed=rearmed)
        self.window.clear()
        self.user_aborted = False
        self.allow_rearm = False
        if prompt:
            self.last_prompt = prompt
        self.revision += 1
        return self.turn

    def end_turn(
        self, outcome: Outcome, cause: EndCause, reason: str, now: float, wall: float, detail: str = ""
    ) -> TurnRecord | None:
        """THE end-turn path: flush, close open tool rows, record, drop the Turn."""
        turn = self.turn
        if turn is None:
            return None
        self.flush(wall, interrupted=outcome is not Outcome.COMPLETED)
        closing = "cancelled" if outcome is Outcome.ABORTED else "interrupted"
        for call in list(turn.tools.values()):
            if call.status in ("running", "waiting"):
                self.set_tool_row(call, closing, "")
        record = TurnRecord(
            turn.seq,
            turn.prompt,
            outcome,
            reason,
            turn.started_at,
            now,
            turn.tool_call_count,
            turn.successful_tools,
            detail,
            tuple(turn.refused),
            cause,
        )
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

    def permission_answered(
        self, request_id: str, answer: str, now: float, wall: float, tool_call_id: str | None = None
    ) -> bool:
        """A permission prompt was answered (by the user, the policy, the agent or a Stop).

        ``answer`` is the option kind or the agent's result kind ("allow_once", "reject_once",
        "denied-interactively-by-user", "cancelled", …). The tool it was for stops "waiting";
        a refused one will read "rejected" when it fails. A refused request whose tool has no
        row yet (ACP agents ask before the tool starts) gets a "rejected" row of its own, so
        the chat always says what was refused. Returns False for an unknown prompt.
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
        call = turn.tools.get(tool_call_id) if tool_call_id else None
        if tool_call_id:
            if refused or "cancel" in answer:
                turn.rejected_tools.add(tool_call_id)
            if call is not None and call.status == "waiting":
                self.set_tool_row(call, "running", "")
        if refused and prompt is not None and (call is None or call.row < 0):
            name = prompt.kind or "permission"
            row = self.add_item(
                ItemKind.TOOL,
                "",
                wall,
                tool_call_id=tool_call_id,
                tool_name=name,
                tool_status="rejected",
                tool_detail=prompt.title,
            )
            if tool_call_id and call is None:  # a late start or result of this tool keeps this row
                turn.tools[tool_call_id] = ToolCall(tool_call_id, name, now, row, prompt.title, "rejected")
        return prompt is not None

    def settle_open_tool_rows(self, now: float) -> None:
        """Tool rows a previous run left open (the app was killed mid-tool).

        With a restored turn in flight they belong to it again (a late completion updates
        its row; the turn's end closes what is left); otherwise they are closed as
        interrupted at once, never "running" forever.
        """
        turn = self.turn
        # Only held rows: a restore reads at once every session with open tool rows on disk.
        for row, item in list(self.history.held()):
            if item.kind is not ItemKind.TOOL or item.tool_status not in ("running", "waiting"):
                continue
            call = ToolCall(
                item.tool_call_id or f"restored-{row}", item.tool_name, now, row, item.tool_detail, item.tool_status
            )
            if turn is None:
                self.set_tool_row(call, "interrupted", "")
            elif call.call_id not in turn.tools:
                # Known for its completion, but not "active": the restored turn keeps its
                # resume tiers until the agent says a tool really runs.
                turn.tools[call.call_id] = call

    @property
    def last_outcome(self) -> TurnRecord | None:
        return self.turns[-1] if self.turns else None

    # ---- what event handling updates ---------------------------------------------
    def may_rearm(self, now: float) -> bool:
        """A late turn_start may re-open the last turn (#375): not after a Stop or a close."""
        if self.user_aborted or self.closed:
            return False
        return self.allow_rearm or (self.cleared_at is not None and now - self.cleared_at >= REARM_AFTER)

    def note_usage(self, kind: str, data: Mapping[str, Any]) -> None:
        """Fold a usage event's figures in (a change shows in the view; it is never activity)."""
        usage = self.usage.fold(kind, data)
        if usage != self.usage:
            self.usage = usage
            self.revision += 1

    def set_plan(self, entries: Any) -> None:
        """The agent's plan (ACP plan entries), bounded for display."""
        if isinstance(entries, list):
            self.plan = tuple(
                (one_line(_text(e.get("content")), 120), _text(e.get("status")))
                for e in entries
                if isinstance(e, Mapping)
            )

    def set_tool_row(self, call: ToolCall, status: str, output: str) -> None:
        """Replace a tool's history row in place with its new status (and output, if any)."""
        call.status = status
        if 0 <= call.row < len(self.history) and (old := self.history[call.row]) is not UNREADABLE:
            text = bounded(strip_control(output), TOOL_TEXT_CHARS) if output else old.text
            item = replace(old, tool_status=status, text=text)
            self.history[call.row] = item
            self.revision += 1
            if self.on_item is not None:
                self.on_item(call.row, item, True)


def _text(value: Any) -> str:
    """An agent's field as text: a string as it is, anything else (null, a number, a list) as ""."""
    return value if isinstance(value, str) else ""
