"""Attaching to an engine on another machine: an SSH tunnel per attach, and that engine's agents."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from polypilot_tui.config import AgentCatalog, AgentConfig, checked
from polypilot_tui.engine.verbs import AGENTS, NoArgs
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.ssh import Tunnel, open_tunnel

KINDS = ("demo", "copilot", "acp")


class SshAttach:
    """The ``connect`` of a RemoteEngine over SSH: the engine there is started when none runs;
    after a loss (the engine died, the connection dropped) a new tunnel is opened."""

    def __init__(
        self, target: str, remote_command: str = "polypilot", ssh_options: Sequence[str] = (), timeout: float = 20.0
    ) -> None:
        self.target = target
        self.remote_command = remote_command
        self.ssh_options = tuple(ssh_options)
        self.timeout = timeout
        """Seconds a tunnel may take to open (ssh, the engine's start, its first answer)."""
        self.tunnel: Tunnel | None = None
        self._fresh = False

    async def open(self) -> Path:
        """Open the first tunnel (before the dashboard starts: a failure is told in the shell)."""
        self.tunnel = await open_tunnel(
            self.target, remote_command=self.remote_command, ssh_options=self.ssh_options, timeout=self.timeout
        )
        self._fresh = True
        return Path(self.tunnel.socket_path)

    async def connect(self) -> Path:
        """The tunnel just opened, else a new one."""
        if self._fresh and self.tunnel is not None and self.tunnel.alive():
            self._fresh = False
            return Path(self.tunnel.socket_path)
        await self.close()
        return await self.open()

    async def close(self) -> None:
        """End the tunnel (the engine there goes on)."""
        self._fresh = False
        if self.tunnel is not None:
            await self.tunnel.close()
            self.tunnel = None


async def engine_agents(socket: Path) -> AgentCatalog:
    """The agents the engine on ``socket`` offers, by name and kind (how it starts them is its own)."""
    client = EngineClient(socket, timeout=30.0)
    try:
        offers = await client.call(AGENTS, NoArgs())
    finally:
        await client.aclose()
    agents = {o.name: checked(AgentConfig, {"name": o.name, "kind": o.kind}) for o in offers if o.kind in KINDS}
    return AgentCatalog(agents)
