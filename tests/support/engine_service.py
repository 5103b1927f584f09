"""A real engine service for tests: ``polypilot serve`` as a process of its own, in a short
state folder (Unix socket paths are limited to 107 bytes), stopped by the test, the errors it
logged failing the test (``tests/support/logged_errors.py``); or an engine of this process
served on a socket of its own in the test's loop, as ``serve`` serves it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.engine.api import Engine
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.verbs import ENGINE_INFO, NoArgs
from polypilot_tui.service.address import API, socket_path
from polypilot_tui.service.client import EngineClient, EngineUnreachable
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.service.serve import bind_socket, start_server
from polypilot_tui.service.stream_client import FRAME
from polypilot_tui.storage.lock import lock_holder
from tests.support.logged_errors import report_log_folder
from tests.support.waiting import until

START_WAIT = 30.0


def short_state_dir() -> Path:
    """A fresh private folder with a short path (its socket must fit in 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="pp-", dir="/tmp"))


def engine_env(state: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a test engine or dashboard: this state folder, fast demo, no recordings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env.update({"POLYPILOT_STATE_DIR": str(state), "POLYPILOT_DEMO_SPEED": "20", "POLYPILOT_RECORD": "false"})
    env["POLYPILOT_NPM_CACHE"] = os.environ.get("POLYPILOT_NPM_CACHE", "")
    env.update(extra or {})
    return env


class RawApi:
    """The engine's HTTP API as JSON on the wire, paths written out: what a test of the wire
    itself (its documented shapes) asserts on. Everything else asks through EngineClient."""

    def __init__(self, socket: Path) -> None:
        transport = httpx.AsyncHTTPTransport(uds=str(socket))
        self._http = httpx.AsyncClient(transport=transport, base_url="http://engine", timeout=30.0)

    async def get(self, path: str) -> Any:
        return await self._answer(await self._http.get(API + path))

    async def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return await self._answer(await self._http.post(API + path, content=dump_json(body or {}).encode()))

    @staticmethod
    async def _answer(response: httpx.Response) -> Any:
        data = load_json(response.content, str(response.url))
        assert response.status_code < 400, data
        return data

    async def aclose(self) -> None:
        await self._http.aclose()


@dataclass
class EngineProcess:
    """A running engine, the one client of its API, and its raw JSON wire (for wire tests)."""

    state: Path
    process: subprocess.Popen[bytes]
    client: EngineClient
    http: RawApi

    @property
    def socket(self) -> Path:
        return socket_path(self.state)

    async def info(self) -> dict[str, Any]:
        info = await self.http.get("/engine")
        assert isinstance(info, dict)
        return info


async def wait_until_answering(state: Path, timeout: float = START_WAIT) -> EngineClient:
    """A client of the engine of ``state`` once it answers (AssertionError after ``timeout``)."""

    async def answering() -> EngineClient | None:
        client = EngineClient(socket_path(state), timeout=30.0)
        try:
            await client.call(ENGINE_INFO, NoArgs())
            return client
        except EngineUnreachable:
            await client.aclose()
            return None

    return await until(answering, timeout, f"an engine answering on {socket_path(state)}", every=0.05)


def kill_engine_of(state: Path) -> None:
    """End whatever engine serves ``state`` (one a dashboard started detached), hard."""
    holder = lock_holder(state)
    if holder is not None and holder.pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(holder.pid, signal.SIGKILL)


@asynccontextmanager
async def running_engine(
    state: Path | None = None, env: Mapping[str, str] | None = None, keep: bool = False
) -> AsyncIterator[EngineProcess]:
    """``polypilot serve`` on ``state`` (a new short folder by default); stopped (SIGTERM, then
    SIGKILL) and its folder removed at the end unless ``keep``."""
    state = state or short_state_dir()
    process = subprocess.Popen(
        [sys.executable, "-m", "polypilot_tui", "serve"],
        env=engine_env(state, env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    client: EngineClient | None = None
    raw = RawApi(socket_path(state))
    try:
        client = await wait_until_answering(state)
        yield EngineProcess(state, process, client, raw)
    finally:
        await raw.aclose()
        if client is not None:
            await client.aclose()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, 20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        last_words = ""
        if process.stderr is not None:
            last_words = _drain(process.stderr)
            process.stderr.close()
        kill_engine_of(state)  # one a test's dashboard started after this one died
        report_log_folder(state, last_words)
        if not keep:
            shutil.rmtree(state, ignore_errors=True)


def _drain(stream: Any) -> str:
    """What a pipe holds now, without waiting (a child of the engine may still hold it open)."""
    os.set_blocking(stream.fileno(), False)
    try:
        data = stream.read() or b""
    except OSError:
        data = b""
    return str(data.decode("utf-8", "replace"))


def attached_dashboard(state: Path, agents_file: Path | None = None, **options: Any) -> Any:
    """The dashboard as ``polypilot`` builds it: attached to the engine of ``state`` (started
    detached when none runs, with this process's POLYPILOT_* environment)."""
    from polypilot_tui.config import Settings, load_agents
    from polypilot_tui.ui.launch import dashboard_on, local_connect
    from polypilot_tui.ui.theming import BUNDLED_DIR

    settings = Settings.read(None, state_dir=state, agents_file=agents_file, **options)
    return dashboard_on(
        settings,
        load_agents(agents_file),
        RemoteEngine(local_connect(settings, None)),
        theme_dirs=[BUNDLED_DIR],
        keymap_file=state / "no-keymap.toml",
        launch_folder=str(state),
    )


class ServedEngine:
    """``engine``'s API on a Unix socket of its own, in this process and loop, as ``polypilot
    serve`` serves it (bind_socket, start_server): the engine's clock may be virtual, and the
    test can reach the engine behind the socket. :meth:`open` is idempotent."""

    def __init__(self, engine: LocalEngine, *, start: bool = False) -> None:
        self.engine = engine
        self._start = start
        """Start the engine (restore its sessions) before serving, as ``serve`` does."""
        self._folder: Path | None = None
        self._sock: socket.socket | None = None
        self._server: uvicorn.Server | None = None

    async def open(self) -> Path:
        """Serve (the first time) and return the socket."""
        if self._folder is None:
            if self._start:
                await self.engine.start()
            # Views are paced on the engine's clock: a virtual one moves only when the test moves it.
            frame = 0.0 if isinstance(self.engine.clock, FakeClock) else FRAME
            self._folder = short_state_dir()
            self._sock = bind_socket(socket_path(self._folder))
            self._server = await start_server(self.engine, self._sock, lambda: None, grace=1, frame=frame)
        return socket_path(self._folder)

    async def close(self) -> None:
        """Stop serving (clients get a second to leave) and remove the socket's folder."""
        server, sock, folder = self._server, self._sock, self._folder
        self._server = self._sock = self._folder = None
        if server is not None and sock is not None:
            await server.shutdown(sockets=[sock])
            sock.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def attach(self) -> RemoteEngine:
        """A dashboard's engine as ``polypilot`` makes it, attached to this one: its first
        connect serves the engine (started), its detach stops serving and closes the engine.
        A virtual clock is shared (the engine's own times), a real one is read as over SSH."""

        async def detach() -> None:
            await self.close()
            await self.engine.close()

        clock = self.engine.clock if isinstance(self.engine.clock, FakeClock) else None
        return RemoteEngine(self.open, reconnect=False, on_detach=detach, clock=clock)


def caught_up(remote: Engine, engine: LocalEngine) -> bool:
    """The mirror ``remote`` holds what ``engine`` holds now: the sessions in order, their views,
    the replies streaming and their rows (the first look asks for a history not fetched yet)."""
    ids = engine.ids()
    return remote.ids() == ids and all(
        remote.view(sid) == engine.view(sid)
        and remote.streaming_text(sid) == engine.streaming_text(sid)
        and tuple(remote.history(sid)) == tuple(engine.history(sid))
        for sid in ids
    )


@asynccontextmanager
async def serving_in_process(engine: LocalEngine) -> AsyncIterator[Path]:
    """``engine`` served on a socket of its own in this loop (ServedEngine); yields the socket."""
    served = ServedEngine(engine)
    try:
        yield await served.open()
    finally:
        await served.close()
