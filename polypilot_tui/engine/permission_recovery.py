"""Permission-denial recovery: reconnect with the configured handler, resend only if safe.

PolyPilot #285/#298/#305, minus the blanket auto-approve: recovery never widens
permissions. At most 2 attempts per session, one at a time, behind a global breaker.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from polypilot_tui.domain.recovery import may_resend
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import Outcome

if TYPE_CHECKING:
    from polypilot_tui.engine.manager import SessionManager


async def recover_permissions(manager: SessionManager, session_id: str) -> None:
    """Run one recovery for ``session_id`` if the gate allows it."""
    managed = manager._get(session_id)
    session = managed.session
    gate = manager.recovery
    clock = manager.clock
    turn = session.turn
    if turn is None:
        return
    refusal = gate.refusal(session_id, clock.now())
    if refusal is not None:
        if not gate.in_progress(session_id):
            session.error("⚠ Multiple recovery attempts failed: tools keep failing with permission errors "
                          f"({refusal}). Press Reconnect to try again.", clock.wall())
            manager._changed(session_id)
        return
    attempt = gate.begin(session_id, clock.now())
    prompt = turn.prompt
    resend = bool(prompt) and may_resend(turn.successful_tools)
    session.recovering = True
    session.system(f"⚠ Permission errors detected. Attempting to reconnect session "
                   f"(attempt {attempt} of {gate.max_attempts})...", clock.wall())
    manager._changed(session_id)
    manager._emit_action(session_id, "reconnect", {"reason": "permission errors", "attempt": attempt})
    try:
        await manager._drop_backend(session_id, "")
        await manager._ensure_connected(session_id)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001
        if session.recovering:
            session.recovering = False
            manager._end(session_id, Outcome.FAILED, f"auto-recovery failed: {exc}. Press Reconnect to retry.")
        gate.finish(session_id)
        return
    if not session.recovering:  # the user pressed Stop meanwhile
        gate.finish(session_id)
        return
    session.recovering = False
    manager._end(session_id, Outcome.RECOVERED, "reconnected after permission errors")
    gate.finish(session_id)
    wall = clock.wall()
    if resend:
        session.system(f'⟳ Resending: "{one_line(prompt, 60)}"', wall)
        manager._changed(session_id)
        await manager._start_turn(session_id, prompt, resend=True)
    elif prompt:
        session.system("✅ Session reconnected. Auto-resend skipped — some tools had already completed, "
                       "and running them twice could repeat their side effects.", wall)
        manager._changed(session_id)
    else:
        session.system("✅ Session reconnected.", wall)
        manager._changed(session_id)
