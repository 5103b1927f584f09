"""Requests to an engine service over its Unix socket (httpx), for the dashboard and commands."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from polypilot_tui.domain.safe_json import load_json
from polypilot_tui.engine.api import EngineError
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

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, API + path, **kwargs)
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
                self._http, "GET", API + "/stream", params=params or None, timeout=httpx.Timeout(None, connect=5.0)
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
