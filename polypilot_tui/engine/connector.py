"""Connecting a session's agent: handler first, resume, adopt the id, read restore hints."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from polypilot_tui.agents.base import AgentBackend, BackendError
from polypilot_tui.domain.events import EventType
from polypilot_tui.domain.session import ItemKind
from polypilot_tui.infra.private import private_dir
from polypilot_tui.domain.turn import Outcome

if TYPE_CHECKING:
    from polypilot_tui.engine.manager import SessionManager

log = logging.getLogger(__name__)

_HISTORY_KINDS = {EventType.USER_MESSAGE: ItemKind.USER, EventType.MESSAGE: ItemKind.ASSISTANT}


async def ensure_connected(manager: SessionManager, session_id: str) -> AgentBackend:
    """Return the session's live backend, connecting (or resuming) it first if needed.

    One connect per session at a time: every caller awaits the same task, so Stop can
    cancel it (``manager.stop``); callers then get a BackendError, not a CancelledError.
    """
    managed = manager._get(session_id)
    if managed.connecting is None:
        if managed.backend is not None:
            return managed.backend
        task = asyncio.get_running_loop().create_task(_connect(manager, session_id), name=f"connect-{session_id}")
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


async def _connect(manager: SessionManager, session_id: str) -> AgentBackend:
    managed = manager._get(session_id)
    session = managed.session
    workdir = manager.workdir(session_id)
    for folder in (workdir.parent, workdir):  # sessions/ and sessions/<id>/ are ours: 0700,
        private_dir(folder)  # agent logs and transcripts hold the user's work
    ref: list[AgentBackend] = []
    # The sink exists before connect() runs, so resume-time events are never lost (#559).
    backend = manager._factory(session.agent, manager._sink_for(session_id, ref), workdir)
    ref.append(backend)
    managed.backend = backend
    resume_id = session.agent_session_id or None
    session.connecting = True
    manager._changed(session_id)
    try:
        result = await backend.connect(resume_id)
    except asyncio.CancelledError:  # Stop: the backend has stopped what it started
        managed.backend = None
        session.connecting = False
        manager._changed(session_id)
        await manager._safe(backend.close())
        raise
    except Exception as exc:  # noqa: BLE001
        manager.diagnostics(session_id)  # its stderr says why it could not start
        managed.backend = None
        session.connecting = False
        session.lost = f"could not start the agent: {exc}"
        manager._changed(session_id)
        await manager._safe(backend.close())
        raise BackendError(session.lost) from exc
    managed.last_connect = result
    session.connecting = False
    session.connected = True
    session.lost = ""
    session.agent_session_id = result.agent_session_id or session.agent_session_id
    wall = manager.clock.wall()
    if result.history and not session.history:
        for event in result.history:
            kind = _HISTORY_KINDS.get(event.type)  # type: ignore[call-overload]
            if kind is not None and event.text("content"):
                session.add_item(kind, event.text("content"), wall)
    if resume_id:
        managed.reconnected = True
        if result.resumed:
            session.system(f"🔄 Session reconnected ({result.how}).", wall)
        else:
            session.error(f"⚠ The agent could not resume its earlier session ({result.how}). This is a new "
                          "agent session: the agent does not remember the conversation above.", wall)
    if result.interrupted_tool:
        session.interrupted_tool = True  # aborted before the next send (#393)
    turn = session.turn
    if turn is not None and turn.restored:
        if result.still_processing:
            turn.used_tools = True  # RESUME-ACTIVE: the tool tier, the agent is working
        elif result.lost_turn:
            manager._end(session_id, Outcome.FAILED, "the agent lost this turn in the app restart")
    manager._changed(session_id)
    return backend
