"""SessionManager: the engine's one public API — create, drive, stop, reconnect and watch sessions.

Everything runs on one asyncio loop; backends deliver their events onto it, so no state is
ever touched from another thread. What happens leaves the engine one way: the typed change
stream (:meth:`SessionManager.subscribe`, records in :mod:`polypilot_tui.domain.records`).
The manager routes agent events and signals; its collaborators — the connector, the
watchdog timer, permission recovery — share an :class:`EngineContext` and never reach into
each other.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from polypilot_tui.agents.base import AgentBackend, BackendError, ConnectResult, Diagnostics
from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.admission import admit_prompt, admit_session, session_name
from polypilot_tui.domain.agents import AgentOffer
from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.prompt_queue import QueuedPrompt, take_back
from polypilot_tui.domain.records import EngineAction, Record, SessionAdded, SessionRemoved
from polypilot_tui.domain.recovery import RecoveryGate
from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line, strip_control
from polypilot_tui.domain.tool_servers import ToolServer
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.domain.view import SessionDetails, SessionView, make_view
from polypilot_tui.domain.watchdog import WatchdogConfig
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.engine.connector import BackendFactory, Connector
from polypilot_tui.engine.context import EngineContext
from polypilot_tui.engine.stream import Listener, Unsubscribe
from polypilot_tui.engine.tool_handoff import ToolHandoff
from polypilot_tui.engine.turns import TurnRunner, checked_prompt, policy_of, refuse_without_folder
from polypilot_tui.engine.watchdog_timer import WatchdogTimer

log = logging.getLogger(__name__)

QUIT_REASON = "interrupted: polypilot stopped during this turn"


class SessionManager:
    """Creates, drives, stops and reconnects agent sessions and keeps each one honest."""

    def __init__(
        self,
        settings: Settings,
        catalog: AgentCatalog,
        clock: Clock,
        backend_factory: BackendFactory | None = None,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        ctx = self._ctx = EngineContext(settings, catalog, clock)
        self._new_id = id_factory or (lambda: uuid.uuid4().hex[:8])
        self._tools = ToolHandoff(ctx)
        self._connector = Connector(ctx, backend_factory, self.apply, self._tools.source)
        self._watchdog = WatchdogTimer(ctx, self._connector)
        self._turns = TurnRunner(ctx, self._connector, self._watchdog)

    # ---- what the engine is made of ------------------------------------------------
    @property
    def settings(self) -> Settings:
        return self._ctx.settings

    @property
    def catalog(self) -> AgentCatalog:
        return self._ctx.catalog

    @property
    def clock(self) -> Clock:
        return self._ctx.clock

    @property
    def cfg(self) -> WatchdogConfig:
        """The watchdog's thresholds (from the settings; tests and chaos runs may tune them)."""
        return self._ctx.cfg

    @cfg.setter
    def cfg(self, value: WatchdogConfig) -> None:
        self._ctx.cfg = value

    @property
    def recovery(self) -> RecoveryGate:
        """Permission recovery's attempt caps and circuit breaker."""
        return self._ctx.recovery

    @property
    def tool_servers(self) -> Callable[[str], tuple[ToolServer, ...]]:
        """The tool servers a session's agent is handed, asked each time it connects (new,
        resume or load, reconnect); default: none. The team desk sets it."""
        return self._tools.servers_for

    @tool_servers.setter
    def tool_servers(self, value: Callable[[str], tuple[ToolServer, ...]]) -> None:
        self._tools.servers_for = value

    def tools_arrived(self, capability: str) -> str:
        """The relay with ``capability`` says its agent listed its tools; the session's id
        (UnknownCapability when no session was handed it)."""
        return self._tools.arrived(capability)

    def awaiting_tools(self, session_id: str) -> bool:
        """The session's agent was handed the team relay, whose hello has not come (yet)."""
        return self._tools.expecting(session_id)

    # ---- observation ---------------------------------------------------------------
    def subscribe(self, listener: Listener, *kinds: type[Record]) -> Unsubscribe:
        """Call ``listener(change)`` for every record of ``kinds`` (all when none are given),
        on the engine's loop, in order; returns an unsubscribe."""
        return self._ctx.stream.subscribe(listener, *kinds)

    def ids(self) -> list[str]:
        return list(self._ctx.sessions)

    def session(self, session_id: str) -> Session:
        return self._ctx.get(session_id).session

    def view(self, session_id: str) -> SessionView:
        managed = self._ctx.get(session_id)
        return make_view(managed.session, self._ctx.cfg, managed.probes)

    def views(self) -> tuple[SessionView, ...]:
        cfg = self._ctx.cfg
        return tuple(make_view(m.session, cfg, m.probes) for m in self._ctx.sessions.values())

    def history(self, session_id: str) -> Sequence[ChatItem]:
        return self._ctx.get(session_id).session.history  # live: copy what must not change

    def streaming_text(self, session_id: str) -> str:
        turn = self._ctx.get(session_id).session.turn
        return turn.response_text if turn else ""

    def backend(self, session_id: str) -> AgentBackend | None:
        """The session's live agent connection (None while disconnected)."""
        return self._ctx.get(session_id).backend

    def details(self, session_id: str) -> SessionDetails:
        """What the details view shows: agent, folders, command, logs, the last stderr lines."""
        managed = self._ctx.get(session_id)
        session = managed.session
        config = self._ctx.catalog.agents.get(session.agent)
        diagnostics = self.diagnostics(session_id)
        return SessionDetails(
            view=self.view(session_id),
            agent_kind=config.kind if config else "?",
            command=diagnostics.command,
            folder=session.cwd or str(config.cwd if config and config.cwd else Path.cwd()),
            state_folder=str(self.workdir(session_id)),
            connected_how=managed.last_connect.how if managed.last_connect else "",
            log_paths=diagnostics.log_paths,
            stderr_tail=tuple(strip_control(line) for line in diagnostics.stderr_tail),
            plan=session.plan,
            sandbox_rules=self._sandbox_lines(session),
            permission_policy=policy_of(session, self._ctx.settings.permission_policy).value,
        )

    def _sandbox_lines(self, session: Session) -> tuple[str, ...]:
        """What the session's sandbox allows, in words (empty without one)."""
        if not session.sandbox.on:
            return ()
        if session.sandbox_rules is not None:  # those its agent was started with
            return session.sandbox_rules.lines()
        if session.agent not in self._ctx.catalog.agents:
            return ("its agent is not configured any more: it does not start",)
        try:
            plan = self._connector.sandbox_plan(session)
        except OSError as exc:
            return (f"its rules cannot be read now: {exc.strerror or exc}",)
        return plan.rules.lines() if plan is not None else ()

    def diagnostics(self, session_id: str) -> Diagnostics:
        """The live backend's diagnostics, else those its predecessor left behind."""
        return self._ctx.diagnostics(session_id)

    def offers(self) -> tuple[AgentOffer, ...]:
        """Every agent of the catalog and whether it can start here (see Connector.offer)."""
        return tuple(self._connector.offer(name) for name in self.catalog.agents)

    def cannot_start(self, agent: str) -> str | None:
        """Why ``agent`` cannot start on this machine, or None (see Connector.cannot_start)."""
        return self._connector.cannot_start(agent)

    def connect_result(self, session_id: str) -> ConnectResult | None:
        """What the last connect of this session found (resume hints), or None."""
        return self._ctx.get(session_id).last_connect

    def workdir(self, session_id: str) -> Path:
        """The session's own folder under the state directory."""
        return self._connector.workdir(session_id)

    # ---- lifecycle -----------------------------------------------------------------
    def add_session(
        self,
        agent: str,
        name: str | None = None,
        cwd: str = "",
        session_id: str | None = None,
        connect: bool = True,
        workspace: Workspace | None = None,
        sandbox: Sandbox = NO_SANDBOX,
    ) -> str:
        """Register a new session; it connects in the background unless ``connect`` is False.
        With a ``workspace`` the agent runs in its folder (``cwd`` is then ignored)."""
        config = self._ctx.catalog.get(agent)
        sid = session_id or self._new_id()
        if sid in self._ctx.sessions:
            raise ValueError(f"session {sid} already exists")
        admit_session(len(self._ctx.sessions), workspace)
        label = session_name(name) if name and name.strip() else f"{agent}-{len(self._ctx.sessions) + 1}"
        session = Session(
            sid,
            label,
            agent,
            created_wall=self.clock.wall(),
            cwd=workspace.folder if workspace else cwd or str(config.cwd or ""),
            model=config.model or "",
            workspace=workspace,
            sandbox=sandbox,
        )
        self._ctx.register(session)
        self._ctx.stream.publish(SessionAdded(sid))
        self._ctx.changed(sid)
        if connect:
            self._ctx.spawn(sid, self.connect(sid))
        return sid

    def adopt(self, session: Session, mid_turn_prompt: str | None = None, *, restored: bool = True) -> None:
        """Take over a session restored from disk (lazy: connects on first use). A session that
        was mid-turn comes back processing with the 30 s resume-quiescence tier seeded from now
        (never from file time, #148/#211) and reconnects at once."""
        self._ctx.register(session)
        now = self.clock.now()
        if mid_turn_prompt is not None:
            session.begin_turn(mid_turn_prompt, now, resumed=True)
        session.settle_open_tool_rows(now)
        self._ctx.stream.publish(SessionAdded(session.id, restored, mid_turn_prompt is not None, mid_turn_prompt or ""))
        if mid_turn_prompt is not None:
            self._watchdog.schedule(session.id)
            self._ctx.spawn(session.id, self.connect(session.id))
        self._ctx.changed(session.id)

    def set_changes(self, session_id: str, changes: ChangeStats, problem: str = "") -> None:
        """What the session changed in its workspace, as just counted (or why it could not be)."""
        session = self._ctx.get(session_id).session
        if (session.changes, session.workspace_problem) == (changes, problem):
            return
        session.changes = changes
        session.workspace_problem = problem
        session.revision += 1
        self._ctx.changed(session_id)

    def set_team(self, session_id: str, parent: str, orchestrator: bool, note: str) -> None:
        """Its place in a team, as its view shows it (engine/teams.py keeps the team)."""
        session = self._ctx.get(session_id).session
        if (session.team_parent, session.orchestrator, session.team_note) == (parent, orchestrator, note):
            return
        session.team_parent, session.orchestrator, session.team_note = parent, orchestrator, note
        session.revision += 1
        self._ctx.changed(session_id)

    def set_attempt_of(self, session_id: str, group: str) -> None:
        """The session is an attempt of the fan-out ``group`` ("": of none)."""
        session = self._ctx.get(session_id).session
        if session.attempt_of != group:
            session.attempt_of = group
            session.revision += 1
            self._ctx.changed(session_id)

    def rename(self, session_id: str, name: str) -> None:
        """Give the session another name (one line, at most limits.NAME_CHARS characters)."""
        session = self._ctx.get(session_id).session
        session.name = session_name(name)
        session.revision += 1
        self._ctx.changed(session_id)

    async def connect(self, session_id: str) -> AgentBackend:
        """Connect (or resume) the session's agent now, if it is not connected."""
        return await self._connector.ensure_connected(session_id)

    async def create_session(
        self, agent: str, name: str | None = None, cwd: str = "", workspace: Workspace | None = None
    ) -> str:
        """Add a session and wait until its agent is connected."""
        sid = self.add_session(agent, name, cwd, connect=False, workspace=workspace)
        await self.connect(sid)
        return sid

    async def send(self, session_id: str, prompt: str) -> str:
        """Send a prompt; while a turn runs it is queued. Returns "sent" or "queued".

        Leading and trailing blank lines are dropped; the text itself (every line of a
        multi-line prompt) is sent as typed. One the engine could not keep whole is refused,
        naming the limit (domain/admission.py): never cut."""
        session = self._ctx.get(session_id).session
        prompt = checked_prompt(session, prompt)  # nothing is queued or sent to a folder that is gone
        queued = session.turn is not None or session.recovering
        size = admit_prompt(prompt, session, queued, (m.session for m in self._ctx.sessions.values()))
        if queued:
            session.queue.append(QueuedPrompt.of(prompt, size))
            session.revision += 1
            self._ctx.changed(session_id)
            return "queued"
        await self._turns.start_turn(session_id, prompt)
        return "sent"

    def unqueue(self, session_id: str, index: int, expected: str | None = None) -> str | None:
        """Take a queued prompt back (to edit or drop it); returns its text.

        ``expected`` is the key of the prompt the user saw at ``index`` (``QueueEntry.key``):
        if the queue moved on since (its head was sent), that prompt is looked up instead;
        None when it is no longer queued."""
        session = self._ctx.get(session_id).session
        prompt = take_back(session.queue, index, expected)
        if prompt is None:
            return None
        session.queue_held = session.queue_held and bool(session.queue)
        session.revision += 1
        self._ctx.changed(session_id)
        return prompt.text

    def clear_queue(self, session_id: str) -> int:
        """Drop every queued prompt (the running turn goes on); returns how many were dropped."""
        session = self._ctx.get(session_id).session
        dropped = len(session.queue)
        if dropped:
            session.queue.clear()
            session.queue_held = False
            session.revision += 1
            self._ctx.changed(session_id)
        return dropped

    async def send_queued(self, session_id: str) -> bool:
        """Release a held queue: the next queued prompt goes out now if the session is idle."""
        session = self._ctx.get(session_id).session
        refuse_without_folder(session)
        session.queue_held = False
        session.revision += 1
        self._ctx.changed(session_id)
        if session.turn is not None or session.recovering or not session.queue:
            return False
        await self._turns.start_turn(session_id, session.queue.pop(0).text)
        return True

    async def stop(self, session_id: str) -> None:
        """Stop the current turn; always leaves a usable session.

        Abort first; if the agent does not go idle within the grace period, kill it (the
        next send reconnects). Pending permissions are answered "cancelled". Queued prompts
        are kept and held: they go out only when the user says so.
        """
        await self._turns.stop(session_id)

    async def answer_permission(self, session_id: str, request_id: str, option_id: str) -> None:
        """Answer a pending permission request with one of its options."""
        await self._turns.answer_permission(session_id, request_id, option_id)

    def apply(self, session_id: str, event: AgentEvent) -> None:
        """Fold one agent event into a session and act on what it signals (the hot path)."""
        self._turns.apply(session_id, event)

    async def reconnect(self, session_id: str) -> ConnectResult:
        """Replace the agent connection, resuming the same agent-side session."""
        ctx = self._ctx
        managed = ctx.get(session_id)
        if managed.session.turn is not None:
            ctx.end_turn(session_id, Outcome.ABORTED, EndCause.RECONNECT, "reconnect requested during the turn")
        ctx.action(session_id, EngineAction.RECONNECT, by_user=True)
        await self._connector.drop_backend(session_id, "")
        await self.connect(session_id)
        managed.session.outcome_dismissed = True  # a fresh agent: "stopped" or "stuck" is history now
        managed.session.revision += 1
        ctx.changed(session_id)
        result = managed.last_connect
        assert result is not None  # set by the connect that just succeeded
        return result

    async def resend_interrupted(self, session_id: str) -> bool:
        """Resend the prompt of a turn lost to a restart (one key in the UI)."""
        session = self._ctx.get(session_id).session
        prompt = session.interrupted_prompt
        if not prompt or session.turn is not None:
            return False
        refuse_without_folder(session)
        session.interrupted_prompt = ""
        await self._turns.start_turn(session_id, prompt, resend=True)
        return True

    async def close(self, session_id: str) -> Session | None:
        """Stop and forget a session; returns it (history intact) so it can be reopened."""
        ctx = self._ctx
        managed = ctx.sessions.get(session_id)
        if managed is None:
            return None
        if managed.session.turn is not None:
            await self.stop(session_id)
        rows_read = managed.session.history.read_all()  # rows on disk go at the next write; an undo needs them
        managed.session.closed = True
        self._tools.forget(session_id)
        await self._connector.drop_backend(session_id, "")
        await ctx.finish_background(managed)
        del ctx.sessions[session_id]
        managed.session.on_item = None
        ctx.stream.publish(SessionRemoved(session_id, rows_kept=not rows_read))
        return managed.session

    def reopen(self, session: Session, position: int | None = None) -> None:
        """Bring a closed session back (undo): idle, its agent reconnects on the next send;
        ``position``: where it was in the list (else it goes last)."""
        sessions = self._ctx.sessions
        if session.id in sessions:
            raise ValueError(f"session {session.id} already exists")
        admit_session(len(self._ctx.sessions))
        session.closed = session.connected = session.connecting = False
        session.revision += 1
        session.history.read_all()  # what its close could not read is tried once more
        self.adopt(session, restored=False)
        if position is not None:
            order = [sid for sid in sessions if sid != session.id]
            order.insert(max(0, position), session.id)
            for sid in order:  # re-inserted in order: the dict keeps the new one
                sessions[sid] = sessions.pop(sid)

    async def quit(self) -> None:
        """The dashboard is quitting: end turns in flight, then release every backend.

        A turn in flight cannot survive: its agent goes with the app. It ends now as
        interrupted, with its prompt offered for resending at the next start (not after a
        resume-quiescence wait).
        """
        for sid, managed in list(self._ctx.sessions.items()):
            turn = managed.session.turn
            if turn is not None:
                self._ctx.end_turn(sid, Outcome.ABORTED, EndCause.QUIT, QUIT_REASON)
                if turn.prompt:
                    managed.session.interrupted_prompt = turn.prompt
                    managed.session.error(
                        f"⚠ Your request “{one_line(turn.prompt, 60)}” was interrupted when polypilot stopped.",
                        self.clock.wall(),
                    )
        await self.shutdown()

    async def shutdown(self) -> None:
        """Release every backend; turns in flight stay on record (replay, tests, ``run``)."""
        for managed in list(self._ctx.sessions.values()):
            await self._ctx.finish_background(managed)
            if managed.backend is not None:
                await self._ctx.safe(managed.backend.close())
                managed.backend = None

    async def idle(self) -> None:
        """Wait for every background task (tests, `run`, replay)."""
        while True:
            pending = [t for m in self._ctx.sessions.values() for t in m.tasks if not t.done()]
            if not pending:
                return
            await asyncio.gather(*pending, return_exceptions=True)


__all__ = ["SessionManager", "BackendError"]
