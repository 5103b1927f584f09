"""The one client of an engine service, over its Unix socket: for the dashboard's
RemoteEngine and for every command.

:meth:`EngineClient.call` asks any verb of engine/verbs.py (its path, body and reply all come
from its declaration), :meth:`EngineClient.history` pages through a session's rows, and
:meth:`EngineClient.stream` follows the live stream. No URL is written anywhere else.

Before a byte is sent on a new connection the socket must be this user's, in a private
folder, and the process listening on it must run as this user (``SO_PEERCRED``): another
user's listener put at the engine's path gets nothing (:class:`~polypilot_tui.infra.private.NotPrivate`,
which no caller takes for "no engine runs").

HTTP is spoken by service/unix_http.py (h11, a connection per request): a client on one socket
needs none of httpx's URL, cookie, auth or redirect handling (importing httpx, with its command
line's click, pygments and Rich progress bars, was ~45-110 ms of every start), nor httpcore's pool
(its anyio locks were ~15 ms of every dashboard's first frame).
"""

from __future__ import annotations

import contextlib
import socket as sockets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from polypilot_tui.config import STREAM_KEEPALIVE_SECONDS
from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.limits import EVENT_BYTES
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.domain.sandbox import Sandbox
from polypilot_tui.engine.api import EngineError, Verb
from polypilot_tui.engine.codec import decode, encode
from polypilot_tui.engine.verbs import API_VERSION, ENGINE_INFO, HISTORY_PAGE, HISTORY_PAGE_OF, HistoryRange, NoArgs
from polypilot_tui.infra.private import NotPrivate, check_private_socket
from polypilot_tui.service.address import API
from polypilot_tui.service.peer import foreign_peer
from polypilot_tui.service.sse import StreamEvent, read_events
from polypilot_tui.service.unix_http import Answer, LinkError, LinkSilent, Timeouts, cut, exchange

REQUEST_TIMEOUT = 120.0
"""Seconds a request may take: a stop waits for its grace period, a connect for an agent."""
MAX_EVENT = EVENT_BYTES
"""Bytes one stream event may have: whatever the engine accepts fits (domain/limits.py)."""
STREAM_KEEPALIVE: float = STREAM_KEEPALIVE_SECONDS
"""The longest an engine's stream stays silent (its setting may be shorter, never longer)."""
SILENCE_LIMIT = 2.5 * STREAM_KEEPALIVE
"""Seconds of a stream without a byte after which the engine is taken for gone: stopped, hung,
or the link to it dead without a word (an SSH forward whose network went away)."""
CONNECT_TIMEOUT = 5.0
"""Seconds a connection to the socket may take."""


Q = TypeVar("Q")
R = TypeVar("R")


class EngineUnreachable(EngineError):
    """No engine answers on the socket (none runs, or it died)."""


class EngineSilent(EngineUnreachable):
    """The engine's stream said nothing for longer than its keepalive allows."""


