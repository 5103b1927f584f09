"""The engine's HTTP API (Starlette): requests that drive sessions, and one live stream.

Every route is a verb of engine/verbs.py, built from its declaration: its request is read
from the path, the query and the JSON body, :meth:`LocalEngine.call
<polypilot_tui.engine.local.LocalEngine.call>` answers it, and its reply goes back as JSON. The stream
(``GET /v1/stream``, Server-Sent Events) starts with a snapshot of every session and then
carries the changes in order: history rows as they are added or replaced, turn ends, notices,
sessions added and removed, and views. Views are coalesced per client: a burst of deltas is
one view, built when the client is ready for it, with the reply text that streamed since the
last one (never the whole reply again).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from polypilot_tui.agents.base import BackendError
from polypilot_tui.domain.changes import (
    Change,
    EventReceived,
    ItemAdded,
    ItemReplaced,
    SessionAdded,
    SessionRemoved,
    TurnEnded,
    ViewChanged,
)
from polypilot_tui.domain.limits import BODY_BYTES, size_words
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.api import BadRequest, EngineError, Verb
from polypilot_tui.engine.codec import change_to_json, decode, encode, from_text
from polypilot_tui.engine.local import LocalEngine, read_in
from polypilot_tui.engine.verbs import ENGINE_INFO, ENGINE_STOP, FOCUS_CLIENT, VERBS, EngineInfo, Focus, NoArgs
from polypilot_tui.service.wire import API, session_state
from polypilot_tui.storage.notices import Notice

log = logging.getLogger(__name__)

MAX_BODY = BODY_BYTES
"""Bytes a request body may have: the largest prompt, as a client may write it (domain/limits.py)."""


class TooLarge(BadRequest):
    """A request body over :data:`MAX_BODY`."""

    status = 413


STREAMED = (ItemAdded, ItemReplaced, SessionAdded, SessionRemoved, ViewChanged, TurnEnded)
"""The change records a client hears (not raw agent events or actions: views reflect those)."""


class StreamClient:
    """One attached client's queue: records in order, views coalesced until it reads them.

    ``only`` narrows it to one session (a command following it); ``events`` adds that
    session's agent events, in order with its changes (the reply's deltas as they come)."""

    def __init__(self, engine: LocalEngine, client_id: int, only: str | None = None, events: bool = False) -> None:
        self.engine = engine
        self.client_id = client_id
        self.only = only
        self.events_too = events and only is not None
        self._queue: list[tuple[str, Any]] = []
        self._views_queued: dict[str, int] = {}
        """Where each session's queued view sits in the queue."""
        self._sent_stream: dict[str, str] = {}
        self._sent_view: dict[str, SessionView] = {}
        self._ready = asyncio.Event()

    def on_change(self, change: Change) -> None:
        sid = change.session_id
        if self.only is not None and sid != self.only:
            return
        if isinstance(change, EventReceived):
            self._queue.append(("event", {"type": change.event.type, "data": dict(change.event.data)}))
        elif isinstance(change, ViewChanged):
            # One view per session per batch, built when sent (the latest), and after every
            # record queued before this change: a client never sees a turn over before its rows.
            earlier = self._views_queued.get(sid)
            if earlier is not None:
                self._queue[earlier] = ("moved", None)
            self._views_queued[sid] = len(self._queue)
            self._queue.append(("view", sid))
        elif isinstance(change, SessionAdded):
            self._queue.append(("session", sid))
        elif isinstance(change, SessionRemoved):
            self._queue.append(("removed", sid))
        else:
            self._queue.append(("change", change_to_json(change)))
        self._ready.set()

    def on_notice(self, notice: Notice) -> None:
        self.tell("notice", encode(notice))

    def tell(self, kind: str, data: dict[str, Any]) -> None:
        """Send ``data`` as a ``kind`` event, in order with the changes."""
        self._queue.append((kind, data))
        self._ready.set()

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
                self._views_queued[sid] = len(self._queue)
                self._queue.append(("view", sid))
                self._ready.set()
        return {"engine": engine_info(self.engine), "client": self.client_id, "sessions": sessions}

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

        return detach

    async def events(self) -> AsyncIterator[tuple[str, Any]]:
        """(event, data) in order, forever; a view is built when its turn to be sent comes."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            for event in self.drain():
                yield event

    def drain(self) -> list[tuple[str, Any]]:
        """Every event queued so far, built now (views and sessions as they are at this moment)."""
        batch, self._queue, self._views_queued = self._queue, [], {}
        live = set(self.engine.ids())  # once per batch: a burst of deltas is many views
        out: list[tuple[str, Any]] = []
        for kind, data in batch:
            if kind == "moved":
                continue
            if kind == "view":
                if data in live:
                    out.append(self._view(data))
            elif kind == "session":
                if data in live:  # a new one's empty history is sent; a reopened one's is asked for
                    out.append(("session", self._session(data, with_history=not self.engine.history(data))))
            elif kind == "removed":
                self._sent_stream.pop(data, None)
                self._sent_view.pop(data, None)
                out.append(("removed", {"session_id": data}))
            else:
                out.append((kind, data))
        return out

    def _view(self, sid: str) -> tuple[str, dict[str, Any]]:
        """The session's view now, with the reply text streamed since the last; while only the
        stream moved (most deltas), just that: a "stream" event, not the whole view again."""
        text = self.engine.streaming_text(sid)
        sent = self._sent_stream.get(sid, "")
        start = len(sent) if text.startswith(sent) else 0
        self._sent_stream[sid] = text
        view, last = self.engine.view(sid), self._sent_view.get(sid)
        self._sent_view[sid] = view
        stream = {"stream_from": start, "stream": text[start:]}
        moved = streamed_fields(view)
        if last is not None and view == replace(last, **moved):
            return "stream", {"session_id": sid, **moved, **stream}
        return "view", {"view": encode(view), **stream}


def streamed_fields(view: SessionView) -> dict[str, Any]:
    """What a delta changes in a view: a "stream" event carries these, the rest is as last sent."""
    return {
        "revision": view.revision,
        "streaming_chars": view.streaming_chars,
        "last_activity_at": view.last_activity_at,
        "gives_up_at": view.gives_up_at,
    }


def sse(kind: str, data: Any) -> str:
    """One Server-Sent Event: compact JSON holds no raw newline, so it is one ``data:`` line."""
    return f"event: {kind}\ndata: {dump_json(data)}\n\n"


def engine_info(engine: LocalEngine) -> dict[str, Any]:
    """Who the engine is and how busy, for the stream's snapshot (as ENGINE_INFO answers)."""
    return dict(encode(engine.info()))


