"""Permission-denial recovery: reconnect with the configured handler, resend only if safe.

PolyPilot #285/#298/#305, minus the blanket auto-approve: recovery never widens
permissions. At most 2 attempts per session, one at a time, behind a global breaker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from polypilot_tui.agents.base import BackendError
from polypilot_tui.domain.records import EngineAction
from polypilot_tui.domain.recovery import may_resend
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.engine.connector import Connector
from polypilot_tui.engine.context import EngineContext
from polypilot_tui.infra.logs import log_failure

log = logging.getLogger(__name__)

ResendTurn = Callable[[str, str], Awaitable[None]]
"""(session id, prompt): start the turn again with the same prompt (no new history row)."""


class PermissionRecovery:
    """Runs one recovery per tripped session, if the gate allows it."""

    def __init__(self, ctx: EngineContext, connector: Connector, resend: ResendTurn) -> None:
        self._ctx = ctx
        self._connector = connector
        self._resend = resend

    async def recover(self, session_id: str) -> None:
        """Reconnect ``session_id``'s agent after repeated permission denials (3 of 5)."""
        ctx = self._ctx
        session = ctx.get(session_id).session
        gate = ctx.recovery
        clock = ctx.clock
        turn = session.turn
        if turn is None:
            return
        refusal = gate.refusal(session_id, clock.now())
        if refusal is not None:
            if not gate.in_progress(session_id):
                session.error(
                    "⚠ Multiple recovery attempts failed: tools keep failing with permission errors "
                    f"({refusal}). Press Reconnect to try again.",
                    clock.wall(),
                )
                ctx.changed(session_id)
            return
        attempt = gate.begin(session_id, clock.now())
        prompt = turn.prompt
        resend = bool(prompt) and may_resend(turn.successful_tools)
        session.recovering = True
        session.system(
            f"⚠ Permission errors detected. Attempting to reconnect session "
            f"(attempt {attempt} of {gate.max_attempts})...",
            clock.wall(),
        )
        ctx.changed(session_id)
        ctx.action(session_id, EngineAction.RECONNECT, "permission errors", attempt=attempt)
        try:
            await self._connector.drop_backend(session_id, "")
            await self._connector.ensure_connected(session_id)
        except Exception as exc:  # noqa: BLE001 - "recovering" must end, whatever stood in the way
            log_failure(log, f"reconnect of {session_id} for a recovery", exc, (BackendError,))
            if session.recovering:
                session.recovering = False
                ctx.end_turn(
                    session_id,
                    Outcome.FAILED,
                    EndCause.RECOVERY_FAILED,
                    f"auto-recovery failed: {exc}. Press Reconnect to retry.",
                )
            gate.finish(session_id)
            return
        if not session.recovering:  # the user pressed Stop meanwhile
            gate.finish(session_id)
            return
        session.recovering = False
        ctx.end_turn(session_id, Outcome.RECOVERED, EndCause.RECOVERED, "reconnected after permission errors")
        gate.finish(session_id)
        wall = clock.wall()
        if resend:
            session.system(f'⟳ Resending: "{one_line(prompt, 60)}"', wall)
            ctx.changed(session_id)
            await self._resend(session_id, prompt)
        elif prompt:
            session.system(
                "✅ Session reconnected. Auto-resend skipped — some tools had already completed, "
                "and running them twice could repeat their side effects.",
                wall,
            )
            ctx.changed(session_id)
        else:
            session.system("✅ Session reconnected.", wall)
            ctx.changed(session_id)
