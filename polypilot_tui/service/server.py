"""The engine's HTTP API (Starlette): requests that drive sessions, and one live stream.

Every route is a verb of engine/verbs.py, built from its declaration: its request is read
from the path, the query and the JSON body, :meth:`LocalEngine.call
<polypilot_tui.engine.local.LocalEngine.call>` answers it, and its reply goes back as JSON. A
request body is read a chunk at a time up to :data:`MAX_BODY`, never whole before the limit
is checked. The stream (``GET /v1/stream``, Server-Sent Events) is one
:class:`~polypilot_tui.service.stream_client.StreamClient` per attached client.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import fields, replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from polypilot_tui.agents.base import BackendError
from polypilot_tui.domain.limits import BODY_BYTES, size_words
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.engine.api import BadRequest, EngineError, Verb
from polypilot_tui.engine.codec import decode, encode, from_text
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.read_ahead import read_in
from polypilot_tui.engine.verbs import ENGINE_INFO, ENGINE_STOP, FOCUS_CLIENT, VERBS, EngineInfo, Focus, NoArgs
from polypilot_tui.service.address import API
from polypilot_tui.service.stream_client import FRAME, FrameCache, StreamClient, sse

log = logging.getLogger(__name__)

MAX_BODY = BODY_BYTES
"""Bytes a request body may have: the largest prompt, as a client may write it (domain/limits.py)."""


class TooLarge(BadRequest):
    """A request body over :data:`MAX_BODY`."""

    status = 413


def build_app(engine: LocalEngine, stop: Callable[[], None], frame: float = FRAME) -> Starlette:
    """The API around ``engine``; ``stop`` ends the service (``POST /v1/engine/stop``); ``frame``:
    seconds between two batches of views to a client, on the engine's clock (0 on a virtual
    one, which moves only when a test moves it)."""
    attached: list[StreamClient] = []
    clients = itertools.count(1)
    frames = FrameCache()
    focused = [0]  # the client whose terminal had the focus last (0: none said)

    async def stream(request: Request) -> Response:
        only = request.query_params.get("session") or None
        if only is not None:
            engine.known(only)
        with_history = request.query_params.get("history") == "all"
        for sid in engine.ids() if with_history else ():
            if not await read_in(engine.history(sid)):  # rather than send placeholders as rows
                raise EngineError(f"saved chat rows of {sid} cannot be read now; ask again later")
        events_too = request.query_params.get("events") == "1"
        client = StreamClient(
            engine, next(clients), only, events_too, frames=frames, frame=frame, focused=lambda: focused[0]
        )
        detach = client.attach()
        # Same tick as the subscribe: nothing falls in between.
        first = client.snapshot(with_history=with_history)
        attached.append(client)
        engine.watch_folders(True)

        async def events() -> AsyncIterator[str]:
            try:
                yield sse("snapshot", first)
                async for text in client.frames():  # a batch a write: one send for a burst
                    yield text
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
    unknown = sorted(set(body) - {f.name for f in fields(verb.request)})
    if unknown:  # a newer client's field: dropping it would do less than was asked (a sandbox!)
        raise BadRequest(
            f"{verb.name}: this engine does not know {', '.join(map(repr, unknown))}: it is older than its "
            "client (stop it with `polypilot engine stop`; the next start runs the new one)"
        )
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
