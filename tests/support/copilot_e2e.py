"""Helpers for driving CopilotBackend against the scripted model server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from polypilot_tui.agents.copilot.backend import CopilotBackend
from polypilot_tui.config import AgentConfig, ProviderConfig, Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent
from tests.support.model_server import ModelServer
from tests.support.waiting import until

KEY_ENV = "POLYPILOT_E2E_MODEL_KEY"
#: Long on purpose: the CLI masks the provider key wherever it appears in tool output.
KEY = "sk-scripted-e2e-0123456789abcdef"
WAIT = 30.0


class Collector:
    """An event sink that remembers everything and lets a test wait for an event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: str) -> list[AgentEvent]:
        return [e for e in self.events if e.type == kind]

    def mark(self) -> int:
        """Index to wait from (events after the next action)."""
        return len(self.events)

    async def wait(
        self, kind: str, since: int = 0, timeout: float = WAIT, where: Callable[[AgentEvent], bool] = lambda e: True
    ) -> AgentEvent:
        def found() -> AgentEvent | None:
            return next((e for e in self.events[since:] if e.type == kind and where(e)), None)

        return await until(found, timeout, lambda: f"a {kind} event (last events: {', '.join(self.types()[-25:])})")

    async def idle(self, since: int = 0, timeout: float = WAIT) -> AgentEvent:
        return await self.wait("session.idle", since, timeout)

    def messages(self, since: int = 0) -> str:
        return "\n".join(e.text("content") for e in self.events[since:] if e.type == "assistant.message")


def copilot_agent(cli: Path, server: ModelServer, home: Path, cwd: Path) -> AgentConfig:
    cwd.mkdir(parents=True, exist_ok=True)
    return AgentConfig(
        name="copilot-e2e",
        kind="copilot",
        command=str(cli),
        model="gpt-4.1",
        cwd=cwd,
        env={"COPILOT_HOME": str(home), KEY_ENV: KEY},
        provider=ProviderConfig(base_url=server.base_url, api_key_env=KEY_ENV),
    )


def make_backend(agent: AgentConfig, workdir: Path) -> tuple[CopilotBackend, Collector]:
    workdir.mkdir(parents=True, exist_ok=True)
    sink = Collector()
    return CopilotBackend(agent, sink, SystemClock(), Settings.read(), workdir), sink


async def wait_on_disk(path: Path | None, needle: str, timeout: float = 10.0) -> None:
    """The CLI batches its log writes: wait until ``needle`` reached events.jsonl."""
    assert path is not None
    await until(
        lambda: path.exists() and needle in path.read_text(encoding="utf-8", errors="replace"),
        timeout,
        f"{needle!r} in {path}",
        every=0.1,
    )
