"""A SessionManager on the demo agent in virtual time, for engine tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.records import ActionTaken, Record
from polypilot_tui.engine.manager import SessionManager


class Harness:
    """A manager, its FakeClock, and helpers to run sessions to rest in virtual time."""

    def __init__(self, manager: SessionManager, clock: FakeClock) -> None:
        self.manager = manager
        self.clock = clock
        self.actions: list[tuple[float, str, str, dict[str, Any]]] = []
        manager.subscribe(self._action, ActionTaken)

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

    async def until_rest(self, sid: str, horizon: float = 10_000.0) -> None:
        """Advance virtual time until the session is at rest (or the horizon)."""
        await self.clock.settle()
        while self.busy(sid):
            deadline = self.clock.next_deadline()
            if deadline is None or deadline > horizon:
                return
            await self.clock.advance_to(deadline)
        await self.manager.idle()

    async def until(self, predicate: Callable[[], bool], horizon: float = 10_000.0) -> None:
        await self.clock.settle()
        while not predicate():
            deadline = self.clock.next_deadline()
            if deadline is None or deadline > horizon:
                raise AssertionError(f"condition not reached by t={self.clock.now()}")
            await self.clock.advance_to(deadline)

    def outcomes(self, sid: str) -> list[tuple[str, str]]:
        return [(t.outcome.value, t.reason) for t in self.manager.session(sid).turns]

    def details(self, sid: str) -> list[str]:
        """The technical why of each ended turn (watchdog tier, last event type)."""
        return [t.detail for t in self.manager.session(sid).turns]

    def texts(self, sid: str) -> str:
        return "\n".join(item.text for item in self.manager.history(sid))
