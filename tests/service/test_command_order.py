"""A session's prompts reach the engine in the order the dashboard sent them, attached as in
process: each request travels on a connection of its own, and one sent later overtook one
sent earlier (a burst of prompts typed into one session was queued out of order)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine import verbs
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.service.remote import RemoteEngine
from tests.support.engine_service import ServedEngine

PROMPTS = 40


@pytest.fixture
async def attached(tmp_path: Path) -> AsyncIterator[tuple[RemoteEngine, LocalEngine]]:
    """A dashboard's engine attached to a demo engine served in this loop, and that engine."""
    settings = Settings.read(None, state_dir=tmp_path, demo_speed=20, record=False)
    engine = build_engine(settings, load_agents(None), SystemClock(), persist=False)
    remote = ServedEngine(engine, start=True).attach()
    await remote.start()
    try:
        yield remote, engine
    finally:
        await remote.detach(stop_engine=False)


def prompts_of(engine: LocalEngine, sid: str) -> list[str]:
    """The prompts the session took, in its order: those sent, then those queued."""
    sent = [row.text for row in engine.history(sid) if row.kind is ItemKind.USER]
    return sent + [queued.text for queued in engine.manager.session(sid).queue]


async def test_prompts_sent_at_once_to_one_session_reach_it_in_the_order_sent(
    attached: tuple[RemoteEngine, LocalEngine],
) -> None:
    remote, engine = attached
    sid = await remote.call(verbs.NEW_SESSION, verbs.NewSession("demo"))
    prompts = [f"prompt {n}" for n in range(PROMPTS)]
    answers = await asyncio.gather(*(remote.call(verbs.SEND, verbs.Send(sid, p)) for p in prompts))
    assert answers[0] == "sent" and set(answers[1:]) == {"queued"}
    assert prompts_of(engine, sid) == prompts


async def test_a_released_queue_goes_out_before_a_prompt_sent_after_the_release(
    attached: tuple[RemoteEngine, LocalEngine],
) -> None:
    """SEND_QUEUED then prompts, at once: the held queue's head starts the turn, they wait."""
    remote, engine = attached
    sid = await remote.call(verbs.NEW_SESSION, verbs.NewSession("demo"))
    await remote.call(verbs.SEND, verbs.Send(sid, "first"))
    await remote.call(verbs.SEND, verbs.Send(sid, "queued"))
    await remote.call(verbs.STOP, verbs.SessionRef(sid))  # the queue is kept, held
    assert engine.manager.session(sid).queue_held
    later = [f"later {n}" for n in range(PROMPTS)]
    released, *answers = await asyncio.gather(
        remote.call(verbs.SEND_QUEUED, verbs.SessionRef(sid)),
        *(remote.call(verbs.SEND, verbs.Send(sid, p)) for p in later),
    )
    assert released and set(answers) == {"queued"}
    assert prompts_of(engine, sid) == ["first", "queued", *later]
