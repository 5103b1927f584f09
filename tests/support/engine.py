"""An engine on the demo agent in virtual time, for engine tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from polypilot_tui.config import AgentCatalog, Settings, load_agents
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.records import ActionTaken, Record
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine
from tests.support.waiting import advance_until


def demo_harness(settings: Settings, catalog: AgentCatalog | None = None, **options: Any) -> Harness:
    """A Harness on an engine as build_engine makes it (nothing saved), sessions s1, s2, …"""
    ids = itertools.count(1)
    options.setdefault("id_factory", lambda: f"s{next(ids)}")
    engine = build_engine(settings, catalog or load_agents(None), FakeClock(), persist=False, **options)
    return Harness(engine)


class Harness:
    """An engine, its manager and FakeClock, and helpers to run sessions to rest in virtual time."""

    def __init__(self, engine: LocalEngine) -> None:
        assert isinstance(engine.clock, FakeClock), "a Harness runs in virtual time"
        self.engine = engine
        self.manager = engine.manager
        self.clock: FakeClock = engine.clock
        self.actions: list[tuple[float, str, str, dict[str, Any]]] = []
        self.manager.subscribe(self._action, ActionTaken)

    def _action(self, change: Record) -> None:
        assert isinstance(change, ActionTaken)
        details = {
            k: v
            for k, v in (
                ("reason", change.reason),
                ("detail", change.detail),
                ("prompt", change.prompt),
                ("attempt", change.attempt),
            )
            if v
        }
        self.actions.append((self.clock.now(), change.session_id, change.action.value, details))

    async def new(self, agent: str = "demo") -> str:
        return await self.manager.create_session(agent)

    def busy(self, sid: str) -> bool:
        session = self.manager.session(sid)
        return session.turn is not None or session.recovering

    async def until_rest(self, sid: str, within: float = 10_000.0) -> None:
        """Advance virtual time until the session is at rest."""
        await advance_until(self.clock, lambda: not self.busy(sid), within=within, what=f"{sid} at rest")
        await self.manager.idle()

    async def until(self, predicate: Callable[[], bool], within: float = 10_000.0) -> None:
        await advance_until(self.clock, predicate, within=within)

    def outcomes(self, sid: str) -> list[tuple[str, str]]:
        return [(t.outcome.value, t.reason) for t in self.manager.session(sid).turns]

    def details(self, sid: str) -> list[str]:
        """The technical why of each ended turn (watchdog tier, last event type)."""
        return [t.detail for t in self.manager.session(sid).turns]

    def texts(self, sid: str) -> str:
        return "\n".join(item.text for item in self.manager.history(sid))
