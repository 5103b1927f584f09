"""Turns: starting one, folding agent events into it, stopping it, answering its prompts.

The turn's end always goes through :meth:`EngineContext.end_turn`; this module decides
when, from the signals :func:`~polypilot_tui.domain.reducer.apply_event` returns (the hot path: every streamed
token passes through :meth:`TurnRunner.apply`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

from polypilot_tui.agents.base import ALLOW_ONCE, CANCELLED, REJECT_ONCE, BackendError
from polypilot_tui.config import PermissionPolicy
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import within
from polypilot_tui.domain.events import AgentEvent, EventType, kept
from polypilot_tui.domain.records import EngineAction, EventReceived, Record, TurnEnded
from polypilot_tui.domain.reducer import Signal, apply_event
from polypilot_tui.domain.sandbox_policy import reason_to_ask
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.connector import Connector
from polypilot_tui.engine.context import AGENT_FAILURES, EngineContext, ManagedSession
from polypilot_tui.engine.permission_recovery import PermissionRecovery
from polypilot_tui.engine.watchdog_timer import WatchdogTimer
from polypilot_tui.infra.logs import log_failure

log = logging.getLogger(__name__)


def policy_of(session: Session, policy: PermissionPolicy) -> PermissionPolicy:
    """The permission policy of ``session`` under the user's ``policy``: that one, except that
    an attempt of a fan-out the user made sandboxed approves inside its worktree
    (``allow-in-sandbox``) where the user's policy would ask. Derived from what is saved with
    the session (its sandbox, its group), so nothing — a restart, a recovery, an orchestrator
    — can widen it: only ``ask`` ever becomes ``allow-in-sandbox``, and only sandboxed."""
    if policy is PermissionPolicy.ASK and session.attempt_of and session.sandbox.on:
        return PermissionPolicy.ALLOW_IN_SANDBOX
    return policy


def checked_prompt(session: Session, prompt: str) -> str:
    """``prompt`` without its leading and trailing blank lines (the text itself as typed);
    ValueError when empty, :class:`EngineError` when the session's folder is gone."""
    prompt = prompt.strip("\n").rstrip()
    if not prompt.strip():
        raise ValueError("empty prompt")
    refuse_without_folder(session)
    return prompt


def refuse_without_folder(session: Session) -> None:
    """:class:`EngineError` when the session's folder is gone (see :func:`folder_gone`)."""
    if why := folder_gone(session):
        raise EngineError(why)


def folder_gone(session: Session) -> str:
    """Why the session takes no prompt: the folder its agent works in is gone (its worktree
    discarded, or the folder deleted by hand), so the agent would work in a deleted folder;
    "" when it can take one. One ``stat``."""
    if not session.cwd or os.path.isdir(session.cwd):
        return ""
    workspace = session.workspace
    why = " (its worktree was discarded)" if workspace is not None and workspace.owned else ""
    return (
        f"{session.name!r} takes no more prompts: its folder {session.cwd} is gone{why}. "
        "Close the session and start a new one"
    )


SEND_TIMEOUT = 60.0
#: A send waits for the previous stuck turn's abort at most this long past the stop grace
#: (the abort itself is bounded by the grace; a kill that follows by a few seconds).
SETTLE_MARGIN = 10.0

#: Events after which a watchdog deadline may move EARLIER than the armed timer.
_SHORTENING = frozenset(
    str(t)
    for t in (
        EventType.TURN_END,
        EventType.MESSAGE,
        EventType.TOOL_COMPLETE,
        EventType.PERMISSION_COMPLETED,
        EventType.TURN_START,
    )
)
_NONE = Signal.NONE
_DELTA = str(EventType.MESSAGE_DELTA)


