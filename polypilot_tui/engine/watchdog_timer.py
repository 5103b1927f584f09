"""The manager's watchdog: one timer per turn at its next deadline, and acting on decisions.

The policy itself is pure (:mod:`polypilot_tui.domain.watchdog`); this module only arms the
timer, asks the backend for probes when it fires, and carries out the decision through the
manager's single end-turn path.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from polypilot_tui.agents.base import AgentBackend
from polypilot_tui.domain.turn import Outcome, Turn
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.watchdog import Action, decide, next_deadline

if TYPE_CHECKING:
    from polypilot_tui.engine.manager import SessionManager, _Managed

log = logging.getLogger(__name__)


def probe(managed: _Managed) -> Probes | None:
    """Ask the backend for liveness facts; a failing probe is no probe."""
    if managed.backend is None:
        return None
    try:
        managed.probes = managed.backend.probe()
    except Exception:  # noqa: BLE001 - a probe must never break the watchdog
        log.exception("probe failed")
        managed.probes = None
    return managed.probes


def schedule(manager: SessionManager, session_id: str, only_if_earlier: bool = False) -> None:
    """Arm one timer at the turn's next deadline (or none while idle or paused)."""
    managed = manager._get(session_id)
    turn = managed.session.turn
    if turn is None:
        cancel_timer(managed)
        return
    deadline = next_deadline(turn, manager.cfg, managed.probes)
    if deadline is None:
        cancel_timer(managed)
        return
    if only_if_earlier and managed.armed_at is not None and deadline >= managed.armed_at:
        return
    # Never re-arm in the past: a CONTINUE at a deadline must move time forward.
    deadline = max(deadline, manager.clock.now() + 0.001)
    cancel_timer(managed)
    managed.armed_at = deadline
    managed.timer = manager.clock.call_at(deadline, lambda: _on_deadline(manager, session_id, turn))


def cancel_timer(managed: _Managed) -> None:
    """Disarm the turn's timer."""
    if managed.timer is not None:
        managed.timer.cancel()
    managed.timer = None
    managed.armed_at = None


def _on_deadline(manager: SessionManager, session_id: str, turn: Turn) -> None:
    managed = manager._sessions.get(session_id)
    if managed is None or managed.session.turn is not turn:
        return  # the turn this timer was armed for is gone
    managed.timer = None
    managed.armed_at = None
    try:
        _act(manager, session_id, turn)
    except Exception as exc:  # noqa: BLE001 - #372: a crash must not leave "Sending…" forever
        log.exception("watchdog failed for %s", session_id)
        manager._end(session_id, Outcome.FAILED, f"internal error in session monitoring: {exc}")


def _act(manager: SessionManager, session_id: str, turn: Turn) -> None:
    managed = manager._get(session_id)
    session = managed.session
    now = manager.clock.now()
    probes = probe(managed)
    decision = decide(turn, now, manager.cfg, probes)
    action = decision.action
    if action is not Action.CONTINUE:
        log.info("watchdog %s: %s (%s; %s)", session_id, action.value, decision.reason, decision.detail)
        turn.last_decision = decision.reason
    if action is Action.RESET:
        turn.note_reset(now, decision.rule, probes)
    elif action is Action.ABORT_ONCE:
        turn.dead_send_abort_tried = True
        turn.note_reset(now, decision.rule, probes)
        session.system(f"Watchdog: {decision.reason}.", manager.clock.wall())
        manager._emit_action(session_id, "abort", {"reason": decision.reason, "detail": decision.detail})
        if managed.backend is not None:
            manager._spawn(session_id, manager._safe(managed.backend.abort()))
    elif action is Action.COMPLETE:
        manager._end(session_id, Outcome.COMPLETED, decision.reason, decision.detail)
        return
    elif action is Action.KILL:
        manager._emit_action(session_id, "abort", {"reason": decision.reason, "detail": decision.detail})
        backend = managed.backend
        manager._end(session_id, Outcome.STUCK, decision.reason, decision.detail)
        if backend is not None:
            managed.settling_backend = backend
            managed.settling = manager._spawn(session_id, _abort_stuck(manager, session_id, backend))
        return
    if action is not Action.CONTINUE:
        session.revision += 1
        manager._changed(session_id)
    schedule(manager, session_id)


async def _abort_stuck(manager: SessionManager, session_id: str, backend: AgentBackend) -> None:
    """After a stuck turn: abort the agent; if even that hangs, drop it (reconnect on next send)."""
    try:
        await asyncio.wait_for(backend.abort(), manager.settings.stop_grace_seconds)
    except Exception as exc:  # noqa: BLE001
        manager._emit_action(session_id, "kill", {"reason": f"abort after stuck turn failed: {exc or 'timeout'}"})
        await manager._safe(backend.kill())
        managed = manager._sessions.get(session_id)
        if managed is not None and managed.backend is backend:
            await manager._drop_backend(session_id, "")
        else:  # already detached (its death was reported), or replaced by a reconnect
            await manager._safe(backend.close())
