"""The commands' way to the state folder's engine (or, ``--host NAME``, a host's): reach it (or
start it), name a session, follow it.

Read-only commands never start this machine's engine: with none running they say so and exit
:data:`EXIT_NO_ENGINE`. The others start it detached, as the dashboard does; a host's engine
(``--host``, ``ls --all-hosts``) is started there when none runs, as the dashboard does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from polypilot_tui.commands.interrupts import on_interrupt
from polypilot_tui.commands.output import say
from polypilot_tui.commands.resolve import NoSuchSession, pick_session
from polypilot_tui.config import Settings
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.hosts import HostEntry, other_version_reason
from polypilot_tui.domain.records import ItemAdded, Record
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.codec import decode_fields, record_from_json, view_from_json
from polypilot_tui.engine.verbs import API_VERSION, ENGINE_INFO, SESSION_VIEW, SESSIONS, NoArgs, SessionRef
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.client import EngineClient, EngineUnreachable, event_data
from polypilot_tui.service.spawn import engine_info, ensure_engine
from polypilot_tui.service.ssh import TunnelError, open_tunnel

EXIT_NO_ENGINE = 5
"""A read-only command found no engine running for the state folder."""
EXIT_INTERRUPTED = 130
T = TypeVar("T")


class CommandFailed(Exception):
    """A command cannot go on: its message (for stderr) and exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class EngineGone(Exception):
    """The engine stopped answering while a command followed it."""


def fail(message: str) -> None:
    """One line on stderr, agent or engine text stripped of terminal controls."""
    say(f"polypilot: {message}", err=True)


async def connect(settings: Settings, *, start: bool) -> EngineClient:
    """A client of the state folder's engine; started detached when none runs and ``start``,
    else CommandFailed with :data:`EXIT_NO_ENGINE`."""
    if start:
        try:
            path, _started = await ensure_engine(settings)
        except EngineError as exc:
            raise CommandFailed(str(exc)) from None
        return EngineClient(path)
    if await engine_info(settings) is None:
        raise CommandFailed(f"No engine runs for {settings.state_dir}.", EXIT_NO_ENGINE)
    return EngineClient(socket_path(settings.state_dir))


async def find_view(client: EngineClient, key: str) -> SessionView:
    """The live session ``key`` names (an id, or a name only one session has)."""
    listed = await client.call(SESSIONS, NoArgs())
    try:
        return pick_session(key, listed.sessions, lambda v: v.id, lambda v: v.name)
    except NoSuchSession as exc:
        raise CommandFailed(str(exc)) from None


async def one_view(client: EngineClient, sid: str) -> SessionView:
    """The session's view now."""
    return await client.call(SESSION_VIEW, SessionRef(sid))


@dataclass(frozen=True)
class Snapshot:
    """The followed session as the stream began: its view and the reply streaming then."""

    view: SessionView
    streaming: str


@dataclass(frozen=True)
class Resync:
    """The command fell behind the stream and the engine sent a snapshot in place of what it
    missed: the session now, why, and the history rows it missed (read from the history)."""

    snapshot: Snapshot
    reason: str
    rows: tuple[ItemAdded, ...]


Item = tuple[str, Any]
"""("view", SessionView) | ("change", Record) | ("event", (type, data)) | ("removed", id) | ("stopping", None)
| ("resync", Resync)."""


@asynccontextmanager
async def follow_session(client: EngineClient, sid: str) -> AsyncIterator[tuple[Snapshot, AsyncIterator[Item]]]:
    """The session's stream, narrowed by the engine to it, with its agent events: the snapshot,
    then its records in order. The iterator raises EngineGone when the stream ends."""
    try:
        async with client.stream(session=sid, events="1") as source:
            first = await anext(source, None)
            if first is None or first.event != "snapshot":
                raise EngineGone("the engine closed the stream before its snapshot")
            snapshot = _snapshot(event_data(first))
            if snapshot is None:
                raise CommandFailed(f"no session {sid!r} (closed meanwhile?)")
            yield snapshot, _items(source, client, snapshot.view)
    except EngineUnreachable as exc:
        raise EngineGone(str(exc)) from None


