"""The SDK session of one engine session on a shared Copilot CLI: create or resume, stop.

The CLI process and its ``CopilotClient`` are a :class:`~polypilot_tui.agents.copilot.server.
CopilotServer`, shared by every session of the same agent configuration (server.py says what
that is). The recipe (see shared/reference/copilot-sdk.md): pass the CLI path explicitly, pass
the environment explicitly (GitHub tokens dropped unless the agent config sets them), and with
a BYOK provider set ``COPILOT_OFFLINE`` + ``COPILOT_PROVIDER_BASE_URL`` + ``COPILOT_MODEL`` in
the env AND pass ``provider=`` on create and on every resume. The event handler is registered
before create/resume, and the session id is known before either (we choose it on create), so
an event is never routed to the wrong session of a shared CLI.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from polypilot_tui.agents import agent_log
from polypilot_tui.agents.base import BackendError, ConnectResult, Diagnostics
from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.cli_spec import cli_environment, spec_of
from polypilot_tui.agents.copilot.intake import EventIntake
from polypilot_tui.agents.copilot.runtime import (
    is_processing,
    resume_hints,
    session_home,
)
from polypilot_tui.agents.copilot.sdk_errors import SHAPE_ERRORS, sdk_failures
from polypilot_tui.agents.copilot.server import CLOSE_TIMEOUT, CopilotServer, join
from polypilot_tui.agents.locate import find_command, missing_command
from polypilot_tui.agents.sandbox import SandboxPlan
from polypilot_tui.config import AgentConfig
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.exit_status import signals_named
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.tool_servers import ToolServer, ToolServerSource, no_servers

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
RPC_TIMEOUT = 30.0


class CopilotConnection:
    """Joins the shared CLI, attaches the SDK session, and detaches and leaves again (never twice)."""

    def __init__(
        self,
        agent: AgentConfig,
        clock: Clock,
        intake: EventIntake,
        busy: BusyFlag,
        abort: Callable[[], Awaitable[None]],
        tool_servers: ToolServerSource = no_servers,
        sandbox: SandboxPlan | None = None,
    ) -> None:
        self._agent = agent
        self._sandbox = sandbox
        """Its sandbox: in the CLI's argv, and its spec is its own (ServerSpec.own): no CLI is shared."""
        self._tool_servers = tool_servers
        """Asked at each connect: the stdio MCP servers the session's agent is handed."""
        self._mcp_servers: dict[str, Any] = {}
        self._clock = clock
        self._intake = intake
        self._busy = busy
        self._abort = abort
        """Ends the current turn; used on a resume that ended inside a tool."""
        self._env: dict[str, str] = {}
        self._provider: dict[str, Any] | None = None
        self._server: CopilotServer | None = None
        self._session: Any = None
        self._session_id = ""
        self._command = ""
        self._last_stderr: tuple[str, ...] = ()
        """The CLI's last stderr lines, kept when the client is released (for details after a crash)."""

    # -- facts ------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The attached SDK session's id ("" before connect)."""
        return self._session_id

    @property
    def session(self) -> Any:
        """The attached SDK session, None before connect and after release."""
        return self._session

    @property
    def client(self) -> Any:
        """The shared ``CopilotClient`` while this session is on it (None before and after)."""
        return self._server.client if self._server is not None else None

    @property
    def pid(self) -> int | None:
        """The shared CLI's process id (for tests and diagnostics)."""
        proc = self._server.proc if self._server is not None else None
        return proc.pid if proc is not None else None

    @property
    def own_pid(self) -> int | None:
        """The CLI's process id while this session is the only one on it, else None (two
        sandboxed sessions of one agent in one folder share a CLI, and its tools)."""
        server = self._server
        return self.pid if server is not None and server.members == {self._intake} else None

    @property
    def log_path(self) -> Path | None:
        """``$COPILOT_HOME/session-state/<id>/events.jsonl`` of the attached session."""
        if not self._session_id:
            return None
        return session_home(self._env) / "session-state" / self._session_id / "events.jsonl"

    def probe(self) -> Probes | None:
        """Process liveness plus a stat (and 8 KiB tail) of the CLI's own event log."""
        if self._server is None or self._server.proc is None:
            return None
        alive = self._server.alive and not self._intake.lost
        path = self.log_path
        stat = agent_log.stat_log(path, self._clock.wall()) if path is not None else None
        if stat is None:
            return Probes(agent_alive=alive)
        return Probes(agent_alive=alive, log_age=stat.age, log_size=stat.size, log_last_type=stat.last_type)

    def diagnostics(self) -> Diagnostics:
        """The CLI's command, its log folder and event log, and the last lines of its stderr."""
        home = session_home(self._env) if self._env else None
        paths: list[tuple[str, str]] = []
        if home is not None:
            paths.append(("Copilot CLI logs", str(home / "logs")))
        if self.log_path is not None:
            paths.append(("Session event log", str(self.log_path)))
        # The SDK keeps the CLI's stderr on its private JSON-RPC client; read it if still there.
        rpc = getattr(self.client, "_client", None)
        stderr = ""
        try:
            stderr = rpc.get_stderr_output() if rpc is not None else ""
        except AttributeError:  # the SDK's private buffer: gone in another SDK version
            log.debug("copilot: no stderr output", exc_info=True)
        tail = tuple(line for line in stderr.splitlines() if line.strip())[-20:]
        command = " ".join([self._command or "copilot", *self._agent.args])
        return Diagnostics(command, tuple(paths), tail or self._last_stderr)

    # -- connect ----------------------------------------------------------------------------

    async def connect(self, resume_id: str | None) -> ConnectResult:
        """Join (or start) the shared CLI, then create a session or resume ``resume_id`` (handler first)."""
        if self._server is not None:
            raise BackendError("this Copilot backend is already connected")
        cli = find_command(self._agent)
        self._command = cli or self._agent.command or ""
        if not cli:
            raise BackendError(f"Copilot CLI cannot be started: {missing_command(self._agent)}")
        self._env, self._provider = cli_environment(self._agent, os.environ)
        self._mcp_servers = sdk_mcp_servers(self._tool_servers())
        try:
            await asyncio.wait_for(self._join(cli), START_TIMEOUT)
            if resume_id:
                return await self._resume(resume_id)
            return await self._create("new session")
        except TimeoutError:
            reason = f"the Copilot CLI did not answer within {START_TIMEOUT:.0f} s"
            try:  # killed only if no one else is on it, or it answers nothing at all (server.py)
                if self._server is not None:
                    await self._server.timed_out(self._intake, reason)
            finally:
                await self._abandon()
            raise BackendError(reason) from None
        except sdk_failures() as exc:  # every failure of the CLI becomes a readable message
            log.warning("copilot: connect failed: %s", exc, exc_info=True)
            await self._abandon()
            raise BackendError(f"Copilot CLI failed to start: {signals_named(str(exc))}") from exc
        except BaseException:  # a BackendError of ours, a cancel, or a bug: nothing is left joined
            await self._abandon()
            raise

    def _model(self) -> str | None:
        return self._agent.model or self._env.get("COPILOT_MODEL") or None

    @property
    def byok(self) -> bool:
        """Sessions use a model provider of one's own (the agent's, or the CLI's COPILOT_PROVIDER_*)."""
        return self._provider is not None

    @property
    def provider_url(self) -> str | None:
        """The model server sessions talk to, when it is one of ours to name (BYOK), else None."""
        url = self._provider.get("base_url") if self._provider is not None else None
        return url if isinstance(url, str) and url else None

    @property
    def configured_model(self) -> str | None:
        """The model sessions start on (the agent's ``model``, else COPILOT_MODEL), or None."""
        return self._model()

    async def _join(self, cli: str) -> None:
        """Join (or start) the shared CLI of this agent configuration."""
        spec = spec_of(self._agent, cli, self._env, logged_in=self._provider is None, sandbox=self._sandbox)
        self._server = join(spec, self._intake)
        await self._server.ready()
        log.info("copilot: on the CLI %s (pid %s, %d session(s))", cli, self.pid, len(self._server.members))

    def _session_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "on_event": self._intake.on_sdk_event,
            "on_permission_request": self._intake.on_permission_request,
            "streaming": True,
            "working_directory": str(self._agent.cwd or Path.cwd()),
        }
        if self._provider is not None:
            kwargs["provider"] = self._provider
        if self._mcp_servers:
            kwargs["mcp_servers"] = self._mcp_servers
        model = self._model()
        if model:
            kwargs["model"] = model
        return kwargs

    async def _create(self, how: str) -> ConnectResult:
        # The id is ours, so the intake knows it before the CLI's first event of the session.
        session_id = str(uuid.uuid4())
        self._intake.attach(session_id)
        session = await asyncio.wait_for(
            self.client.create_session(session_id=session_id, **self._session_kwargs()), START_TIMEOUT
        )
        self.adopt(session)
        return ConnectResult(agent_session_id=self._session_id, how=how)

    async def _resume(self, resume_id: str) -> ConnectResult:
        from copilot._jsonrpc import JsonRpcError

        path = session_home(self._env) / "session-state" / resume_id / "events.jsonl"
        entries = agent_log.read_tail(path)  # before the resume appends to it
        stat = agent_log.stat_log(path, self._clock.wall())
        self._intake.attach(resume_id)
        try:
            session = await asyncio.wait_for(
                self.client.resume_session(resume_id, continue_pending_work=True, **self._session_kwargs()),
                START_TIMEOUT,
            )
        except JsonRpcError as exc:
            log.warning("copilot: resume of %s refused: %s", resume_id, exc)
            reason = str(exc).rsplit("message: ", 1)[-1]  # drop the JSON-RPC preamble
            return await self._create(f"new session (resume failed: {reason})")
        self.adopt(session)
        pending = await self._surface_pending_permissions()
        processing = await is_processing(session)
        if processing:
            self._busy.set(True)
        hints = resume_hints(entries, stat.age if stat else None, pending, processing)
        how = "resumed"
        if hints.interrupted_tool:
            # #393: a tool that died with the old CLI must be cut off before the next send.
            log.info("copilot: %s ended inside a tool; aborting it after resume", resume_id)
            try:
                await self._abort()
                how = "resumed; the interrupted tool was aborted"
            except BackendError as exc:  # the manager aborts again before the next send
                log.warning("copilot: abort after resume failed: %s", exc)
        return ConnectResult(
            agent_session_id=self._session_id,
            how=how,
            resumed=True,
            interrupted_tool=hints.interrupted_tool,
            still_processing=hints.still_processing,
            lost_turn=hints.lost_turn,
        )

    def adopt(self, session: Any) -> None:
        """Make ``session`` (created or resumed by the SDK) the one this backend drives."""
        self._session = session
        self._session_id = str(session.session_id)
        self._intake.attach(self._session_id)
        log.info("copilot: attached to session %s", self._session_id)

    async def _surface_pending_permissions(self) -> set[str]:
        """Re-emit requests still waiting for an answer; returns their tool call ids."""
        try:
            result = await asyncio.wait_for(self._session.rpc.permissions.pending_requests(), RPC_TIMEOUT)
        except sdk_failures() as exc:  # an old CLI without the RPC is not fatal
            log.warning("copilot: cannot list pending permissions: %s", exc)
            return set()
        tool_ids: set[str] = set()
        for item in getattr(result, "items", []) or []:
            try:
                raw = item.to_dict()
            except SHAPE_ERRORS:
                log.debug("copilot: unreadable pending permission", exc_info=True)
                continue
            self._intake.handle(AgentEvent(EventType.PERMISSION_REQUESTED, raw))
            info = self._intake.prompt(str(raw.get("requestId", "")))
            if info is not None and info.tool_call_id:
                tool_ids.add(info.tool_call_id)
        return tool_ids

    # -- stopping ---------------------------------------------------------------------------

    async def kill(self) -> None:
        """SIGKILL the shared CLI and its tools (every other session on it is told), report
        connection.lost, leave the server."""
        if self._server is None:
            return  # never started: nothing to kill, nothing was lost
        self._server.kill(self._intake)
        self._intake.mark_lost("killed")
        await self._release()

    async def close(self) -> None:
        """Detach the session and leave the shared CLI (the last one out stops it)."""
        self._intake.closing_on_purpose()
        try:
            if self._session is not None and not self._intake.lost:
                await asyncio.wait_for(self._session.disconnect(), CLOSE_TIMEOUT / 2)
        except sdk_failures() as exc:  # a CLI that died or hangs: it is left (and stopped) all the same
            log.debug("copilot: detach failed: %r", exc)
        finally:
            await self._release()

    async def _release(self) -> None:
        self._last_stderr = self.diagnostics().stderr_tail
        server, self._server = self._server, None
        session, self._session = self._session, None
        self._intake.closing_on_purpose()
        if server is None:
            return
        server.forget_session(session)
        await server.leave(self._intake)

    async def _abandon(self) -> None:
        """Connect failed or was cancelled half way: leave the server quietly (the last one
        out kills a CLI still starting, synchronously, before anything is awaited)."""
        await self._release()


def sdk_mcp_servers(servers: tuple[ToolServer, ...]) -> dict[str, Any]:
    """Tool servers as the SDK's session ``mcp_servers``: stdio, every tool exposed (``["*"]``:
    ``[]`` would expose none). The CLI's ``--acp`` mode ignores ``mcpServers``; this path does not."""
    return {
        server.name: {
            "type": "stdio",
            "command": server.command,
            "args": list(server.args),
            "env": dict(server.env),
            "tools": ["*"],
        }
        for server in servers
    }
