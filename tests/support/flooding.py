"""A real engine (``polypilot serve``) whose ``fake`` agent is the fake ACP agent
(tests/support/fake_acp_agent.py): its ``CHAOS flood`` prompts make a real agent process
flood the engine with thousands of updates a second."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from polypilot_tui.domain.view import SessionStatus
from tests.reliability.conftest import fake_agents_file
from tests.support.engine_service import EngineProcess, running_engine


@asynccontextmanager
async def flood_engine(folder: Path, backlog: int | None = None) -> AsyncIterator[EngineProcess]:
    """An engine whose ``fake`` agent is the fake ACP agent (its ``CHAOS flood`` prompts);
    ``backlog``: what may wait for one client (the default 8 MiB takes a long flood to fill)."""
    env = {"POLYPILOT_AGENTS_FILE": str(fake_agents_file(folder / "agents.toml"))}
    if backlog is not None:
        env["POLYPILOT_STREAM_CLIENT_BACKLOG_BYTES"] = str(backlog)
    async with running_engine(env=env) as engine:
        yield engine


async def fake_session(engine: EngineProcess) -> str:
    """A session of the fake agent, connected (one plain turn done)."""
    sid = str((await engine.http.post("/sessions", {"agent": "fake"}))["id"])
    await engine.http.post(f"/sessions/{sid}/send", {"prompt": "hello"})
    await until_idle(engine, sid, turns=1)
    return sid


async def until_idle(engine: EngineProcess, sid: str, turns: int, timeout: float = 60.0) -> dict[str, Any]:
    """The session's view once ``turns`` turns ended and none runs."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        view: dict[str, Any] = await engine.http.get(f"/sessions/{sid}")
        if view["turns"] >= turns and not SessionStatus(view["status"]).busy:
            return view
        if loop.time() > deadline:
            raise AssertionError(f"the turn did not end within {timeout} s: {view['status']}")
        await asyncio.sleep(0.1)
