"""The agents a host's engine can start are asked once, not at every redraw: a host that
failed to answer is asked again :data:`ASK_AGAIN` seconds later (issue 26 review)."""

from __future__ import annotations

import asyncio
from typing import Any

from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.hosts import LOCAL
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.ui.welcome import ASK_AGAIN, AgentsFound


class AgentsEngine:
    """One layer's stand-in: an engine whose AGENTS call fails (or answers), counted."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.calls = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def call(self, verb: Any, request: Any) -> Any:
        assert verb is verbs.AGENTS
        self.calls += 1
        await self.gate.wait()
        if self.fail:
            raise EngineError("dev: the link dropped")
        return ()


async def test_a_host_that_failed_is_not_asked_again_until_its_retry_time() -> None:
    clock = FakeClock()
    found = AgentsFound(clock)
    engine = AgentsEngine(fail=True)
    assert found.due("dev")
    assert await found.look(engine, "dev") is False  # type: ignore[arg-type]
    for _ in range(50):  # every redraw asks due(): none starts a lookup
        assert not found.due("dev")
    await clock.advance(ASK_AGAIN - 1)
    assert not found.due("dev")
    await clock.advance(1)
    assert found.due("dev")
    engine.fail = False
    assert await found.look(engine, "dev") is True  # type: ignore[arg-type]
    assert not found.due("dev") and engine.calls == 2


async def test_a_host_being_asked_is_not_due_so_two_redraws_start_one_call() -> None:
    found = AgentsFound(FakeClock())
    engine = AgentsEngine(fail=False)
    engine.gate.clear()
    first = asyncio.ensure_future(found.look(engine, "dev"))  # type: ignore[arg-type]
    assert not found.due("dev")  # marked at the call, before the answer
    await asyncio.sleep(0)
    assert not found.due("dev") and engine.calls == 1
    engine.gate.set()
    assert await first is True


async def test_local_that_fails_is_answered_empty_not_retried() -> None:
    found = AgentsFound(FakeClock())
    assert await found.look(AgentsEngine(fail=True), LOCAL) is True  # type: ignore[arg-type]
    assert found.offers == () and not found.due(LOCAL)
