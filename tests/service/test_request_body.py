"""A request body past the engine's limit (3 MiB + 64 KiB) is refused before it is read: a real ``polypilot
serve``, bodies written on a raw socket (with their length said, and chunked), the engine's peak
memory measured from /proc."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from bench._support import proc_kib
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.verbs import SEND, Send
from polypilot_tui.service.server import MAX_BODY
from tests.support.engine_service import running_engine

pytestmark = pytest.mark.slow

BODY = 50 << 20
"""What an attacker sends: 50 MB (the limit is 3 MiB + 64 KiB)."""


def request_head(path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: engine", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer_of(sock: socket.socket, limit: float = 10.0) -> tuple[int, str]:
    """The status and body of the one answer on ``sock`` (it reads until the answer is whole)."""
    sock.settimeout(limit)
    raw = b""
    while b"\r\n\r\n" not in raw or len(raw.partition(b"\r\n\r\n")[2]) < content_length(raw):
        chunk = sock.recv(65536)
        if not chunk:
            break
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


def content_length(raw: bytes) -> int:
    for line in raw.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


async def test_a_body_over_the_limit_is_refused_413_before_it_is_read_whole() -> None:
    """50 MB said in Content-Length: 413 at once, nothing read. 50 MB sent chunked (no length
    said): 413 once the limit has passed, the rest read and dropped; the engine's peak memory (VmHWM)
    stays where it was (it read the 50 MB whole first: +95 MB). A client sending more than the
    limit reads the reason, not a broken pipe."""
    async with running_engine() as engine:
        sid = (await engine.http.post("/sessions", {"agent": "demo"}))["id"]
        path = f"/v1/sessions/{sid}/send"
        peak = proc_kib(engine.process.pid, "status", "VmHWM:")

        def said_length() -> tuple[int, str]:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(engine.socket))
                sock.sendall(request_head(path, {"Content-Type": "application/json", "Content-Length": str(BODY)}))
                return answer_of(sock)  # the body was never sent: the answer cannot wait for it

        status, body = await asyncio.to_thread(said_length)
        assert status == 413 and f"({MAX_BODY} bytes)" in body

        def chunked() -> tuple[int, str]:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(engine.socket))
                sock.sendall(request_head(path, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
                piece = b'{"prompt": "' + b"x" * (1 << 20)
                sender = threading.Thread(target=send_chunks, args=(sock, piece, BODY // len(piece)))
                sender.start()
                answer = answer_of(sock)
                sender.join(60)
                return answer

        status, body = await asyncio.to_thread(chunked)
        assert status == 413 and f"({MAX_BODY} bytes)" in body
        grown = (proc_kib(engine.process.pid, "status", "VmHWM:") - peak) / 1024
        assert grown < 8, f"the engine's peak memory grew by {grown:.0f} MiB"
        with pytest.raises(EngineError, match=f"larger than .* \\({MAX_BODY} bytes\\)"):  # our client hears why
            await engine.client.call(SEND, Send(sid, "y" * (MAX_BODY + 1)))
        assert (await engine.http.get(f"/sessions/{sid}"))["turns"] == 0  # nothing was sent


def send_chunks(sock: socket.socket, piece: bytes, count: int) -> None:
    """``count`` chunks of ``piece`` in HTTP chunked framing, then the end (stops when the
    engine has closed the connection)."""
    try:
        for _ in range(count):
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass
