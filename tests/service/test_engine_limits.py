"""Whatever the engine accepts it can save, read back and send: a real engine (``polypilot
serve``) filled through its API to every limit a user can fill — sessions, names, a prompt
running in each of two sessions, a queue full, the prompts of all sessions together — refuses
one more of each with a message naming the limit, is stopped (turns in flight become
interrupted prompts), starts again, reads every session back whole and lets a dashboard's
mirror attach. (70 queued prompts of 1 MB made a sessions.json its own reader refused: the
whole list was moved aside, and no dashboard could attach while the queue existed.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from polypilot_tui.domain.limits import (
    HELD_BYTES,
    NAME_CHARS,
    PROMPT_BYTES,
    QUEUE_BYTES,
    QUEUE_PROMPTS,
    REGISTRY_BYTES,
    SESSIONS,
    saved_bytes,
)
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError, Verb
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.storage.registry import Registry
from tests.support.engine_service import running_engine, short_state_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def sized(head: str, size: int) -> str:
    """``head`` padded to ``size`` bytes as saved (a prompt at a limit)."""
    return head + "p" * (size - saved_bytes(head))


async def refused(client: EngineClient, verb: Verb[Any, Any], request: object, words: str) -> None:
    with pytest.raises(EngineError, match=words):
        await client.call(verb, request)


async def attach(socket: object) -> RemoteEngine:
    mirror = RemoteEngine(lambda: asyncio.sleep(0, socket), reconnect=False)
    await mirror.start()
    return mirror


async def test_an_engine_filled_to_every_limit_saves_restarts_reads_back_and_attaches() -> None:
    state = short_state_dir()
    each = QUEUE_BYTES // QUEUE_PROMPTS
    full_queue = [sized(f"queued {i} ", each) for i in range(QUEUE_PROMPTS)]
    running = [sized(f"!hang turn {i} ", PROMPT_BYTES) for i in range(2)]
    rest = HELD_BYTES - sum(saved_bytes(p) for p in full_queue + running)  # to the byte
    second_queue = [sized(f"more {i} ", PROMPT_BYTES) for i in range(rest // PROMPT_BYTES)]
    second_queue.append(sized("last ", rest - PROMPT_BYTES * len(second_queue)))
    assert sum(saved_bytes(p) for p in full_queue + running + second_queue) == HELD_BYTES
    async with running_engine(state, keep=True) as engine:
        client = engine.client
        names = [f"{i:03d} " + "é" * (NAME_CHARS - 4) for i in range(SESSIONS)]
        ids = [await client.call(verbs.NEW_SESSION, verbs.NewSession("demo", name)) for name in names]
        await refused(client, verbs.NEW_SESSION, verbs.NewSession("demo"), f"the engine holds {SESSIONS} sessions")
        await refused(client, verbs.RENAME, verbs.Rename(ids[0], "n" * (NAME_CHARS + 1)), "may have at most")
        await refused(client, verbs.SEND, verbs.Send(ids[0], "x" * 3_000_000), "one prompt may hold at most")

        async def send(sid: str, prompt: str) -> str:
            return await client.call(verbs.SEND, verbs.Send(sid, prompt))

        for sid, prompt in zip(ids, running, strict=False):
            assert await send(sid, prompt) == "sent"
        for prompt in full_queue:
            assert await send(ids[0], prompt) == "queued"
        await refused(client, verbs.SEND, verbs.Send(ids[0], "x"), "prompts are queued in this session")
        for prompt in second_queue:
            assert await send(ids[1], prompt) == "queued"
        await refused(client, verbs.SEND, verbs.Send(ids[2], "x"), "the engine holds 16,777,216 bytes of prompts")
        mirror = await attach(engine.socket)  # the snapshot of it all is within what a client takes
        try:
            assert len(mirror.ids()) == SESSIONS and mirror.view(ids[0]).queued == QUEUE_PROMPTS
            assert mirror.view(ids[1]).queue[-1].size == saved_bytes(second_queue[-1])
        finally:
            await mirror.detach(stop_engine=False)
    saved = Registry(state).load(repair=False)
    assert saved.problem == "" and len(saved.sessions) == SESSIONS
    assert (state / "sessions.json").stat().st_size <= REGISTRY_BYTES
    async with running_engine(state) as engine:  # read back at the next start, whole
        http = engine.http
        views = (await http.get("/sessions"))["sessions"]
        assert [v["name"] for v in views] == names
        first, second = [await http.get(f"/sessions/{sid}") for sid in ids[:2]]
        assert first["interrupted_prompt"] and first["queue_held"] and len(first["queue"]) == QUEUE_PROMPTS
        assert len(second["queue"]) == len(second_queue)
        taken = await http.post(f"/sessions/{ids[0]}/unqueue", {"index": 0, "expected": first["queue"][0]["key"]})
        assert taken["result"] == full_queue[0]  # whole
        assert (await http.post(f"/sessions/{ids[0]}/resend", {}))["result"] is True  # the interrupted one, whole
        mirror = await attach(engine.socket)
        try:
            assert len(mirror.ids()) == SESSIONS
        finally:
            await mirror.detach(stop_engine=False)
