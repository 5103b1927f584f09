"""An agent that says too much in one message: a real engine (``polypilot serve``) with the
scripted ACP agent writing one line of 20 MB — a reply, then a tool's output. What the engine
keeps of it is bounded and the cut is said; its memory grows by about twice the line (it was
8x for a reply with one dashboard attached, 13x with a recording and a follower: the line was
copied by the reader, the transcript, the mapper, the turn, the row and every event)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from bench._engine_service import follow
from polypilot_tui.domain.limits import ROW_CHARS, TOOL_TEXT_CHARS
from polypilot_tui.engine import verbs
from polypilot_tui.service.remote import RemoteEngine
from tests.reliability.conftest import fake_agents_file
from tests.support.engine_service import running_engine, short_state_dir
from tests.support.waiting import until

pytestmark = pytest.mark.slow

LINE = 20_000_000
MAX_GROWTH = 3.0
"""Peak memory the engine may add per byte of the line (2.0x measured; 8x before)."""


def peak_rss(pid: int) -> int:
    """The process's peak resident size so far, in bytes (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def turn(mirror: RemoteEngine, sid: str, prompt: str) -> None:
    done = mirror.view(sid).turns + 1
    await mirror.call(verbs.SEND, verbs.Send(sid, prompt))
    await until(lambda: mirror.view(sid).turns >= done and not mirror.view(sid).status.busy, 60, f"{prompt!r} done")


async def rows(mirror: RemoteEngine, sid: str, count: int) -> list[str]:
    await until(lambda: len(mirror.history(sid)) >= count, 20, f"{count} rows")
    return [item.text for item in mirror.history(sid)]


def said_cut(text: str, limit: int) -> bool:
    """``text`` keeps the start of the 20 MB line (no more than ``limit`` characters of it)
    and says how many characters it did not keep: the rest of the line at least."""
    found = re.search(r"…\n\[([\d,]+) more characters not kept\]$", text)
    if found is None or not text.startswith("0123456789abcdef"):
        return False
    kept = found.start()
    return kept <= limit and kept + int(found.group(1).replace(",", "")) >= LINE


async def test_one_huge_agent_line_is_kept_bounded_said_and_costs_about_twice_its_size() -> None:
    state = short_state_dir()
    agents = fake_agents_file(state / "agents.toml")
    env = {"POLYPILOT_AGENTS_FILE": str(agents), "POLYPILOT_RECORD": "true"}
    async with running_engine(state, env=env) as engine:
        mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), reconnect=False)
        await mirror.start()
        try:
            sid = await mirror.call(verbs.NEW_SESSION, verbs.NewSession("fake", "talkative"))
            follower = asyncio.create_task(follow(engine.socket, sid))  # `polypilot follow`: every event
            await turn(mirror, sid, "hello")
            await turn(mirror, sid, "hello again")  # warm: what a turn costs anyway is in the baseline
            for prompt, limit in ((f"HUGE {LINE / 1e6}", ROW_CHARS), (f"HUGEOUT {LINE / 1e6}", TOOL_TEXT_CHARS)):
                before = peak_rss(engine.process.pid)
                await turn(mirror, sid, prompt)
                grown = peak_rss(engine.process.pid) - before
                assert grown < MAX_GROWTH * LINE, f"{prompt}: +{grown / 1e6:.0f} MB for a line of {LINE / 1e6:.0f} MB"
                texts = await rows(mirror, sid, 1)
                assert any(said_cut(text, limit) for text in texts), (prompt, [t[-80:] for t in texts])
            follower.cancel()
        finally:
            await mirror.detach(stop_engine=False)
