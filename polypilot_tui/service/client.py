"""The one client of an engine service, over its Unix socket (httpx): for the dashboard's
RemoteEngine and for every command.

:meth:`EngineClient.call` asks any verb of engine/verbs.py (its path, body and reply all come
from its declaration), :meth:`EngineClient.history` pages through a session's rows, and
:meth:`EngineClient.stream` follows the live stream. No URL is written anywhere else.

Before a byte is sent on a new connection the socket must be this user's, in a private
folder, and the process listening on it must run as this user (``SO_PEERCRED``): another
user's listener put at the engine's path gets nothing (:class:`~polypilot_tui.infra.private.NotPrivate`,
which no caller takes for "no engine runs").
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from polypilot_tui.config import Settings
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

REQUEST_TIMEOUT = 120.0
"""Seconds a request may take: a stop waits for its grace period, a connect for an agent."""
MAX_EVENT = EVENT_BYTES
"""Bytes one stream event may have: whatever the engine accepts fits (domain/limits.py)."""
STREAM_KEEPALIVE: float = Settings.model_fields["stream_keepalive_seconds"].default
"""The longest an engine's stream stays silent (its setting may be shorter, never longer)."""
SILENCE_LIMIT = 2.5 * STREAM_KEEPALIVE
"""Seconds of a stream without a byte after which the engine is taken for gone: stopped, hung,
or the link to it dead without a word (an SSH forward whose network went away)."""


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
        self._http = httpx.AsyncClient(
            # Plain HTTP on a Unix socket: a TLS context that trusts nothing, instead of httpx's
            # default, which loads the CA bundle for every client (~20 ms each, at start too).
            transport=httpx.AsyncHTTPTransport(uds=str(socket), verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)),
            base_url="http://engine",
            timeout=httpx.Timeout(timeout, connect=5.0),
        )
        self._api: int | None = None
        """The engine's API version, once a request needed it (see :meth:`_require_sandboxes`)."""

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(self, verb: Verb[Q, R], request: Q) -> R:
        """Ask ``verb``; its reply, or the error the engine answered (UnknownSession for a 404…)."""
        sandbox = getattr(request, "sandbox", None)
        if isinstance(sandbox, Sandbox) and sandbox.on:
            await self._require_sandboxes()
        plain = encode(request, verb.request)
        path = API + verb.path.format(**{name: quote(str(plain.pop(name)), safe="") for name in verb.path_fields})
        if verb.method == "GET":
            query = {name: str(value) for name, value in plain.items() if value is not None}
            answer = await self._request(verb, "GET", path, params=query or None)
        else:
            headers = {"Content-Type": "application/json"}
            answer = await self._request(verb, "POST", path, content=dump_json(plain).encode(), headers=headers)
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

    async def _check(self, event: str, info: dict[str, Any]) -> None:
        """httpx's trace hook: a new connection is checked before anything is sent on it."""
        if event == "connection.connect_unix_socket.started":
            with contextlib.suppress(FileNotFoundError):  # nothing there: the connect says no engine answers
                check_private_socket(self.socket)
        elif event == "connection.connect_unix_socket.complete":
            stream = info["return_value"]
            try:
                other = foreign_peer(stream.get_extra_info("socket"))
                who = other.describe() if other is not None else ""
            except OSError as exc:
                who = f"who cannot be told: {exc}"
            if who:
                await stream.aclose()
                raise NotPrivate(
                    self.socket,
                    f"is listened on by a process of another user ({who}): it is not your engine, and "
                    "nothing was sent to it",
                    "have that socket removed (by that user or root)",
                )

    async def _request(self, verb: Verb[Any, Any], method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, path, extensions={"trace": self._check}, **kwargs)
        except (httpx.TransportError, FileNotFoundError) as exc:
            raise EngineUnreachable(f"no engine answers on {self.socket} ({exc})") from None
        try:
            data = load_json(response.content, f"the engine's answer to {verb.name}") if response.content else {}
        except ValueError as exc:
            raise EngineError(str(exc)) from None
        if response.status_code >= 400:
            message = data.get("error") if isinstance(data, dict) else None
            raise verb.refusal(response.status_code)(str(message or f"HTTP {response.status_code}"))
        return data

    @asynccontextmanager
    async def stream(self, **params: str) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
        """The live stream: the snapshot first, then every change (see server.py); ``params``
        narrow it (``session=ID``, and ``events="1"`` for that session's agent events too). A
        stream silent for :attr:`silence` seconds ends with :class:`EngineSilent`."""
        try:
            async with aconnect_sse(
                self._http,
                "GET",
                API + "/stream",
                params=params or None,
                timeout=httpx.Timeout(None, connect=5.0, read=self.silence),
                extensions={"trace": self._check},
            ) as source:
                if source.response.status_code != 200:
                    await source.response.aread()
                    raise EngineError(_refusal(source.response))
                yield source.aiter_sse()
        except httpx.ReadTimeout:
            raise EngineSilent(
                f"the engine on {self.socket} said nothing for {self.silence:g} s (stopped or hung?)"
            ) from None
        except (httpx.TransportError, FileNotFoundError) as exc:  # refused, or cut off (a killed engine)
            raise EngineUnreachable(f"the engine on {self.socket} is gone ({type(exc).__name__})") from None


def _refusal(response: httpx.Response) -> str:
    """What a refused stream said (its ``error``), or its status."""
    try:
        data = load_json(response.content, "the engine's refusal") if response.content else {}
    except ValueError:
        data = {}
    message = data.get("error") if isinstance(data, dict) else None
    return str(message or f"the engine refused the stream (HTTP {response.status_code})")


def event_data(event: ServerSentEvent) -> Any:
    """An event's JSON (bounded); ValueError on anything else."""
    if len(event.data) > MAX_EVENT:
        raise ValueError(f"a {event.event} event of {len(event.data)} bytes is too large")
    return load_json(event.data, f"the engine's {event.event} event")
