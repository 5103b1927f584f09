"""A stand-in for the engine behind ``polypilot engine start``, until the real one lands.

``python fake_engine.py serve SOCKET PIDFILE``: an HTTP server on the Unix socket answering
``GET /v1/engine`` with a JSON object; it ends by itself after :data:`LIFETIME` seconds.

With ``FAKE_ENGINE_API=N`` in its environment it answers as an engine of API version N.

``python fake_engine.py start SOCKET PIDFILE``: the ``engine start`` contract — starts the
server detached unless one already answers on SOCKET, waits until it accepts connections,
prints ``{"socket": …, "pid": …, "started": …}`` and exits 0 (1 with a message otherwise).

Stdlib only: it runs in the test sshd's login session, outside the test process.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LIFETIME = 120.0


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/v1/engine":
            self.send_error(404)
            return
        answer: dict[str, Any] = {"engine": "fake", "pid": os.getpid()}
        api = os.environ.get("FAKE_ENGINE_API")
        if api:  # an engine of that API version: /v1/engine as the real one answers it
            now = time.monotonic()
            answer = {"pid": os.getpid(), "state_dir": "/x", "started_at": time.time(), "now": now}
            answer.update({"wall": time.time(), "sessions": 0, "running_turns": 0, "persistent": True})
            answer["api"] = int(api)
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass


class _UnixHTTPServer(ThreadingHTTPServer):
    address_family = socket.AF_UNIX
    daemon_threads = True

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "engine", 0


def accepting(path: str) -> bool:
    """Whether something accepts connections on the Unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def serve(path: str, pidfile: str) -> None:
    """Serve on ``path`` until :data:`LIFETIME` passes."""
    with open(pidfile, "w") as f:  # before it listens: a client that connects finds it
        f.write(str(os.getpid()))
    old = os.umask(0o177)
    try:
        server = _UnixHTTPServer(path, _Handler)
    finally:
        os.umask(old)
    threading.Timer(LIFETIME, server.shutdown).start()
    server.serve_forever(poll_interval=0.2)


def start(path: str, pidfile: str) -> int:
    """``engine start``: the JSON line once the engine accepts connections."""
    started = False
    if not accepting(path):
        with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
            subprocess.Popen(
                [sys.executable, __file__, "serve", path, pidfile],
                stdin=null_in,
                stdout=null_out,
                stderr=null_out,
                start_new_session=True,
            )
        started = True
        end = time.monotonic() + 10
        while not accepting(path):
            if time.monotonic() > end:
                print(f"the engine did not listen on {path} within 10 s", file=sys.stderr)
                return 1
            time.sleep(0.05)
    with open(pidfile) as f:
        pid = int(f.read())
    print(json.dumps({"socket": path, "pid": pid, "started": started}), flush=True)
    return 0


if __name__ == "__main__":
    command, sock, pids = sys.argv[1:4]
    if command == "serve":
        serve(sock, pids)
    else:
        sys.exit(start(sock, pids))
