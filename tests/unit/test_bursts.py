"""Stream deltas that arrive in one loop iteration are folded as one (engine/bursts.py).

The folding must never change what a session ends up with: the same text in the same order,
nothing held past the end of the iteration, and a turn that ends under held deltas keeps them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from polypilot_tui.agents.base import EventSink, NullBackend
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.engine.bursts import DeltaBursts
from polypilot_tui.engine.manager import SessionManager


def delta(text: str, message: str = "m") -> AgentEvent:
    return AgentEvent(EventType.MESSAGE_DELTA, {"messageId": message, "deltaContent": text, "extra": 1})


class Recorder:
    """What DeltaBursts hands on, through the same ``take``-else-apply step the engine uses."""

    def __init__(self) -> None:
        self.applied: list[AgentEvent] = []
        self.bursts = DeltaBursts(lambda sid, event: self.applied.append(event))

    def offer(self, event: AgentEvent, session: str = "s") -> None:
        if not self.bursts.take(session, event):
            self.applied.append(event)

    def texts(self) -> list[str]:
        return [e.text("deltaContent") if e.type == EventType.MESSAGE_DELTA else e.type for e in self.applied]


def test_without_a_running_loop_nothing_is_held() -> None:
    r = Recorder()
    for text in ("a", "b", "c"):
        r.offer(delta(text))
    assert r.texts() == ["a", "b", "c"]


async def test_a_burst_is_folded_as_one_at_the_end_of_the_iteration() -> None:
    r = Recorder()
    for text in ("a", "b", "c"):
        r.offer(delta(text))
    assert r.texts() == []  # held for the end of this iteration
    await asyncio.sleep(0)
    assert r.texts() == ["abc"]
    assert r.applied[0].data["messageId"] == "m" and r.applied[0].data["extra"] == 1  # the rest of the event kept
    r.offer(delta("d"))
    await asyncio.sleep(0)
    assert r.texts() == ["abc", "d"]


async def test_another_event_or_message_goes_after_what_is_held() -> None:
    r = Recorder()
    r.offer(delta("a"))
    r.offer(delta("b"))
    r.offer(delta("c"))
    r.offer(AgentEvent(EventType.TOOL_START, {"toolCallId": "t"}))
    r.offer(delta("x", "n"))
    r.offer(delta("y", "n"))
    r.offer(delta("z", "other"))
    assert r.texts() == ["abc", EventType.TOOL_START, "xy"]
    await asyncio.sleep(0)
    assert r.texts() == ["abc", EventType.TOOL_START, "xy", "z"]


async def test_sessions_are_folded_apart() -> None:
    r = Recorder()
    for text in ("a1", "b1", "a2", "b2", "a3"):
        r.offer(delta(text), session=text[0])
    assert r.texts() == []
    await asyncio.sleep(0)
    assert sorted(r.texts()) == ["a1a2a3", "b1b2"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["m", "n", "tool"]), st.sampled_from(["s1", "s2"]), st.booleans()),
        max_size=40,
    )
)
def test_each_session_gets_the_same_text_in_the_same_order(script: list[tuple[str, str, bool]]) -> None:
    """Whatever the bursts, each session sees its events' text in arrival order, all of it."""

    async def run() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        applied: dict[str, list[str]] = {"s1": [], "s2": []}
        sent: dict[str, list[str]] = {"s1": [], "s2": []}

        def apply_now(sid: str, event: AgentEvent) -> None:
            applied[sid].append(event.text("deltaContent") if event.type == EventType.MESSAGE_DELTA else "|")

        bursts = DeltaBursts(apply_now)
        for index, (kind, sid, yield_first) in enumerate(script):
            if yield_first:
                await asyncio.sleep(0)
            event = AgentEvent(EventType.TOOL_START, {}) if kind == "tool" else delta(f"<{index}>", kind)
            sent[sid].append("|" if kind == "tool" else f"<{index}>")
            if not bursts.take(sid, event):
                apply_now(sid, event)
        await asyncio.sleep(0)
        return applied, sent

    applied, sent = asyncio.run(run())
    for sid in ("s1", "s2"):
        assert "".join(applied[sid]) == "".join(sent[sid])


async def test_a_turn_stopped_under_held_deltas_keeps_their_text(tmp_path: Path) -> None:
    backends: list[NullBackend] = []

    def factory(agent: str, sink: EventSink, workdir: Path) -> NullBackend:
        backends.append(NullBackend(sink))
        return backends[-1]

    settings = Settings(_env_file=None, state_dir=tmp_path)  # type: ignore[call-arg]
    catalog = AgentCatalog({"quiet": AgentConfig(name="quiet", kind="demo")})
    manager = SessionManager(settings, catalog, FakeClock(), backend_factory=factory)
    sid = await manager.create_session("quiet")
    await manager.send(sid, "go")
    for text in ("one ", "two ", "three"):
        backends[-1].sink(delta(text))
    turn = manager.session(sid).turn
    assert turn is not None and turn.response_text == ""  # all three held
    await manager.stop(sid)  # in the same iteration: the turn ends with the held text in it
    replies = [i.text for i in manager.history(sid) if i.kind is ItemKind.ASSISTANT]
    assert replies == ["one two three"], replies
    await manager.shutdown()
