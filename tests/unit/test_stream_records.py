"""A streaming reply is one view change per loop iteration, not one per token.

Every delta is folded into its session at once (the session is always up to date); only the
``ViewChanged`` notice of the deltas that came in one loop iteration goes out once, at its
end, or with the session's next other change — whichever is first.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from polypilot_tui.agents.base import EventSink, NullBackend
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.records import Record, ViewChanged
from polypilot_tui.engine.manager import SessionManager


def delta(text: str) -> AgentEvent:
    return AgentEvent(EventType.MESSAGE_DELTA, {"messageId": "m", "deltaContent": text})


class Rig:
    """A manager on agents that say only what the test pushes, and the view changes it published."""

    def __init__(self, tmp_path: Path) -> None:
        self.backends: list[NullBackend] = []

        def factory(agent: str, sink: EventSink, workdir: Path) -> NullBackend:
            self.backends.append(NullBackend(sink))
            return self.backends[-1]

        settings = Settings.read(None, state_dir=tmp_path)
        catalog = AgentCatalog({"quiet": AgentConfig(name="quiet", kind="demo")})
        self.manager = SessionManager(settings, catalog, FakeClock(), backend_factory=factory)
        self.views: list[tuple[str, int]] = []
        self.manager.subscribe(self._on_view, ViewChanged)

    def _on_view(self, change: Record) -> None:
        assert isinstance(change, ViewChanged)
        self.views.append((change.session_id, change.revision))

    async def turn(self) -> tuple[str, NullBackend]:
        sid = await self.manager.create_session("quiet")
        await self.manager.send(sid, "go")
        await asyncio.sleep(0)
        return sid, self.backends[-1]

    def response(self, sid: str) -> str:
        turn = self.manager.session(sid).turn
        assert turn is not None
        return turn.response_text


@pytest.fixture
async def rig(tmp_path: Path) -> Rig:
    built = Rig(tmp_path)
    yield built  # type: ignore[misc]
    await built.manager.shutdown()


async def test_a_burst_of_deltas_is_one_view_change_and_the_session_is_current_throughout(rig: Rig) -> None:
    sid, agent = await rig.turn()
    rig.views.clear()
    for text in ("one ", "two ", "three"):
        agent.sink(delta(text))
        assert rig.response(sid).endswith(text)  # folded at once
    assert rig.views == []
    await asyncio.sleep(0)
    assert rig.views == [(sid, rig.manager.session(sid).revision)]
    agent.sink(delta(" four"))  # the next iteration: another notice
    await asyncio.sleep(0)
    assert len(rig.views) == 2 and rig.response(sid) == "one two three four"


async def test_another_change_of_the_session_carries_the_streams_notice(rig: Rig) -> None:
    sid, agent = await rig.turn()
    rig.views.clear()
    agent.sink(delta("text before the tool "))
    agent.sink(AgentEvent(EventType.TOOL_START, {"toolCallId": "t1", "toolName": "bash"}))
    assert rig.views == [(sid, rig.manager.session(sid).revision)]  # at once, with the delta in it
    await asyncio.sleep(0)
    assert len(rig.views) == 1  # nothing left to say at the end of the iteration


async def test_sessions_get_a_notice_each(rig: Rig) -> None:
    first, a = await rig.turn()
    second, b = await rig.turn()
    rig.views.clear()
    for _ in range(3):
        a.sink(delta("a"))
        b.sink(delta("b"))
    await asyncio.sleep(0)
    assert sorted(sid for sid, _ in rig.views) == sorted([first, second])


def test_without_a_running_loop_the_notice_goes_at_once(tmp_path: Path) -> None:
    async def started() -> tuple[Rig, str, NullBackend]:
        built = Rig(tmp_path)
        sid, agent = await built.turn()
        return built, sid, agent

    built, sid, agent = asyncio.run(started())
    built.views.clear()
    agent.sink(delta("x"))
    assert built.views == [(sid, built.manager.session(sid).revision)]
