"""One Copilot CLI process per agent configuration, shared by the sessions that use it.

A CLI is 290–450 MiB; the SDK runs many sessions on one client (events, permissions, abort
and ``set_model`` are all per session id), so sessions whose CLI would be started the same
way share one. "The same way" is the :class:`ServerSpec`: the argv (command and args), the
full environment (which holds the BYOK settings, ``COPILOT_HOME`` and the default model) and
whether the CLI signs in to GitHub. Everything else is per session and is passed on create
and resume: the working directory (the CLI runs each session's tools in its own
``workingDirectory``, verified), the provider (with its key) and the model.

A server is started by the first session that joins it, counted by the sessions on it, and
stopped when the last one leaves. When it dies (crash, or a Kill to stop one session's turn),
every session on it is told (``connection.lost``, once each) and the pool forgets it, so the
next connect of any of them (the engine's resume) starts a new one.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import weakref
from typing import Any, Protocol

from polypilot_tui.agents.copilot.cli_spec import ServerSpec, server_cwd
from polypilot_tui.agents.copilot.runtime import install_hooks, kill_tree, watch_process
from polypilot_tui.agents.copilot.sdk_errors import sdk_failures
from polypilot_tui.agents.copilot.sdk_import import import_sdk
from polypilot_tui.agents.copilot.sdk_import import install as install_sdk_import
from polypilot_tui.agents.copilot.spawn import adopt, spawn_cli
from polypilot_tui.domain.exit_status import exit_text

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 10.0
"""How long a graceful stop (or a session's detach, half of it) may take before it is forced."""
PING_TIMEOUT = 5.0
"""How long a CLI may take to answer a ping before a session that timed out has it killed."""


class ServerMember(Protocol):
    """What a server needs of a session on it (the session's event intake)."""

    def on_raw_event(self, session_id: str, raw: dict[str, Any]) -> None:
        """An event the SDK could not parse, for whichever session it names."""

    def mark_lost(self, reason: str) -> None:
        """The CLI is gone: report ``connection.lost`` (once)."""


class CopilotServer:
    """One CLI process and the SDK client on it, shared by the sessions of one spec."""

    def __init__(self, spec: ServerSpec, loop: asyncio.AbstractEventLoop) -> None:
        self.spec = spec
        self.loop = loop
        self.members: set[ServerMember] = set()
        self.client: Any = None
        """The ``CopilotClient`` once created (None after the server stopped)."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.dead = False
        """Lost, killed or stopping: no session may join it any more."""
        self._starting: asyncio.Task[None] | None = None

    def __repr__(self) -> str:  # the spec's env (keys) stays out of it
        pid = self.proc.pid if self.proc is not None else None
        return f"<CopilotServer pid={pid} members={len(self.members)} dead={self.dead}>"

    @property
    def alive(self) -> bool:
        """The process runs and the server has not been given up."""
        return not self.dead and self.proc is not None and self.proc.poll() is None

    def start(self, spawned: subprocess.Popen[bytes] | None = None) -> asyncio.Task[None]:
        """Boot the CLI now (:meth:`boot`; ``spawned``: the CLI already started with this
        spec, agents/head_start.py) and connect the SDK to it in a task (:meth:`launch`):
        once, by the first caller; the task ends when the SDK client is connected.

        The start is a task of its own: one session's connect being cancelled (Stop) must
        not cancel the start others wait for; the last one leaving cancels it.
        """
        if self._starting is not None and spawned is not None:  # started already: that one is not needed
            kill_tree(spawned)
            spawned.wait()
        if self._starting is None:
            self.proc = spawned
            try:
                imported = self.boot()
            except BaseException:
                self._give_up()
                raise
            self._starting = self.loop.create_task(self.launch(imported), name="copilot-cli-start")
            self._starting.add_done_callback(_seen)  # its failure is each waiter's to report, or no one's
        return self._starting

    def boot(self) -> asyncio.Future[Any]:
        """Spawn the CLI (unless :meth:`start` was handed it), and start importing the SDK in a
        thread, at once; the import's future. The CLI boots while the SDK imports (~0.25 s,
        sdk_import.py), off the loop: the first Copilot session does not freeze the dashboard,
        and a run goes on loading meanwhile."""
        if self.proc is None:
            self.proc = spawn_cli(
                list(self.spec.argv), dict(self.spec.env), server_cwd(), use_logged_in_user=self.spec.logged_in
            )
        install_sdk_import()  # here, on the loop's thread, before any thread imports
        return self.loop.run_in_executor(None, import_sdk)

    async def ready(self) -> None:
        """Start the CLI once (:meth:`start`); everyone waits for the same start."""
        await asyncio.shield(self.start())

    async def launch(self, imported: asyncio.Future[Any]) -> None:
        """Connect the SDK client to the CLI once the SDK is ``imported``: run once, by :meth:`start`."""
        assert self.proc is not None
        try:
            await imported
            from copilot import CopilotClient, RuntimeConnection

            argv = list(self.spec.argv)
            self.client = CopilotClient(
                connection=RuntimeConnection.for_stdio(path=argv[0], args=tuple(argv[1:])),
                env=dict(self.spec.env),
                working_directory=server_cwd(),
                use_logged_in_user=self.spec.logged_in,
            )
            adopt(self.client, self.proc)
            await self.client.start()
        except BaseException:
            self._give_up()
            raise
        # The SDK does not expose the CLI process; its private attribute is the only handle.
        self.proc = getattr(self.client, "_cli_process", None) or self.proc
        install_hooks(self.client, self.loop, on_raw_event=self.on_raw_event, on_closed=self._closed)
        watch_process(self.proc, self.loop, lambda code: self.lost(f"Copilot CLI exited ({exit_text(code)})"))
        log.info("copilot: CLI started (pid %s)", self.proc.pid)

    def on_raw_event(self, session_id: str, raw: dict[str, Any]) -> None:
        """An event as the CLI sent it (the JSON-RPC hook): to every member, each keeps its own."""
        for member in list(self.members):
            member.on_raw_event(session_id, raw)

    def _closed(self) -> None:
        self.lost("Copilot CLI connection closed")

    def lost(self, reason: str, *, killer: ServerMember | None = None) -> None:
        """The CLI is gone (or being killed): every session on it is told, the pool forgets it."""
        if self.dead:
            return
        self._give_up()
        others = [m for m in self.members if m is not killer]
        if others:
            log.warning("copilot: the CLI shared by %d session(s) is gone: %s", len(others), reason)
        for member in others:
            member.mark_lost(reason)

    def kill(self, killer: ServerMember) -> None:
        """SIGKILL the CLI and its tools (a session's Stop escalated); the others are told."""
        self.lost(
            "the Copilot CLI this session shared was killed to stop another session's turn; "
            "the next message resumes the session on a new one",
            killer=killer,
        )

    async def answers(self, timeout: float = PING_TIMEOUT) -> bool:
        """The CLI answers a ping within ``timeout`` (a cheap RPC no session is involved in)."""
        if self.client is None or not self.alive:
            return False
        try:
            await asyncio.wait_for(self.client.ping(), timeout)
        except sdk_failures() as exc:  # any failure means it does not answer
            log.warning("copilot: the shared CLI does not answer a ping: %r", exc)
            return False
        return True

    async def timed_out(self, member: ServerMember, reason: str, *, timeout: float = PING_TIMEOUT) -> None:
        """``member``'s create or resume did not answer in time. One slow session must not end
        every other session's turn: the CLI is killed only when ``member`` is alone on it or
        the CLI does not answer a ping either; otherwise only this connect fails."""
        if self.dead or self.client is None:
            return
        if self.members - {member} and await self.answers(timeout):
            log.warning("copilot: %s; the shared CLI still answers, so only this session fails", reason)
            return
        self.lost(reason, killer=member)

    def forget_session(self, session: Any) -> None:
        """Drop a detached session from the client's table. The SDK keeps every session it
        ever created there (``disconnect`` only clears its handlers); on a client that lives
        as long as its sessions keep coming, that table would only grow."""
        sessions = getattr(self.client, "_sessions", None)
        lock = getattr(self.client, "_sessions_lock", None)
        session_id = getattr(session, "session_id", None)
        if not isinstance(sessions, dict) or lock is None or session_id is None:
            return
        with lock:
            if sessions.get(session_id) is session:
                del sessions[session_id]

    def _process(self) -> subprocess.Popen[bytes] | None:
        return self.proc or getattr(self.client, "_cli_process", None)

    def _give_up(self) -> None:
        """Synchronously: no one joins any more, and the process (if any) is killed. Killing
        first and awaiting after means a second cancellation cannot leak the CLI."""
        self.dead = True
        _forget(self)
        proc = self._process()
        if proc is not None:
            kill_tree(proc)

    async def leave(self, member: ServerMember) -> None:
        """``member`` no longer uses the server; the last one out stops it. Raises only a
        cancellation, and never leaves the CLI running behind it."""
        self.members.discard(member)
        if self.members:
            return
        graceful = not self.dead and self._starting is not None and self._starting.done()
        if not graceful:
            self._give_up()
        else:
            self.dead = True
            _forget(self)
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        proc = self._process()
        client, self.client = self.client, None
        try:
            if client is not None:
                await _stop(client, graceful=graceful)
        finally:
            # However the stop ended (a second Stop cancelling it included), a CLI that left
            # the pool is killed now: nothing else would ever stop it. A no-op once it exited.
            if proc is not None:
                kill_tree(proc)


async def _stop(client: Any, *, graceful: bool) -> None:
    """Stop ``client`` gracefully (if ``graceful``), else or if that fails, forcibly."""
    if graceful:
        failures: tuple[type[Exception], ...] = (*sdk_failures(), ExceptionGroup)  # stop() groups its StopErrors
        try:
            await asyncio.wait_for(client.stop(), CLOSE_TIMEOUT)
            return
        except failures as exc:
            log.debug("copilot: graceful stop failed: %r", exc)
    try:
        await asyncio.wait_for(client.force_stop(), CLOSE_TIMEOUT)
    except sdk_failures() as exc:
        log.warning("copilot: force stop failed: %r", exc)


_POOL: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ServerSpec, CopilotServer]] = (
    weakref.WeakKeyDictionary()
)
"""Live servers per event loop (a client delivers its events on the loop that started it)."""


