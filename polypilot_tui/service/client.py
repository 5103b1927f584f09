"""Requests to an engine service over its Unix socket (httpx), for the dashboard and commands.

Before a byte is sent on a new connection the socket must be this user's, in a private
folder, and the process listening on it must run as this user (``SO_PEERCRED``): another
user's listener put at the engine's path gets nothing (:class:`~polypilot_tui.infra.private.NotPrivate`,
which no caller takes for "no engine runs").
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from polypilot_tui.domain.safe_json import load_json
from polypilot_tui.engine.api import EngineError
from polypilot_tui.infra.private import NotPrivate, check_private_socket
from polypilot_tui.service.peer import foreign_peer
from polypilot_tui.service.wire import API

REQUEST_TIMEOUT = 120.0
"""Seconds a request may take: a stop waits for its grace period, a connect for an agent."""
MAX_EVENT = 64 << 20
"""Bytes one stream event may have (a snapshot of hundreds of sessions fits)."""


class EngineUnreachable(EngineError):
    """No engine answers on the socket (none runs, or it died)."""


class EngineHttp:
    """One engine's API: JSON requests and the live stream, on ``socket``."""

    def __init__(self, socket: Path | str, timeout: float = REQUEST_TIMEOUT) -> None:
        self.socket = Path(socket)
        self._http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(socket)),
            base_url="http://engine",
            timeout=httpx.Timeout(timeout, connect=5.0),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get(self, path: str, **params: Any) -> Any:
        return await self._request("GET", path, params=params or None)

    async def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return await self._request("POST", path, json=body or {})

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

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, API + path, extensions={"trace": self._check}, **kwargs)
        except (httpx.TransportError, FileNotFoundError) as exc:
            raise EngineUnreachable(f"no engine answers on {self.socket} ({exc})") from None
        try:
            data = load_json(response.content, f"the engine's answer to {path}") if response.content else {}
        except ValueError as exc:
            raise EngineError(str(exc)) from None
        if response.status_code >= 400:
            message = data.get("error") if isinstance(data, dict) else None
            raise EngineError(str(message or f"HTTP {response.status_code}"))
        return data

    @asynccontextmanager
    async def stream(self, **params: str) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
        """The live stream: the snapshot first, then every change (see server.py); ``params``
        narrow it (``session=ID``, and ``events="1"`` for that session's agent events too)."""
        try:
            async with aconnect_sse(
                self._http,
                "GET",
                API + "/stream",
                params=params or None,
                timeout=httpx.Timeout(None, connect=5.0),
                extensions={"trace": self._check},
            ) as source:
                if source.response.status_code != 200:
                    await source.response.aread()
                    raise EngineError(_refusal(source.response))
                yield source.aiter_sse()
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
