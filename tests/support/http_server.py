"""A plain local HTTP server for tests: answers every GET and POST, counts what it was asked."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer(ThreadingHTTPServer):
    """On 127.0.0.1; ``asked`` counts the GETs and POSTs it answered with ``reply(path)``."""

    def __init__(self, reply: Callable[[str], bytes]) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.reply = reply
        self.asked = 0

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Answer(BaseHTTPRequestHandler):
    server: LocalServer

    def do_GET(self) -> None:
        self.server.asked += 1
        body = self.server.reply(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def local_server(reply: Callable[[str], bytes], seconds: float = 60) -> Iterator[LocalServer]:
    """A server answering ``reply(path)``, stopped at the end or after ``seconds`` at most."""
    server = LocalServer(reply)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    timer = threading.Timer(seconds, server.shutdown)
    timer.start()
    try:
        yield server
    finally:
        timer.cancel()
        server.shutdown()
        server.server_close()
        thread.join(5)
