"""RemoteEngine: an engine service as the dashboard sees it — a mirror kept by the live stream.

Reads (views, history, the reply streaming now) are answered from the mirror, so a redraw
never waits on the socket; commands are requests. The mirror publishes the same change
records an engine in this process would, so the dashboard cannot tell the two apart.

When the stream ends (the engine was killed, the SSH forward dropped) or is silent past the
keepalive, the loss is told at once and ``connect`` is called again — it starts a new engine
when none runs — and the new snapshot replaces the mirror: the sessions come back through the
engine's own restore. A dashboard that fell behind (suspended) is sent a snapshot the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.clock import Clock, SystemClock
from polypilot_tui.domain.limits import SESSIONS
from polypilot_tui.domain.records import (
    ItemAdded,
    ItemReplaced,
    Record,
    SessionAdded,
    SessionRemoved,
    ViewChanged,
)
from polypilot_tui.domain.view import SESSION_ID, SessionView
from polypilot_tui.engine.api import EngineError, OneMachine, Verb
from polypilot_tui.engine.codec import decode, decode_fields, items_from_json, record_from_json, view_from_json
from polypilot_tui.engine.stream import Listener, RecordStream, Unsubscribe
from polypilot_tui.engine.verbs import (
    ENGINE_STOP,
    FOCUS_CLIENT,
    NEW_SESSION,
    RESEND,
    SEND,
    SEND_QUEUED,
    Focus,
    NoArgs,
    Reopen,
    Send,
    SessionRef,
)
from polypilot_tui.service.client import SILENCE_LIMIT, EngineClient, EngineSilent, EngineUnreachable, event_data
from polypilot_tui.service.histories import Histories
from polypilot_tui.storage.notices import Notice, NoticeBoard, NoticeListener

log = logging.getLogger(__name__)

Connect = Callable[[], Awaitable[Path]]
"""Makes sure an engine runs and returns its socket (starts one, or opens an SSH forward)."""

Q = TypeVar("Q")
R = TypeVar("R")
SNAPSHOT_TIMEOUT = 15.0
LOST = "The engine stopped unexpectedly; starting a new one — your sessions come back."
RESYNCED = "This dashboard fell behind the engine (it was not reading); its sessions were fetched again."
RECONNECT_TRIES = 5
IN_ORDER: frozenset[Verb[Any, Any]] = frozenset({SEND, SEND_QUEUED, RESEND})
"""The verbs that give a session a prompt: one of a session waits for the engine's answer to
the one asked before it (each request has a connection of its own, and a later one can reach
the engine first: a burst of prompts was queued out of order)."""


class EngineClock(SystemClock):
    """This machine's clock, set to read the engine's: views carry the engine's clock times."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.monotonic() + self.offset


