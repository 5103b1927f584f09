"""The engine's watchdog: one timer per turn at its next deadline, and acting on decisions.

The policy itself is pure (:mod:`polypilot_tui.domain.watchdog`); this module only arms the
timer, asks the backend for probes when it fires, and carries out the decision through the
engine's single end-turn path.
"""

from __future__ import annotations

import logging

from polypilot_tui.agents.base import AgentBackend
from polypilot_tui.domain.clock import within
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.records import EngineAction
from polypilot_tui.domain.turn import EndCause, Outcome, Turn
from polypilot_tui.domain.watchdog import Action, decide, next_deadline
from polypilot_tui.engine.connector import Connector
from polypilot_tui.engine.context import AGENT_FAILURES, EngineContext, ManagedSession
from polypilot_tui.infra.logs import log_failure

log = logging.getLogger(__name__)


class WatchdogTimer:
    """Arms, moves and fires the one watchdog timer of each running turn."""

    def __init__(self, ctx: EngineContext, connector: Connector) -> None:
        self._ctx = ctx
        self._connector = connector

    def probe(self, managed: ManagedSession) -> Probes | None:
        """Ask the backend for liveness facts; a failing probe is no probe."""
        if managed.backend is None:
            return None
        try:
            managed.probes = managed.backend.probe()
        except Exception:  # facts are optional: a bug in a probe is logged, never breaks the watchdog
            log.exception("probe failed")
            managed.probes = None
        return managed.probes

    def schedule(self, session_id: str, only_if_earlier: bool = False) -> None:
        """Arm one timer at the turn's next deadline (or none while idle or paused)."""
        ctx = self._ctx
        managed = ctx.get(session_id)
        turn = managed.session.turn
        if turn is None:
            managed.disarm()
            return
        deadline = next_deadline(turn, ctx.cfg, managed.probes)
        if deadline is None:
            managed.disarm()
            return
        if only_if_earlier and managed.armed_at is not None and deadline >= managed.armed_at:
            return
        # Never re-arm in the past: a CONTINUE at a deadline must move time forward.
        deadline = max(deadline, ctx.clock.now() + 0.001)
        managed.disarm()
        managed.armed_at = deadline
        managed.timer = ctx.clock.call_at(deadline, lambda: self._on_deadline(session_id, turn))

    def _on_deadline(self, session_id: str, turn: Turn) -> None:
        managed = self._ctx.sessions.get(session_id)
        if managed is None or managed.session.turn is not turn:
            return  # the turn this timer was armed for is gone
        managed.timer = None
        managed.armed_at = None
        try:
            self._act(managed, turn)
        except Exception as exc:  # a timer's top (#372): a crash must not leave "Sending…" forever
            log.exception("watchdog failed for %s", session_id)
            self._ctx.end_turn(
                session_id, Outcome.FAILED, EndCause.INTERNAL, f"internal error in session monitoring: {exc}"
            )

    def _act(self, managed: ManagedSession, turn: Turn) -> None:
        ctx = self._ctx
        session = managed.session
        session_id = session.id
        now = ctx.clock.now()
        probes = self.probe(managed)
        decision = decide(turn, now, ctx.cfg, probes)
        action = decision.action
        if action is not Action.CONTINUE:
            log.info("watchdog %s: %s (%s; %s)", session_id, action.value, decision.reason, decision.detail)
            turn.last_decision = decision.reason
        if action is Action.RESET:
            turn.note_reset(now, decision.rule, probes)
        elif action is Action.ABORT_ONCE:
            turn.dead_send_abort_tried = True
            turn.note_reset(now, decision.rule, probes)
            session.system(f"Watchdog: {decision.reason}.", ctx.clock.wall())
            ctx.action(session_id, EngineAction.ABORT, decision.reason, detail=decision.detail)
            if managed.backend is not None:
                ctx.spawn(session_id, ctx.safe(managed.backend.abort()))
        elif action is Action.COMPLETE:
            ctx.end_turn(session_id, Outcome.COMPLETED, EndCause.WATCHDOG, decision.reason, decision.detail)
            return
        elif action is Action.KILL:
            ctx.action(session_id, EngineAction.ABORT, decision.reason, detail=decision.detail)
            backend = managed.backend
            ctx.end_turn(session_id, Outcome.STUCK, EndCause.WATCHDOG, decision.reason, decision.detail)
            if backend is not None:
                managed.settling_backend = backend
                managed.settling = ctx.spawn(session_id, self._abort_stuck(managed, backend))
            return
        if action is not Action.CONTINUE:
            session.revision += 1
            ctx.changed(session_id)
        self.schedule(session_id)

    async def _abort_stuck(self, managed: ManagedSession, backend: AgentBackend) -> None:
        """After a stuck turn: abort the agent; if even that hangs, drop it (reconnect on next send)."""
        ctx = self._ctx
        session_id = managed.session.id
        try:
            await within(ctx.clock, backend.abort(), ctx.settings.stop_grace_seconds)
        except Exception as exc:  # noqa: BLE001 - a wedged agent is exactly the case to handle: killed, whatever it was
            log_failure(log, f"abort of {session_id} after a stuck turn (the agent is killed)", exc, AGENT_FAILURES)
            ctx.action(session_id, EngineAction.KILL, f"abort after stuck turn failed: {exc or 'timeout'}")
            await ctx.safe(backend.kill())
            if ctx.sessions.get(session_id) is managed and managed.backend is backend:
                await self._connector.drop_backend(session_id, "")
            else:  # already detached (its death was reported), or replaced by a reconnect
                await ctx.safe(backend.close())
