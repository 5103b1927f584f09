"""After a killed engine, a turn the agent cannot go on with ends at once as interrupted, with
the resend offered — not "Sending" for the 30 s of the resume-quiescence tier, then "stuck".

Real engines (``polypilot serve``), SIGKILLed mid-turn, and the scripted ACP agent as a real
process: one that cannot resume (a new session), one that resumes or loads its session (a new
process all the same: the turn it ran died with it), and one that no longer starts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import FAKE_AGENT, fake_agents_file
from tests.support.engine_service import EngineProcess, running_engine, short_state_dir
from tests.support.waiting import until, until_answer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PROMPT = "SLOW tell me a long story"
QUIESCENCE = 30.0
"""The resume-quiescence tier the restored turn used to wait out."""
BUSY = {"sending", "thinking", "writing", "working", "awaiting_permission", "recovering"}


def saved_in_flight(state: Path, sid: str) -> bool:
    """The registry holds the turn in flight and the agent's session id to resume it with (a
    save before the connect lands has no id, and the next comes ~0.5 s later)."""
    try:
        saved = json.loads((state / "sessions.json").read_text())
    except (OSError, ValueError):
        return False
    return any(
        s.get("id") == sid and s.get("turn_in_flight") and s.get("agent_session_id") for s in saved.get("sessions", [])
    )


async def killed_mid_turn(engine: EngineProcess, agent: str) -> str:
    """A session of ``agent`` whose turn streams, saved as in flight, and the engine SIGKILLed."""
    sid = (await engine.http.post("/sessions", {"agent": agent}))["id"]
    await engine.http.post(f"/sessions/{sid}/send", {"prompt": PROMPT})
    view = lambda: engine.http.get(f"/sessions/{sid}")  # noqa: E731
    await until_answer(view, lambda v: v["streaming_chars"] > 0, 30, "the reply streaming")
    await until(lambda: saved_in_flight(engine.state, sid), 10, "the turn saved in flight with its agent session")
    os.kill(engine.process.pid, signal.SIGKILL)
    await asyncio.to_thread(engine.process.wait, 10)
    return sid


async def ended_at_once(engine: EngineProcess, sid: str) -> dict[str, Any]:
    """The restored session's view once its turn has ended; it must end long before the tier."""
    began = time.monotonic()
    seen: list[str] = []

    async def view() -> dict[str, Any]:
        answer = await engine.http.get(f"/sessions/{sid}")
        seen.append(answer["status"])
        return answer

    ended = await until_answer(
        view, lambda v: v["turns"] >= 1 and v["status"] not in BUSY, QUIESCENCE + 15, "the restored turn's end"
    )
    took = time.monotonic() - began
    assert took < QUIESCENCE / 3, f"the restored turn ended after {took:.1f} s ({list(dict.fromkeys(seen))})"
    assert "stuck" not in seen and ended["status"] != "stuck", seen
    return ended


async def resend_is_offered(engine: EngineProcess, sid: str) -> None:
    rows = (await engine.http.get(f"/sessions/{sid}/history"))["items"]
    assert any("was interrupted by a restart of polypilot; resend it with ctrl+y" in row["text"] for row in rows)
    assert (await engine.http.post(f"/sessions/{sid}/resend", {}))["result"] is True
    await until_answer(
        lambda: engine.http.get(f"/sessions/{sid}"), lambda v: v["status"] in BUSY, 10, "the resent turn"
    )


@pytest.mark.parametrize("caps", ["", "resume", "load"], ids=["cannot-resume", "resumes", "loads"])
async def test_a_turn_the_agent_cannot_go_on_with_ends_at_once_and_is_offered_again(caps: str, tmp_path: Path) -> None:
    state = short_state_dir()
    agents = fake_agents_file(
        tmp_path / "agents.toml", env={"FAKE_ACP_CAPS": caps, "FAKE_ACP_STATE": str(tmp_path / "agent-state")}
    )
    env = {"POLYPILOT_AGENTS_FILE": str(agents)}
    async with running_engine(state, env=env, keep=True) as engine:
        sid = await killed_mid_turn(engine, "fake")
    async with running_engine(state, env=env) as engine:
        ended = await ended_at_once(engine, sid)
        reason = ended["last_outcome_reason"]
        if caps:  # it went on with its session, in a new process the turn did not survive
            assert reason == "the agent lost this turn in the restart", reason
        else:
            assert reason.startswith("the agent could not resume its session (new session"), reason
            assert reason.endswith("so this turn was lost in the restart"), reason
        await resend_is_offered(engine, sid)


async def test_a_turn_whose_agent_no_longer_starts_ends_at_once_and_is_offered_again(tmp_path: Path) -> None:
    state = short_state_dir()
    switch = tmp_path / "broken"
    wrapper = tmp_path / "agent.sh"  # the agent, until the switch file says its config broke
    wrapper.write_text(
        f'#!/bin/sh\nif [ -e "{switch}" ]; then echo "config is broken now" >&2; exit 3; fi\n'
        f'exec "{sys.executable}" "{FAKE_AGENT}"\n'
    )
    wrapper.chmod(0o755)
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[fake]\nkind = "acp"\ncommand = "{wrapper}"\nenv = {{ FAKE_ACP_STATE = "{tmp_path}/s" }}\n')
    env = {"POLYPILOT_AGENTS_FILE": str(agents)}
    async with running_engine(state, env=env, keep=True) as engine:
        sid = await killed_mid_turn(engine, "fake")
    switch.write_text("")
    async with running_engine(state, env=env) as engine:
        ended = await ended_at_once(engine, sid)
        assert "could not be started again after the restart" in ended["last_outcome_reason"]
        assert "config is broken now" in ended["last_outcome_reason"]
        rows = (await engine.http.get(f"/sessions/{sid}/history"))["items"]
        assert any("resend it with ctrl+y" in row["text"] for row in rows)
