"""Driving the Copilot CLI's turns: send a prompt, abort one, answer its permission requests.

Every SDK call is bounded by a timeout, and the CLI's death during one becomes
``connection.lost`` plus a :class:`BackendError`. The CLI answers an abort at once but ends
the turn (``session.idle {aborted}``) a little later; an abort, and a send that finds the
CLI still in a turn, wait for that end.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.connection import RPC_TIMEOUT, CopilotConnection
from polypilot_tui.agents.copilot.events import RESULT_KINDS, decision_for
from polypilot_tui.agents.copilot.intake import EventIntake
from polypilot_tui.agents.copilot.runtime import is_processing
from polypilot_tui.config import Settings
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.exit_status import signals_named

log = logging.getLogger(__name__)

#: An abort waits this share of the Stop grace for the CLI's ``session.idle``; the rest of
#: the grace is the manager's, to kill the agent when even that does not come.
ABORT_SETTLE_SHARE = 0.8
LEFTOVER_CHECK_TIMEOUT = 5.0


class TurnControl:
    """Send, abort and permission answers for the session of one :class:`CopilotConnection`."""

    def __init__(self, connection: CopilotConnection, intake: EventIntake, busy: BusyFlag, settings: Settings) -> None:
        self._connection = connection
        self._intake = intake
        self._busy = busy
        self._settings = settings
        self._aborting = 0

    def _require_session(self) -> Any:
        session = self._connection.session
        if session is None:
            raise BackendError("not connected to a Copilot session")
        if self._intake.lost:
            raise BackendError("the Copilot CLI is gone; reconnect the session")
        return session

    async def send(self, prompt: str) -> None:
        """Hand a prompt to the CLI; events follow through the sink.

        The manager sends only when it holds no turn, but the CLI may still be in one: a
        Stop whose abort is still settling, or a turn the watchdog completed while the CLI
        was in fact still waiting on the model. That leftover turn is ended first (abort),
        with its events muted, so its ``session.idle {aborted}`` cannot end this turn and
        the CLI does not run this prompt behind a hung model call.
        """
        session = self._require_session()
        if self._aborting or self._busy.busy:
            await self._end_leftover_turn(session)
        self._busy.set(True)
        await self._call(session.send(prompt), "send")

    async def _end_leftover_turn(self, session: Any) -> None:
        with self._intake.muted():
            seconds = self._abort_settle_seconds()
            if not self._aborting:
                if await is_processing(session, timeout=LEFTOVER_CHECK_TIMEOUT) is False:
                    self._busy.set(False)  # the idle of the last turn never came; nothing runs
                    return
                log.info(
                    "copilot: %s is still in an earlier turn; aborting it before the next prompt",
                    self._connection.session_id,
                )
                await self._call(session.abort(), "abort")
                self._intake.close_open_tools()
            if not await self._busy.wait_idle(seconds):
                log.warning(
                    "copilot: the earlier turn of %s did not end within %.1f s; sending anyway",
                    self._connection.session_id,
                    seconds,
                )

    async def abort(self) -> None:
        """``session.abort``, then wait until the CLI has ended the turn (``session.idle``).

        The CLI answers the abort RPC at once and sends ``session.idle {aborted}`` a little
        later. Returning before that idle would let the next prompt's turn be ended by it
        (found by tests/e2e/test_copilot_manager.py: Stop, then send at once). Raises
        BackendError when the turn does not end within most of the Stop grace, so the
        manager kills the agent, as it does when the abort itself hangs.
        """
        session = self._require_session()
        self._aborting += 1
        try:
            await self._call(session.abort(), "abort")
            self._intake.close_open_tools()
            seconds = self._abort_settle_seconds()
            if not await self._busy.wait_idle(seconds) and not self._intake.lost:
                if await is_processing(session, timeout=1.0) is not False:
                    raise BackendError(f"the Copilot CLI did not end the turn within {seconds:.1f} s of the abort")
                self._busy.set(False)  # it is idle; the echo just never came
        finally:
            self._aborting -= 1

    @property
    def in_turn(self) -> bool:
        """The CLI is in a turn (a prompt went out and its ``session.idle`` has not come)."""
        return self._busy.busy

    async def abort_quietly(self) -> None:
        """Abort the CLI's turn with its events muted: the engine ends the turn its own way."""
        with self._intake.muted():
            await self.abort()

    def _abort_settle_seconds(self) -> float:
        return max(0.5, self._settings.stop_grace_seconds * ABORT_SETTLE_SHARE)

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        """Answer a pending request (also one that survived a restart) by option id."""
        from copilot.generated.rpc import PermissionDecisionRequest

        session = self._require_session()
        info = self._intake.prompt(request_id)
        try:
            decision = decision_for(option_id, info)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        request = PermissionDecisionRequest(request_id=request_id, result=decision)
        result = await self._call(session.rpc.permissions.handle_pending_permission_request(request), "permission")
        # Ours goes out first; the intake then drops the CLI's own permission.completed.
        self._intake.handle(
            AgentEvent(
                EventType.PERMISSION_COMPLETED,
                {
                    "requestId": request_id,
                    "toolCallId": info.tool_call_id if info else "",
                    "result": {"kind": RESULT_KINDS.get(option_id, option_id)},
                },
            )
        )
        if getattr(result, "success", True) is False:
            raise BackendError("the agent was no longer waiting for that permission request")

    async def _call(self, awaitable: Any, what: str) -> Any:
        """Await an SDK call with a timeout; CLI death becomes connection.lost + BackendError."""
        from copilot._jsonrpc import JsonRpcError, ProcessExitedError

        try:
            return await asyncio.wait_for(awaitable, RPC_TIMEOUT)
        except ProcessExitedError as exc:
            self._intake.mark_lost(f"Copilot CLI exited: {signals_named(str(exc))}")
            raise BackendError(f"{what} failed: the Copilot CLI exited") from None
        except (TimeoutError, JsonRpcError, OSError, RuntimeError) as exc:
            log.warning("copilot: %s failed: %r", what, exc)
            raise BackendError(f"{what} failed: {exc or type(exc).__name__}") from None