def build_app(engine: LocalEngine, stop: Callable[[], None]) -> Starlette:
    """The API around ``engine``; ``stop`` ends the service (``POST /v1/engine/stop``)."""
    attached: list[StreamClient] = []
    clients = itertools.count(1)
    focused = [0]  # the client whose terminal had the focus last (0: none said)

    async def stream(request: Request) -> Response:
        only = request.query_params.get("session") or None
        if only is not None:
            engine.known(only)
        with_history = request.query_params.get("history") == "all"
        for sid in engine.ids() if with_history else ():
            if not await read_in(engine.history(sid)):  # rather than send placeholders as rows
                raise EngineError(f"saved chat rows of {sid} cannot be read now; ask again later")
        client = StreamClient(engine, next(clients), only, request.query_params.get("events") == "1")
        detach = client.attach()
        # Same tick as the subscribe: nothing falls in between.
        first = client.snapshot(with_history=with_history)
        attached.append(client)
        engine.watch_folders(True)

        async def events() -> AsyncIterator[str]:
            try:
                yield sse("snapshot", {**first, "focused": focused[0]})
                async for kind, data in client.events():
                    yield sse(kind, data)
            finally:
                detach()
                attached.remove(client)
                engine.watch_folders(bool(attached))

        # Starlette ends the generator when the client leaves. (sse-starlette was not used: its
        # shutdown watcher wakes twice a second for the engine's whole life, and an idle
        # engine must not poll; the framing below is the whole of what it would add.)
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def info(request: NoArgs) -> EngineInfo:
        return replace(engine.info(), attached=len(attached))

    async def focus_client(request: Focus) -> None:
        """A client's terminal has the focus: attention alerts go there (every client hears)."""
        focused[0] = request.client
        for client in attached:
            client.tell("focus", {"client": focused[0]})

    async def engine_stop(request: NoArgs) -> bool:
        for client in attached:  # a stop asked for: clients do not start a new engine
            client.tell("stopping", {})
        stop()
        return True

    # What the service answers itself: who is attached, whose terminal has the focus, its stop.
    served: dict[str, Callable[[Any], Awaitable[Any]]] = {
        ENGINE_INFO.name: info,
        FOCUS_CLIENT.name: focus_client,
        ENGINE_STOP.name: engine_stop,
    }
    routes = [
        Route(f"{API}/stream", stream, methods=["GET"]),
        *(
            Route(API + verb.path, _answer(engine, verb, served.get(verb.name)), methods=[verb.method])
            for verb in VERBS
        ),
    ]
    # Refusals are answers (ExceptionMiddleware); anything else also reaches the 500 handler.
    refusals = {EngineError: _error, ValueError: _error, BackendError: _error, Exception: _error}
    return Starlette(routes=routes, exception_handlers=refusals)