class RemoteEngine(OneMachine):
    """An :class:`~polypilot_tui.engine.api.Engine` in another process, reached through ``connect``."""

    def __init__(
        self,
        connect: Connect,
        *,
        reconnect: bool = True,
        on_detach: Callable[[], Awaitable[None]] | None = None,
        clock: Clock | None = None,
        silence: float = SILENCE_LIMIT,
        on_attached: Callable[[], None] | None = None,
        quiet_loss: bool = False,
    ) -> None:
        self._connect = connect
        self._on_attached = on_attached
        """Called after each snapshot (the mirror is current): a fleet marks its host live."""
        self._quiet_loss = quiet_loss
        """A lost stream is not told as a notice: its watcher tells it (a fleet's host state)."""
        self._silence = silence  # seconds the stream may say nothing before the engine is taken for lost
        self._on_detach = on_detach
        self._reconnect = reconnect
        self._clock: Clock = clock or EngineClock()
        """The engine's time: this machine's clock set to the engine's at each snapshot, or
        one that reads the engine's own (a test's FakeClock shared with the engine it serves)."""
        self._stream = RecordStream()
        self.notices = NoticeBoard()
        self.http: EngineClient | None = None
        self.info: dict[str, Any] = {}
        """What the engine said of itself in its last snapshot (pid, state folder, …)."""
        self._views: dict[str, SessionView] = {}
        self._history = Histories(self._fetch_history, self._history_loaded, self._clock)
        self._streaming: dict[str, str] = {}
        self._reader: asyncio.Task[None] | None = None
        self._client_id = 0
        self._focused = 0
        """The client whose terminal had the focus last (0: none said yet)."""
        self._in_order: dict[str, asyncio.Lock] = {}
        """Per session, its prompts' verbs (:data:`IN_ORDER`) one after another."""
        self._detaching = False
        self._stopping = False
        """The engine said it stops because somebody asked (no new one is started then)."""

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def separate(self) -> bool:
        return True

    @property
    def persistent(self) -> bool:
        return True

    # ---- reads -------------------------------------------------------------------------
    def ids(self) -> list[str]:
        return list(self._views)

    def view(self, session_id: str) -> SessionView:
        return self._views[session_id]

    def views(self) -> tuple[SessionView, ...]:
        return tuple(self._views.values())

    def history(self, session_id: str) -> Sequence[ChatItem]:
        """The rows so far; the first ask fetches them (a ViewChanged follows when they are here)."""
        return self._history.get(session_id) if session_id in self._views else ()

    def streaming_text(self, session_id: str) -> str:
        return self._streaming.get(session_id, "")

    def subscribe(self, listener: Listener, *kinds: type[Record]) -> Unsubscribe:
        return self._stream.subscribe(listener, *kinds)

    def on_notice(self, listener: NoticeListener) -> Unsubscribe:
        return self.notices.listen(listener)

    # ---- life --------------------------------------------------------------------------
    async def start(self) -> None:
        """Attach: the snapshot is in the mirror when this returns; changes follow. EngineError
        when none came (EngineSilent: none within :data:`SNAPSHOT_TIMEOUT`; the stream is still
        read, and a snapshot that comes later is taken)."""
        snapshot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(snapshot), name="engine stream")
        try:
            await asyncio.wait_for(asyncio.shield(snapshot), SNAPSHOT_TIMEOUT)
        except TimeoutError:
            # told now: what may end the stream later is read here, not logged as never retrieved
            snapshot.add_done_callback(lambda done: done.cancelled() or done.exception())
            raise EngineSilent(
                f"the engine sent no snapshot within {SNAPSHOT_TIMEOUT:g} s (hung, or overloaded?)"
            ) from None

    async def _read(self, first: asyncio.Future[None]) -> None:
        attempt = 0
        while not self._detaching:
            silent = False
            try:
                socket = await self._connect()
                if self.http is None or self.http.socket != socket:
                    if self.http is not None:
                        await self.http.aclose()
                    self.http = EngineClient(socket, silence=self._silence)
                async with self.http.stream() as events:
                    async for event in events:
                        self.apply_event(event.event, event_data(event))
                        if event.event == "snapshot":
                            attempt = 0
                            if self._on_attached is not None:
                                self._on_attached()
                            if not first.done():
                                first.set_result(None)
                            self.notices.over(
                                "engine-lost", f"Attached to the engine again (pid {self.info.get('pid')})."
                            )
                reason = "the engine closed the connection"
            except EngineSilent as exc:
                reason, silent = str(exc), True
            except (EngineError, ValueError, OSError) as exc:
                reason = str(exc)
            except Exception as exc:  # noqa: BLE001 - whatever it was, the dashboard must hear of it
                log.exception("engine stream failed")
                reason = f"{type(exc).__name__}: {exc}"
            if self._detaching:
                return
            log.warning("engine stream ended: %s", reason)
            if self._stopping:
                self.notices.tell(
                    "engine-stopped",
                    "The engine was stopped (polypilot engine stop, or another dashboard); its sessions are "
                    "saved. Sending or ctrl+r starts it again (ctrl+y too, on a session whose prompt it interrupted).",
                    "warning",
                )
                return
            if not first.done():
                first.set_exception(EngineUnreachable(reason))
                return
            if not self._reconnect or attempt >= RECONNECT_TRIES:
                self.notices.tell("engine-lost", f"The engine is gone and could not be started again: {reason}")
                return
            silence = f"The engine has said nothing for {self._silence:g} s (stopped or hung?); reconnecting."
            if not self._quiet_loss:
                self.notices.tell("engine-lost", silence if silent else LOST)
            attempt += 1
            await asyncio.sleep(min(0.2 * attempt, 2.0))

    def reading(self) -> bool:
        """The stream is followed (or being reconnected): False before start and once given up."""
        return self._reader is not None and not self._reader.done()

    async def detach(self, stop_engine: bool) -> None:
        self._detaching = True
        try:
            if stop_engine and self.http is not None:
                try:
                    await self.http.call(ENGINE_STOP, NoArgs())
                except EngineError as exc:
                    log.warning("the engine could not be stopped: %s", exc)
        finally:
            if self._reader is not None:
                self._reader.cancel()
            self._history.cancel()
            if self.http is not None:
                await self.http.aclose()
            if self._on_detach is not None:
                await self._on_detach()

    # ---- the stream, into the mirror ------------------------------------------------------
    def apply_event(self, kind: str, data: Any) -> None:
        """Fold one stream event into the mirror and publish what changed."""
        if not isinstance(data, dict):
            raise ValueError(f"a {kind} event is not an object")
        if kind == "snapshot":
            self._resync(data)
        elif kind == "resync":  # it fell behind: what it missed is in this snapshot (histories fetched again)
            self._resync(data)
            self.notices.emit(Notice("engine-resync", RESYNCED, "information"))
        elif kind == "session":
            sid = self._put(data, room=len(self._views) < SESSIONS)
            if sid is not None:
                self._stream.publish(SessionAdded(sid))
                self._stream.publish(ViewChanged(sid, self._views[sid].revision))
        elif kind == "removed":
            sid = str(data.get("session_id"))
            if self._forget(sid):
                self._stream.publish(SessionRemoved(sid))
        elif kind == "view":
            self._view_moved(data)
        elif kind == "change":
            self._change(record_from_json(data))
        elif kind == "stopping":
            self._stopping = True
        elif kind == "focus":
            self._focused = int(data.get("client") or 0)
        elif kind == "notice":
            self.notices.emit(decode(Notice, data, "notice"))

    def _resync(self, data: dict[str, Any]) -> None:
        info = data.get("engine")
        self.info = info if isinstance(info, dict) else {}
        self._client_id = int(data.get("client") or 0)
        self._focused = int(data.get("focused") or 0)
        now = self.info.get("now")
        if isinstance(now, (int, float)) and isinstance(self._clock, EngineClock):
            self._clock.offset = float(now) - time.monotonic()
        sessions = data.get("sessions")
        if not isinstance(sessions, list):
            raise ValueError("snapshot: sessions must be a list")
        before = set(self._views)
        if len(sessions) > SESSIONS:
            self._too_many()
        after = [sid for s in sessions[:SESSIONS] if (sid := self._put(s)) is not None]
        for sid in before - set(after):
            self._forget(sid)
            self._stream.publish(SessionRemoved(sid))
        self._views = {sid: self._views[sid] for sid in after}  # the engine's order
        for sid in after:
            if sid not in before:
                self._stream.publish(SessionAdded(sid, restored=True))
            self._stream.publish(ViewChanged(sid, self._views[sid].revision))

    def _too_many(self) -> None:
        self.notices.tell(
            "engine-too-many",
            f"The engine listed more than {SESSIONS} sessions, the most one engine holds: the others are not shown.",
            "warning",
        )

    def _put(self, data: Any, room: bool = True) -> str | None:
        """The session ``data`` into the mirror, and its id; None (told) when its id is not one,
        or when it is new and there is no ``room`` (the mirror holds :data:`SESSIONS` at most)."""
        if not isinstance(data, dict):
            raise ValueError("a session must be an object")
        view = view_from_json(data.get("view"))
        if not SESSION_ID.fullmatch(view.id):  # another machine's engine is not trusted with our terminal
            self.notices.tell(
                "engine-bad-id",
                f"The engine listed a session whose id {ascii(view.id[:40])} is not a session id "
                "(1-64 letters, digits, '-', '_'): it is not shown.",
                "warning",
            )
            return None
        if not room and view.id not in self._views:  # a host that floods keeps the dashboard's memory bounded
            self._too_many()
            return None
        streaming = data.get("streaming", "")
        self._views[view.id] = view
        history = data.get("history")
        self._history.put(view.id, items_from_json(history) if history is not None else None)
        self._streaming[view.id] = streaming if isinstance(streaming, str) else ""
        return view.id

    async def _fetch_history(self, sid: str) -> list[ChatItem]:
        return [row async for _start, rows in self._api().history(sid) for row in rows]

    def _history_loaded(self, sid: str) -> None:
        if sid in self._views:
            self._stream.publish(ViewChanged(sid, self._views[sid].revision))  # a redraw shows it

    def _forget(self, sid: str) -> bool:
        self._history.forget(sid)
        self._in_order.pop(sid, None)
        self._streaming.pop(sid, None)
        return self._views.pop(sid, None) is not None

    def _view_moved(self, data: dict[str, Any]) -> None:
        """The fields of a view that changed since the last one, and the reply streamed since."""
        last = self._views.get(str(data.get("session_id")))
        if last is None:
            return
        changed = data.get("changed")
        if not isinstance(changed, dict):
            raise ValueError("a view event's changed fields must be an object")
        view = decode_fields(last, changed, "view")
        if view.id != last.id:
            raise ValueError("a view event may not change the session's id")
        start, text = data.get("stream_from"), data.get("stream")
        if isinstance(start, int) and isinstance(text, str):
            current = self._streaming.get(view.id, "")
            self._streaming[view.id] = current[:start] + text
        self._views[view.id] = view
        self._stream.publish(ViewChanged(view.id, view.revision))

    def _change(self, change: Record) -> None:
        if isinstance(change, (ItemAdded, ItemReplaced)):
            self._history.apply(change)
        self._stream.publish(change)

    def alerts_here(self) -> bool:
        """Attention alerts ring here: this terminal had the focus last (or none said so)."""
        return self._focused in (0, self._client_id)

    async def focus(self) -> None:
        """This terminal has the focus now: alerts come here."""
        if self._client_id:
            await self._api().call(FOCUS_CLIENT, Focus(self._client_id))

    # ---- the verbs ---------------------------------------------------------------------
    def _api(self) -> EngineClient:
        if self.http is None:
            raise EngineUnreachable("not attached to an engine")
        return self.http

    async def _attached(self) -> EngineClient:
        """The engine's API; after a stop asked for elsewhere, the engine is started again first."""
        if self._reader is not None and self._reader.done() and not self._detaching:
            self._stopping = False
            self.notices.over("engine-stopped", "The engine runs again.")
            await self.start()
        return self._api()

    async def call(self, verb: Verb[Q, R], request: Q) -> R:
        """Ask ``verb`` of the engine; a session it adds or brings back is in the mirror on return.
        A session's prompts reach the engine in the order they were asked (:data:`IN_ORDER`)."""
        if verb in IN_ORDER and isinstance(request, SessionRef | Send):
            async with self._in_order.setdefault(request.session_id, asyncio.Lock()):
                return await (await self._attached()).call(verb, request)
        reply = await (await self._attached()).call(verb, request)
        if verb is NEW_SESSION and isinstance(reply, str):
            await self._arrival(reply)
        elif isinstance(request, Reopen):
            await self._arrival(request.session_id)
        return reply

    async def _arrival(self, sid: str, timeout: float = 10.0) -> None:
        """Wait until the stream has brought ``sid`` into the mirror (the answer can come first)."""
        arrived = asyncio.Event()
        unsubscribe = self._stream.subscribe(lambda change: arrived.set() if change.session_id == sid else None)
        try:
            if sid not in self._views:
                await asyncio.wait_for(arrived.wait(), timeout)
        except TimeoutError:
            pass  # it comes with the stream later; the dashboard selects it then
        finally:
            unsubscribe()
