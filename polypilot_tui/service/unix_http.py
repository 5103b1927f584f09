"""HTTP/1.1 to a server on a Unix socket: one connection per request, spoken with h11.

The engine's client used httpcore's connection pool, whose locks on asyncio are anyio's:
importing anyio's asyncio back end at the first request, with httpcore itself, was ~45 ms of an
attached dashboard's first frame (556 -> 510 ms, alternated starts). A connection to a Unix socket costs tens of
microseconds, so keeping connections alive saves nothing a pool is worth: each request opens
one, says ``Connection: close``, and reads its answer to the end.

A connection is handed to ``check`` before a byte is sent on it (the client refuses a listener
of another user there). Every wait is bounded: connecting, writing, and each read (the longest
silence allowed, which is what a stream that may go quiet needs).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import h11

READ_SIZE = 64 * 1024
"""Bytes asked of the socket at a time."""
CONNECT_RETRY = 0.01
"""Seconds between tries to connect while the server's queue of connections is full."""


class LinkError(Exception):
    """No answer can be had: the socket refused or is gone, or the server broke HTTP."""


class LinkTimeout(LinkError):
    """The server took longer than allowed to accept the connection or to take the request."""


class LinkSilent(LinkTimeout):
    """The server said nothing for longer than allowed while its answer was read."""


class Timeouts(NamedTuple):
    """Seconds each wait may take (None: as long as it takes). A tuple, not one of our records:
    every exchange makes one, the dashboard's first among them, and a record's class is made
    (its methods compiled, ~0.8 ms) at its first use (domain/dataclass_on_use.py)."""

    connect: float
    read: float | None
    """The longest silence while the answer is read."""
    write: float | None


class Answer:
    """The server's answer: its status, then its body as it comes."""

    def __init__(self, status: int, link: _Link) -> None:
        self.status = status
        self._link = link

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, a piece at a time, to its end (LinkError if the connection is cut first)."""
        while True:
            event = await self._link.next_event()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.chunks()])


def cut(connection: socket.socket) -> None:
    """End ``connection`` now, whatever its request is doing: a write or a read under way (or
    to come) ends with LinkError."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class _Link:
    """One connection (a non-blocking socket on the running loop) and h11's state of it."""

    def __init__(self, connection: socket.socket, timeouts: Timeouts) -> None:
        self.socket = connection
        self.timeouts = timeouts
        self.http = h11.Connection(h11.CLIENT)
        self.loop = asyncio.get_running_loop()
        self.ended = False
        """Whether the server closed its end (what an answer cut short is, not broken HTTP)."""

    async def send(self, *events: h11.Event) -> None:
        data = b"".join(self.http.send(event) or b"" for event in events)
        try:
            async with asyncio.timeout(self.timeouts.write):
                await self.loop.sock_sendall(self.socket, data)
        except TimeoutError:
            raise LinkTimeout(f"the request was not taken in {self.timeouts.write:g} s") from None
        except OSError as exc:
            raise LinkError(_said(exc)) from None

    async def next_event(self) -> h11.Event:
        while True:
            try:
                event = self.http.next_event()
            except h11.RemoteProtocolError as exc:
                if self.http.their_state is h11.ERROR and self.ended:  # h11 says so of an end mid-answer
                    raise LinkError("the connection was closed before the answer ended") from None
                raise LinkError(f"the answer is not HTTP ({exc})") from None
            if isinstance(event, h11.ConnectionClosed):
                raise LinkError("the connection was closed before the answer ended")
            if isinstance(event, h11.Event):
                return event
            if event is h11.PAUSED:  # only after a whole answer, which nothing reads past
                raise LinkError("the server said more than one answer")
            try:
                async with asyncio.timeout(self.timeouts.read):
                    data = await self.loop.sock_recv(self.socket, READ_SIZE)
            except TimeoutError:
                raise LinkSilent(f"nothing was said for {self.timeouts.read:g} s") from None
            except OSError as exc:
                raise LinkError(_said(exc)) from None
            self.ended = not data  # b"": the server closed its end
            self.http.receive_data(data)


@contextlib.asynccontextmanager
async def exchange(
    path: Path,
    method: str,
    target: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    timeouts: Timeouts,
    check: Callable[[socket.socket], None],
) -> AsyncIterator[Answer]:
    """Send one request on a new connection to ``path``; its answer, until the block ends (the
    connection is closed then). ``check`` sees the connected socket before anything is sent
    (what it raises is raised here)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.setblocking(False)
        await _connect(connection, path, timeouts.connect)
        check(connection)
        link = _Link(connection, timeouts)
        framing = [("Content-Length", str(len(body)))] if body or method == "POST" else []
        request = h11.Request(
            method=method, target=target, headers=[("Host", "engine"), ("Connection", "close"), *framing, *headers]
        )
        try:
            await link.send(request, *([h11.Data(data=body)] if body else []), h11.EndOfMessage())
        except LinkTimeout:
            raise
        except LinkError as unsent:
            # The server may have answered before it stopped reading (a 413 for a body over its
            # limit): that answer is the one to tell.
            try:
                event = await link.next_event()
            except LinkError:
                raise unsent from None
        else:
            event = await link.next_event()
        while isinstance(event, h11.InformationalResponse):  # a 100 Continue: the answer follows
            event = await link.next_event()
        if not isinstance(event, h11.Response):
            raise LinkError("the server answered no HTTP response")
        yield Answer(event.status_code, link)


async def _connect(connection: socket.socket, path: Path, seconds: float) -> None:
    """Connect ``connection`` to ``path`` within ``seconds``. A Unix socket connects at once or
    fails, but for a server whose queue of connections is full (a busy or stuck server): EAGAIN,
    and the socket is left unconnected. asyncio's sock_connect took that socket for connected (an
    unconnected one is writable), so the check saw no peer (uid -1: "another user") and a
    request was written to nowhere; tried again here, as anyio did, until there is room."""
    try:
        async with asyncio.timeout(seconds):
            while True:
                try:
                    connection.connect(str(path))
                    return
                except BlockingIOError:
                    await asyncio.sleep(CONNECT_RETRY)
    except TimeoutError:
        raise LinkTimeout(f"no connection in {seconds:g} s (the server takes none)") from None
    except OSError as exc:
        raise LinkError(_said(exc)) from None


def _said(exc: OSError) -> str:
    """What a socket error says (often nothing but its kind)."""
    return str(exc) or type(exc).__name__
