"""The engine reads only so far ahead of an agent: a real ``polypilot serve`` and a real agent
process writing its tool's output faster than the engine handles it (nothing of it is kept),
the engine's memory measured from /proc."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench._support import proc_kib
from tests.support.flooding import fake_session, flood_engine

pytestmark = pytest.mark.slow


async def test_an_agent_flooding_faster_than_the_engine_handles_waits_instead_of_growing_it(tmp_path: Path) -> None:
    """2000 updates of 30 KB written as fast as the pipe takes them: the agent waits on its full
    pipe; the engine grows by a few MB at most. (Since an agent's lines are read a slice of the
    loop at a time, the pipe is read between slices too: with 10 MB lines read whole it read
    up to 20 MB ahead of what it had handled, and grew by that.)"""
    async with flood_engine(tmp_path) as engine:
        sid = await fake_session(engine)
        pid = engine.process.pid
        before = proc_kib(pid, "status", "VmRSS:")
        await engine.http.post(f"/sessions/{sid}/send", {"prompt": "CHAOS flood 1000000 0.002 progress 30000"})
        peak = before
        while (await engine.http.get(f"/sessions/{sid}"))["status"] != "idle":
            peak = max(peak, proc_kib(pid, "status", "VmRSS:"))
            await asyncio.sleep(0.1)
        grown = (peak - before) / 1024
        assert grown < 8, f"the engine grew by {grown:.1f} MiB while the agent flooded it"
