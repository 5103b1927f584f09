"""The engine's client over its Unix socket: what making one costs."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.verbs import ENGINE_INFO, NoArgs
from polypilot_tui.service import client as client_module
from polypilot_tui.service.client import EngineClient, EngineUnreachable
from tests.support.full_queue import full_queue
from tests.support.waiting import until


async def test_a_client_loads_no_certificate_authorities(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The socket speaks plain HTTP: making a client (the dashboard's attach, every command) loads
    no CA bundle (httpx's default context did, 20-100 ms of CPU each)."""
    loaded: list[dict[str, Any]] = []
    real = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        loaded.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    client = EngineClient(tmp_path / "engine.sock")
    await client.aclose()
    assert loaded == []
    httpx.AsyncHTTPTransport(uds=str(tmp_path / "engine.sock"))  # the count can fail: httpx's default loads them
    assert len(loaded) == 1


async def test_a_closed_client_sends_nothing(tmp_path: Path) -> None:
    """httpcore's pool opens a new connection for a request after it is closed: a verb asked
    while the dashboard detaches must not reach the engine (nor leave a connection open)."""
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    socket = folder / "engine.sock"
    connections: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(answer, path=str(socket))
    try:
        client = EngineClient(socket)
        with pytest.raises(EngineError):
            await client.call(ENGINE_INFO, NoArgs())  # the server is reached while the client is open
        assert len(connections) == 1
        await client.aclose()
        with pytest.raises(EngineUnreachable, match="closed"):
            await client.call(ENGINE_INFO, NoArgs())
        with pytest.raises(EngineUnreachable, match="closed"):
            async with client.stream():
                pass
        assert len(connections) == 1
    finally:
        server.close()
        await server.wait_closed()


async def test_an_engine_too_busy_to_accept_is_unreachable_not_another_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine whose queue of connections is full (its loop blocked, thousands of clients) is
    one that does not answer: never told as "listened on by another user" (whose fix, removing
    the socket, would cut every client of a live engine)."""
    monkeypatch.setattr(client_module, "CONNECT_TIMEOUT", 0.3)
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    with full_queue(folder / "engine.sock"):
        client = EngineClient(folder / "engine.sock")
        try:
            with pytest.raises(EngineUnreachable, match="no connection"):
                await client.call(ENGINE_INFO, NoArgs())
            with pytest.raises(EngineUnreachable, match="no connection"):
                async with client.stream():
                    pass
        finally:
            await client.aclose()


async def test_closing_cuts_every_request_under_way_and_one_connecting_sends_nothing(tmp_path: Path) -> None:
    """aclose() while a request waits for its answer ends that request at once (a dashboard
    detaching is not held up by a verb the engine is slow to answer); a request still connecting
    when the client closes writes not a byte to the engine."""
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    heard: list[bytes] = []

    async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.readuntil(b"\r\n\r\n"))
        await reader.read()  # until the client goes
        writer.close()

    server = await asyncio.start_unix_server(never_answers, path=str(folder / "engine.sock"))
    try:
        client = EngineClient(folder / "engine.sock")
        waiting = asyncio.ensure_future(client.call(ENGINE_INFO, NoArgs()))
        await until(lambda: heard, 5.0, "the request reached the server")
        await client.aclose()
        with pytest.raises(EngineUnreachable, match="closed"):
            await asyncio.wait_for(waiting, 2.0)
    finally:
        server.close()
        await server.wait_closed()

    busy = tmp_path / "busy"
    busy.mkdir(mode=0o700)
    with full_queue(busy / "engine.sock") as listener:
        client = EngineClient(busy / "engine.sock")
        connecting = asyncio.ensure_future(client.call(ENGINE_INFO, NoArgs()))
        await asyncio.sleep(0)  # it has tried once: the queue is full, it waits for room
        await client.aclose()

        def make_room_and_listen() -> bytes:
            listener.settimeout(5.0)
            listener.accept()[0].close()
            served, _ = listener.accept()  # the client, connected once there was room
            with served:
                served.settimeout(5.0)
                return served.recv(4096)

        said = await asyncio.to_thread(make_room_and_listen)
        with pytest.raises(EngineUnreachable, match="closed"):
            await asyncio.wait_for(connecting, 2.0)
    assert said == b""  # closed without a byte sent