def _snapshot(data: Any) -> Snapshot | None:
    """The one session of a narrowed snapshot (None: it is gone)."""
    sessions = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(sessions, list) or len(sessions) != 1 or not isinstance(sessions[0], dict):
        return None
    state = sessions[0]
    streaming = state.get("streaming")
    return Snapshot(view_from_json(state.get("view")), streaming if isinstance(streaming, str) else "")


async def _items(source: AsyncIterator[Any], client: EngineClient, view: SessionView) -> AsyncIterator[Item]:
    """The stream's records as items, from the snapshot's ``view`` on (a view event says what
    changed in it; the rows after its count come as changes — or, missed while behind, from
    the history at a resync)."""
    sid, rows = view.id, view.history_len
    try:
        async for event in source:
            kind, data = event.event, event_data(event)
            if kind == "view":
                changed = data.get("changed")
                if not isinstance(changed, dict):
                    raise EngineGone("the engine sent a view event without its changed fields")
                view = decode_fields(view, changed, "view")
                yield "view", view
            elif kind == "change":
                change: Record = record_from_json(data)
                if isinstance(change, ItemAdded):
                    rows = max(rows, change.index + 1)
                yield "change", change
            elif kind == "resync":
                snapshot = _snapshot(data)
                if snapshot is None:
                    yield "removed", sid
                    continue
                upto = snapshot.view.history_len
                missed = [
                    ItemAdded(sid, start + i, item)
                    async for start, page in client.history(sid, upto, start=rows)
                    for i, item in enumerate(page)
                ]
                rows, view = max(rows, upto), snapshot.view
                yield "resync", Resync(snapshot, str(data.get("reason") or ""), tuple(missed))
            elif kind == "event":
                payload = data.get("data")
                yield "event", (str(data.get("type")), payload if isinstance(payload, dict) else {})
            elif kind == "removed":
                yield "removed", data.get("session_id")
            elif kind == "stopping":
                yield "stopping", None
    except EngineUnreachable as exc:
        raise EngineGone(str(exc)) from None
    raise EngineGone("the engine closed the stream")


async def until_signal(work: Awaitable[T], on_signal: Callable[[str], T]) -> T:
    """``work``'s result; a SIGINT or SIGTERM cancels it and returns ``on_signal(name)`` instead."""
    task = asyncio.ensure_future(work)
    caught: list[str] = []

    def cancel(name: str) -> None:
        caught.append(name)
        task.cancel()

    try:
        with on_interrupt(cancel):
            return await task
    except asyncio.CancelledError:
        if caught:
            return on_signal(caught[0])
        raise


HOST: ContextVar[HostEntry | None] = ContextVar("polypilot_host", default=None)
"""The host the commands aim at (``--host NAME``, set once by the command line); None: this
machine's engine."""


@asynccontextmanager
async def reach(settings: Settings, start: bool, host: HostEntry | None) -> AsyncIterator[EngineClient]:
    """A client of this machine's engine (``host`` None), or of ``host``'s through an ssh
    forward of its own, ended with the command (the engine there is started when none runs, as
    ``--ssh`` does). CommandFailed names the host and says why it cannot be reached."""
    if host is None:
        client = await connect(settings, start=start)
        try:
            yield client
        finally:
            await client.aclose()
        return
    try:
        tunnel = await open_tunnel(host.target, remote_command=host.remote_command, ssh_options=host.ssh_options)
    except TunnelError as exc:
        raise CommandFailed(f"{host.name}: {exc}") from None
    client = EngineClient(tunnel.socket_path)
    try:
        info = await client.call(ENGINE_INFO, NoArgs())
        if info.api != API_VERSION:
            raise CommandFailed(f"{host.name}: {other_version_reason(info.api, API_VERSION)}")
        yield client
    finally:
        await client.aclose()
        await tunnel.close()


async def run_command(settings: Settings, start: bool, body: Callable[[EngineClient], Awaitable[int]]) -> int:
    """Reach the engine (:data:`HOST`'s when set) and run ``body`` with it; a refusal or a
    failure is one line on stderr."""
    try:
        async with reach(settings, start, HOST.get()) as client:
            return await body(client)
    except CommandFailed as exc:
        fail(str(exc))
        return exc.code
    except EngineGone as exc:
        fail(f"the engine went away: {exc}")
        return 1
    except EngineError as exc:
        fail(str(exc))
        return 1
