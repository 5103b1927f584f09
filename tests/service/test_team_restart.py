"""A real engine service (``polypilot serve``) stopped mid-orchestration, then started again:
the team's links, its budget and the wait its orchestrator had pending survive, and the wait,
which the relay that died with the engine can no longer be answered on, reaches the
orchestrator as a prompt. The orchestrator is the scripted ACP agent (it keeps the tool
servers it was handed, capability included, where the test reads them); its workers are demo
agents."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.domain.tool_servers import CAPABILITY_ENV
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError, UnknownCapability
from tests.reliability.conftest import db_texts, fake_agents_file
from tests.support.engine_service import EngineProcess, running_engine, short_state_dir
from tests.support.waiting import until, until_answer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def handed_capability(agent_state: Path) -> str:
    """The capability in the last relay the engine handed the fake agent ("" for none yet)."""
    try:
        lines = (agent_state / "mcp-servers.jsonl").read_text().splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        for server in json.loads(line)["servers"]:
            for pair in server.get("env", []):
                if pair["name"] == CAPABILITY_ENV:
                    return str(pair["value"])
    return ""


def saved_wait(state: Path) -> bool:
    try:
        lines = (state / "teams.jsonl").read_text().splitlines()
    except OSError:
        return False
    return len(lines) == 1 and bool(json.loads(lines[0])["waits"])


def saved_sessions(state: Path) -> set[str]:
    """The sessions sessions.json holds now (the engine writes it a moment after a change)."""
    try:
        return {s["id"] for s in json.loads((state / "sessions.json").read_text())["sessions"]}
    except (OSError, ValueError):
        return set()


async def team_of(engine: EngineProcess, lead: str) -> verbs.TeamState:
    return await engine.client.call(verbs.TEAM_STATE, verbs.SessionRef(lead))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
async def test_a_restart_mid_orchestration_keeps_the_links_and_delivers_the_pending_wait(
    stop: signal.Signals, tmp_path: Path
) -> None:
    state = short_state_dir()
    agent_state = tmp_path / "agent-state"
    agents = fake_agents_file(tmp_path / "agents.toml", env={"FAKE_ACP_STATE": str(agent_state)})
    env = {"POLYPILOT_AGENTS_FILE": str(agents)}
    async with running_engine(state, env=env, keep=True) as engine:
        lead = (await engine.http.post("/sessions", {"agent": "fake"}))["id"]
        await until_answer(lambda: engine.http.get(f"/sessions/{lead}"), lambda v: v["status"] == "idle", 30, "idle")
        await engine.http.post(f"/sessions/{lead}/orchestrate", {"bounds": {"turns": 30}})
        capability = await until(lambda: handed_capability(agent_state), 30, "the relay handed to the agent")
        client = engine.client
        quick = await client.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "hello quick worker"))
        hung = await client.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "!tool-hang"))
        wait = asyncio.ensure_future(client.call(verbs.TEAM_WAIT, verbs.WaitWorkers(capability)))

        async def settled() -> bool:
            team = await team_of(engine, lead)
            states = {w.worker: w.state for w in team.workers}
            return team.pending_waits == 1 and states == {quick.worker: "done", hung.worker: "working"}

        await until(settled, 30, "one worker done, one working, the wait pending")
        await until(lambda: saved_wait(state), 10, "the wait saved")
        await until(lambda: saved_sessions(state) >= {lead, quick.worker, hung.worker}, 10, "the sessions saved")
        # The team's file says a worker is done at once; the history writes its reply 0.2 s after
        # it arrives: a kill in between would lose the reply, not the worker's end.
        reply = "You said: **hello quick worker**"
        await until(lambda: any(reply in text for text in db_texts(state, quick.worker) or ()), 10, "the reply saved")
        os.kill(engine.process.pid, stop)
        await asyncio.to_thread(engine.process.wait, 30)
        with pytest.raises(Exception) as ended:
            await asyncio.wait_for(wait, 10)
        if stop == signal.SIGTERM:  # a stopping engine answers the relay, saying where the answer will be
            assert isinstance(ended.value, EngineError) and "this wait is kept" in str(ended.value), ended.value

    async with running_engine(state, env=env) as engine:

        async def told() -> str:
            rows: list[dict[str, Any]] = (await engine.http.get(f"/sessions/{lead}/history"))["items"]
            return next((r["text"] for r in rows if "restarted while you waited" in r["text"]), "")

        text = await until(told, 60, "the pending wait delivered to the orchestrator")
        assert f"({quick.worker}): done" in text and "You said: **hello quick worker**" in text
        assert f"({hung.worker}): " in text and f"({hung.worker}): done" not in text
        team = await team_of(engine, lead)
        assert team.pending_waits == 0 and team.bounds.turns == 30
        assert {w.worker for w in team.workers} == {quick.worker, hung.worker}
        assert (await engine.http.get(f"/sessions/{hung.worker}"))["parent"] == lead
        assert (await engine.http.get(f"/sessions/{lead}"))["orchestrator"] is True
        with pytest.raises(UnknownCapability):  # a new relay, a new secret: the old one is nobody's
            await engine.client.call(verbs.TEAM_WORKERS, verbs.TeamCall(capability))
        assert capability not in (state / "teams.jsonl").read_text()
