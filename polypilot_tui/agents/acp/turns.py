"""The turns of an ACP session: a prompt out, its end in, and cancelling one.

A turn is one ``session/prompt`` request, run as a task; its response ends the turn.
``session/cancel`` goes out once per turn, and Stop answers open permission prompts itself
(the SDK ignores ``$/cancel_request``). A prompt the engine has already given up on is
cancelled, muted, before the next one goes out, and an agent that ignores that cancel is
restarted on the same session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp import RequestError, text_block
from pydantic import ValidationError

from polypilot_tui.agents.acp.client import PermissionDesk
from polypilot_tui.agents.acp.errors import request_error_text
from polypilot_tui.agents.acp.intake import StreamIntake
from polypilot_tui.agents.acp.link import AgentLink
from polypilot_tui.agents.base import CANCELLED, BackendError, ConnectResult
from polypilot_tui.config import Settings
from polypilot_tui.domain.clock import Clock, within
from polypilot_tui.domain.events import AgentEvent, EventType

logger = logging.getLogger(__name__)

_NOTED_STOPS = {
    "max_tokens": "the model hit its output token limit",
    "refusal": "the agent refused to continue",
    "max_turn_requests": "the agent hit its limit of model requests for one turn",
}


class TurnControl:
    """Sends prompts, cancels them, and ends each turn with the events the engine expects."""

    def __init__(
        self,
        link: AgentLink,
        intake: StreamIntake,
        desk: PermissionDesk,
        clock: Clock,
        settings: Settings,
        *,
        reconnect: Callable[[str | None], Awaitable[ConnectResult]],
        kill: Callable[[], Awaitable[None]],
    ) -> None:
        self._link = link
        self._intake = intake
        self._desk = desk
        self._clock = clock
        self._settings = settings
        self._reconnect = reconnect
        """Restarts the agent on a session (for an agent that ignores the cancel of a closed turn)."""
        self._kill = kill
        self._prompt_task: asyncio.Task[None] | None = None
        self._cancel_sent: asyncio.Task[None] | None = None
        """The prompt task a session/cancel was already sent for."""

    def _connected(self) -> bool:
        link = self._link
        return link.ready and link.conn is not None and link.session_id is not None

    async def send(self, prompt: str) -> None:
        """Start a turn with ``prompt``; returns once the request is written (events follow)."""
        if not self._connected():
            raise BackendError("the ACP agent is not connected (reconnect the session)")
        stale = self._prompt_task
        if stale is not None and not stale.done():
            # The engine only sends when it has closed the previous turn (its watchdog
            # completed or gave up on it), but the agent is still on that prompt.
            await self._retire(stale)
            if not self._connected():
                raise BackendError("the ACP agent was lost while its previous turn was being cancelled")
        self._intake.mapper.begin_turn()
        self._intake.emit(AgentEvent(EventType.TURN_START, {"turnId": self._link.session_id}))
        written = self._intake.prompt_written
        written.clear()
        task = self._prompt_task = asyncio.create_task(self._run_prompt(prompt, self._link.gen), name="acp-prompt")
        # Return once the request is on the wire, so a Stop right after a send cannot
        # overtake the prompt it is meant to cancel.
        on_wire = asyncio.ensure_future(written.wait())
        try:
            await asyncio.wait({task, on_wire}, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
        finally:
            on_wire.cancel()

    async def abort(self) -> None:
        """Cancel the running prompt; kill the agent if it does not stop within the grace."""
        task = self._prompt_task
        if not self._link.ready or self._link.conn is None or task is None or task.done():
            self._desk.cancel_all()
            return
        if not await self._send_cancel(task):
            return
        self._desk.cancel_all()
        self._intake.mapper.close_open_tools("cancelled", status="cancelled")
        if not await self._wait(task, self._settings.stop_grace_seconds):
            logger.warning("ACP agent did not stop within %.1f s; killing it", self._settings.stop_grace_seconds)
            await self._kill()

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        """Resolve a permission prompt; "cancelled" cancels the turn first, as ACP requires."""
        task = self._prompt_task
        if option_id == CANCELLED and task is not None and not task.done():
            # In ACP a "cancelled" outcome belongs to a cancelled turn, and session/cancel
            # must reach the agent first, or it reads a plain rejection and carries on.
            await self._send_cancel(task)
        self._desk.answer(request_id, option_id)

    async def cancel_prompt(self) -> None:
        """Teardown: stop the prompt task of the process being torn down."""
        task = self._prompt_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._prompt_task = None

    async def _retire(self, task: asyncio.Task[None]) -> None:
        """Cancel a prompt whose turn the engine already closed, reporting nothing of it.

        Its late updates and its end would otherwise land in the next turn (an ``aborted``
        end would even end it). An agent that ignores the cancel is restarted on the same
        session, so the next prompt still goes out.
        """
        with self._intake.muted():
            if await self._send_cancel(task):
                self._desk.cancel_all(emit=False)
                if await self._wait(task, self._settings.stop_grace_seconds):
                    return
            if not self._link.ready:
                return  # the connection died meanwhile (already reported)
            logger.warning("ACP agent ignored session/cancel of a closed turn; restarting it")
            restarted = await self._reconnect(self._link.session_id)
            if not restarted.resumed:
                logger.warning("ACP agent restarted without its session: %s", restarted.how)

    async def _send_cancel(self, task: asyncio.Task[None]) -> bool:
        """``session/cancel`` once per turn; False when the connection is gone."""
        if self._cancel_sent is task:
            return True
        link = self._link
        gen = link.gen
        try:
            # A prompt task runs only on a connection with an open session: teardown
            # cancels it before it drops the connection.
            assert link.conn is not None and link.session_id is not None
            await link.conn.cancel(session_id=link.session_id)
        except ConnectionError:
            await link.connection_failed(gen)
            return False
        self._cancel_sent = task
        return True

    async def _run_prompt(self, prompt: str, gen: int) -> None:
        conn, session_id = self._link.conn, self._link.session_id
        assert conn is not None and session_id is not None
        self._intake.clear_raw_stop()
        stop: str | None
        usage: Any = None
        try:
            response = await conn.prompt(session_id=session_id, prompt=[text_block(prompt)])
            stop, usage = response.stop_reason, response.usage
        except ValidationError:
            stop = self._intake.raw_stop_reason()
            if stop is None:
                self._end_turn(gen, error="the agent's prompt response is not valid ACP")
                return
        except ConnectionError:
            await self._link.connection_failed(gen)
            return
        except RequestError as exc:
            await self._link.stderr_caught_up()  # its stderr lines go with the error
            self._end_turn(gen, error=request_error_text(exc))
            return
        except Exception as exc:  # a task's top: anything else (a bug) is logged and still ends the turn visibly
            logger.exception("ACP prompt failed")
            self._end_turn(gen, error=f"{type(exc).__name__}: {exc}")
            return
        self._end_turn(gen, stop=stop, usage=usage)

    def _end_turn(self, gen: int, stop: str | None = None, error: str | None = None, usage: Any = None) -> None:
        if gen != self._link.gen:
            return  # a turn of a process we already replaced
        mapper = self._intake.mapper
        emit = self._intake.emit
        self._desk.cancel_all()
        mapper.finish()
        if stop == "cancelled":
            mapper.close_open_tools("cancelled", status="cancelled")
        else:
            mapper.close_open_tools("the turn ended before the tool reported a result")
        if usage is not None:
            emit(AgentEvent(EventType.ASSISTANT_USAGE, usage.model_dump(mode="json", by_alias=True, exclude_none=True)))
        if error is not None:
            emit(AgentEvent(EventType.SESSION_ERROR, {"message": error, "errorType": "acp"}))
            return
        emit(AgentEvent(EventType.TURN_END, {"turnId": self._link.session_id}))
        data: dict[str, Any] = {"stopReason": stop, "aborted": stop == "cancelled"}
        if stop in _NOTED_STOPS:
            data["note"] = _NOTED_STOPS[stop]
            emit(
                AgentEvent(
                    EventType.SYSTEM_MESSAGE, {"content": f"Turn ended: {_NOTED_STOPS[stop]}.", "level": "warning"}
                )
            )
        emit(AgentEvent(EventType.SESSION_IDLE, data))

    async def _wait(self, task: asyncio.Task[Any], seconds: float) -> bool:
        """True when ``task`` finished within ``seconds`` of the backend's clock."""
        with contextlib.suppress(TimeoutError):  # asyncio.wait: never cancels the task, never raises
            await within(self._clock, asyncio.wait({task}), seconds)
        return task.done()