def _forget(server: CopilotServer) -> None:
    servers = _POOL.get(server.loop, {})
    if servers.get(server.spec) is server:
        del servers[server.spec]


def join(spec: ServerSpec, member: ServerMember) -> CopilotServer:
    """The live server of ``spec`` on this loop (a new one if none), with ``member`` on it.
    The caller awaits :meth:`CopilotServer.ready` and calls :meth:`CopilotServer.leave`."""
    loop = asyncio.get_running_loop()
    servers = _POOL.setdefault(loop, {})
    server = servers.get(spec)
    if server is not None and server.proc is not None and server.proc.poll() is not None:
        # Exited before its watcher's report ran on the loop: report it now, take a new one.
        server.lost(f"Copilot CLI exited ({exit_text(server.proc.returncode)})")
    if server is None or server.dead:
        server = servers[spec] = CopilotServer(spec, loop)
    if not isinstance(member, HeadStart):  # a place held for this session: it is the session's now
        server.members -= {held for held in server.members if isinstance(held, HeadStart)}
    server.members.add(member)
    return server


def _seen(task: asyncio.Task[None]) -> None:
    """Mark a start's failure as retrieved: a waiter reports it; with none, nothing is lost."""
    if not task.cancelled():
        task.exception()


class HeadStart:
    """A place on a server taken before any session wants it (``polypilot run``: before the
    engine is even imported), so that its CLI boots and the SDK connects meanwhile. The
    session that then joins the same spec takes the place over (from then on the server is
    the sessions' alone, as if they had started it); :meth:`release` gives up a place no
    session took (the server stops). ``spawned``: its CLI, started already with ``spec``."""

    def __init__(self, spec: ServerSpec, spawned: subprocess.Popen[bytes] | None = None) -> None:
        self.server = join(spec, self)
        self.server.start(spawned)

    def on_raw_event(self, session_id: str, raw: dict[str, Any]) -> None:
        """Events are for the sessions on the server, not for this place."""

    def mark_lost(self, reason: str) -> None:
        """A session that joins later finds the server gone and starts another."""

    async def release(self) -> None:
        if self in self.server.members:
            await self.server.leave(self)


def live_servers() -> list[CopilotServer]:
    """The servers of this loop still running or starting (for tests and the benchmark)."""
    return list(_POOL.get(asyncio.get_running_loop(), {}).values())
