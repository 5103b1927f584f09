"""Shared pieces of the benchmarks: an agent that says nothing unless told, and a manager on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from polypilot_tui.agents.base import ConnectResult, EventSink
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.core.clock import Clock
from polypilot_tui.manager import SessionManager

AGENT = "bench"


class QuietBackend:
    """Accepts everything and emits nothing; a benchmark feeds events through ``sink``."""

    kind = "bench"

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink

    async def connect(self, resume_id: str | None) -> ConnectResult:
        return ConnectResult("agent", "new session")

    async def send(self, prompt: str) -> None:
        return None

    async def abort(self) -> None:
        return None

    async def kill(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        return None

    def probe(self) -> None:
        return None


def bench_settings(state_dir: Path, **overrides: Any) -> Settings:
    """Settings that ignore the developer's environment and record nothing."""
    return Settings(_env_file=None, state_dir=state_dir, record=False, default_agent=AGENT,  # type: ignore[call-arg]
                    **overrides)


def bench_manager(settings: Settings, clock: Clock,
                  backend: Callable[[EventSink], Any] = QuietBackend) -> tuple[SessionManager, AgentCatalog]:
    """A manager whose only agent is ``backend``."""
    catalog = AgentCatalog({AGENT: AgentConfig(name=AGENT, kind="demo")})
    manager = SessionManager(settings, catalog, clock, backend_factory=lambda agent, sink, workdir: backend(sink))
    return manager, catalog