class TurnRunner:
    """Starts, feeds, stops and answers the turns of the engine's sessions."""

    def __init__(self, ctx: EngineContext, connector: Connector, watchdog: WatchdogTimer) -> None:
        self._ctx = ctx
        self._connector = connector
        self._watchdog = watchdog
        self._recovery = PermissionRecovery(
            ctx, connector, lambda sid, prompt: self.start_turn(sid, prompt, resend=True, by_user=False)
        )
        ctx.stream.subscribe(self.after_turn, TurnEnded)

    async def stop(self, session_id: str) -> None:
        """Stop the current turn; always leaves a usable session.

        Abort first; if the agent does not go idle within the grace period, kill it (the
        next send reconnects). Pending permissions are answered "cancelled". Queued prompts
        are kept and held: they go out only when the user says so.
        """
        ctx = self._ctx
        managed = ctx.get(session_id)
        session = managed.session
        turn = session.turn
        connecting = self._connector.cancel_connect(managed)  # no agent left starting for a stopped turn
        if turn is None and not session.recovering:
            return
        ctx.action(session_id, EngineAction.ABORT, "stopped by user", by_user=True)
        backend = managed.backend if not connecting else None
        pending = list(turn.pending_permissions) if turn is not None else []
        session.recovering = False
        ctx.recovery.finish(session_id)
        ctx.recovery.reset(session_id)
        # The turn ends before anything is awaited: whatever the agent does with the cancelled
        # prompts (the Copilot CLI goes on and may even finish) belongs to a stopped turn.
        ctx.end_turn(session_id, Outcome.ABORTED, EndCause.USER_STOP, "stopped by user")
        if backend is None:
            return
        for request_id in pending:
            await ctx.safe(backend.answer_permission(request_id, CANCELLED))
        grace = ctx.settings.stop_grace_seconds
        try:
            await within(ctx.clock, backend.abort(), grace)
        except Exception as exc:  # noqa: BLE001 - a wedged agent is exactly the case to handle: killed, whatever it was
            log_failure(log, f"abort of {session_id} (the agent is killed)", exc, AGENT_FAILURES)
            # A TimeoutError says nothing of itself ("()" was all the user got).
            why = (
                f"it did not stop within {grace:g} s of being asked"
                if isinstance(exc, TimeoutError)
                else f"its abort failed ({exc or type(exc).__name__})"
            )
            ctx.action(session_id, EngineAction.KILL, why)
            await ctx.safe(backend.kill())
            await self._connector.drop_backend(session_id, f"agent killed: {why}")

    async def answer_permission(self, session_id: str, request_id: str, option_id: str) -> None:
        """Answer a pending permission request with one of its options."""
        self._note_answer(self._ctx.get(session_id).session, request_id, option_id)
        await self._deliver_answer(session_id, request_id, option_id)

    def _note_answer(self, session: Session, request_id: str, option_id: str) -> None:
        """The request is answered from now on: no surface offers it to anyone any more."""
        turn = session.turn
        prompt = turn.pending_permissions.get(request_id) if turn is not None else None
        kind = next((k for oid, _, k in prompt.options if oid == option_id), "") if prompt else ""
        clock = self._ctx.clock
        session.permission_answered(request_id, kind or option_id, clock.now(), clock.wall())

    async def _deliver_answer(self, session_id: str, request_id: str, option_id: str) -> None:
        managed = self._ctx.get(session_id)
        if managed.backend is not None:
            await managed.backend.answer_permission(request_id, option_id)
        self._watchdog.schedule(session_id)
        self._ctx.changed(session_id)

    async def start_turn(self, session_id: str, prompt: str, resend: bool = False, by_user: bool = True) -> None:
        """Begin a turn and send ``prompt`` (``resend``: it was sent before; ``by_user``: the user
        asked, so it gets its own history row and a replay sends it too — a recovery's resend
        continues the turn on screen and a replay re-derives it)."""
        ctx = self._ctx
        managed = ctx.get(session_id)
        session = managed.session
        session.interrupted_prompt = ""
        if by_user:
            session.add_item(ItemKind.USER, prompt, self._ctx.clock.wall())
        turn = session.begin_turn(prompt, self._ctx.clock.now())
        ctx.changed(session_id)
        settling = managed.settling
        if settling is not None and not settling.done():
            # The agent of the last (stuck) turn is still being aborted or killed; a send
            # now would reach an agent still busy with that turn, or one about to be killed.
            with contextlib.suppress(TimeoutError):  # asyncio.wait: never cancels the abort, never raises
                await within(ctx.clock, asyncio.wait({settling}), ctx.settings.stop_grace_seconds + SETTLE_MARGIN)
            if session.turn is not turn:
                return
        try:
            backend = await self._connector.ensure_connected(session_id)
        except Exception as exc:  # noqa: BLE001 - a begun turn must end, whatever stood in the way
            log_failure(log, f"connect of {session_id} for a turn", exc, (BackendError,))
            ctx.end_turn(session_id, Outcome.FAILED, EndCause.CONNECT_FAILED, f"could not connect: {exc}")
            return
        if session.turn is not turn:
            return
        turn.reconnected_send = managed.reconnected
        managed.reconnected = False
        if session.interrupted_tool:  # #393: clear the agent's wedged tool before sending
            session.interrupted_tool = False
            turn.expect_abort_echo = True
            ctx.action(session_id, EngineAction.ABORT, "interrupted tool on resume")
            await ctx.safe(backend.abort())
        probes = self._watchdog.probe(managed)
        turn.log_size_at_send = probes.log_size if probes else None
        self._watchdog.schedule(session_id)
        ctx.action(session_id, EngineAction.RESEND if resend else EngineAction.SEND, prompt=prompt, by_user=by_user)
        try:
            await asyncio.wait_for(backend.send(prompt), SEND_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - a begun turn must end, whatever stood in the way
            log_failure(log, f"send to {session_id}", exc, AGENT_FAILURES)
            if session.turn is turn:
                ctx.end_turn(
                    session_id, Outcome.FAILED, EndCause.SEND_FAILED, f"send failed: {exc or type(exc).__name__}"
                )

    def after_turn(self, change: Record) -> None:
        """A completed turn sends the next queued prompt (unless the user holds the queue)."""
        assert isinstance(change, TurnEnded)
        managed = self._ctx.sessions.get(change.session_id)
        if managed is None or change.record.outcome is not Outcome.COMPLETED:
            return
        session = managed.session
        if session.queue and not session.queue_held and session.turn is None:
            if folder_gone(session):  # the queue waits, kept: the user reads why on the next send
                session.queue_held = True
                session.revision += 1
                self._ctx.changed(session.id)
                return
            self._ctx.spawn(session.id, self.start_turn(session.id, session.queue.pop(0).text))

    def apply(self, session_id: str, event: AgentEvent) -> None:
        """Fold one agent event into a session and act on what it signals."""
        ctx = self._ctx
        stream = ctx.stream
        event = kept(event)  # an agent's text past its limit is cut here, before anything keeps it
        if stream.wants(EventReceived):
            stream.publish(EventReceived(session_id, event))
        managed = ctx.sessions.get(session_id)
        if managed is None:
            return
        session = managed.session
        before = session.revision
        signal = apply_event(session, event, ctx.clock.now(), ctx.clock)
        if signal is _NONE:
            if event.type in _SHORTENING and session.turn is not None:
                self._watchdog.schedule(session_id, only_if_earlier=True)
        else:
            self._on_signal(managed, signal, event)
        if session.revision != before:
            if signal is _NONE and event.type == _DELTA:
                ctx.streamed(session_id)  # one view change per loop iteration, not per token
            else:
                ctx.changed(session_id)

    def _on_signal(self, managed: ManagedSession, signal: Signal, event: AgentEvent) -> None:
        ctx = self._ctx
        session_id = managed.session.id
        if signal is Signal.IDLE:
            ctx.end_turn(session_id, Outcome.COMPLETED, EndCause.IDLE, "session.idle")
        elif signal is Signal.IDLE_ABORTED:
            ctx.end_turn(session_id, Outcome.ABORTED, EndCause.AGENT_ABORTED, "the agent ended the turn as aborted")
        elif signal is Signal.ERROR:
            message = event.text("message") or event.text("errorType") or "session error"
            code = event.get("statusCode")  # Copilot's: the provider's HTTP status (names the failure)
            detail = f"HTTP {code}" if isinstance(code, int) and not isinstance(code, bool) else ""
            reason = f"agent error: {one_line(message, 300)}"
            ctx.end_turn(session_id, Outcome.FAILED, EndCause.AGENT_ERROR, reason, detail)
        elif signal is Signal.CONNECTION_LOST:
            reason = managed.session.lost or "agent connection lost"
            ctx.end_turn(session_id, Outcome.FAILED, EndCause.DISCONNECTED, f"agent disconnected: {reason}")
            ctx.diagnostics(session_id)
            backend, managed.backend = managed.backend, None
            if backend is not None:
                ctx.release(session_id, backend)
        elif signal is Signal.PERMISSION_REQUESTED:
            self._watchdog.schedule(session_id)  # pauses the watchdog while the user decides
            self._apply_policy(managed.session, event)
        elif signal is Signal.PERMISSION_TRIPPED:
            ctx.spawn(session_id, self._recovery.recover(session_id))
        elif signal is Signal.REARMED:
            self._watchdog.schedule(session_id)

    def _apply_policy(self, session: Session, event: AgentEvent) -> None:
        """Answer a permission request as the session's policy says (ask: leave it to the user).
        The answer is noted at once, so the request is never offered to anyone meanwhile (a
        headless run would put it to its user, or refuse it, while the policy approves it)."""
        session_id = session.id
        policy = policy_of(session, self._ctx.settings.permission_policy)
        if policy is PermissionPolicy.ASK:
            return
        if policy is PermissionPolicy.ALLOW_IN_SANDBOX and (
            why := reason_to_ask(event.data, session.cwd, session.sandbox)
        ):
            log.info("%s: permission asked under allow-in-sandbox: %s", session_id, one_line(why, 200))
            return
        wanted = REJECT_ONCE if policy is PermissionPolicy.DENY else ALLOW_ONCE
        options = [o for o in (event.get("options") or []) if isinstance(o, dict)]
        choice = next((o["optionId"] for o in options if o.get("kind") == wanted), None)
        choice = choice or next((o["optionId"] for o in options if o.get("optionId") == wanted), wanted)
        request_id = event.text("requestId")
        self._note_answer(session, request_id, choice)
        self._ctx.spawn(session_id, self._deliver_answer(session_id, request_id, choice))
