"""A scripted OpenAI-compatible model server for real-agent tests (stdlib only).

It binds 127.0.0.1 on an ephemeral port, speaks Chat Completions (``/v1/chat/completions``,
streaming and not), the Responses API (``/v1/responses``) and ``GET /v1/models``, and
answers from the script in :mod:`tests.support.model_script`. It records every request so a
test can check what the agent sent, and it stops by itself after ``max_seconds`` or
``max_requests``, whichever comes first. Use it as a context manager or through the
:func:`model_server` fixture::

    with ModelServer() as server:
        provider_url = server.base_url          # http://127.0.0.1:PORT/v1
        ...
        assert "done: hi" in server.model_requests()[-1].text()

A test that needs a reply to be in the middle while it acts (quit, stop, kill mid-reply)
holds the ``SLOW`` replies instead of racing their pauses: after :meth:`ModelServer.hold` a
``SLOW`` reply stops after its first :data:`HELD_WORDS` words until
:meth:`ModelServer.release`, and then finishes without its pauses.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import select
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.model_script import (
    LastMessage,
    Reply,
    ScriptSettings,
    Turn,
    chat_turn,
    content_text,
    last_chat_message,
    last_responses_item,
    offered_tools,
    plan_reply,
    responses_turn,
)
from tests.support.waiting import until_blocking

log = logging.getLogger(__name__)

CHAT_PATH = "/chat/completions"
RESPONSES_PATH = "/responses"
MODELS_PATH = "/models"
HELD_WORDS = 5
"""Words a held ``SLOW`` reply sends before it waits (a test waits for ``word3``)."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    """Path without the optional ``/v1`` prefix and without the query string."""
    headers: dict[str, str]
    body: Any
    """Parsed JSON body, or None."""
    at: float = field(default_factory=time.monotonic)

    @property
    def is_model_call(self) -> bool:
        return self.method == "POST" and self.path in (CHAT_PATH, RESPONSES_PATH)

    @property
    def last(self) -> LastMessage:
        """The message the script decided from."""
        body = self.body if isinstance(self.body, dict) else {}
        return last_responses_item(body) if self.path == RESPONSES_PATH else last_chat_message(body)

    @property
    def turn(self) -> Turn:
        """The last user message and the tool results since (for ``STEPS``)."""
        body = self.body if isinstance(self.body, dict) else {}
        return responses_turn(body) if self.path == RESPONSES_PATH else chat_turn(body)

    def text(self) -> str:
        """Every message text of the conversation, joined (to assert history was kept)."""
        body = self.body if isinstance(self.body, dict) else {}
        items = body.get("messages") if self.path == CHAT_PATH else body.get("input")
        if isinstance(items, str):
            return items
        pieces: list[str] = []
        for item in items or []:
            if not isinstance(item, dict):
                continue
            pieces.append(content_text(item.get("content")))
            pieces.append(content_text(item.get("output")))
            for call in item.get("tool_calls") or []:
                if isinstance(call, dict):
                    pieces.append(json.dumps(call.get("function", {})))
            if isinstance(item.get("arguments"), str):
                pieces.append(item["arguments"])
        return "\n".join(p for p in pieces if p)


@dataclass(frozen=True)
class UsageReport:
    """The token counts the server sent for one model call (what the agent was told it used)."""

    request: RecordedRequest
    prompt_tokens: int
    completion_tokens: int


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # hanging handlers are released by the stop event instead
    owner: ModelServer


class ModelServer:
    """The scripted model endpoint; thread-safe, no global state."""

    def __init__(
        self,
        settings: ScriptSettings | None = None,
        *,
        max_seconds: float = 180.0,
        max_requests: int = 400,
        **overrides: Any,
    ) -> None:
        self.settings = replace(settings or ScriptSettings(), **overrides)
        self.max_seconds = max_seconds
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._usage: list[UsageReport] = []
        self._serial = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self.fault: tuple[int, Any, dict[str, str]] | None = None
        """(status, JSON body, headers) every model call gets instead of its scripted reply (a failure test)."""
        self._pace = threading.Condition()
        self._held = False
        self._hurried = False

    # -- lifetime -------------------------------------------------------------------------

    def start(self) -> ModelServer:
        """Bind 127.0.0.1:<ephemeral> and serve in a daemon thread."""
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="model-server", daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.max_seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()
        log.debug("model server on %s", self.base_url)
        return self

    def stop(self) -> None:
        """Stop serving and release every hanging response; idempotent."""
        with self._lock:
            server, self._server = self._server, None
        self._stopping.set()
        if self._timer is not None:
            self._timer.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def hold(self) -> None:
        """From now on a ``SLOW`` reply stops after :data:`HELD_WORDS` words until :meth:`release`."""
        with self._pace:
            self._held, self._hurried = True, False

    def release(self) -> None:
        """Held ``SLOW`` replies go on, and they and every later one stream without pauses."""
        with self._pace:
            self._held, self._hurried = False, True
            self._pace.notify_all()

    def pause_before(self, words: int, scripted: float) -> float | None:
        """How long a ``SLOW`` reply that sent ``words`` words waits before its next one:
        0 once released, None while it is held (ask again), else its ``scripted`` pause."""
        with self._pace:
            if self._hurried:
                return 0.0
            if self._held and words >= HELD_WORDS:
                self._pace.wait(0.1)
                return None
        return scripted

    def _expire(self) -> None:
        log.warning("model server lifetime (%.0f s) is over; stopping", self.max_seconds)
        self.stop()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def wait_stopping(self, seconds: float) -> bool:
        """Block up to ``seconds``; True once the server is stopping (handlers give up)."""
        return self._stopping.wait(seconds)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("model server is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- what was asked -------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def model_requests(self) -> list[RecordedRequest]:
        """Only the model calls (chat completions and responses)."""
        return [r for r in self.requests if r.is_model_call]

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least ``count`` model calls arrived (AssertionError otherwise)."""

        def arrived() -> list[RecordedRequest] | None:
            found = self.model_requests()
            return found if len(found) >= count else None

        return until_blocking(arrived, timeout, lambda: f"{count} model requests (saw {len(self.model_requests())})")

    def record(self, request: RecordedRequest) -> int:
        """Keep a request (thread-safe); returns how many there are now."""
        with self._lock:
            self._requests.append(request)
            return len(self._requests)

    def usage_reports(self) -> list[UsageReport]:
        """Every usage the server sent with a finished answer, oldest first (a streamed chat
        answer carries one only when the agent asked for it with ``include_usage``)."""
        with self._lock:
            return list(self._usage)

    def note_usage(self, report: UsageReport) -> None:
        with self._lock:
            self._usage.append(report)

    def _next_serial(self) -> int:
        with self._lock:
            return next(self._serial)

    def plan(self, request: RecordedRequest) -> Reply:
        """The scripted reply for a model call."""
        body = request.body if isinstance(request.body, dict) else {}
        return plan_reply(request.last, offered_tools(body), self.settings, self._next_serial(), request.turn)


