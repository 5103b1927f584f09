"""Agent backends: one module per kind, built through :func:`create_backend`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polypilot_tui.agents.base import AgentBackend, EventSink
    from polypilot_tui.agents.sandbox import SandboxPlan
    from polypilot_tui.config import AgentConfig, Settings
    from polypilot_tui.domain.clock import Clock
    from polypilot_tui.domain.tool_servers import ToolServerSource


def create_backend(
    agent: AgentConfig,
    sink: EventSink,
    clock: Clock,
    settings: Settings,
    workdir: Path,
    tool_servers: ToolServerSource | None = None,
    sandbox: SandboxPlan | None = None,
) -> AgentBackend:
    """A new, unconnected backend for ``agent``; ``tool_servers`` is asked each time it opens
    its agent's session (None: none). SDKs are imported only when used. With a ``sandbox`` the
    agent's process starts in it (agents/sandbox.py) or not at all; the demo agent runs no
    process and no real tool, so its sessions are only marked (their policy still applies)."""
    from polypilot_tui.domain.tool_servers import no_servers

    source = tool_servers or no_servers
    if agent.kind == "demo":
        from polypilot_tui.agents.demo.backend import DemoBackend

        return DemoBackend(agent, sink, clock, settings, workdir, source)
    if agent.kind == "copilot":
        from polypilot_tui.agents.copilot.backend import CopilotBackend

        return CopilotBackend(agent, sink, clock, settings, workdir, source, sandbox=sandbox)
    if agent.kind == "acp":
        from polypilot_tui.agents.acp.backend import AcpBackend

        return AcpBackend(agent, sink, clock, settings, workdir, tool_servers=source, sandbox=sandbox)
    raise ValueError(f"unknown agent kind {agent.kind!r}")
