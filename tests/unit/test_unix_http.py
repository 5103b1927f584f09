"""HTTP/1.1 on a Unix socket (service/unix_http.py) against real servers on real sockets: what
each broken or slow server makes of a request, and that every wait ends."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from polypilot_tui.service.peer import peer_of
from polypilot_tui.service.unix_http import LinkError, LinkSilent, LinkTimeout, Timeouts, cut, exchange
from tests.support.full_queue import full_queue

QUICK = Timeouts(connect=2.0, read=0.3, write=2.0)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def server(tmp_path: Path, handle: Handler) -> AsyncIterator[Path]:
    path = tmp_path / "s.sock"
    listening = await asyncio.start_unix_server(handle, str(path))
    try:
        yield path
    finally:
        listening.close()
        await listening.wait_closed()


async def request_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


def answering(raw: bytes) -> Handler:
    """A server that reads a request's head, says ``raw`` and closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(raw)
        await writer.drain()
        writer.close()

    return handle


def nothing(_connected: socket.socket) -> None:
    """A check that lets every connection through."""


async def test_an_answer_is_read_whole_and_the_request_says_what_it_is(tmp_path: Path) -> None:
    heard: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await request_head(reader)
        heard.append(head + await reader.readexactly(7))
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\nhello ")
        await writer.drain()
        await asyncio.sleep(0.05)  # the body in two reads
        writer.write(b"world")
        await writer.drain()
        writer.close()

    async with (
        server(tmp_path, handle) as path,
        exchange(
            path, "POST", "/v1/x?a=1", [("Content-Type", "application/json")], b'{"a":1}', QUICK, nothing
        ) as answer,
    ):
        assert (answer.status, await answer.read()) == (201, b"hello world")
    head = heard[0].lower()
    assert head.startswith(b"post /v1/x?a=1 http/1.1\r\n")
    assert b"content-length: 7" in head and b"connection: close" in head and head.endswith(b'{"a":1}')


async def test_a_broken_server_is_a_link_error_never_a_hang(tmp_path: Path) -> None:
    """No socket; a server that says no HTTP; one that closes in the middle of its body."""
    with pytest.raises(LinkError):
        async with exchange(tmp_path / "none.sock", "GET", "/", [], b"", QUICK, nothing):
            pass

    async with server(tmp_path, answering(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")) as path:
        with pytest.raises(LinkError, match="not HTTP"):
            async with exchange(path, "GET", "/", [], b"", QUICK, nothing):
                pass

    cut_short = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
    async with server(tmp_path, cut_short) as path, exchange(path, "GET", "/", [], b"", QUICK, nothing) as answer:
        assert answer.status == 200
        with pytest.raises(LinkError):
            await answer.read()


async def test_silence_ends_a_read_and_a_refused_check_sends_nothing(tmp_path: Path) -> None:
    heard: list[bytes] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.read(100))
        await asyncio.sleep(5)  # answers nothing (the test's read timeout is 0.3 s)
        writer.close()

    def refuse(_connected: socket.socket) -> None:
        raise PermissionError("not ours")

    async with server(tmp_path, silent) as path:
        with pytest.raises(LinkSilent):
            async with exchange(path, "GET", "/", [], b"", QUICK, nothing):
                pass
        with pytest.raises(PermissionError):
            async with exchange(path, "GET", "/secret", [], b"", QUICK, refuse):
                pass
        async with asyncio.timeout(2.0):  # the server has read the refused connection's end
            while len(heard) < 2:
                await asyncio.sleep(0.01)
    assert len(heard) == 2 and heard[0].startswith(b"GET / ") and heard[1] == b""  # the refused one: not a byte


async def test_a_cut_ends_a_stream_being_read(tmp_path: Path) -> None:
    async def streaming(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await asyncio.sleep(5)
        writer.close()

    patient = Timeouts(connect=2.0, read=None, write=2.0)
    connections: list[socket.socket] = []
    async with (
        server(tmp_path, streaming) as path,
        exchange(path, "GET", "/stream", [], b"", patient, connections.append) as answer,
    ):
        chunks = answer.chunks()
        assert await anext(chunks) == b"first"
        waiting = asyncio.ensure_future(anext(chunks))
        await asyncio.sleep(0.05)
        cut(connections[0])  # as the client's close cuts it
        with pytest.raises(LinkError):
            await asyncio.wait_for(waiting, 2.0)


async def test_a_write_the_server_does_not_take_times_out(tmp_path: Path) -> None:
    """A server that never reads: a big body fills the socket's buffers, the write gives up."""

    async def deaf(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        writer.close()

    async with server(tmp_path, deaf) as path:
        stuck = Timeouts(connect=2.0, read=2.0, write=0.3)
        with pytest.raises(LinkTimeout) as raised:
            async with exchange(path, "POST", "/", [], b"x" * (32 << 20), stuck, nothing):
                pass
        assert not isinstance(raised.value, LinkSilent)


async def test_a_server_whose_queue_is_full_is_waited_for_and_never_taken_for_connected(tmp_path: Path) -> None:
    """A full queue refuses a connect with EAGAIN and leaves the socket unconnected: the check
    must never see that socket (its peer reads as uid -1, "another user"), nothing is written to
    it, and the wait is the connect timeout; once the server makes room, the request goes through."""
    checked: list[int] = []

    def check(connected: socket.socket) -> None:
        checked.append(peer_of(connected).uid)

    path = tmp_path / "busy.sock"
    with full_queue(path) as listener:
        with pytest.raises(LinkTimeout):
            async with exchange(path, "GET", "/", [], b"", Timeouts(connect=0.3, read=2.0, write=2.0), check):
                pass
        assert checked == []

        def make_room_and_answer() -> bytes:
            listener.settimeout(5.0)
            listener.accept()[0].close()  # the one waiting: room for the client trying meanwhile
            served, _ = listener.accept()
            with served:
                head = served.recv(4096)
                served.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
            return head

        async def ask() -> int:
            async with exchange(path, "GET", "/late", [], b"", QUICK, check) as answer:
                return answer.status

        asking = asyncio.ensure_future(ask())
        await asyncio.sleep(0)  # it has tried once: the queue is full
        head = await asyncio.to_thread(make_room_and_answer)
        assert await asyncio.wait_for(asking, 5.0) == 204
    assert head.startswith(b"GET /late ") and checked == [os.geteuid()]


@pytest.mark.parametrize(
    "said",
    [b"", b"HTTP/1.1 20", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", b"HTTP/1.1 200 OK\r\n"],
)
async def test_a_server_that_ends_mid_answer_is_told_as_gone_not_as_broken_http(tmp_path: Path, said: bytes) -> None:
    """An engine killed mid-request closes its end: that is what the error says (h11 calls it a
    protocol error, which read as "the answer is not HTTP", as if something else listened)."""

    async def ends(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(said)
        await writer.drain()
        writer.close()

    async with server(tmp_path, ends) as path:
        with pytest.raises(LinkError, match="closed before the answer ended"):
            async with exchange(path, "GET", "/", [], b"", QUICK, nothing) as answer:
                await answer.read()
