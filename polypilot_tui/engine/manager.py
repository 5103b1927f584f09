"""SessionManager: owns the sessions, routes backend events, schedules the watchdog.

Everything runs on one asyncio loop; backends deliver events onto it, so no state is ever
touched from another thread. Listeners get the id of each session that changed and read
:class:`~polypilot_tui.domain.view.SessionView` snapshots; nothing here blocks the loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from polypilot_tui.engine import watchdog_timer as watchdog
from polypilot_tui.agents.base import (ALLOW_ONCE, CANCELLED, REJECT_ONCE, AgentBackend, BackendError,
                                       ConnectResult, Diagnostics, EventSink)
from polypilot_tui.config import AgentCatalog, PermissionPolicy, Settings
from polypilot_tui.domain.clock import Clock, TimerHandle
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.recovery import RecoveryGate
from polypilot_tui.domain.session import ChatItem, ItemKind, Session, Signal
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.domain.text import strip_control
from polypilot_tui.domain.view import SessionDetails, SessionView, make_view
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.watchdog import WatchdogConfig

log = logging.getLogger(__name__)

BackendFactory = Callable[[str, EventSink, Path], AgentBackend]
"""(agent name, sink, session workdir) -> a new, unconnected backend."""
Listener = Callable[[str], None]
ActionListener = Callable[[str, str, dict[str, Any]], None]
"""(session id, action, details): "abort", "kill", "reconnect", "resend", "send" — for replay."""

SEND_TIMEOUT = 60.0
RELEASE_TIMEOUT = 15.0
"""How long closing a session waits for its agents to be released (each close is bounded too)."""
QUIT_REASON = "interrupted: the app quit during this turn"
#: A send waits for the previous stuck turn's abort at most this long past the stop grace
#: (the abort itself is bounded by the grace; a kill that follows by a few seconds).
SETTLE_MARGIN = 10.0

#: Events after which a watchdog deadline may move EARLIER than the armed timer.
_SHORTENING = frozenset(str(t) for t in (EventType.TURN_END, EventType.MESSAGE, EventType.TOOL_COMPLETE,
                                          EventType.PERMISSION_COMPLETED, EventType.TURN_START))
_NONE = Signal.NONE


@dataclass
class _Managed:
    """A session plus its live parts; nothing here outlives the manager."""

    session: Session
    backend: AgentBackend | None = None
    timer: TimerHandle | None = None
    armed_at: float | None = None
    probes: Probes | None = None
    reconnected: bool = False
    """The next send goes out on a freshly reconnected agent (35 s tier)."""
    last_connect: ConnectResult | None = None
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    """Background work for the session (connects, queued sends); cancelled when it closes."""
    releases: set[asyncio.Task[Any]] = field(default_factory=set)
    """Backends being closed in the background; awaited (never cancelled) when it closes."""
    connecting: asyncio.Task[AgentBackend] | None = None
    """The connect in flight (one per session; every caller awaits the same one)."""
    settling: asyncio.Task[Any] | None = None
    """The abort of a turn the watchdog gave up on; the next send goes out after it."""
    settling_backend: AgentBackend | None = None
    """The backend that abort is for: until it is done, its events belong to the stuck turn."""
    diagnostics: Diagnostics | None = None
    """The last backend's diagnostics, kept when it goes away (its stderr explains a crash)."""

    def is_settling(self, backend: AgentBackend) -> bool:
        return self.settling is not None and not self.settling.done() and self.settling_backend is backend


