"""Agent backends: one module per kind, built through :func:`create_backend`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polypilot_tui.agents.base import AgentBackend, EventSink
    from polypilot_tui.config import AgentConfig, Settings
    from polypilot_tui.domain.clock import Clock


def create_backend(
    agent: AgentConfig, sink: EventSink, clock: Clock, settings: Settings, workdir: Path
) -> AgentBackend:
    """A new, unconnected backend for ``agent``. SDKs are imported only when used."""
    if agent.kind == "demo":
        from polypilot_tui.agents.demo.backend import DemoBackend

        return DemoBackend(agent, sink, clock, settings, workdir)
    if agent.kind == "copilot":
        from polypilot_tui.agents.copilot.backend import CopilotBackend

        return CopilotBackend(agent, sink, clock, settings, workdir)
    if agent.kind == "acp":
        from polypilot_tui.agents.acp.backend import AcpBackend

        return AcpBackend(agent, sink, clock, settings, workdir)
    raise ValueError(f"unknown agent kind {agent.kind!r}")
