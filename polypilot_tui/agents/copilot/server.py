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
import hashlib
import importlib
import logging
import subprocess
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from polypilot_tui.agents.copilot.runtime import install_hooks, kill_tree, watch_process
from polypilot_tui.agents.copilot.spawn import adopt, spawn_cli

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 10.0


@dataclass(frozen=True)
class ServerSpec:
    """How a CLI is started: two sessions with equal specs share one process."""

    argv: tuple[str, ...]
    """The full argv before the SDK's own flags (the leash, the CLI, the agent's args)."""
    env: tuple[tuple[str, str], ...]
    """The CLI's whole environment, sorted (it may hold keys: never logged or shown)."""
    logged_in: bool
    """Signed in with GitHub (no BYOK provider): the SDK then lets the CLI log in."""

    @property
    def key(self) -> str:
        """A digest of the spec: the pool's key (so no secret sits in a readable key)."""
        return hashlib.sha256(repr((self.argv, self.env, self.logged_in)).encode()).hexdigest()


def server_cwd() -> str:
    """The CLI's own working directory: the user's home, not any session's folder (a
    session's worktree may be removed while the CLI serves others; tools use the session's)."""
    home = Path.home()
    return str(home) if home.is_dir() else "/"


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

    @property
    def alive(self) -> bool:
        """The process runs and the server has not been given up."""
        return not self.dead and self.proc is not None and self.proc.poll() is None

    async def ready(self) -> None:
        """Start the CLI once (the first caller); everyone waits for the same start.

        The start is a task of its own: one session's connect being cancelled (Stop) must
        not cancel the start others wait for; the last one leaving cancels it.
        """
        if self.dead:
            raise RuntimeError("the shared Copilot CLI is gone")
        if self._starting is None:
            self._starting = self.loop.create_task(self._start(), name="copilot-cli-start")
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        argv, env = list(self.spec.argv), dict(self.spec.env)
        # The CLI boots while the SDK's generated modules import (~0.9 s each, spawn.py);
        # the import runs off the loop, so the first Copilot session does not freeze the dashboard.
        self.proc = spawn_cli(argv, env, server_cwd(), use_logged_in_user=self.spec.logged_in)
        try:
            await asyncio.to_thread(importlib.import_module, "copilot")
            from copilot import CopilotClient, RuntimeConnection

            self.client = CopilotClient(
                connection=RuntimeConnection.for_stdio(path=argv[0], args=tuple(argv[1:])),
                env=env,
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
        install_hooks(self.client, self.loop, on_raw_event=self._raw_event, on_closed=self._closed)
        watch_process(self.proc, self.loop, lambda code: self.lost(f"Copilot CLI exited (code {code})"))
        log.info("copilot: CLI started (pid %s)", self.proc.pid)

    def _raw_event(self, session_id: str, raw: dict[str, Any]) -> None:
        for member in list(self.members):  # each member keeps only its own session's events
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

    def _give_up(self) -> None:
        """Synchronously: no one joins any more, and the process (if any) is killed. Killing
        first and awaiting after means a second cancellation cannot leak the CLI."""
        self.dead = True
        _forget(self)
        proc = self.proc or getattr(self.client, "_cli_process", None)
        if proc is not None:
            kill_tree(proc)

    async def leave(self, member: ServerMember) -> None:
        """``member`` no longer uses the server; the last one out stops it. Never raises."""
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
        client, self.client = self.client, None
        if client is None:
            return
        try:
            if graceful:
                await asyncio.wait_for(client.stop(), CLOSE_TIMEOUT)
                return
        except Exception as exc:  # noqa: BLE001
            log.debug("copilot: graceful stop failed: %r", exc)
        try:
            await asyncio.wait_for(client.force_stop(), CLOSE_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            log.warning("copilot: force stop failed: %r", exc)
        if self.proc is not None:
            kill_tree(self.proc)  # force_stop timed out or failed: the CLI must not outlive us


_POOL: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, CopilotServer]] = weakref.WeakKeyDictionary()
"""Live servers per event loop (a client delivers its events on the loop that started it)."""


def _forget(server: CopilotServer) -> None:
    servers = _POOL.get(server.loop, {})
    if servers.get(server.spec.key) is server:
        del servers[server.spec.key]


def join(spec: ServerSpec, member: ServerMember) -> CopilotServer:
    """The live server of ``spec`` on this loop (a new one if none), with ``member`` on it.
    The caller awaits :meth:`CopilotServer.ready` and calls :meth:`CopilotServer.leave`."""
    loop = asyncio.get_running_loop()
    servers = _POOL.setdefault(loop, {})
    server = servers.get(spec.key)
    if server is None or server.dead:
        server = servers[spec.key] = CopilotServer(spec, loop)
    server.members.add(member)
    return server


def live_servers() -> list[CopilotServer]:
    """The servers of this loop still running or starting (for tests and the benchmark)."""
    return list(_POOL.get(asyncio.get_running_loop(), {}).values())
