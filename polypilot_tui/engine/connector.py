"""Connecting a session's agent: handler first, resume, adopt the id, read restore hints.

One connect per session at a time: every caller awaits the same task, so Stop can cancel
it; callers then get a BackendError, not a CancelledError. The connector also owns the
other end of a connection: the event sink it hands the backend (events of a replaced
backend are dropped, the orphan guard), and detaching or dropping a backend.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from msgspec import structs

from polypilot_tui.agents.base import AgentBackend, BackendError, ConnectResult, EventSink
from polypilot_tui.agents.readiness import readiness
from polypilot_tui.agents.sandbox import SandboxPlan
from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.failures import failure_text
from polypilot_tui.domain.limits import ID_CHARS
from polypilot_tui.domain.records import EventReceived
from polypilot_tui.domain.sandbox import SandboxMode
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.tool_servers import ToolServerSource
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.engine.context import EngineContext, ManagedSession
from polypilot_tui.engine.model_restore import restore_model_choice
from polypilot_tui.infra.logs import log_failure
from polypilot_tui.infra.private import private_dir

log = logging.getLogger(__name__)

BackendFactory = Callable[[str, EventSink, Path], AgentBackend]
"""(agent name, sink, session workdir) -> a new, unconnected backend."""
EventHandler = Callable[[str, AgentEvent], None]

_HISTORY_KINDS = {EventType.USER_MESSAGE: ItemKind.USER, EventType.MESSAGE: ItemKind.ASSISTANT}


class Connector:
    """Starts, resumes, detaches and drops the agents of the engine's sessions."""

    def __init__(
        self,
        ctx: EngineContext,
        factory: BackendFactory | None,
        on_event: EventHandler,
        tool_source: Callable[[str], ToolServerSource] | None = None,
    ) -> None:
        self._ctx = ctx
        self._tool_source = tool_source
        """A session's id → what its backend asks for its agent's tool servers at each open."""
        self._factory = factory or self._default_factory
        self._real_backends = factory is None
        self._on_event = on_event

    def offer(self, agent: str) -> AgentOffer:
        """``agent`` and whether it can start here. An injected factory (tests, chaos runs)
        starts what it is given: only the real backends' commands, keys and sign-ins are checked."""
        config = self._ctx.catalog.agents[agent]
        if not self._real_backends:
            return AgentOffer(
                agent, config.kind, Availability.READY, config.title, "injected", sandbox=SandboxMode(config.sandbox)
            )
        return readiness(config)

    def cannot_start(self, agent: str) -> str | None:
        """Why ``agent`` cannot start here (not configured, command not found, key not set), or None."""
        if agent not in self._ctx.catalog.agents:
            return "it is not configured any more"
        return self.offer(agent).cannot_start

    def workdir(self, session_id: str) -> Path:
        """The session's own folder under the state directory (agent logs, transcripts)."""
        return Path(self._ctx.settings.state_dir) / "sessions" / session_id

    async def ensure_connected(self, session_id: str) -> AgentBackend:
        """The session's live backend, connecting (or resuming) it first if needed; whatever
        stands in the way is a BackendError that says it (a cancel by Stop included)."""
        managed = self._ctx.get(session_id)
        if managed.connecting is None:
            if managed.backend is not None:
                return managed.backend
            task = asyncio.get_running_loop().create_task(self._connect(managed), name=f"connect-{session_id}")
            managed.connecting = task
            managed.tasks.add(task)  # cancelled with the session (close, shutdown)
            task.add_done_callback(managed.tasks.discard)
            task.add_done_callback(lambda t: setattr(managed, "connecting", None) if managed.connecting is t else None)
        task = managed.connecting
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and not (current is not None and current.cancelling()):
                raise BackendError("the connect was cancelled (Stop)") from None
            raise

    def cancel_connect(self, managed: ManagedSession) -> bool:
        """Cancel a connect in flight (Stop): no agent is left starting for a stopped turn."""
        connecting = managed.connecting
        if connecting is None or connecting.done():
            return False
        connecting.cancel()
        return True

    async def _connect(self, managed: ManagedSession) -> AgentBackend:
        ctx = self._ctx
        session = managed.session
        session_id = session.id
        workdir = self.workdir(session_id)
        ref: list[AgentBackend] = []
        try:
            for folder in (workdir.parent, workdir):  # sessions/ and sessions/<id>/ are ours: 0700,
                private_dir(folder)  # agent logs and transcripts hold the user's work
            # The sink exists before connect() runs, so resume-time events are never lost (#559).
            backend = self._factory(session.agent, self._sink_for(session_id, ref), workdir)
        except (OSError, KeyError, ValueError) as exc:  # its folder is not ours, its agent no longer configured
            said = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise BackendError(f"could not start the agent: {said}") from exc
        ref.append(backend)
        managed.backend = backend
        resume_id = session.agent_session_id or None
        session.connecting = True
        ctx.changed(session_id)
        try:
            result = await backend.connect(resume_id)
        except asyncio.CancelledError:  # Stop: the backend has stopped what it started
            managed.backend = None
            session.connecting = False
            ctx.changed(session_id)
            await ctx.safe(backend.close())
            raise
        except Exception as exc:  # whatever it was, the session must not stay "connecting" (re-raised below)
            log_failure(log, f"connect of {session_id}", exc, (BackendError,))  # a bug in a backend: in full
            tail = ctx.diagnostics(session_id).stderr_tail  # its stderr says why it could not start
            managed.backend = None
            session.connecting = False
            said = str(exc)
            if tail and tail[-1] not in said:  # the Copilot SDK quotes it; an ACP agent's is only in its log
                said += f" — its stderr: {one_line(' | '.join(tail[-3:]), 300)}"
            session.lost = f"could not start the agent: {said}"
            if session.turn is not None and session.turn.restored:  # it cannot go on: offered for resending now
                reason = f"the agent could not be started again after the restart: {said}"
                ctx.end_turn(session_id, Outcome.FAILED, EndCause.LOST_IN_RESTART, reason)
            row = failure_text(session.lost, session.sign_in)
            last = session.history[-1] if session.history else None
            # A turn's end says it (with the fix) in its own row; a retry that fails the same way
            # (F8, a model list, Reconnect) does not add the same row again.
            if session.turn is None and not (last is not None and last.kind is ItemKind.ERROR and last.text == row):
                session.error(row, ctx.clock.wall())
            ctx.changed(session_id)
            await ctx.safe(backend.close())
            raise BackendError(session.lost) from exc
        managed.last_connect = result
        session.connecting = False
        session.connected = True
        session.lost = ""
        if result.agent_session_id and len(result.agent_session_id) <= ID_CHARS:  # longer: not an id we can keep
            session.agent_session_id = result.agent_session_id
        wall = ctx.clock.wall()
        if result.history and not session.history:
            for event in result.history:
                kind = _HISTORY_KINDS.get(event.type)  # type: ignore[call-overload]
                if kind is not None and event.text("content"):
                    session.add_item(kind, event.text("content"), wall)
        if resume_id:
            managed.reconnected = True
            if result.resumed:
                session.system(f"🔄 Session reconnected: {result.how}.", wall)
            elif not (session.turns or session.earlier_turns or (session.turn is not None and session.turn.restored)):
                # Nothing was said in it yet (a session made an orchestrator right away; its first
                # prompt may wait for this connect): nothing is forgotten, and the Copilot CLI
                # keeps no session it was never prompted in.
                session.usage = session.usage.new_counter()
                session.system(
                    "🔄 Session reconnected: a new agent session (there was no conversation to resume).", wall
                )
            else:
                # A new agent session counts its cost from zero: the old mark would swallow it.
                session.usage = session.usage.new_counter()
                session.error(
                    f"⚠ The agent could not resume its earlier session ({result.how}). This is a new "
                    "agent session: the agent does not remember the conversation above.",
                    wall,
                )
        await restore_model_choice(session, backend, wall)  # a restart keeps the user's model
        if result.interrupted_tool:
            session.interrupted_tool = True  # aborted before the next send (#393)
        turn = session.turn
        if turn is not None and turn.restored:
            if result.still_processing:
                turn.used_tools = True  # RESUME-ACTIVE: the tool tier, the agent is working
            elif lost := _lost_in_restart(result):  # known now: no 30 s wait for events that cannot come
                ctx.end_turn(session_id, Outcome.FAILED, EndCause.LOST_IN_RESTART, lost)
        ctx.changed(session_id)
        return backend

    def _sink_for(self, session_id: str, backend_ref: list[AgentBackend]) -> EventSink:
        ctx = self._ctx
        stream = ctx.stream
        on_event = self._on_event

        def sink(event: AgentEvent) -> None:
            try:
                take(event)
            except Exception:  # an SDK's callback: a bug of ours is logged in full, the agent's stream goes on
                log.exception("session %s: the engine failed on a %s event", session_id, event.type)

        def take(event: AgentEvent) -> None:
            managed = ctx.sessions.get(session_id)
            # Events from a replaced backend are ignored (orphan guard, INV-14).
            if managed is None or not backend_ref or managed.backend is not backend_ref[0]:
                return
            if managed.is_settling(backend_ref[0]):
                # The tail of a turn the watchdog already ended (its abort echo, or the agent
                # dying under the kill): it must not touch the next turn, which may already
                # be waiting to be sent. A death only detaches it; the send reconnects.
                if stream.wants(EventReceived):
                    stream.publish(EventReceived(session_id, event))
                if event.type == EventType.CONNECTION_LOST:
                    self.detach(session_id, backend_ref[0], one_line(event.text("reason"), 200))
                return
            on_event(session_id, event)

        return sink

    def detach(self, session_id: str, backend: AgentBackend, lost_reason: str) -> None:
        """Forget a backend whose agent died (closed in the background)."""
        ctx = self._ctx
        managed = ctx.sessions.get(session_id)
        if managed is None or managed.backend is not backend:
            return
        ctx.diagnostics(session_id)
        managed.backend = None
        managed.session.connected = False
        managed.session.lost = lost_reason or "agent connection lost"
        ctx.release(session_id, backend)
        ctx.changed(session_id)

    async def drop_backend(self, session_id: str, lost_reason: str) -> None:
        """Close the session's backend (the next send reconnects); ``lost_reason`` says why, if lost."""
        ctx = self._ctx
        managed = ctx.sessions.get(session_id)
        if managed is None:
            return
        ctx.diagnostics(session_id)
        backend, managed.backend = managed.backend, None
        managed.session.connected = False
        if lost_reason:
            managed.session.lost = lost_reason
        if backend is not None:
            await ctx.safe(backend.close())
        ctx.changed(session_id)

    def _default_factory(self, agent: str, sink: EventSink, workdir: Path) -> AgentBackend:
        from polypilot_tui.agents import create_backend  # the SDKs load only with their backend

        ctx = self._ctx
        config = ctx.catalog.get(agent)
        managed = ctx.sessions.get(workdir.name)  # the workdir is named after the session
        if managed is None:  # never an agent started without its session's sandbox
            raise ValueError(f"its session {workdir.name} is gone")
        if managed.session.cwd:
            config = structs.replace(config, cwd=Path(managed.session.cwd))
        tools = self._tool_source(workdir.name) if self._tool_source is not None else None
        sandbox = self.sandbox_plan(managed.session)
        # a tool's failure is read against the rules the agent runs under
        managed.session.sandbox_rules = sandbox.rules if sandbox is not None else None
        return create_backend(config, sink, ctx.clock, ctx.settings, workdir, tools, sandbox)

    def sandbox_plan(self, session: Session) -> SandboxPlan | None:
        """The session's sandbox as its backend starts it (None when it has none)."""
        from polypilot_tui.agents.sandbox import plan_for

        config = self._ctx.catalog.get(session.agent)
        folder = session.cwd or str(config.cwd or Path.cwd())
        return plan_for(session.sandbox, folder, config, self._ctx.settings)


def _lost_in_restart(result: ConnectResult) -> str:
    """Why a turn in flight before a restart cannot go on with this connection ("" when it may):
    the agent opened a new session (it cannot resume), or says the turn is not running."""
    if not result.resumed:
        return f"the agent could not resume its session ({result.how}), so this turn was lost in the restart"
    if result.lost_turn:
        return "the agent lost this turn in the restart"
    return ""
