"""Opening the session on a freshly started ACP agent: initialize, then resume, load or create.

A resume keeps the agent's own history where it is; a load replays it to us (it becomes
:attr:`ConnectResult.history`); when neither works the agent starts a new session and
``how`` says why.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    ClientCapabilities,
    EnvVariable,
    FileSystemCapabilities,
    HttpMcpServer,
    Implementation,
    McpServerStdio,
    SseMcpServer,
)
from pydantic import ValidationError

from polypilot_tui.agents.acp.errors import Refused, request_error_text
from polypilot_tui.agents.acp.intake import StreamIntake
from polypilot_tui.agents.acp.link import AgentLink
from polypilot_tui.agents.base import BackendError, ConnectResult
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.exit_status import exit_text
from polypilot_tui.domain.tool_servers import ToolServer, ToolServerSource, no_servers

logger = logging.getLogger(__name__)
T = TypeVar("T")
McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio]
"""What ``session/new|load|resume`` take (only stdio ones are sent: every agent must take those)."""

try:
    _VERSION = importlib.metadata.version("polypilot_tui")
except importlib.metadata.PackageNotFoundError:
    _VERSION = "0"

#: initialize / session/new / load / resume; opencode needs ~3-5 s, a cold CI box more.
CONNECT_TIMEOUT = 90.0
NOT_ACP_GRACE = 5.0
"""Plain text on stdout and no answer to initialize for this long: not an ACP agent."""


class SessionOpener:
    """Attaches the session on the connection of an :class:`AgentLink` just spawned."""

    def __init__(
        self,
        link: AgentLink,
        intake: StreamIntake,
        cwd: Path,
        prefer_load: bool,
        tool_servers: ToolServerSource = no_servers,
    ) -> None:
        self._link = link
        self._intake = intake
        self._cwd = cwd
        self._prefer_load = prefer_load
        self._tool_servers = tool_servers
        """Asked at each open: the stdio MCP servers the agent is to start (every ACP agent must take them)."""
        """Use session/load even when session/resume exists (to get the history back)."""
        self.capabilities: AgentCapabilities | None = None
        """What the agent said it can do, in its answer to initialize."""
        self.config_options: list[Any] | None = None
        """The session's config options (its model select among them), from the open's answer."""

    async def open(self, resume_id: str | None) -> ConnectResult:
        """initialize, then resume or load ``resume_id`` when the agent can, else a new session."""
        link = self._link
        conn = link.conn
        assert conn is not None, "open() follows a spawn"
        init = await self._call(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False
                ),
                client_info=Implementation(name="polypilot", title="PolyPilot TUI", version=_VERSION),
            ),
            "initialize",
        )
        caps = init.agent_capabilities or AgentCapabilities()
        self.capabilities = caps
        servers = mcp_servers(self._tool_servers())
        can_resume = caps.session_capabilities is not None and caps.session_capabilities.resume is not None
        failures: list[str] = []
        if resume_id and can_resume and not (self._prefer_load and caps.load_session):
            try:
                link.session_id = resume_id
                resumed = await self._call(
                    conn.resume_session(session_id=resume_id, cwd=str(self._cwd), mcp_servers=servers), "session/resume"
                )
                self.config_options = resumed.config_options
                # A new agent process: no turn of the one before runs in it.
                return ConnectResult(resume_id, "resumed", resumed=True, lost_turn=True)
            except Refused as exc:
                failures.append(str(exc))
        if resume_id and caps.load_session:
            try:
                history = await self._load(resume_id, servers)
                return ConnectResult(
                    resume_id, "loaded (history replayed)", resumed=True, lost_turn=True, history=history
                )
            except Refused as exc:
                failures.append(str(exc))
        link.session_id = None
        created = await self._call(conn.new_session(cwd=str(self._cwd), mcp_servers=servers), "session/new")
        link.session_id = created.session_id
        self.config_options = created.config_options
        if not resume_id:
            how = "new session"
        elif failures:
            how = f"new session (resume failed: {'; '.join(failures)})"
        else:
            how = "new session (agent cannot resume)"
        return ConnectResult(created.session_id, how)

    async def _load(self, session_id: str, servers: McpServers) -> tuple[AgentEvent, ...]:
        """``session/load``: the replayed updates become ConnectResult.history."""
        conn = self._link.conn
        assert conn is not None
        events: list[AgentEvent] = []
        self._link.session_id = session_id
        with self._intake.replaying(events.append) as replay:
            loaded = await self._call(
                conn.load_session(session_id=session_id, cwd=str(self._cwd), mcp_servers=servers), "session/load"
            )
            self.config_options = loaded.config_options
        replay.finish()
        # The agent process is new: a tool the history leaves open can no longer finish.
        replay.close_open_tools("interrupted (the agent was restarted)")
        return tuple(events)

    async def _call(self, awaitable: Awaitable[T], what: str) -> T:
        """Await a request; failures become BackendErrors that say what went wrong."""
        try:
            return await self._answer(awaitable, what)
        except RequestError as exc:
            raise Refused(f"{what} failed: {request_error_text(exc)}") from None
        except ConnectionError:
            await self._link.stderr_drained()
            code = await self._link.exit_code()
            how = f" ({exit_text(code)})" if code is not None else ""
            raise BackendError(f"the agent exited during {what}{how}{self._stray_text()}") from None
        except TimeoutError:
            raise BackendError(
                f"the agent did not answer {what} within {CONNECT_TIMEOUT:.0f} s{self._stray_text()}"
            ) from None
        except ValidationError as exc:
            raise BackendError(f"the agent's answer to {what} is not valid ACP: {exc.errors()[:1]}") from None

    async def _answer(self, awaitable: Awaitable[T], what: str) -> T:
        """The answer within CONNECT_TIMEOUT; a program that writes plain text on stdout and no
        answer to initialize is not an ACP agent: that is said after NOT_ACP_GRACE, not 90 s."""
        task = asyncio.ensure_future(awaitable)
        waited = 0.0
        try:
            while waited < CONNECT_TIMEOUT:
                step = min(1.0, CONNECT_TIMEOUT - waited)
                done, _ = await asyncio.wait({task}, timeout=step)
                if done:
                    return task.result()
                waited += step
                if what == "initialize" and waited >= NOT_ACP_GRACE and self._link.stray_stdout():
                    raise BackendError(f"the agent does not speak ACP: no answer to initialize{self._stray_text()}")
            raise TimeoutError
        finally:
            if not task.done():
                task.cancel()

    def _stray_text(self) -> str:
        stray = self._link.stray_stdout()
        return f"; it wrote on stdout instead: “{stray[-1]}”" if stray else ""


def mcp_servers(servers: tuple[ToolServer, ...]) -> McpServers:
    """Tool servers as ACP's stdio ``mcpServers`` entries (env as a name/value list)."""
    return [
        McpServerStdio(
            name=server.name,
            command=server.command,
            args=list(server.args),
            env=[EnvVariable(name=name, value=value) for name, value in server.env],
        )
        for server in servers
    ]
