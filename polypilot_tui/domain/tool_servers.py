"""Tool servers the engine hands an agent: stdio MCP servers whose tools become the agent's.

Every agent kind takes the same description: ACP agents in ``session/new|load|resume``
``mcpServers``, the Copilot SDK in its session's ``mcp_servers``. The engine asks for them
each time a session's agent connects (new, resume or load, reconnect), so a reconnected agent
gets them again.

A server's ``env`` is where its secrets go (the team relay's capability): every value there
is treated as one, redacted wherever it would be written. Settings that are not secret go in
``args``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from polypilot_tui.domain.dataclass_on_use import dataclass

MAX_SERVERS = 8
"""Tool servers one session is handed at most (agents start each as a process)."""
MAX_ARGS = 32
MAX_FIELD_CHARS = 4096
"""A name, command, argument, env name or value longer than this is refused, not cut."""
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Copilot names a server's tools ``<server>-<tool>``: a plain word keeps them readable."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@dataclass(frozen=True)
class ToolServer:
    """A stdio MCP server an agent starts: ``command`` (absolute) with ``args``, and ``env``
    as (name, value) pairs added to what the agent passes on (each value a secret)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def problem(self) -> str:
        """Why an agent cannot be handed this server ("" when it can)."""
        if not _NAME.fullmatch(self.name):
            return f"a tool server's name must be 1-64 letters, digits, '-' or '_' (got {self.name[:80]!r})"
        if not self.command.startswith("/"):
            return f"tool server {self.name}: its command must be an absolute path (got {self.command[:200]!r})"
        if len(self.args) > MAX_ARGS:
            return f"tool server {self.name}: {len(self.args)} arguments, at most {MAX_ARGS}"
        for name, _ in self.env:
            if not _ENV_NAME.fullmatch(name):
                return f"tool server {self.name}: {name[:80]!r} is not an environment variable's name"
        texts = (self.command, *self.args, *(value for _, value in self.env))
        if any(len(text) > MAX_FIELD_CHARS or "\x00" in text for text in texts):
            return f"tool server {self.name}: a command, argument or value is over {MAX_FIELD_CHARS} chars or holds NUL"
        return ""

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values of its env: the redactor learns them before the server is handed out."""
        return tuple(value for _, value in self.env)


ToolServerSource = Callable[[], tuple["ToolServer", ...]]
"""What a backend asks, each time it opens its agent's session, for the servers to hand it."""


def no_tool_servers(session_id: str) -> tuple[ToolServer, ...]:
    """The engine's default: a session's agent gets no tool servers."""
    return ()


def no_servers() -> tuple[ToolServer, ...]:
    """A backend's default source: its agent is handed none."""
    return ()


def checked(servers: tuple[ToolServer, ...]) -> tuple[ToolServer, ...]:
    """``servers`` when every one can be handed out; ValueError naming the first that cannot."""
    if len(servers) > MAX_SERVERS:
        raise ValueError(f"{len(servers)} tool servers for one session, at most {MAX_SERVERS}")
    names = [server.name for server in servers]
    if len(set(names)) != len(names):
        raise ValueError(f"two tool servers share a name: {', '.join(sorted(names))}")
    for server in servers:
        if problem := server.problem():
            raise ValueError(problem)
    return servers


# ---- the team relay: the one tool server the engine itself hands out -------------------------
CAPABILITY_ENV = "POLYPILOT_TEAM_CAPABILITY"
"""The env variable that carries a relay's capability (a secret naming the team and the session)."""
RELAY_NAME = "polypilot"
"""The relay's server name: Copilot names its tools ``polypilot-start_worker`` …"""
RELAY_MODULE = "polypilot_tui.service.mcp_relay"


def relay_server(python: str, socket: str, capability: str, log: str = "") -> ToolServer:
    """The team relay as a tool server: ``python -P -m polypilot_tui.service.mcp_relay`` on the
    engine's ``socket``, with ``capability`` in its env and its log in ``log`` ("" for none).

    ``-P``: the agent starts it in the session's folder, a repository that may hold a ``mcp/`` or
    ``httpx.py`` of its own, which ``-m`` alone would import first from there."""
    args = ("-P", "-m", RELAY_MODULE, "--socket", socket, *(("--log", log) if log else ()))
    return ToolServer(RELAY_NAME, python, args, ((CAPABILITY_ENV, capability),))


def capability_of(servers: tuple[ToolServer, ...]) -> str:
    """The team capability handed with ``servers`` ("" when they hold no relay)."""
    for server in servers:
        for name, value in server.env:
            if name == CAPABILITY_ENV and value:
                return value
    return ""
