"""Clients of a real engine's stream that misbehave on purpose: one that connects and stops
reading (a raw socket with a small receive buffer, never read until the test says), and a
dashboard's mirror in a process of its own that the test can suspend (SIGSTOP) and resume."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.support.sse import parse_sse

DRIVER = Path(__file__).with_name("mirror_driver.py")
ROOT = Path(__file__).resolve().parents[2]


class StalledClient:
    """``GET /v1/stream?QUERY`` sent on a raw socket that is then not read (its kernel buffer
    kept small, so the engine's side fills at once), until :meth:`read` is called."""

    def __init__(self, engine_socket: Path, query: str = "") -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(str(engine_socket))
        self.sock.sendall(f"GET /v1/stream{query} HTTP/1.1\r\nHost: engine\r\n\r\n".encode())
        self.sock.setblocking(False)
        self.received = b""

    async def read(
        self, quiet: float = 1.0, limit: float = 30.0, until: tuple[str, int] | None = None
    ) -> list[tuple[str, Any]]:
        """Read what the engine sends until it has been quiet for ``quiet`` seconds, or ``until``
        (kind, count) events of that kind (":" for comments) have come (at most ``limit``); the
        events of the whole stream so far (chunked framing removed)."""
        loop = asyncio.get_running_loop()
        deadline, last = loop.time() + limit, loop.time()
        while loop.time() < deadline and loop.time() - last < quiet:
            if until is not None and sum(1 for k, _ in parse_sse(dechunk(self.received)) if k == until[0]) >= until[1]:
                break
            try:
                chunk = self.sock.recv(1 << 20)
            except BlockingIOError:
                await asyncio.sleep(0.02)
                continue
            if not chunk:
                break
            self.received += chunk
            last = loop.time()
        return parse_sse(dechunk(self.received))

    def discard(self) -> int:
        """Read what has come, and drop it (a client that reads, but keeps nothing); the bytes."""
        total = 0
        while True:
            try:
                chunk = self.sock.recv(1 << 20)
            except BlockingIOError:
                return total
            if not chunk:
                return total
            total += len(chunk)

    def close(self) -> None:
        self.sock.close()


def dechunk(raw: bytes) -> str:
    """The body of an HTTP/1.1 response with chunked framing, as far as it has arrived."""
    _head, _, rest = raw.partition(b"\r\n\r\n")
    body = bytearray()
    while rest:
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line, 16)
        if size == 0 or len(rest) < size:
            body += rest[:size]
            break
        body += rest[:size]
        rest = rest[size + 2 :]
    return body.decode("utf-8", "replace")


class MirrorProcess:
    """tests/support/mirror_driver.py: a RemoteEngine attached to the engine, in a process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def ask(self, line: str, timeout: float = 60.0) -> dict[str, Any]:
        """Send a command line; its one-line JSON answer."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()
        answer = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not answer:
            raise AssertionError("the mirror process ended without answering")
        result: dict[str, Any] = json.loads(answer)
        return result


@asynccontextmanager
async def mirror_process(engine_socket: Path) -> AsyncIterator[MirrorProcess]:
    """The driver, attached (its snapshot in); killed at the end."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DRIVER),
        str(engine_socket),
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        mirror = MirrorProcess(process)
        ready = await mirror.ask("ready")
        assert ready == {"ready": True}
        yield mirror
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
