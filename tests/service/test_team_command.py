"""``polypilot team`` against a real engine service (``polypilot serve``), killed and started
again: the orchestrator, its bounds and what it spent come back from teams.jsonl."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.service.test_commands import polypilot
from tests.support.engine_service import running_engine, short_state_dir
from tests.support.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def saved_turns(state: Path) -> int | None:
    """The turns bound of the one team saved in the state folder (None: none saved yet)."""
    try:
        lines = (state / "teams.jsonl").read_text().splitlines()
    except OSError:
        return None
    return json.loads(lines[0])["bounds"]["turns"] if len(lines) == 1 else None


async def test_the_team_command_makes_an_orchestrator_that_a_killed_engine_keeps() -> None:
    state = short_state_dir()
    async with running_engine(state, keep=True) as engine:
        sid = (await engine.http.post("/sessions", {"agent": "demo"}))["id"]
        made = await polypilot(
            state, "team", sid, "--turns", "9", "--workers-at-once", "3", "--minutes", "5", "--cost", "2.5"
        )
        assert made.code == 0, made.err
        team = json.loads(made.out)
        assert team["orchestrator"] == sid and team["workers"] == []
        bounds = team["bounds"]
        assert (bounds["turns"], bounds["workers_at_once"], bounds["wall_seconds"], bounds["cost"]) == (
            9,
            3,
            300.0,
            2.5,
        )
        bad = await polypilot(state, "team", sid, "--total", "0")
        assert bad.code != 0 and "total workers must be a whole number" in bad.err
        again = await polypilot(state, "team", sid, "--total", "4")  # a re-run changes what it names only
        assert again.code == 0, again.err
        bounds = json.loads(again.out)["bounds"]
        assert (bounds["total_workers"], bounds["turns"], bounds["workers_at_once"], bounds["cost"]) == (4, 9, 3, 2.5)
        assert (await engine.http.get(f"/sessions/{sid}"))["orchestrator"] is True
        await until(lambda: saved_turns(state) == 9, 10, "the team saved")
        assert (state / "teams.jsonl").stat().st_mode & 0o777 == 0o600
        os.kill(engine.process.pid, signal.SIGKILL)
        engine.process.wait(10)
    async with running_engine(state) as engine:
        shown = await polypilot(state, "team", sid, "--show")
        assert shown.code == 0, shown.err
        assert json.loads(shown.out)["bounds"]["turns"] == 9
        assert (await engine.http.get(f"/sessions/{sid}"))["orchestrator"] is True
        stopped = await polypilot(state, "team", sid, "--stop-workers")
        assert stopped.code == 0 and stopped.out.strip().endswith(": 0 worker(s) stopped"), stopped
        other = (await engine.http.post("/sessions", {"agent": "demo"}))["id"]
        none = await polypilot(state, "team", other, "--show")
        assert none.code != 0 and "leads no team and works in none" in none.err
