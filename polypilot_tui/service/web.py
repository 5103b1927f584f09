"""``polypilot web``: the dashboard in a browser, served by textual-serve on loopback only.

textual-serve's :class:`~textual_serve.server.Server` does the serving: its aiohttp app has
``/`` (the page), ``/ws`` (the websocket that starts one dashboard process per connection and
carries its terminal), ``/static/…`` and ``/download/{key}``. This module binds the sockets, adds
three routes and one aiohttp middleware in front of every route, and one script at the end of
the page (web_page.js); nothing of textual-serve is copied. Who may get in (web_access.py):

- the listening sockets are bound to 127.0.0.1 and ::1 only, never to another address (the one
  not asked for is held so that no one else gets ``localhost:PORT``);
- a random token is printed once on stdout, in the fragment of the address to open
  (``http://127.0.0.1:PORT/#token=…``): browsers send a fragment to no server, in no Referer;
  and written in a private page in the state folder (``web-PORT.html``, 0600, removed at the
  end) that sends the browser there: opened by its file name, the token stays off the
  browser's command line, which every user of the machine can read in ``ps`` (Jupyter's way);
- the page and its static files hold no secret and are served to anyone on the machine; the
  page's script takes the token out of the address bar and shows it (``Authorization: Bearer``)
  to ``POST /key``, which answers the websocket's address with a page key in it
  (``/ws/{key}``): good once, for seconds; textual-serve's own ``/ws`` is refused;
- no cookie is ever set: browsers send 127.0.0.1's cookies to every port of 127.0.0.1, so a
  server another local user runs on another port would receive it;
- ``/key`` and the websocket want this page's Origin; a request for another host name is
  refused (DNS rebinding); every answer says no-referrer, no-store, not in a frame of another
  page, and no opener for the windows the page opens (their page could navigate ours).

The token is never logged: aiohttp's access log is off and the dashboard processes never see it
(it is neither in their command nor in their environment), nor a page key.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from aiohttp import web
from textual_serve.server import Server

from polypilot_tui.domain.clock import Clock, SystemClock
from polypilot_tui.infra import event_loop
from polypilot_tui.infra.private import atomic_write, private_dir
from polypilot_tui.service.web_access import PageKeys, new_secret, shows_token

EXIT_OK = 0
EXIT_USAGE = 2

LOOPBACK_HOSTS: Final = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}
"""The ``--host`` values accepted, and the address each binds."""
LOOPBACK_TWINS: Final = {"127.0.0.1": "::1", "::1": "127.0.0.1"}
"""The other loopback, where a browser may look for ``localhost`` too: held as well."""
TWIN_TRIES = 20

OPENER_NAME = "web-{port}.html"
"""The private page in the state folder that opens the address with the token."""
KEY_PATH = "/key"
PAGE_SCRIPT_PATH = "/polypilot/page.js"
PAGE_SCRIPT: Final = Path(__file__).with_name("web_page.js")
PUBLIC_ROUTES: Final = {"index", "static", "page-script"}
"""textual-serve's page and static files, and our script: nothing secret in them."""
PAGE_ROUTES: Final = {"page-key", "page-websocket"}
"""What only this server's page may use: the page's Origin, and the token or a page key."""
SAFE_HEADERS: Final = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    # A window the page opens (a link in the dashboard) gets no handle on it.
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Never in a frame of another page (a page on another port could dress it up and get clicks).
    "Content-Security-Policy": "frame-ancestors 'none'; connect-src 'self'; form-action 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}
NO_TOKEN = "forbidden: open the address `polypilot web` printed, with its token\n"
NO_PAGE_KEY = "forbidden: the websocket needs a page key from this server's page (reload the page)\n"
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
    argv = [sys.executable, "-P", "-m", "polypilot_tui"]  # -P: its folder's modules are not imported
    if agents_file is not None:
        argv += ["--agents-file", str(agents_file.expanduser().resolve())]
    if in_process:
        argv.append("--in-process")
    return shlex.join(argv)


