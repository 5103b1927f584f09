"""What the engine takes in is bounded at the edge: a prompt, a queue, the prompts of all
sessions together, the number of sessions, a name — each refused whole with a message that
names its limit, nothing changed by the refusal; never cut."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.limits import (
    HELD_BYTES,
    NAME_CHARS,
    PROMPT_BYTES,
    QUEUE_BYTES,
    QUEUE_PROMPTS,
    SESSIONS,
    LimitExceeded,
    saved_bytes,
)
from polypilot_tui.domain.workspace import Workspace
from tests.support.engine import Harness

TOO_BIG = r"the prompt is 1,048,578 bytes; one prompt may hold at most 1,048,576 bytes \(put the text in a file"
QUEUE_FULL = (
    r"the prompt is 1 byte and this session's queue holds 8,388,608 bytes already; a queue may hold at most 8,388,"
)
ENGINE_FULL = r"the engine holds 16,777,216 bytes of prompts already .* at most 16,777,216 bytes"


async def busy_session(harness: Harness) -> str:
    """A session whose turn hangs: what is sent now is queued."""
    sid = await harness.new()
    assert await harness.manager.send(sid, "!hang") == "sent"
    await harness.clock.settle()
    return sid


def state(harness: Harness, sid: str) -> tuple[object, ...]:
    session = harness.manager.session(sid)
    return session.revision, tuple(p.text for p in session.queue), session.turn.prompt if session.turn else None


async def test_a_prompt_larger_than_one_may_be_is_refused_whole_and_one_at_the_limit_is_taken(
    harness: Harness,
) -> None:
    sid = await busy_session(harness)
    at_limit = "é" * (PROMPT_BYTES // 2)  # two bytes each: the limit counts bytes as saved, not characters
    assert saved_bytes(at_limit) == PROMPT_BYTES
    before = state(harness, sid)
    with pytest.raises(
        LimitExceeded,
        match=TOO_BIG,
    ):
        await harness.manager.send(sid, at_limit + "é")
    assert state(harness, sid) == before
    assert await harness.manager.send(sid, at_limit) == "queued"
    assert harness.manager.session(sid).queue[-1].text == at_limit  # whole


async def test_a_queue_holds_so_many_prompts_and_so_many_bytes(harness: Harness) -> None:
    sid = await busy_session(harness)
    for i in range(QUEUE_PROMPTS):
        assert await harness.manager.send(sid, f"prompt {i}") == "queued"
    before = state(harness, sid)
    with pytest.raises(LimitExceeded, match=f"{QUEUE_PROMPTS} prompts are queued in this session already"):
        await harness.manager.send(sid, "one more")
    assert state(harness, sid) == before
    other = await busy_session(harness)
    big = "x" * PROMPT_BYTES
    for _ in range(QUEUE_BYTES // PROMPT_BYTES):
        await harness.manager.send(other, big)
    with pytest.raises(
        LimitExceeded,
        match=QUEUE_FULL,
    ):
        await harness.manager.send(other, "x")
    assert [p.text for p in harness.manager.session(other).queue] == [big] * (QUEUE_BYTES // PROMPT_BYTES)


async def test_the_engine_holds_so_many_bytes_of_prompts_over_all_its_sessions(harness: Harness) -> None:
    """Queued, running and interrupted prompts count together: what the registry holds."""
    big = "x" * PROMPT_BYTES
    sessions = [await harness.new() for _ in range(HELD_BYTES // PROMPT_BYTES)]
    for sid in sessions[:-1]:
        assert await harness.manager.send(sid, big) == "sent"  # running: the agent has it, so does the registry
    last = sessions[-1]
    harness.manager.session(last).interrupted_prompt = big  # a turn a restart interrupted
    idle = await harness.new()
    with pytest.raises(LimitExceeded, match=ENGINE_FULL):
        await harness.manager.send(idle, "a short one")
    assert harness.manager.session(idle).turn is None and harness.manager.view(idle).turns == 0
    await harness.manager.stop(sessions[0])  # its prompt is no longer held
    await harness.until_rest(sessions[0])
    assert await harness.manager.send(idle, "a short one") == "sent"


async def test_an_engine_holds_so_many_sessions_and_a_name_so_many_characters(harness: Harness) -> None:
    manager = harness.manager
    with pytest.raises(LimitExceeded, match=f"a session's name may have at most {NAME_CHARS}"):
        manager.add_session("demo", "n" * (NAME_CHARS + 1), connect=False)
    sid = manager.add_session("demo", "a\nname  on\tlines", connect=False)
    assert manager.view(sid).name == "a name on lines"  # flattened, not cut
    with pytest.raises(LimitExceeded, match="may have at most"):
        manager.rename(sid, "r" * (NAME_CHARS + 1))
    assert manager.view(sid).name == "a name on lines"
    with pytest.raises(LimitExceeded, match="the branch has 300 characters"):
        manager.add_session("demo", connect=False, workspace=Workspace("/tmp", branch="b" * 300))
    while len(manager.ids()) < SESSIONS:
        manager.add_session("demo", connect=False)
    with pytest.raises(LimitExceeded, match=f"the engine holds {SESSIONS} sessions"):
        manager.add_session("demo", connect=False)
    closed = await manager.close(sid)
    assert closed is not None
    manager.add_session("demo", connect=False)
    with pytest.raises(LimitExceeded, match=f"the engine holds {SESSIONS} sessions"):
        manager.reopen(closed)


async def test_a_queued_prompt_is_taken_back_whole_by_its_key(harness: Harness) -> None:
    sid = await busy_session(harness)
    texts = ["first " + "a" * 5000, "second", "first " + "a" * 5000 + "b"]  # the first two share a preview
    for text in texts:
        await harness.manager.send(sid, text)
    view = harness.manager.view(sid)
    assert [q.size for q in view.queue] == [saved_bytes(t) for t in texts]
    assert view.queue[0].preview == view.queue[2].preview and view.queue[0].key != view.queue[2].key
    third = view.queue[2]
    assert harness.manager.unqueue(sid, 0) == texts[0]  # the queue moved on since the view was drawn
    assert harness.manager.unqueue(sid, 2, third.key) == texts[2]  # found by its key, whole
    assert harness.manager.unqueue(sid, 0, third.key) is None
