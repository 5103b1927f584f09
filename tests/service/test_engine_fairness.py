"""Sessions that flood leave the engine responsive: a real ``polypilot serve`` with real agent
processes writing thousands of updates a second (tests/support/fake_acp_agent.py), a dashboard's
mirror and followers attached; the API and another session's stream measured (loose bounds:
the tight figures are bench/engine_fairness.py's)."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import pytest

from bench._engine_service import read_tokens
from polypilot_tui.domain.records import Record, ViewChanged
from polypilot_tui.service.remote import RemoteEngine
from tests.support.flooding import fake_session, flood_engine, until_idle
from tests.support.stream_clients import StalledClient

pytestmark = pytest.mark.slow


async def test_two_flooding_sessions_leave_the_api_and_another_sessions_stream_responsive(tmp_path: Path) -> None:
    """Two agents flood 3000 reply chunks a second each, each followed by a client reading its
    events, a dashboard attached: API answers and a third session's stream (20 chunks a second,
    each stamped with when its agent sent it) stay prompt — loose bounds here, a loaded CI box
    shares 2 cores; the tight figures are bench/engine_fairness.py's (they were 173-357 ms and
    over 600 ms for every answer, the other stream seconds behind)."""
    async with flood_engine(tmp_path) as engine:
        floods = [await fake_session(engine) for _ in range(2)]
        other = await fake_session(engine)
        followers = [StalledClient(engine.socket, f"?session={sid}&events=1") for sid in floods]
        mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), reconnect=False)
        await mirror.start()
        delays: list[float] = []
        seen = [0]

        def arrived(change: Record) -> None:
            if change.session_id == other:
                text = mirror.streaming_text(other)
                seen[0] = max(seen[0], read_tokens(text, seen[0], time.monotonic(), delays)[0])

        mirror.subscribe(arrived, ViewChanged)
        drain = asyncio.create_task(keep_reading(followers))
        try:
            for sid in floods:
                await engine.http.post(f"/sessions/{sid}/send", {"prompt": "CHAOS flood 3000 5"})
            await asyncio.sleep(1.0)  # the floods under way
            await engine.http.post(f"/sessions/{other}/send", {"prompt": "CHAOS flood 20 4 stamp"})
            answers = []
            flooded = 0
            loop = asyncio.get_running_loop()
            until = loop.time() + 4.0
            while loop.time() < until:
                started = time.perf_counter()
                await engine.http.get("/engine")
                answers.append((time.perf_counter() - started) * 1000)
                flooded = max(flooded, mirror.view(floods[0]).streaming_chars)
                await asyncio.sleep(0.05)
            await until_idle(engine, other, turns=2)
            assert flooded > 50_000  # they did flood while the answers were timed (their 5 s may end after)
        finally:
            drain.cancel()
            await mirror.detach(stop_engine=False)
            for follower in followers:
                follower.close()
        assert len(delays) >= 50, f"only {len(delays)} of the other session's chunks were seen"
        median, stream = statistics.median(answers), statistics.median(delays)
        assert median < 200, f"API answers took {median:.0f} ms (median) while two sessions flooded"
        assert stream < 300, f"the other session's stream was {stream:.0f} ms behind (median)"


async def keep_reading(clients: list[StalledClient]) -> None:
    """Followers that read (a `polypilot follow` of each flooding session), what they read dropped."""
    while True:
        for client in clients:
            client.discard()
        await asyncio.sleep(0.01)