class TokenServer(Server):
    """textual-serve's server behind the token and page keys, on sockets bound before the app is made."""

    def __init__(self, command: str, socks: list[socket.socket], token: str, clock: Clock | None = None) -> None:
        address, port = socks[0].getsockname()[:2]
        url_host = f"[{address}]" if ":" in address else address
        super().__init__(command, host=address, port=port, title="polypilot", public_url=f"http://{url_host}:{port}")
        self.socks = socks
        """The canonical address's first, then the other loopback's at the same port (if any)."""
        self.token = token
        self.page_keys = PageKeys(clock or SystemClock())
        self.canonical_host = f"{url_host}:{port}"
        self.allowed_hosts = {f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")}
        self.runner: web.AppRunner | None = None
        self.connections: set[asyncio.Task[object]] = set()

    @property
    def url(self) -> str:
        """The address to open, token included (in the fragment): print it once, log it never."""
        return f"{self.public_url}/#token={self.token}"

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.router.add_post(KEY_PATH, self.handle_key, name="page-key")
        app.router.add_get("/ws/{key}", self.handle_page_websocket, name="page-websocket")
        app.router.add_get(PAGE_SCRIPT_PATH, self.handle_page_script, name="page-script")
        app.middlewares.append(self.guard)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: textual-serve prints a banner here; the caller prints the one line that matters."""

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every route: checked (:meth:`check`), and every answer with :data:`SAFE_HEADERS`."""
        try:
            self.check(request)
            response = await handler(request)
        except web.HTTPException as refused:
            refused.headers.update(SAFE_HEADERS)
            raise
        if not response.prepared:  # a websocket has already sent its headers
            response.headers.update(SAFE_HEADERS)
        return response

    def check(self, request: web.Request) -> None:
        """The right host name; then the page and its files for anyone, the page's routes for its
        own Origin only (the token or the page key is each route's own check), nothing else."""
        if request.host not in self.allowed_hosts:
            raise web.HTTPForbidden(text="forbidden: unknown host name\n")
        if request.host != self.canonical_host:
            # The page's origin is the canonical address: its websocket and /key want that Origin.
            raise web.HTTPTemporaryRedirect(f"{self.public_url}{request.path_qs}")
        route = request.match_info.route.name
        if route in PUBLIC_ROUTES:
            return
        if route in PAGE_ROUTES:
            if request.headers.get("Origin") != self.public_url:
                raise web.HTTPForbidden(text="forbidden: not this server's page\n")
            return
        if route == "websocket":  # textual-serve's own, keyless
            raise web.HTTPForbidden(text=NO_PAGE_KEY)
        raise web.HTTPNotFound(text="not found\n")  # downloads (the dashboard offers none), the rest

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, with web_page.js at its end (it holds the websocket back until
        it has a page key). Only a script tag is added, so the template stays textual-serve's."""
        page = await super().handle_index(request)
        if not isinstance(page, web.Response) or page.text is None or page.text.count("</body>") != 1:
            raise web.HTTPInternalServerError(text="textual-serve's page has changed: no place for the page's script\n")
        page.text = page.text.replace("</body>", f'<script src="{PAGE_SCRIPT_PATH}"></script>\n</body>')
        return page

    async def handle_page_script(self, request: web.Request) -> web.StreamResponse:
        """web_page.js, the page's side of the access (read at each load: small, and no state)."""
        return web.Response(text=PAGE_SCRIPT.read_text(encoding="utf-8"), content_type="text/javascript")

    async def handle_key(self, request: web.Request) -> web.StreamResponse:
        """``POST /key`` with the token: the websocket's address with a new page key in it."""
        if not shows_token(request.headers.get("Authorization"), self.token):
            raise web.HTTPForbidden(text=NO_TOKEN)
        ws_url = "ws:" + self.public_url.split(":", 1)[1]
        return web.json_response({"websocket": f"{ws_url}/ws/{self.page_keys.mint()}"})

    async def handle_page_websocket(self, request: web.Request) -> web.StreamResponse:
        """The websocket, for a page key that is good (it is spent here, whatever follows)."""
        if not self.page_keys.redeem(request.match_info["key"]):
            raise web.HTTPForbidden(text=NO_PAGE_KEY)
        return await self._live(request, self.handle_websocket)

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
        """Serve on the bound sockets (no access log: keep request lines and page keys out of logs)."""
        app = await self._make_app()
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_SECONDS)
        await self.runner.setup()
        for sock in self.socks:
            await web.SockSite(self.runner, sock).start()

    async def stop(self) -> None:
        """Close the connections; each dashboard is told to quit and waited for by textual-serve."""
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        for sock in self.socks:
            sock.close()