class ClientGone(Exception):
    """The agent closed the connection (abort) or the server is stopping."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        log.debug("model server: " + format, *args)

    @property
    def owner(self) -> ModelServer:
        return self.server.owner

    # -- request plumbing -----------------------------------------------------------------

    def _path(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def _read_body(self) -> Any:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            raw = gzip.decompress(raw)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _recorded(self, body: Any) -> RecordedRequest | None:
        request = RecordedRequest(self.command, self._path(), dict(self.headers.items()), body)
        count = self.owner.record(request)
        if count > self.owner.max_requests:
            self._send_json(503, {"error": {"message": "model server request cap reached"}})
            threading.Thread(target=self.owner.stop, daemon=True).start()
            return None
        return request

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        request = self._recorded(None)
        if request is None:
            return
        if request.path == MODELS_PATH:
            model = self.owner.settings.model
            self._send_json(
                200,
                {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "scripted"}]},
            )
        else:
            self._send_json(404, {"error": {"message": f"no route {request.path}"}})

    def do_POST(self) -> None:
        request = self._recorded(self._read_body())
        if request is None:
            return
        if not request.is_model_call or not isinstance(request.body, dict):
            self._send_json(404, {"error": {"message": f"no route {request.path}"}})
            return
        if self.owner.fault is not None:
            self._send_json(*self.owner.fault)
            return
        reply = self.owner.plan(request)
        responses = request.path == RESPONSES_PATH
        try:
            if request.body.get("stream"):
                self._stream(request.body, reply, responses)
            elif reply.kind == "hang":
                self._wait(None)
            else:
                shape = _responses_object if responses else _chat_object
                self._send_json(200, shape(request.body, reply, self.owner.settings.model))
            streamed_chat = request.body.get("stream") and not responses
            if not streamed_chat or (request.body.get("stream_options") or {}).get("include_usage"):
                self.owner.note_usage(UsageReport(request, *_usage(request.body, reply.text or reply.arguments)))
        except (ClientGone, BrokenPipeError, ConnectionResetError):
            log.debug("model server: client left during %s", request.path)
        finally:
            self.close_connection = True

    # -- streaming ------------------------------------------------------------------------

    def _client_left(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _wait(self, seconds: float | None) -> None:
        """Sleep ``seconds`` (None: forever) unless the server stops or the client leaves."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            step = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if step <= 0:
                return
            if self.owner.wait_stopping(step) or self._client_left():
                raise ClientGone()

    def _pause(self, words: int, scripted: float) -> None:
        """The pause of a ``SLOW`` reply before its next word (long while the server holds it)."""
        while (seconds := self.owner.pause_before(words, scripted)) is None:
            if self.owner.stopped or self._client_left():
                raise ClientGone()
        self._wait(seconds)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, body: dict[str, Any], reply: Reply, responses: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        if reply.kind == "hang":
            self._wait(None)
        model = self.owner.settings.model
        steps = _responses_events(body, reply, model) if responses else _chat_chunks(body, reply, model)
        words = 0
        for step in steps:
            if isinstance(step, float):
                self._pause(words, step)
                words += 1
            else:
                self._chunk(step.encode())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# -- payload shapes -----------------------------------------------------------------------


