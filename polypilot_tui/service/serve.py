"""``polypilot serve``: the engine as a process of its own, on a Unix socket in the state folder.

One engine per state folder: the state folder's lock (taken by persistence) is held from start
to exit, so a second ``serve`` exits at once naming the running one. The socket is made 0600 in
a 0700 folder of this user before anyone can connect, and every connection of another user is
closed before its request is read (service/peer.py). SIGTERM, SIGINT and ``POST
/v1/engine/stop`` end the engine the way a dashboard's quit did: turns in flight end as
interrupted and are offered for resending at the next start; everything is saved before the
process exits. An engine whose
socket is gone or another's (the state folder deleted or moved) stops the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import uvicorn

from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.infra.private import NotPrivate, private_dir, user_name
from polypilot_tui.service.address import SOCKET_PATH_MAX, socket_path
from polypilot_tui.service.peer import own_user_only
from polypilot_tui.service.server import build_app
from polypilot_tui.service.stream_client import FRAME
from polypilot_tui.storage.lock import StateFolderBusy, lock_holder
from polypilot_tui.storage.retention import prune_state_dir

log = logging.getLogger(__name__)


SHUTDOWN_GRACE = 3
"""Seconds attached clients get to close their streams when the engine stops."""


SOCKET_CHECK = 30.0
"""Seconds between two looks that the socket is still this engine's. When it is gone (the
state folder deleted or moved) or another engine's, nobody can reach this one any more: it
stops, rather than live on unreachable beside a new engine for the same folder."""


class EngineRefused(Exception):
    """The engine cannot start here (another runs, the socket path is too long, …)."""


def bind_socket(path: Path) -> socket.socket:
    """A listening Unix socket at ``path``, private (0600) from the moment it exists.

    Only a socket of this user is removed from the path first (one left by an engine that
    died: the lock says nobody uses it); anything else there is refused, never removed.
    """
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise EngineRefused(
            f"the socket path {path} is longer than {SOCKET_PATH_MAX} bytes; use a shorter state folder"
        )
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(found.st_mode):
            raise EngineRefused(f"{path} is there and is not a socket: remove it, then start the engine again")
        if found.st_uid != os.geteuid():
            raise EngineRefused(
                f"{path} is a socket of {user_name(found.st_uid)}, not yours: it was left as it is; have it "
                "removed (by that user or root), or use a state folder of your own"
            )
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(64)
    return sock


def _inode(path: Path) -> int | None:
    """The inode at ``path`` (None when nothing is there; raises OSError when it cannot tell)."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


async def _watch_socket(path: Path, inode: int, stopped: asyncio.Event, every: float) -> None:
    """Set ``stopped`` once ``path`` is no longer this engine's socket (see SOCKET_CHECK)."""
    while not stopped.is_set():
        await asyncio.sleep(every)
        try:
            now = _inode(path)
        except OSError:
            continue  # cannot tell now (a network folder, say): look again later
        if now != inode:
            log.warning("engine %d: its socket %s is gone or replaced; nobody can reach it", os.getpid(), path)
            stopped.set()


async def start_server(
    engine: LocalEngine,
    sock: socket.socket,
    stop: Callable[[], None],
    grace: int = SHUTDOWN_GRACE,
    frame: float = FRAME,
) -> uvicorn.Server:
    """The engine's API (server.py) answering on ``sock``, a listening socket (bind_socket), in
    this loop; ``stop`` is called when a client asks the engine to stop. End it with
    ``await server.shutdown(sockets=[sock])``: clients get ``grace`` seconds to leave."""
    engine.teams.socket = Path(sock.getsockname())  # the team relays' way back to the engine
    config = uvicorn.Config(
        build_app(engine, stop, frame),
        log_level="warning",
        lifespan="off",
        ws="none",  # the API is HTTP and SSE: no websocket server (its import slowed the start)
        access_log=False,
        timeout_graceful_shutdown=grace,
    )
    config.load()
    config.http_protocol_class = own_user_only(config.http_protocol_class)
    server = uvicorn.Server(config)
    # uvicorn's own serve() wakes ten times a second to look for a stop: an idle engine must
    # not poll, so the stop is the caller's and only startup() and shutdown() are uvicorn's.
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    return server


async def serve(
    settings: Settings,
    catalog: AgentCatalog,
    ready: asyncio.Event | None = None,
    *,
    socket_check: float = SOCKET_CHECK,
) -> int:
    """Run the engine until it is stopped; returns the exit code."""
    state = Path(settings.state_dir)
    try:
        private_dir(state)
    except NotPrivate as exc:
        raise EngineRefused(str(exc)) from None
    holder = lock_holder(state)
    if holder is not None:
        raise EngineRefused(f"an engine already runs for {state} ({holder.describe()})")
    engine = build_engine(settings, catalog, must_persist=True)
    try:
        await engine.start()
    except StateFolderBusy as exc:
        raise EngineRefused(f"an engine already runs for {state} ({exc.holder.describe()})") from None
    prune_state_dir(state)
    path = socket_path(state)
    try:
        sock = bind_socket(path)
    except (OSError, EngineRefused):
        await engine.close(quitting=False)
        raise
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    server = await start_server(engine, sock, stopped.set)
    log.info("engine %d listening on %s", os.getpid(), path)
    ours = os.stat(path).st_ino
    watcher = asyncio.create_task(_watch_socket(path, ours, stopped, socket_check))
    if ready is not None:
        ready.set()
    try:
        await stopped.wait()
    finally:
        watcher.cancel()
        log.info("engine stopping: %d turn(s) in flight end as interrupted", engine.running_turns())
        await engine.close(quitting=True)  # clients hear the turns end, then that the engine stops
        await server.shutdown(sockets=[sock])
        with contextlib.suppress(OSError):
            if _inode(path) == ours:  # never another engine's socket, bound since at this path
                path.unlink()
        sock.close()
    return 0