def listen(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on the loopback address ``host`` names (port 0: the OS picks), first,
    and on the machine's other loopback at the same port when it has one.

    A browser may try ``localhost:PORT`` on ::1 before 127.0.0.1: whoever listens on the twin
    would get the page, and its script the token in the address's fragment. So the twin is held
    too (its requests are sent to the canonical address), or the port is not used: with a port
    given, a twin taken by another program is an error; with port 0 another port is tried.
    """
    address = bind_address(host)
    twin = LOOPBACK_TWINS[address]
    for _ in range(TWIN_TRIES if port == 0 else 1):
        first = _listening(address, port)
        try:
            return [first, _listening(twin, first.getsockname()[1])]
        except OSError as exc:
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                return [first]  # no such loopback here: no one can listen there either
            first.close()
            if exc.errno != errno.EADDRINUSE:
                raise
    raise OSError(
        errno.EADDRINUSE,
        f"the same port on {twin} is taken by another program (a browser that opens localhost at "
        "this port could reach it instead)",
    )


def _listening(address: str, port: int) -> socket.socket:
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


def opener_page(url: str) -> bytes:
    """A page that sends the browser to ``url`` at once (replacing itself in the tab's history)."""
    target = json.dumps(url)  # a JS string; the token is URL-safe, so it is HTML-safe too
    return (
        '<!doctype html>\n<meta charset="utf-8">\n<meta name="referrer" content="no-referrer">\n'
        f"<title>polypilot</title>\n<script>location.replace({target});</script>\n"
        "<p>Opening polypilot\u2026 (JavaScript is needed.)</p>\n"
    ).encode()


def write_opener(folder: Path, server: TokenServer) -> Path:
    """The private page (0600, never through a link) that opens ``server``'s address."""
    path = private_dir(folder) / OPENER_NAME.format(port=server.socks[0].getsockname()[1])
    atomic_write(path, opener_page(server.url))
    return path


async def serve_until_signalled(server: TokenServer, opener_folder: Path) -> None:
    """Serve until SIGINT or SIGTERM, then stop the dashboards and the server (and remove the
    opener page: its token dies with the server anyway)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    opener = write_opener(opener_folder, server)
    try:
        print(
            f"polypilot web: the dashboard on {server.public_url} (this machine only); open this page, which "
            "holds the access token (a browser started with the address itself shows the token to every user "
            "of this machine in its command line; ctrl+c stops):",
            flush=True,
        )
        print(opener.as_uri(), flush=True)
        print("or paste this address into a browser's address bar (the page then takes it out):", flush=True)
        print(server.url, flush=True)
        await stop.wait()
    finally:
        with contextlib.suppress(FileNotFoundError):
            opener.unlink()
        await server.stop()


def run_web(host: str, port: int, state_dir: Path, agents_file: Path | None = None, in_process: bool = False) -> int:
    """``polypilot web``: exit 2 for a host that is not loopback or a port that cannot be had
    (the opener page goes in ``state_dir``)."""
    from polypilot_tui.infra.logs import setup_stderr_logging

    setup_stderr_logging()  # textual-serve's warnings as one line on stderr; no log file, no token
    try:
        socks = listen(host, port)
    except NotLoopback as exc:
        print(f"polypilot web: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"polypilot web: cannot listen on {host} port {port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    server = TokenServer(dashboard_command(agents_file, in_process), socks, new_secret())
    event_loop.run(serve_until_signalled(server, state_dir))
    return EXIT_OK