def _usage(body: dict[str, Any], text: str) -> tuple[int, int]:
    return max(1, len(json.dumps(body)) // 4), max(1, len(text) // 4)


def _chat_chunks(body: dict[str, Any], reply: Reply, model: str) -> Iterator[str | float]:
    """SSE lines of a streamed chat completion; floats are pauses."""
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        obj = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(obj)}\n\n"

    if reply.kind == "tool":
        yield chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": reply.call_id,
                        "type": "function",
                        "function": {"name": reply.tool_name, "arguments": ""},
                    }
                ],
            }
        )
        args = reply.arguments
        for start in range(0, len(args), 16):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[start : start + 16]}}]})
        yield chunk({}, "tool_calls")
    else:
        yield chunk({"role": "assistant", "content": ""})
        for piece in reply.chunks:
            if reply.interval:
                yield reply.interval
            yield chunk({"content": piece})
        yield chunk({}, "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        prompt, completion = _usage(body, reply.text or reply.arguments)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        yield (
            "data: "
            + json.dumps(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
            + "\n\n"
        )
    yield "data: [DONE]\n\n"


def _chat_object(body: dict[str, Any], reply: Reply, model: str) -> dict[str, Any]:
    """A non-streamed chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    finish = "stop"
    if reply.kind == "tool":
        message["tool_calls"] = [
            {
                "id": reply.call_id,
                "type": "function",
                "function": {"name": reply.tool_name, "arguments": reply.arguments},
            }
        ]
        finish = "tool_calls"
    prompt, completion = _usage(body, reply.text or reply.arguments)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def _response_items(reply: Reply) -> list[dict[str, Any]]:
    if reply.kind == "tool":
        return [
            {
                "type": "function_call",
                "id": f"fc_{reply.call_id}",
                "call_id": reply.call_id,
                "name": reply.tool_name,
                "arguments": reply.arguments,
                "status": "completed",
            }
        ]
    return [
        {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
    ]


def _response_envelope(body: dict[str, Any], reply: Reply, model: str, rid: str, done: bool) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "completed" if done else "in_progress",
        "output": _response_items(reply) if done else [],
    }
    if done:
        prompt, completion = _usage(body, reply.text or reply.arguments)
        envelope["usage"] = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }
    return envelope


def _responses_object(body: dict[str, Any], reply: Reply, model: str) -> dict[str, Any]:
    """A non-streamed Responses API answer."""
    return _response_envelope(body, reply, model, f"resp_{uuid.uuid4().hex[:12]}", done=True)


def _responses_events(body: dict[str, Any], reply: Reply, model: str) -> Iterator[str | float]:
    """SSE events of a streamed Responses API answer (the minimal set codex accepts)."""
    rid = f"resp_{uuid.uuid4().hex[:12]}"
    seq = itertools.count()

    def event(kind: str, **fields: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': next(seq), **fields})}\n\n"

    yield event("response.created", response=_response_envelope(body, reply, model, rid, done=False))
    item = _response_items(reply)[0]
    if reply.kind == "tool":
        yield event("response.output_item.added", output_index=0, item=item)
    else:
        started = {**item, "status": "in_progress", "content": []}
        yield event("response.output_item.added", output_index=0, item=started)
        for piece in reply.chunks:
            if reply.interval:
                yield reply.interval
            yield event("response.output_text.delta", item_id=item["id"], output_index=0, content_index=0, delta=piece)
    yield event("response.output_item.done", output_index=0, item=item)
    yield event("response.completed", response=_response_envelope(body, reply, model, rid, done=True))


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A running scripted model server, stopped when the test ends."""
    with ModelServer() as server:
        yield server