class EngineClient:
    """One engine's API: its verbs and the live stream, on ``socket``."""

    def __init__(self, socket: Path | str, timeout: float = REQUEST_TIMEOUT, silence: float = SILENCE_LIMIT) -> None:
        self.socket = Path(socket)
        self.silence = silence
        """Seconds the stream may go without a byte (see :data:`SILENCE_LIMIT`)."""
        self._timeout = timeout
        self._closed = False
        """Closed by :meth:`aclose`: nothing is sent after, and the requests under way are cut."""
        self._connections: set[sockets.socket] = set()
        """The connections open: a request's until its answer is read, a stream's while it is followed."""
        self._api: int | None = None
        """The engine's API version, once a request needed it (see :meth:`_require_sandboxes`)."""

    async def aclose(self) -> None:
        self._closed = True
        for connection in list(self._connections):
            cut(connection)  # one still waiting for its answer too, as httpcore's pool cut it

    async def call(self, verb: Verb[Q, R], request: Q) -> R:
        """Ask ``verb``; its reply, or the error the engine answered (UnknownSession for a 404…)."""
        sandbox = getattr(request, "sandbox", None)
        if isinstance(sandbox, Sandbox) and sandbox.on:
            await self._require_sandboxes()
        plain = encode(request, verb.request)
        path = API + verb.path.format(**{name: quote(str(plain.pop(name)), safe="") for name in verb.path_fields})
        if verb.method == "GET":
            query = {name: str(value) for name, value in plain.items() if value is not None}
            answer = await self._request(verb, "GET", path + (f"?{urlencode(query)}" if query else ""))
        else:
            answer = await self._request(verb, "POST", path, dump_json(plain).encode())
        if verb.wrap is not None:
            if not isinstance(answer, dict) or verb.wrap not in answer:
                raise EngineError(f"the engine's answer to {verb.name} has no {verb.wrap!r}")
            answer = answer[verb.wrap]
        try:
            reply: R = decode(verb.reply, answer, f"the engine's answer to {verb.name}")
        except ValueError as exc:
            raise EngineError(str(exc)) from None
        return reply

    async def _require_sandboxes(self) -> None:
        """An engine of API 1 (running since before an upgrade) would drop a request's sandbox
        without a word and start the agent unsandboxed: refuse before anything is asked."""
        if self._api is None:
            self._api = (await self.call(ENGINE_INFO, NoArgs())).api
        if self._api < API_VERSION:
            raise EngineError(
                f"the engine on {self.socket} is older than this polypilot (API {self._api}, not {API_VERSION}): "
                "it cannot sandbox a session. Stop it (`polypilot engine stop`); the next start runs this one"
            )

    async def history(
        self, session_id: str, upto: int | None = None, start: int = 0
    ) -> AsyncIterator[tuple[int, list[ChatItem]]]:
        """The session's rows a page at a time, as (index of the first, rows), from ``start`` up
        to ``upto`` rows (None: all there are, as many as the engine counts when each page is asked)."""
        while upto is None or start < upto:
            page = await self.call(HISTORY_PAGE_OF, HistoryRange(session_id, start, HISTORY_PAGE))
            rows = list(page.items[: None if upto is None else upto - start])
            if not rows:
                return
            yield start, rows
            start += len(page.items)
            if start >= page.total:
                return

    def _check(self, connected: sockets.socket) -> None:
        """A new connection, before anything is sent on it: it must be to this user's engine."""
        try:
            other = foreign_peer(connected)
            who = other.describe() if other is not None else ""
        except OSError as exc:
            who = f"who cannot be told: {exc}"
        if who:
            raise NotPrivate(
                self.socket,
                f"is listened on by a process of another user ({who}): it is not your engine, and "
                "nothing was sent to it",
                "have that socket removed (by that user or root)",
            )

    @asynccontextmanager
    async def _exchange(self, method: str, target: str, body: bytes, timeouts: Timeouts) -> AsyncIterator[Answer]:
        """One request on a new, checked connection; its answer until the block ends."""
        if self._closed:  # a verb asked while the dashboard detaches: it must not reach the engine
            raise self._closed_error()
        with contextlib.suppress(FileNotFoundError):  # nothing there: the connect says no engine answers
            check_private_socket(self.socket)
        headers = [("Content-Type", "application/json")] if method == "POST" else []
        mine: list[sockets.socket] = []

        def checked(connected: sockets.socket) -> None:
            if self._closed:  # closed while this one was connecting: not a byte is sent on it
                raise self._closed_error()
            self._check(connected)
            mine.append(connected)
            self._connections.add(connected)

        try:
            async with exchange(self.socket, method, target, headers, body, timeouts, checked) as answer:
                yield answer
        except LinkError:
            if self._closed:  # cut by aclose: what ended it is the close, not the engine
                raise self._closed_error() from None
            raise
        finally:
            self._connections.difference_update(mine)

    def _closed_error(self) -> EngineUnreachable:
        return EngineUnreachable(f"the client of {self.socket} is closed")

    async def _request(self, verb: Verb[Any, Any], method: str, path: str, body: bytes = b"") -> Any:
        try:
            async with self._exchange(
                method, path, body, Timeouts(CONNECT_TIMEOUT, self._timeout, self._timeout)
            ) as answer:
                status, content = answer.status, await answer.read()
        except LinkError as exc:
            raise EngineUnreachable(f"no engine answers on {self.socket} ({exc})") from None
        try:
            data = load_json(content, f"the engine's answer to {verb.name}") if content else {}
        except ValueError as exc:
            raise EngineError(str(exc)) from None
        if status >= 400:
            message = data.get("error") if isinstance(data, dict) else None
            raise verb.refusal(status)(str(message or f"HTTP {status}"))
        return data

    @asynccontextmanager
    async def stream(self, **params: str) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        """The live stream: the snapshot first, then every change (see server.py); ``params``
        narrow it (``session=ID``, and ``events="1"`` for that session's agent events too). A
        stream silent for :attr:`silence` seconds ends with :class:`EngineSilent`; an event
        over :data:`MAX_EVENT` bytes ends it with ValueError."""
        target = API + "/stream" + (f"?{urlencode(params)}" if params else "")
        try:
            async with self._exchange("GET", target, b"", Timeouts(CONNECT_TIMEOUT, self.silence, None)) as answer:
                if answer.status != 200:
                    raise EngineError(_refusal(answer.status, await answer.read()))
                yield read_events(answer.chunks(), MAX_EVENT)
        except LinkSilent:
            raise EngineSilent(
                f"the engine on {self.socket} said nothing for {self.silence:g} s (stopped or hung?)"
            ) from None
        except LinkError as exc:  # refused, or cut off (a killed engine)
            raise EngineUnreachable(f"the engine on {self.socket} is gone ({exc})") from None


def _refusal(status: int, body: bytes) -> str:
    """What a refused stream said (its ``error``), or its status."""
    try:
        data = load_json(body, "the engine's refusal") if body else {}
    except ValueError:
        data = {}
    message = data.get("error") if isinstance(data, dict) else None
    return str(message or f"the engine refused the stream (HTTP {status})")


def event_data(event: StreamEvent) -> Any:
    """An event's JSON; ValueError on anything else."""
    return load_json(event.data, f"the engine's {event.event} event")
