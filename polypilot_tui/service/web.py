"""``polypilot web``: the dashboard in a browser, served by textual-serve on loopback only.

textual-serve's :class:`~textual_serve.server.Server` does the serving: its aiohttp app has
``/`` (the page), ``/ws`` (the websocket that starts one dashboard process per connection and
carries its terminal), ``/static/…`` and ``/download/{key}``. This module adds one aiohttp
middleware in front of every route and binds the socket itself, so nothing of textual-serve is
copied:

- the listening socket is bound to 127.0.0.1 (or ::1) only, never to another address;
- a random token (``secrets.token_urlsafe``) is printed once on stdout, inside the URL to open;
  every request must show it, in ``?token=`` or in the cookie (HttpOnly, SameSite=Strict) set
  when it was shown in the URL, else 403 (compared with ``hmac.compare_digest``);
- a request for another host name is refused (DNS rebinding), a websocket from a page of
  another origin too (cookies are not per port: a page on another local port must not drive it).

The token is never logged: aiohttp's access log (which would hold the query) is off and the
dashboard processes never see it (it is neither in their command nor in their environment).
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from aiohttp import web
from textual_serve.server import Server

EXIT_OK = 0
EXIT_USAGE = 2

LOOPBACK_HOSTS: Final = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}
"""The ``--host`` values accepted, and the address each binds."""

TOKEN_PARAM = "token"
FORBIDDEN = "forbidden: open the address `polypilot web` printed, with its token\n"
SHUTDOWN_SECONDS = 5.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class NotLoopback(ValueError):
    """``--host`` named something other than this machine's loopback."""


def bind_address(host: str) -> str:
    """The loopback address ``host`` stands for, or :class:`NotLoopback`."""
    try:
        return LOOPBACK_HOSTS[host.strip().lower()]
    except KeyError:
        raise NotLoopback(
            f"serves on this machine's loopback only (127.0.0.1, localhost or ::1), not {host!r}; "
            "to reach it from elsewhere, forward the port over SSH (ssh -L PORT:127.0.0.1:PORT host)"
        ) from None


def dashboard_command(agents_file: Path | None = None, in_process: bool = False) -> str:
    """The shell command textual-serve runs for each browser connection: this dashboard, same Python
    (attached to the state folder's engine, or with ``--in-process`` its own)."""
    argv = [sys.executable, "-m", "polypilot_tui"]
    if agents_file is not None:
        argv += ["--agents-file", str(agents_file.expanduser().resolve())]
    if in_process:
        argv.append("--in-process")
    return shlex.join(argv)


def _same(shown: str | None, token: str) -> bool:
    return shown is not None and hmac.compare_digest(shown.encode("utf-8", "replace"), token.encode("utf-8"))


class TokenServer(Server):
    """textual-serve's server behind a token check, on a socket bound before the app is made."""

    def __init__(self, command: str, sock: socket.socket, token: str) -> None:
        address, port = sock.getsockname()[:2]
        url_host = f"[{address}]" if ":" in address else address
        super().__init__(command, host=address, port=port, title="polypilot", public_url=f"http://{url_host}:{port}")
        self.sock = sock
        self.token = token
        self.canonical_host = f"{url_host}:{port}"
        self.allowed_hosts = {f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")}
        self.cookie_name = f"polypilot_web_{port}"  # cookies are not per port: one per server
        self.runner: web.AppRunner | None = None
        self.connections: set[asyncio.Task[object]] = set()

    @property
    def url(self) -> str:
        """The address to open, token included: print it once, log it never."""
        return f"{self.public_url}/?{TOKEN_PARAM}={self.token}"

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.guard)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: textual-serve prints a banner here; the caller prints the one line that matters."""

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every route: the right host, then the token (query or cookie), then the websocket's origin."""
        if request.host not in self.allowed_hosts:
            raise web.HTTPForbidden(text="forbidden: unknown host name\n")
        shown = request.query.get(TOKEN_PARAM)
        from_query = _same(shown, self.token)
        if not from_query and not _same(request.cookies.get(self.cookie_name), self.token):
            raise web.HTTPForbidden(text=FORBIDDEN)
        if request.host != self.canonical_host:
            # The page's websocket goes to the canonical host: the cookie must be set for that one.
            raise web.HTTPTemporaryRedirect(f"{self.public_url}{request.path_qs}")
        origin = request.headers.get("Origin")
        if origin is not None and origin != self.public_url:
            raise web.HTTPForbidden(text="forbidden: another origin\n")
        if request.path == "/ws":
            return await self._live(request, handler)
        response = await handler(request)
        if not response.prepared:  # a websocket has already sent its headers
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["Cache-Control"] = "no-store"
            if from_query:
                response.set_cookie(self.cookie_name, self.token, httponly=True, samesite="Strict", path="/")
        return response

    async def _live(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A browser connection (one dashboard process), known so that a shutdown can end it."""
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            return await handler(request)
        finally:
            self.connections.discard(task)

    async def on_shutdown(self, app: web.Application) -> None:
        """End every connection at once: textual-serve then tells its dashboard to quit and waits.

        (aiohttp would otherwise wait its shutdown timeout for each websocket to end by itself.)
        """
        tasks = list(self.connections)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_SECONDS)

    async def start(self) -> None:
        """Serve on the bound socket (no access log: it would hold the token)."""
        app = await self._make_app()
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_SECONDS)
        await self.runner.setup()
        await web.SockSite(self.runner, self.sock).start()

    async def stop(self) -> None:
        """Close the connections; each dashboard is told to quit and waited for by textual-serve."""
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        self.sock.close()


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on the loopback address ``host`` names (port 0: the OS picks)."""
    address = bind_address(host)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_until_signalled(server: TokenServer) -> None:
    """Serve until SIGINT or SIGTERM, then stop the dashboards and the server."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    print(
        f"polypilot web: the dashboard on {server.public_url} (this machine only); "
        "open this address, which holds the access token (ctrl+c stops):",
        flush=True,
    )
    print(server.url, flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()


def run_web(host: str, port: int, agents_file: Path | None = None, in_process: bool = False) -> int:
    """``polypilot web``: exit 2 for a host that is not loopback or a port that cannot be had."""
    from polypilot_tui.infra.logs import setup_stderr_logging

    setup_stderr_logging()  # textual-serve's warnings as one line on stderr; no log file, no token
    try:
        sock = listen(host, port)
    except NotLoopback as exc:
        print(f"polypilot web: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"polypilot web: cannot listen on {host} port {port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    server = TokenServer(dashboard_command(agents_file, in_process), sock, secrets.token_urlsafe(32))
    asyncio.run(serve_until_signalled(server))
    return EXIT_OK
