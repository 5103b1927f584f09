"""What the engine's parts share: the sessions, the clock, the stream, and the one end-turn path.

The :class:`~polypilot_tui.engine.manager.SessionManager` is the engine's one public API; its
collaborators (connector, watchdog timer, permission recovery) each get this context and
never reach into each other. Everything here runs on the engine's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import field
from typing import Any

from polypilot_tui.agents.base import AgentBackend, BackendError, ConnectResult, Diagnostics
from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.chat import ChatItem, TurnRecord
from polypilot_tui.domain.clock import Clock, TimerHandle
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.failures import failure_text
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.records import ActionTaken, EngineAction, ItemAdded, ItemReplaced, TurnEnded, ViewChanged
from polypilot_tui.domain.recovery import RecoveryGate
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.domain.watchdog import WatchdogConfig
from polypilot_tui.engine.stream import RecordStream
from polypilot_tui.infra.logs import log_failure

log = logging.getLogger(__name__)

AGENT_FAILURES: tuple[type[Exception], ...] = (BackendError, TimeoutError, OSError)
"""How a call to an agent's backend fails when the agent, its process or its connection
fails (not a bug of ours): a backend turns its SDK's errors into BackendError; a timeout is
ours (``within``, ``wait_for``); OSError is a process or pipe that is gone."""

RELEASE_TIMEOUT = 15.0
_OFFERS_RESEND = frozenset({EndCause.DISCONNECTED, EndCause.RECONNECT})
"""Turns lost to a dead agent or a reconnect: their prompt is offered for resending (ctrl+y)."""
"""How long closing a session waits for its agents to be released (each close is bounded too)."""


@dataclass
class ManagedSession:
    """A session plus its live parts; nothing here outlives the engine."""

    session: Session
    backend: AgentBackend | None = None
    timer: TimerHandle | None = None
    armed_at: float | None = None
    """When the watchdog looks at the turn next (None while idle or paused)."""
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
        """``backend`` is being aborted after a stuck turn (its events are that turn's tail)."""
        return self.settling is not None and not self.settling.done() and self.settling_backend is backend

    def disarm(self) -> None:
        """Cancel the watchdog's timer."""
        if self.timer is not None:
            self.timer.cancel()
        self.timer = None
        self.armed_at = None


class EngineContext:
    """The engine's shared state and primitives (see the module docstring)."""

    def __init__(self, settings: Settings, catalog: AgentCatalog, clock: Clock) -> None:
        self.settings = settings
        self.catalog = catalog
        self.clock = clock
        self.cfg: WatchdogConfig = settings.watchdog.to_config()
        self.sessions: dict[str, ManagedSession] = {}
        self.stream = RecordStream()
        self._streamed: dict[str, None] = {}
        """Sessions whose stream grew in this loop iteration (see :meth:`streamed`), in order."""
        self._streamed_soon = False
        self.recovery = RecoveryGate(
            settings.recovery_max_attempts, settings.recovery_breaker_limit, settings.recovery_breaker_window
        )

    # ---- sessions ------------------------------------------------------------------
    def get(self, session_id: str) -> ManagedSession:
        """The session, or KeyError naming it."""
        try:
            return self.sessions[session_id]
        except KeyError:
            raise KeyError(f"no session {session_id!r}") from None

    def register(self, session: Session) -> ManagedSession:
        """Take ``session`` in: every history row it adds or replaces goes on the stream."""
        managed = self.sessions[session.id] = ManagedSession(session)
        if (config := self.catalog.agents.get(session.agent)) is not None:
            session.sign_in = config.sign_in
        sid, publish = session.id, self.stream.publish

        def on_item(index: int, item: ChatItem, replaced: bool) -> None:
            publish(ItemReplaced(sid, index, item) if replaced else ItemAdded(sid, index, item))

        session.on_item = on_item
        return managed

    # ---- the stream ----------------------------------------------------------------
    def changed(self, session_id: str) -> None:
        """What the session shows changed (its view is at the session's revision now)."""
        self._streamed.pop(session_id, None)  # this view change covers its stream's too
        managed = self.sessions.get(session_id)
        revision = managed.session.revision if managed is not None else -1
        self.stream.publish(ViewChanged(session_id, revision))

    def streamed(self, session_id: str) -> None:
        """The session's streaming reply grew: its view change goes out at the end of this loop
        iteration, once however many tokens came in it (each would be a redraw, and a frame
        to every attached dashboard), or sooner with the session's next other change. The
        session itself is up to date at once: nothing but the notice waits."""
        if session_id in self._streamed:
            return
        if not self._streamed_soon:
            try:
                asyncio.get_running_loop().call_soon(self._publish_streamed)
            except RuntimeError:  # no loop: at once
                self.changed(session_id)
                return
            self._streamed_soon = True
        self._streamed[session_id] = None

    def _publish_streamed(self) -> None:
        self._streamed_soon = False
        pending, self._streamed = self._streamed, {}
        for session_id in pending:
            if session_id in self.sessions:  # not closed meanwhile
                self.changed(session_id)

    def action(
        self,
        session_id: str,
        action: EngineAction,
        reason: str = "",
        *,
        detail: str = "",
        prompt: str = "",
        attempt: int = 0,
        by_user: bool = False,
    ) -> None:
        """Say what the engine did to the agent (the recorder writes it, replay plays it)."""
        self.stream.publish(ActionTaken(session_id, action, reason, detail, prompt, attempt, by_user))

    # ---- the one end-turn path -----------------------------------------------------
    def end_turn(
        self, session_id: str, outcome: Outcome, cause: EndCause, reason: str, detail: str = ""
    ) -> TurnRecord | None:
        """End the session's turn (Session.end_turn flushes first), say why in the chat, tell the world."""
        managed = self.get(session_id)
        session = managed.session
        managed.disarm()
        wall = self.clock.wall()
        restored = session.turn is not None and session.turn.restored
        record = session.end_turn(outcome, cause, reason, self.clock.now(), wall, detail)
        if record is None:
            return None
        log.info(
            "turn %s/%d ended %s (%s): %s%s",
            session_id,
            record.seq,
            outcome.value,
            cause.value,
            reason,
            f" ({detail})" if detail else "",
        )
        if restored and outcome in (Outcome.STUCK, Outcome.FAILED) and record.prompt:
            session.interrupted_prompt = record.prompt
            session.error(
                f"⚠ Your request “{one_line(record.prompt, 60)}” was interrupted by a restart of polypilot; "
                "resend it with ctrl+y.",
                wall,
            )
        elif outcome is Outcome.STUCK:
            if session.consecutive_stuck >= 3:
                session.error(
                    f"Session failed to respond {session.consecutive_stuck} times consecutively "
                    f"({reason}). Consider starting a new session.",
                    wall,
                )
            else:
                session.error(f"⚠ Session appears stuck — {reason}. You can try sending your message again.", wall)
        elif outcome is Outcome.FAILED:
            session.error(failure_text(reason, session.sign_in, detail) + self.stderr_lines(session_id), wall)
        if cause in _OFFERS_RESEND and record.prompt:  # lost, not refused: one key sends it again
            session.interrupted_prompt = record.prompt
        elif outcome is Outcome.COMPLETED:
            self.recovery.reset(session_id)
            if cause is EndCause.WATCHDOG:
                session.system(f"Turn completed by the watchdog: {reason}.", wall)
        self.stream.publish(TurnEnded(session_id, record))
        self.changed(session_id)
        return record

    # ---- diagnostics ---------------------------------------------------------------
    def diagnostics(self, session_id: str) -> Diagnostics:
        """The live backend's diagnostics, else those its predecessor left behind."""
        managed = self.get(session_id)
        if managed.backend is not None:
            try:
                managed.diagnostics = managed.backend.diagnostics()
            except Exception:  # read while a failure is told: a bug in it is logged, never breaks the telling
                log.exception("diagnostics of %s failed", session_id)
        return managed.diagnostics or Diagnostics()

    def stderr_lines(self, session_id: str, count: int = 4) -> str:
        """The agent's last stderr lines, as lines to add under a failure ("" when none)."""
        tail = self.diagnostics(session_id).stderr_tail[-count:]
        if not tail:
            return ""
        lines = "\n".join(f"  {one_line(line, 240)}" for line in tail)
        return f"\nThe agent's last lines on stderr (F2 shows the log paths):\n{lines}"

    # ---- background work -----------------------------------------------------------
    def spawn(self, session_id: str, coro: Awaitable[Any]) -> asyncio.Task[None]:
        """Run ``coro`` for the session in the background; a failure is logged, never lost."""
        managed = self.sessions.get(session_id)

        async def runner() -> None:
            try:
                await coro
            except Exception as exc:  # noqa: BLE001 - a task's top: logged, the engine goes on
                log_failure(log, f"background task of {session_id}", exc, AGENT_FAILURES)

        task = asyncio.get_running_loop().create_task(runner())
        if managed is not None:
            managed.tasks.add(task)
            task.add_done_callback(managed.tasks.discard)
        return task

    def release(self, session_id: str, backend: AgentBackend) -> None:
        """Close a backend that is no longer the session's, in the background."""
        task = asyncio.get_running_loop().create_task(self.safe(backend.close()))
        managed = self.sessions.get(session_id)
        if managed is not None:
            managed.releases.add(task)
            task.add_done_callback(managed.releases.discard)

    async def finish_background(self, managed: ManagedSession) -> None:
        """Cancel the session's background work and wait for its agents to be released."""
        managed.disarm()
        current = asyncio.current_task()
        for task in list(managed.tasks):
            if task is not current:
                task.cancel()
        pending = [t for t in (*managed.tasks, *managed.releases) if t is not current]
        if pending:
            await asyncio.wait(pending, timeout=RELEASE_TIMEOUT)

    @staticmethod
    async def safe(awaitable: Awaitable[Any] | None) -> None:
        """Await a backend call whose failure changes nothing (a close, a kill, a cancel's
        answer): logged, never raised; an agent's failure as a warning, a bug in full."""
        if awaitable is None:
            return
        try:
            await awaitable
        except Exception as exc:  # noqa: BLE001 - a clean-up: it goes on whatever failed
            log_failure(log, "backend call (ignored)", exc, AGENT_FAILURES)