def _answer(
    engine: LocalEngine, verb: Verb[Any, Any], own: Callable[[Any], Awaitable[Any]] | None
) -> Callable[[Request], Awaitable[Response]]:
    """The route of ``verb``: its request read from the path, the query or the body, answered
    by the engine (or by ``own``, a verb the service answers itself), its reply written back."""

    async def handle(request: Request) -> Response:
        asked = await _request_of(verb, request)
        reply = await (own(asked) if own is not None else engine.call(verb, asked))
        data = encode(reply, verb.reply)
        return _json(data if verb.wrap is None else {verb.wrap: data}, verb.status)

    return handle


async def _request_of(verb: Verb[Any, Any], request: Request) -> Any:
    """The verb's request: path and query parameters are text, the body is JSON."""
    texts = dict(request.path_params)
    body = await _body(request) if verb.method == "POST" else {}
    if verb.method == "GET":
        texts.update(request.query_params)
    try:
        return decode(verb.request, {**body, **from_text(verb.request, texts)}, verb.name)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def _json(data: Any, status: int = 200) -> Response:
    """Strict JSON (dump_json: a lone surrogate an agent sent is escaped, never a failed answer)."""
    return Response(dump_json(data), status_code=status, media_type="application/json")


async def _error(request: Request, exc: Exception) -> Response:
    """Refusals say why, for people; anything unexpected is logged and said in one line."""
    if isinstance(exc, EngineError):
        return _json({"error": str(exc)}, exc.status)
    if isinstance(exc, (ValueError, BackendError)):  # a value the engine refuses; an agent that cannot
        return _json({"error": str(exc)}, BadRequest.status if isinstance(exc, ValueError) else EngineError.status)
    log.exception("request %s %s failed", request.method, request.url.path)
    return _json({"error": f"the engine failed: {type(exc).__name__}: {exc}"}, 500)


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object, read a chunk at a time up to :data:`MAX_BODY`: a body that
    says it is larger is refused before any of it is read, one that turns out larger (chunked:
    no length said) as soon as it passes the limit — never read whole first."""
    declared = request.headers.get("content-length")
    too_large = f"the request body is larger than {size_words(MAX_BODY)} ({MAX_BODY} bytes), the most the engine takes"
    if declared is not None:
        if not declared.isdigit():
            raise BadRequest("the request's Content-Length is not a number")
        if int(declared) > MAX_BODY:
            raise TooLarge(too_large)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise TooLarge(too_large)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw:
        return {}
    body = load_json(raw, "the request")
    if not isinstance(body, dict):
        raise ValueError("the request must be a JSON object")
    return body


def _text(body: dict[str, Any], key: str, required: bool = True) -> str:
    value = body.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be a string")
    return value
