"""The engine service with the real Copilot CLI: a dashboard attached to it by keys, the engine
killed in the middle of a reply, and the session back — resumed, or its prompt offered again."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.domain.chat import ItemKind
from tests.e2e.dashboard import AGENT_WAIT, see, send
from tests.support.copilot_e2e import KEY, KEY_ENV
from tests.support.copilot_harness import AGENT, agents_toml, home_processes
from tests.support.engine_service import (
    EngineProcess,
    attached_dashboard,
    kill_engine_of,
    running_engine,
    short_state_dir,
)
from tests.support.model_server import ModelServer
from tests.support.waiting import until, until_answer
from tests.ui.helpers import notifications, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SIZE = (150, 45)


@pytest.mark.expect_errors("The engine stopped unexpectedly; starting a new one")
async def test_a_copilot_turn_survives_the_dashboard_and_a_killed_engine_comes_back(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(agents_toml(copilot_cli, model_server, tmp_path))
    # The engines this test starts (and the one the dashboard starts after the kill) read these.
    env = {"POLYPILOT_AGENTS_FILE": str(agents), "POLYPILOT_DEFAULT_AGENT": AGENT, KEY_ENV: KEY}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    state = short_state_dir()
    try:
        async with running_engine(state, env, keep=True) as engine:
            app = attached_dashboard(state, agents, default_agent=AGENT)
            async with app.run_test(size=SIZE, notifications=True) as pilot:
                await see(pilot, "Idle — type a prompt below")
                sid = app.selected
                assert sid is not None
                await send(pilot, "hello through the engine")
                await see(pilot, "echo: hello through the engine")
                # Quit mid-reply (held there): the engine finishes the turn with nobody attached.
                model_server.hold()
                await send(pilot, "SLOW please")
                await wait_for(pilot, lambda: "word3" in app.engine.streaming_text(sid), timeout=AGENT_WAIT)
                await pilot.press("ctrl+q")
                await see(pilot, "Quit while turns run?")
                await pilot.press("y")
            model_server.release()
            view = await poll(engine, sid, lambda v: v["turns"] == 2 and v["status"] == "idle")
            assert view["last_outcome"] == "completed"

            again = attached_dashboard(state, agents, default_agent=AGENT)
            async with again.run_test(size=SIZE, notifications=True) as pilot:
                await wait_for(pilot, lambda: again.selected == sid, what="the session on screen")
                await see(pilot, "word59")
                await wait_for(pilot, lambda: len(again.engine.history(sid)) >= 4, what="the history fetched")
                replies = [i for i in again.engine.history(sid) if i.kind is ItemKind.ASSISTANT]
                assert "word59" in replies[-1].text and not replies[-1].interrupted
                # Now the engine dies in the middle of a reply (held there).
                model_server.hold()
                await send(pilot, "SLOW once more")
                await wait_for(pilot, lambda: "word3" in again.engine.streaming_text(sid), timeout=AGENT_WAIT)
                seen = [(i.kind, i.text) for i in again.engine.history(sid)]
                os.kill(engine.process.pid, signal.SIGKILL)
                model_server.release()
                await wait_for(pilot, lambda: any("The engine stopped" in n for n in notifications(again)), timeout=5)
                await wait_for(
                    pilot,
                    lambda: any("Attached to the engine again" in n for n in notifications(again)),
                    timeout=AGENT_WAIT,
                )
                await wait_for(pilot, lambda: len(again.engine.history(sid)) > len(seen), what="the history fetched")
                assert [(i.kind, i.text) for i in again.engine.history(sid)][: len(seen)] == seen
                # Resumed by the new engine (the reply completes), or reported with a one-key resend.
                await wait_for(pilot, lambda: not again.engine.view(sid).status.busy, timeout=AGENT_WAIT)
                restored = again.engine.view(sid)
                if restored.last_outcome != "completed":
                    assert restored.interrupted_prompt == "SLOW once more", restored
                    await see(pilot, "^y Resend")  # drawn: the key is live
                    await pilot.press("ctrl+y")
                    await wait_for(
                        pilot, lambda: again.engine.view(sid).last_outcome == "completed", timeout=AGENT_WAIT
                    )
                await send(pilot, "and after the kill")
                await see(pilot, "echo: and after the kill")
                again.stop_engine_on_quit = True  # the palette's "Stop the engine and quit"
                await pilot.press("ctrl+q")
    finally:
        kill_engine_of(state)
    await until(lambda: not home_processes(tmp_path / "copilot-home"), 15, "the Copilot CLIs to end with the engines")


async def poll(engine: EngineProcess, sid: str, check: Callable[[Any], object]) -> Any:
    """The session's view once ``check`` accepts it."""
    return await until_answer(
        lambda: engine.http.get(f"/sessions/{sid}"), check, AGENT_WAIT, f"session {sid}", every=0.2
    )
