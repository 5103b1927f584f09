"""Shared helpers for the ACP backend tests: an event recorder and a backend factory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from polypilot_tui.agents.acp.backend import AcpBackend
from polypilot_tui.config import AgentConfig, ProviderConfig, Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent
from tests.support.waiting import until

FAKE_AGENT = Path(__file__).resolve().parents[1] / "support" / "fake_acp_agent.py"


class Recorder:
    """An event sink that tests can wait on."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[AgentEvent]:
        return [e for e in self.events if e.type == kind]

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def text(self) -> str:
        """Every streamed assistant delta, joined."""
        return "".join(e.text("deltaContent") for e in self.of("assistant.message_delta"))

    async def wait_for(
        self, kind: str, where: Callable[[AgentEvent], bool] = lambda e: True, timeout: float = 15.0, after: int = 0
    ) -> AgentEvent:
        """The first event of ``kind`` (at index >= ``after``) matching ``where``."""

        def found() -> AgentEvent | None:
            return next((e for e in self.events[after:] if e.type == kind and where(e)), None)

        return await until(found, timeout, lambda: f"a {kind} event (saw {self.types()})")


def fake_backend(
    tmp_path: Path,
    recorder: Recorder,
    *,
    caps: str = "load,resume",
    grace: float = 3.0,
    name: str = "w1",
    command: str | None = None,
    provider: ProviderConfig | None = None,
    env: dict[str, str] | None = None,
) -> AcpBackend:
    """An AcpBackend on the fake agent; every backend of one tmp_path shares its state folder."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    readme = workspace / "README.md"
    if not readme.exists():
        readme.write_text("readme text\n")
    agent = AgentConfig(
        name="fake",
        kind="acp",
        command=command or sys.executable,
        args=[] if command else [str(FAKE_AGENT)],
        env={"FAKE_ACP_STATE": str(tmp_path / "agent-state"), "FAKE_ACP_CAPS": caps, **(env or {})},
        provider=provider,
    )
    settings = Settings.read(stop_grace_seconds=grace, state_dir=tmp_path / "state")
    return AcpBackend(agent, recorder, SystemClock(), settings, tmp_path / name, cwd=workspace)
