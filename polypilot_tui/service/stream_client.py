"""One attached client of the engine's live stream: what it is sent, and when.

A client starts with a snapshot of every session, then hears the changes in order: history
rows as they are added or replaced, turn ends, notices, sessions added and removed, and views.
Views are coalesced per client: a burst of deltas is one view event, built when the client is
ready for it, carrying the fields that changed and the reply text streamed since the last one
(never the whole view or reply again); the views of every session that moved go together, at
most once a frame. What waits for a client that does not read is bounded
(:mod:`~polypilot_tui.service.outbox`): past the bound it is sent a fresh snapshot instead
(``resync``) once it reads again. A client that is sent nothing for the engine's keepalive
interval gets a comment line, so a dead one is noticed and a live one hears the engine lives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import fields
from operator import attrgetter
from typing import Any

from polypilot_tui.domain.clock import TimerHandle
from polypilot_tui.domain.events import EventType
from polypilot_tui.domain.records import (
    EventReceived,
    ItemAdded,
    ItemReplaced,
    Record,
    SessionAdded,
    SessionRemoved,
    TurnEnded,
    ViewChanged,
)
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.codec import encode, record_to_json, session_state
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.service.outbox import Deltas, Frame, Outbox
from polypilot_tui.storage.notices import Notice

log = logging.getLogger(__name__)

FRAME = 1 / 30
"""Seconds between two batches of views sent to one client, at the most often: a terminal shows
no more, and sessions flooding deltas then cost each client 30 writes a second, each with the
views of every session that moved."""

STREAMED = (ItemAdded, ItemReplaced, SessionAdded, SessionRemoved, ViewChanged, TurnEnded)
"""The stream records a client hears (not raw agent events or actions: views reflect those)."""


class FrameCache:
    """The wire form of the record every client is hearing now, encoded once for all of them
    (the stream publishes one record to each listener in turn)."""

    def __init__(self) -> None:
        self._change: Record | None = None
        self._frames: dict[object, str] = {}

    def get(self, change: Record, key: object, encode: Callable[[], str]) -> str:
        if change is not self._change:
            self._change, self._frames = change, {}
        frame = self._frames.get(key)
        if frame is None:
            frame = self._frames[key] = encode()
        return frame


DELTA_EVENTS = frozenset({str(EventType.MESSAGE_DELTA), str(EventType.REASONING_DELTA)})
"""Agent events whose ``deltaContent`` consecutive ones may be joined into one."""


class StreamClient:
    """One attached client: its records in order (views coalesced until it reads them), in a
    bounded outbox; a fresh snapshot when it fell too far behind; a keepalive when silent.

    ``only`` narrows it to one session (a command following it); ``events`` adds that
    session's agent events, in order with its changes (the reply's deltas as they come)."""

    def __init__(
        self,
        engine: LocalEngine,
        client_id: int,
        only: str | None = None,
        events: bool = False,
        *,
        frames: FrameCache | None = None,
        outbox: Outbox | None = None,
        frame: float = FRAME,
        focused: Callable[[], int] = lambda: 0,
    ) -> None:
        self.engine = engine
        self.client_id = client_id
        self.only = only
        self.events_too = events and only is not None
        self._frames = frames if frames is not None else FrameCache()
        self._outbox = outbox if outbox is not None else Outbox(engine.settings.stream_client_backlog_bytes)
        self._sent_stream: dict[str, str] = {}
        self._sent_view: dict[str, SessionView] = {}
        self._ready = asyncio.Event()
        self.keepalive = float(engine.settings.stream_keepalive_seconds)
        self._sent_at = engine.clock.now()
        """When the client was last given something (records or a keepalive)."""
        self._keepalive_due = False
        self._timer: TimerHandle | None = None
        self.resyncs = 0
        """Fresh snapshots sent because the client fell behind."""
        self.frame = frame
        """Seconds between two views of one session to this client, and between two batches of
        a client following one session (0: as often as they come)."""
        self._focused = focused
        """Whose terminal had the focus last (0: none said), for the snapshots."""
        self._views_sent_at: float | None = None
        """When the last batch with views went (None: none yet; a clock's times may be any number)."""
        self._batch_sent_at: float | None = None
        """When the last batch went (None: none yet; a clock's times may be any number)."""
        self._frame_timer: TimerHandle | None = None
        self._frame_at = 0.0

    # ---- what the engine says ----------------------------------------------------------------
    def on_change(self, change: Record) -> None:
        sid = change.session_id
        if self.only is not None and sid != self.only:
            return
        box = self._outbox
        if isinstance(change, EventReceived):
            event = change.event
            data = event.data
            text = data.get("deltaContent") if event.type in DELTA_EVENTS else None
            if isinstance(text, str):
                box.delta(event.type, {k: v for k, v in data.items() if k != "deltaContent"}, text)
            else:
                box.frame(
                    self._frames.get(change, "event", lambda: sse("event", {"type": event.type, "data": dict(data)}))
                )
        elif isinstance(change, ViewChanged):
            box.view(sid)
            due = self._views_due()
            if due is not None:  # the frame's timer wakes the client, not every delta of a flood
                self._arm_frame(due)
                return
        elif isinstance(change, SessionAdded):
            box.marker("session", sid)
        elif isinstance(change, SessionRemoved):
            box.marker("removed", sid)
        elif isinstance(change, (ItemAdded, ItemReplaced)):
            row = change
            box.row((sid, row.index), isinstance(row, ItemAdded), lambda added: self._row_frame(row, added))
        else:
            box.frame(self._frames.get(change, "change", lambda: sse("change", record_to_json(change))))
        self._ready.set()

    def _row_frame(self, change: ItemAdded | ItemReplaced, added: bool) -> str:
        """A row's frame, as added or as replaced (a coalesced replacement keeps the kind its row
        was queued as)."""
        record: Record = change
        if added is not isinstance(change, ItemAdded):
            record = (ItemAdded if added else ItemReplaced)(change.session_id, change.index, change.item)
        return self._frames.get(change, added, lambda: sse("change", record_to_json(record)))

    def on_notice(self, notice: Notice) -> None:
        self.tell("notice", encode(notice))

    def tell(self, kind: str, data: dict[str, Any]) -> None:
        """Send ``data`` as a ``kind`` event, in order with the changes."""
        self._outbox.frame(sse(kind, data))
        self._ready.set()

    # ---- what the client is sent -----------------------------------------------------------
    def snapshot(self, with_history: bool = False) -> dict[str, Any]:
        """Every session (its history only ``with_history``), and what the client needs to read
        times against the engine. Of every session, the reply streaming now follows in an event
        of its own: a snapshot of hundreds carries views only, so its size is bounded
        (limits.SNAPSHOT_BYTES); the snapshot of one session (``only``) carries its reply."""
        ids = [sid for sid in self.engine.ids() if self.only in (None, sid)]
        one = self.only is not None
        sessions = [self._session(sid, with_history, streaming=one) for sid in ids]
        for sid in () if one else ids:
            if self.engine.streaming_text(sid):
                self._outbox.view(sid)
                self._ready.set()
        return {
            "engine": engine_info(self.engine),
            "client": self.client_id,
            "focused": self._focused(),
            "sessions": sessions,
        }

    def _session(self, sid: str, with_history: bool = False, streaming: bool = True) -> dict[str, Any]:
        """A session's view, its reply streaming now (unless not ``streaming``: an event of its
        own brings it) and, ``with_history``, its rows (else the client asks for them)."""
        engine = self.engine
        text = engine.streaming_text(sid) if streaming else ""
        view = self._sent_view[sid] = engine.view(sid)
        self._sent_stream[sid] = text
        return session_state(view, engine.history(sid) if with_history else None, text)

    def attach(self) -> Callable[[], None]:
        """Hear the engine's changes and notices from now on; returns the detach."""
        unsubscribe = self.engine.subscribe(self.on_change, *STREAMED, *((EventReceived,) if self.events_too else ()))
        stop_notices = self.engine.on_notice(self.on_notice)

        def detach() -> None:
            unsubscribe()
            stop_notices()
            for timer in (self._timer, self._frame_timer):
                if timer is not None:
                    timer.cancel()
            self._timer = self._frame_timer = None

        return detach

    async def frames(self) -> AsyncIterator[str]:
        """The stream's text from now on, forever: what is waiting, a batch at a time (a
        keepalive comment when nothing was sent for :attr:`keepalive` seconds)."""
        self._sent_at = self.engine.clock.now()
        self._arm(self._sent_at + self.keepalive)
        while True:
            await self._ready.wait()
            self._ready.clear()
            text = self.drain()
            if text:
                self._sent_at = self.engine.clock.now()
                yield text

    def drain(self) -> str:
        """What is waiting, in its wire form, built now (views and sessions as they are at this
        moment): a fresh snapshot instead when the client fell behind; a keepalive comment when
        it is due and nothing else is."""
        box = self._outbox
        keepalive, self._keepalive_due = self._keepalive_due, False
        if box.overflowed:
            reason = box.overflowed
            box.take()
            self.resyncs += 1
            log.warning("stream client %d fell behind (%s): sent a fresh snapshot", self.client_id, reason)
            # In the step that empties the outbox, with the subscription kept: nothing falls between.
            return sse("resync", {**self.snapshot(), "reason": reason})
        if not box:
            return KEEPALIVE_FRAME if keepalive else ""
        now = self.engine.clock.now()
        last_batch = self._batch_sent_at
        if self.only is not None and not box.news and last_batch is not None and now < last_batch + self.frame:
            # One session's stream (a command following it): its deltas and view wait for the
            # frame, joined, unless something else (a row, a turn's end) is waiting too.
            self._arm_frame(last_batch + self.frame)
            return KEEPALIVE_FRAME if keepalive else ""
        self._batch_sent_at = now
        live = set(self.engine.ids())  # once per batch: a burst of deltas is many views
        out: list[str] = []
        held: list[str] = []
        views_due = self._views_due()
        for entry in box.take():
            if isinstance(entry, Frame):
                out.append(entry.text)
            elif isinstance(entry, Deltas):
                data = {**entry.base, "deltaContent": "".join(entry.pieces)}
                out.append(sse("event", {"type": entry.type, "data": data}))
            elif entry.kind == "view":
                if entry.session_id not in live:
                    continue
                if views_due is not None:
                    held.append(entry.session_id)
                    continue
                self._views_sent_at = now
                out.append(sse("view", self._view(entry.session_id)))
            elif entry.kind == "session":
                if entry.session_id in live:  # a new one's empty history is sent; a reopened one's is asked for
                    added = self._session(entry.session_id, with_history=not self.engine.history(entry.session_id))
                    out.append(sse("session", added))
            else:  # removed
                self._sent_stream.pop(entry.session_id, None)
                self._sent_view.pop(entry.session_id, None)
                out.append(sse("removed", {"session_id": entry.session_id}))
        if held and views_due is not None:
            self._hold(held, views_due)
        return "".join(out)

    def _views_due(self) -> float | None:
        """When views may go again, if not now: a client is sent views at most once a frame, every
        waiting session's together (one write and one wake-up on each side, not one per session)."""
        last = self._views_sent_at  # None: the first views go at once
        if last is None or self.engine.clock.now() >= last + self.frame:
            return None
        return last + self.frame

    def _hold(self, sessions: list[str], due: float) -> None:
        """Views that came less than a frame after the last ones wait for the frame (behind what
        this batch sent): a session streaming thousands of deltas a second is sent a few dozen
        views, each with all the text since the last; twenty such sessions, a few dozen batches."""
        for sid in sessions:
            self._outbox.view(sid)
        self._arm_frame(due)

    def _arm_frame(self, due: float) -> None:
        """Wake the client at ``due`` (or sooner, when already armed sooner)."""
        if self._frame_timer is None or due < self._frame_at:
            if self._frame_timer is not None:
                self._frame_timer.cancel()
            self._frame_at = due
            self._frame_timer = self.engine.clock.call_at(due, self._frame_due)

    def _frame_due(self) -> None:
        self._frame_timer = None
        self._ready.set()

    def _view(self, sid: str) -> dict[str, Any]:
        """What moved in the session's view since the last one this client was sent (the fields
        that changed, as in a view), and the reply text streamed since."""
        text = self.engine.streaming_text(sid)
        sent = self._sent_stream.get(sid, "")
        start = len(sent) if text.startswith(sent) else 0
        self._sent_stream[sid] = text
        view, last = self.engine.view(sid), self._sent_view.get(sid)
        self._sent_view[sid] = view
        return {"session_id": sid, "changed": view_changes(last, view), "stream_from": start, "stream": text[start:]}

    # ---- the keepalive -----------------------------------------------------------------------
    def _arm(self, at: float) -> None:
        self._timer = self.engine.clock.call_at(at, self._keepalive)

    def _keepalive(self) -> None:
        """One timer per client, moved on to the last send's time + :attr:`keepalive`: a client
        that is sent something often costs no extra wake-up; an idle one one per keepalive."""
        now = self.engine.clock.now()
        due = self._sent_at + self.keepalive
        if now >= due:
            self._keepalive_due = True
            self._ready.set()
            due = now + self.keepalive
        self._arm(due)


KEEPALIVE_FRAME = ": keepalive\n\n"
"""An SSE comment: clients skip it, but it proves the stream alive both ways (a dead client's
socket errors; a client hears bytes at least this often)."""


def view_changes(last: SessionView | None, view: SessionView) -> dict[str, Any]:
    """The fields of ``view`` that differ from ``last`` (all of them without ``last``), as a
    view's JSON holds them: a view event carries what changed, never a big field again (a
    queue of 10 MB went out with every delta of a reply)."""
    if last is None:
        plain: dict[str, Any] = encode(view)
        return plain
    return {
        name: encode(new)
        for name, new, old in zip(VIEW_FIELDS, _view_values(view), _view_values(last), strict=True)
        if new is not old and new != old
    }


VIEW_FIELDS = tuple(f.name for f in fields(SessionView))
_view_values = attrgetter(*VIEW_FIELDS)


def sse(kind: str, data: Any) -> str:
    """One Server-Sent Event: compact JSON holds no raw newline, so it is one ``data:`` line."""
    return f"event: {kind}\ndata: {dump_json(data)}\n\n"


def engine_info(engine: LocalEngine) -> dict[str, Any]:
    """Who the engine is and how busy, for a snapshot (as ENGINE_INFO answers)."""
    return dict(encode(engine.info()))