class SessionManager:
    """Creates, drives, stops and reconnects agent sessions and keeps each one honest."""

    def __init__(self, settings: Settings, catalog: AgentCatalog, clock: Clock,
                 backend_factory: BackendFactory | None = None,
                 id_factory: Callable[[], str] | None = None) -> None:
        self.settings = settings
        self.catalog = catalog
        self.clock = clock
        self.cfg: WatchdogConfig = settings.watchdog.to_config()
        self._factory = backend_factory or self._default_factory
        self._new_id = id_factory or (lambda: uuid.uuid4().hex[:8])
        self._sessions: dict[str, _Managed] = {}
        self._listeners: list[Listener] = []
        self._action_listeners: list[ActionListener] = []
        self._event_taps: list[Callable[[str, AgentEvent], None]] = []
        self.recovery = RecoveryGate(settings.recovery_max_attempts, settings.recovery_breaker_limit,
                                     settings.recovery_breaker_window)

    # ---- observation ---------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(session_id)`` after every change; returns an unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def on_action(self, listener: ActionListener) -> None:
        self._action_listeners.append(listener)

    def tap_events(self, tap: Callable[[str, AgentEvent], None]) -> None:
        """See every raw backend event (recordings)."""
        self._event_taps.append(tap)

    def ids(self) -> list[str]:
        return list(self._sessions)

    def session(self, session_id: str) -> Session:
        return self._get(session_id).session

    def view(self, session_id: str) -> SessionView:
        managed = self._get(session_id)
        return make_view(managed.session, self.cfg, managed.probes)

    def views(self) -> tuple[SessionView, ...]:
        cfg = self.cfg
        return tuple(make_view(m.session, cfg, m.probes) for m in self._sessions.values())

    def history(self, session_id: str) -> tuple[ChatItem, ...]:
        return tuple(self._get(session_id).session.history)

    def streaming_text(self, session_id: str) -> str:
        turn = self._get(session_id).session.turn
        return turn.response_text if turn else ""

    def streaming_reasoning(self, session_id: str) -> str:
        """Reasoning streamed so far in the current turn (saved to history at the next flush)."""
        turn = self._get(session_id).session.turn
        return "".join(turn.reasoning) if turn else ""

    def details(self, session_id: str) -> SessionDetails:
        """What the details view shows: agent, folders, command, logs, the last stderr lines."""
        managed = self._get(session_id)
        session = managed.session
        config = self.catalog.agents.get(session.agent)
        diagnostics = self.diagnostics(session_id)
        return SessionDetails(
            view=self.view(session_id), agent_kind=config.kind if config else "?",
            command=diagnostics.command, folder=session.cwd or str(config.cwd if config and config.cwd else Path.cwd()),
            state_folder=str(self.workdir(session_id)),
            connected_how=managed.last_connect.how if managed.last_connect else "",
            log_paths=diagnostics.log_paths,
            stderr_tail=tuple(strip_control(line) for line in diagnostics.stderr_tail),
        )

    def diagnostics(self, session_id: str) -> Diagnostics:
        """The live backend's diagnostics, else those its predecessor left behind."""
        managed = self._get(session_id)
        if managed.backend is not None:
            try:
                managed.diagnostics = managed.backend.diagnostics()
            except Exception:  # noqa: BLE001 - diagnostics never break anything
                log.exception("diagnostics of %s failed", session_id)
        return managed.diagnostics or Diagnostics()

    def _stderr_lines(self, session_id: str, count: int = 4) -> str:
        """The agent's last stderr lines, as lines to add under a failure ("" when none)."""
        tail = self.diagnostics(session_id).stderr_tail[-count:]
        if not tail:
            return ""
        lines = "\n".join(f"  {one_line(line, 240)}" for line in tail)
        return f"\nThe agent's last lines on stderr (F2 shows the log paths):\n{lines}"

    def connect_result(self, session_id: str) -> ConnectResult | None:
        """What the last connect of this session found (resume hints), or None."""
        return self._get(session_id).last_connect

    def deadline(self, session_id: str) -> float | None:
        """When the watchdog next looks at this session (None when idle or paused)."""
        return self._get(session_id).armed_at

    # ---- lifecycle -----------------------------------------------------------------
    def add_session(self, agent: str, name: str | None = None, cwd: str = "",
                    session_id: str | None = None, connect: bool = True) -> str:
        """Register a new session; it connects in the background unless ``connect`` is False."""
        config = self.catalog.get(agent)
        sid = session_id or self._new_id()
        if sid in self._sessions:
            raise ValueError(f"session {sid} already exists")
        label = name or f"{agent}-{len(self._sessions) + 1}"
        session = Session(sid, label, agent, created_wall=self.clock.wall(),
                          cwd=cwd or str(config.cwd or ""), model=config.model or "")
        self._sessions[sid] = _Managed(session)
        self._changed(sid)
        if connect:
            self._spawn(sid, self._ensure_connected(sid))
        return sid

    def adopt(self, session: Session, mid_turn_prompt: str | None = None) -> None:
        """Take over a session restored from disk (lazy: connects on first use).

        A session that was mid-turn comes back processing with the 30 s resume-quiescence
        tier seeded from now (never from file time, #148/#211) and reconnects at once.
        """
        self._sessions[session.id] = _Managed(session)
        if mid_turn_prompt is not None:
            session.begin_turn(mid_turn_prompt, self.clock.now(), resumed=True)
        session.settle_open_tool_rows(self.clock.now())
        if mid_turn_prompt is not None:
            self._schedule(session.id)
            self._spawn(session.id, self._ensure_connected(session.id))
        self._changed(session.id)

    async def create_session(self, agent: str, name: str | None = None, cwd: str = "") -> str:
        """Add a session and wait until its agent is connected."""
        sid = self.add_session(agent, name, cwd, connect=False)
        await self._ensure_connected(sid)
        return sid

    async def send(self, session_id: str, prompt: str) -> str:
        """Send a prompt; while a turn runs it is queued. Returns "sent" or "queued".

        Leading and trailing blank lines are dropped; the text itself (every line of a
        multi-line prompt) is sent as typed.
        """
        managed = self._get(session_id)
        session = managed.session
        prompt = prompt.strip("\n").rstrip()
        if not prompt.strip():
            raise ValueError("empty prompt")
        if session.turn is not None or session.recovering:
            session.queue.append(prompt)
            session.revision += 1
            self._changed(session_id)
            return "queued"
        await self._start_turn(session_id, prompt)
        return "sent"

    def unqueue(self, session_id: str, index: int, expected: str | None = None) -> str | None:
        """Take a queued prompt back (to edit or drop it); returns its text.

        ``expected`` is the text the user saw at ``index``: if the queue moved on since (its
        head was sent), that text is looked up instead; None when it is no longer queued.
        """
        session = self._get(session_id).session
        if expected is not None and not (0 <= index < len(session.queue) and session.queue[index] == expected):
            if expected not in session.queue:
                return None
            index = session.queue.index(expected)
        if not 0 <= index < len(session.queue):
            return None
        prompt = session.queue.pop(index)
        session.queue_held = session.queue_held and bool(session.queue)
        session.revision += 1
        self._changed(session_id)
        return prompt

    async def send_queued(self, session_id: str) -> bool:
        """Release a held queue: the next queued prompt goes out now if the session is idle."""
        session = self._get(session_id).session
        session.queue_held = False
        session.revision += 1
        self._changed(session_id)
        if session.turn is not None or session.recovering or not session.queue:
            return False
        await self._start_turn(session_id, session.queue.pop(0))
        return True

    async def stop(self, session_id: str) -> None:
        """Stop the current turn; always leaves a usable session.

        Abort first; if the agent does not go idle within the grace period, kill it (the
        next send reconnects). Pending permissions are answered "cancelled". Queued prompts
        are kept and held: they go out only when the user says so.
        """
        managed = self._get(session_id)
        session = managed.session
        turn = session.turn
        connecting = managed.connecting if managed.connecting is not None and not managed.connecting.done() else None
        if connecting is not None:  # no agent is left starting (and started) for a stopped turn
            connecting.cancel()
        if turn is None and not session.recovering:
            return
        self._emit_action(session_id, "abort", {"reason": "stopped by user"})
        backend = managed.backend if connecting is None else None
        pending = list(turn.pending_permissions) if turn is not None else []
        session.recovering = False
        self.recovery.finish(session_id)
        self.recovery.reset(session_id)
        # The turn ends before anything is awaited: whatever the agent does with the cancelled
        # prompts (the Copilot CLI goes on and may even finish) belongs to a stopped turn.
        self._end(session_id, Outcome.ABORTED, "stopped by user")
        if backend is None:
            return
        for request_id in pending:
            await self._safe(backend.answer_permission(request_id, CANCELLED))
        try:
            await asyncio.wait_for(backend.abort(), self.settings.stop_grace_seconds)
        except Exception as exc:  # noqa: BLE001 - a wedged agent is exactly the case to handle
            log.warning("abort of %s failed (%s); killing the agent", session_id, exc)
            self._emit_action(session_id, "kill", {"reason": f"abort did not return: {exc or 'timeout'}"})
            await self._safe(backend.kill())
            await self._drop_backend(session_id, f"agent killed after a failed abort ({exc or 'timeout'})")

    async def reconnect(self, session_id: str) -> ConnectResult:
        """Replace the agent connection, resuming the same agent-side session."""
        managed = self._get(session_id)
        if managed.session.turn is not None:
            self._end(session_id, Outcome.ABORTED, "reconnect requested during the turn")
        self._emit_action(session_id, "reconnect", {})
        await self._drop_backend(session_id, "")
        await self._ensure_connected(session_id)
        managed.session.outcome_dismissed = True  # a fresh agent: "stopped" or "stuck" is history now
        managed.session.revision += 1
        self._changed(session_id)
        return self.connect_result(session_id)  # type: ignore[return-value]

    async def answer_permission(self, session_id: str, request_id: str, option_id: str) -> None:
        """Answer a pending permission request with one of its options."""
        managed = self._get(session_id)
        turn = managed.session.turn
        prompt = turn.pending_permissions.get(request_id) if turn is not None else None
        kind = next((k for oid, _, k in prompt.options if oid == option_id), "") if prompt else ""
        managed.session.permission_answered(request_id, kind or option_id, self.clock.now())
        if managed.backend is not None:
            await managed.backend.answer_permission(request_id, option_id)
        self._schedule(session_id)
        self._changed(session_id)

    async def resend_interrupted(self, session_id: str) -> bool:
        """Resend the prompt of a turn lost to a restart (one key in the UI)."""
        session = self._get(session_id).session
        prompt = session.interrupted_prompt
        if not prompt or session.turn is not None:
            return False
        session.interrupted_prompt = ""
        await self._start_turn(session_id, prompt, resend=True)
        return True

    async def close(self, session_id: str) -> Session | None:
        """Stop and forget a session; returns it (history intact) so it can be reopened."""
        managed = self._sessions.get(session_id)
        if managed is None:
            return None
        if managed.session.turn is not None:
            await self.stop(session_id)
        managed.session.closed = True
        await self._drop_backend(session_id, "")
        await self._finish_background(managed)
        del self._sessions[session_id]
        self._changed(session_id)
        return managed.session

    def reopen(self, session: Session) -> None:
        """Bring a closed session back (undo): idle, its agent reconnects on the next send."""
        if session.id in self._sessions:
            raise ValueError(f"session {session.id} already exists")
        session.closed = False
        session.connected = False
        session.connecting = False
        session.revision += 1
        self.adopt(session)

    async def quit(self) -> None:
        """The dashboard is quitting: end turns in flight, then release every backend.

        A turn in flight cannot survive: its agent goes with the app. It ends now as
        interrupted, with its prompt offered for resending at the next start (not after a
        resume-quiescence wait).
        """
        for sid, managed in list(self._sessions.items()):
            turn = managed.session.turn
            if turn is not None:
                self._end(sid, Outcome.ABORTED, QUIT_REASON)
                if turn.prompt:
                    managed.session.interrupted_prompt = turn.prompt
                    managed.session.error("⚠ Your request was interrupted when the app quit. "
                                          "Press ctrl+y to send it again.", self.clock.wall())
        await self.shutdown()

    async def shutdown(self) -> None:
        """Release every backend; turns in flight stay on record (replay, tests, ``run``)."""
        for sid, managed in list(self._sessions.items()):
            await self._finish_background(managed)
            if managed.backend is not None:
                await self._safe(managed.backend.close())
                managed.backend = None

    # ---- turns ---------------------------------------------------------------------
    async def _start_turn(self, session_id: str, prompt: str, resend: bool = False) -> None:
        managed = self._get(session_id)
        session = managed.session
        session.interrupted_prompt = ""
        if not resend:
            session.add_item(ItemKind.USER, prompt, self.clock.wall())
        turn = session.begin_turn(prompt, self.clock.now())
        self._changed(session_id)
        settling = managed.settling
        if settling is not None and not settling.done():
            # The agent of the last (stuck) turn is still being aborted or killed; a send
            # now would reach an agent still busy with that turn, or one about to be killed.
            await asyncio.wait({settling}, timeout=self.settings.stop_grace_seconds + SETTLE_MARGIN)
            if session.turn is not turn:
                return
        try:
            backend = await self._ensure_connected(session_id)
        except Exception as exc:  # noqa: BLE001
            self._end(session_id, Outcome.FAILED, f"could not connect: {exc}")
            return
        if session.turn is not turn:
            return
        turn.reconnected_send = managed.reconnected
        managed.reconnected = False
        if session.interrupted_tool:  # #393: clear the agent's wedged tool before sending
            session.interrupted_tool = False
            turn.expect_abort_echo = True
            self._emit_action(session_id, "abort", {"reason": "interrupted tool on resume"})
            await self._safe(backend.abort())
        probes = self._probe(managed)
        turn.log_size_at_send = probes.log_size if probes else None
        self._schedule(session_id)
        self._emit_action(session_id, "resend" if resend else "send", {"prompt": prompt})
        try:
            await asyncio.wait_for(backend.send(prompt), SEND_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            if session.turn is turn:
                self._end(session_id, Outcome.FAILED, f"send failed: {exc or type(exc).__name__}")

    def _end(self, session_id: str, outcome: Outcome, reason: str, detail: str = "") -> None:
        """Route every turn end through Session.end_turn, then tell the world."""
        managed = self._get(session_id)
        session = managed.session
        self._cancel_timer(managed)
        wall = self.clock.wall()
        restored = session.turn is not None and session.turn.restored
        record = session.end_turn(outcome, reason, self.clock.now(), wall, detail)
        if record is None:
            return
        log.info("turn %s/%d ended %s: %s%s", session_id, record.seq, outcome.value, reason,
                 f" ({detail})" if detail else "")
        if restored and outcome in (Outcome.STUCK, Outcome.FAILED) and record.prompt:
            session.interrupted_prompt = record.prompt
            session.error("⚠ Your previous request was interrupted by an app restart "
                          f"({reason}). Press ctrl+y to send it again.", wall)
        elif outcome is Outcome.STUCK:
            if session.consecutive_stuck >= 3:
                session.error(f"Session failed to respond {session.consecutive_stuck} times consecutively "
                              f"({reason}). Consider starting a new session.", wall)
            else:
                session.error(f"⚠ Session appears stuck — {reason}. You can try sending your message again.",
                              wall)
        elif outcome is Outcome.FAILED:
            session.error(reason + self._stderr_lines(session_id), wall)
        elif outcome is Outcome.COMPLETED:
            self.recovery.reset(session_id)
            if reason != "session.idle":
                session.system(f"Turn completed by the watchdog: {reason}.", wall)
        self._changed(session_id)
        if outcome is Outcome.COMPLETED and session.queue and not session.queue_held:
            self._spawn(session_id, self._start_turn(session_id, session.queue.pop(0)))

    # ---- events --------------------------------------------------------------------
    def _sink_for(self, session_id: str, backend_ref: list[AgentBackend]) -> EventSink:
        def sink(event: AgentEvent) -> None:
            managed = self._sessions.get(session_id)
            # Events from a replaced backend are ignored (orphan guard, INV-14).
            if managed is None or not backend_ref or managed.backend is not backend_ref[0]:
                return
            if managed.is_settling(backend_ref[0]):
                # The tail of a turn the watchdog already ended (its abort echo, or the agent
                # dying under the kill): it must not touch the next turn, which may already
                # be waiting to be sent. A death only detaches it; the send reconnects.
                for tap in self._event_taps:
                    tap(session_id, event)
                if event.type == EventType.CONNECTION_LOST:
                    self._detach(session_id, backend_ref[0], one_line(event.text("reason"), 200))
                return
            self.apply(session_id, event)
        return sink

    def apply(self, session_id: str, event: AgentEvent) -> None:
        """Fold one agent event into a session and act on what it signals (the hot path)."""
        for tap in self._event_taps:
            tap(session_id, event)
        managed = self._sessions.get(session_id)
        if managed is None:
            return
        session = managed.session
        before = session.revision
        signal = session.apply_event(event, self.clock.now(), self.clock)
        if signal is _NONE:
            if event.type in _SHORTENING and session.turn is not None:
                self._schedule(session_id, only_if_earlier=True)
        else:
            self._on_signal(session_id, signal, event)
        if session.revision != before:
            self._changed(session_id)

    def _on_signal(self, session_id: str, signal: Signal, event: AgentEvent) -> None:
        managed = self._get(session_id)
        if signal is Signal.IDLE:
            self._end(session_id, Outcome.COMPLETED, "session.idle")
        elif signal is Signal.IDLE_ABORTED:
            self._end(session_id, Outcome.ABORTED, "the agent ended the turn as aborted")
        elif signal is Signal.ERROR:
            message = event.text("message") or event.text("errorType") or "session error"
            self._end(session_id, Outcome.FAILED, f"agent error: {one_line(message, 300)}")
        elif signal is Signal.CONNECTION_LOST:
            reason = managed.session.lost or "agent connection lost"
            self._end(session_id, Outcome.FAILED, f"agent disconnected: {reason}")
            self.diagnostics(session_id)
            backend, managed.backend = managed.backend, None
            if backend is not None:
                self._release(session_id, backend)
        elif signal is Signal.PERMISSION_REQUESTED:
            self._schedule(session_id)  # pauses the watchdog while the user decides
            self._apply_policy(session_id, event)
        elif signal is Signal.PERMISSION_TRIPPED:
            self._spawn(session_id, self._recover(session_id))
        elif signal is Signal.REARMED:
            self._schedule(session_id)

    def _apply_policy(self, session_id: str, event: AgentEvent) -> None:
        policy = self.settings.permission_policy
        if policy is PermissionPolicy.ASK:
            return
        wanted = ALLOW_ONCE if policy is PermissionPolicy.ALLOW else REJECT_ONCE
        options = [o for o in (event.get("options") or []) if isinstance(o, dict)]
        choice = next((o["optionId"] for o in options if o.get("kind") == wanted), None)
        choice = choice or next((o["optionId"] for o in options if o.get("optionId") == wanted), wanted)
        self._spawn(session_id, self.answer_permission(session_id, event.text("requestId"), choice))

    # ---- recovery ------------------------------------------------------------------
    async def _recover(self, session_id: str) -> None:
        """Permission binding lost (3 of 5 denials): reconnect with the configured handler."""
        from polypilot_tui.engine.permission_recovery import recover_permissions
        await recover_permissions(self, session_id)

    # ---- watchdog (polypilot_tui/manager_watchdog.py) -----------------------------------
    def _probe(self, managed: _Managed) -> Probes | None:
        return watchdog.probe(managed)

    def _schedule(self, session_id: str, only_if_earlier: bool = False) -> None:
        watchdog.schedule(self, session_id, only_if_earlier)

    def _cancel_timer(self, managed: _Managed) -> None:
        watchdog.cancel_timer(managed)

    # ---- connections ---------------------------------------------------------------
    def _default_factory(self, agent: str, sink: EventSink, workdir: Path) -> AgentBackend:
        from polypilot_tui.agents import create_backend
        config = self.catalog.get(agent)
        managed = self._sessions.get(workdir.name)  # the workdir is named after the session
        if managed is not None and managed.session.cwd:
            config = config.model_copy(update={"cwd": Path(managed.session.cwd)})
        return create_backend(config, sink, self.clock, self.settings, workdir)

    def workdir(self, session_id: str) -> Path:
        path = Path(self.settings.state_dir) / "sessions" / session_id
        return path

    async def _ensure_connected(self, session_id: str) -> AgentBackend:
        from polypilot_tui.engine.connector import ensure_connected
        return await ensure_connected(self, session_id)

    def _detach(self, session_id: str, backend: AgentBackend, lost_reason: str) -> None:
        """Forget a backend whose agent died (closed in the background)."""
        managed = self._sessions.get(session_id)
        if managed is None or managed.backend is not backend:
            return
        self.diagnostics(session_id)
        managed.backend = None
        managed.session.connected = False
        managed.session.lost = lost_reason or "agent connection lost"
        self._release(session_id, backend)
        self._changed(session_id)

    async def _drop_backend(self, session_id: str, lost_reason: str) -> None:
        managed = self._sessions.get(session_id)
        if managed is None:
            return
        self.diagnostics(session_id)
        backend, managed.backend = managed.backend, None
        managed.session.connected = False
        if lost_reason:
            managed.session.lost = lost_reason
        if backend is not None:
            await self._safe(backend.close())
        self._changed(session_id)

    # ---- plumbing ------------------------------------------------------------------
    def _get(self, session_id: str) -> _Managed:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise KeyError(f"no session {session_id!r}") from None

    def _changed(self, session_id: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(session_id)
            except Exception:  # noqa: BLE001 - a broken listener must not break the engine
                log.exception("session listener failed")

    def _emit_action(self, session_id: str, action: str, details: dict[str, Any]) -> None:
        for listener in list(self._action_listeners):
            listener(session_id, action, details)

    def _release(self, session_id: str, backend: AgentBackend) -> None:
        """Close a backend that is no longer the session's, in the background."""
        task = asyncio.get_running_loop().create_task(self._safe(backend.close()))
        managed = self._sessions.get(session_id)
        if managed is not None:
            managed.releases.add(task)
            task.add_done_callback(managed.releases.discard)

    async def _finish_background(self, managed: _Managed) -> None:
        """Cancel the session's background work and wait for its agents to be released."""
        self._cancel_timer(managed)
        current = asyncio.current_task()
        for task in list(managed.tasks):
            if task is not current:
                task.cancel()
        pending = [t for t in (*managed.tasks, *managed.releases) if t is not current]
        if pending:
            await asyncio.wait(pending, timeout=RELEASE_TIMEOUT)

    def _spawn(self, session_id: str, coro: Awaitable[Any]) -> asyncio.Task[None]:
        managed = self._sessions.get(session_id)

        async def runner() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                log.exception("background task of %s failed", session_id)

        task = asyncio.get_running_loop().create_task(runner())
        if managed is not None:
            managed.tasks.add(task)
            task.add_done_callback(managed.tasks.discard)
        return task

    @staticmethod
    async def _safe(awaitable: Awaitable[Any] | None) -> None:
        if awaitable is None:
            return
        try:
            await awaitable
        except Exception as exc:  # noqa: BLE001
            log.warning("ignored backend error: %s", exc)

    async def idle(self) -> None:
        """Wait for every background task (tests, `run`, replay)."""
        while True:
            pending = [t for m in self._sessions.values() for t in m.tasks if not t.done()]
            if not pending:
                return
            await asyncio.gather(*pending, return_exceptions=True)


__all__ = ["SessionManager", "BackendError"]
