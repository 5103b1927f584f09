"""Tool servers the engine hands an agent: stdio MCP servers the agent starts itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolServer:
    """A stdio MCP server an agent starts (ACP ``mcpServers``, the Copilot SDK's ``mcp_servers``)."""

    name: str
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
