"""The dashboard with the real Copilot CLI, driven by keys, checked on screen.

The SDK delivers every event from its reader thread through ``call_soon_threadsafe``; before
the redraw path was fixed the screen froze on the first of them. Here a person's session is
replayed key by key against the scripted model server: a prompt and its streamed reply, a
tool that asks for permission answered by key, Stop in the middle of a reply, Reconnect,
then quit and start again on the same state folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.view import SessionStatus
from tests.e2e.dashboard import AGENT_WAIT, dashboard, see, send, status_line
from tests.support.copilot_harness import catalog_entry
from tests.support.model_server import ModelServer
from tests.ui.helpers import engine_of, screen_text, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SIZE = (150, 50)


async def test_a_copilot_session_from_prompt_to_restore(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    agents = {"copilot": catalog_entry(copilot_cli, model_server, tmp_path)}
    app = dashboard(state, agents, "copilot", stop_grace_seconds=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected is not None, what="the first session")
        sid = app.selected
        await wait_for(
            pilot,
            lambda: engine_of(app).manager.view(sid).status is SessionStatus.IDLE,
            timeout=AGENT_WAIT,
            what="the Copilot CLI connected",
        )

        # A prompt and its reply: the reply streams in (the freeze kept "Sending…" forever).
        await send(pilot, "hello from the dashboard")
        await see(pilot, "echo: hello from the dashboard")
        await wait_for(pilot, lambda: "Idle" in status_line(app), timeout=AGENT_WAIT, what="the turn's end drawn")

        # A tool that asks first: the prompt is on screen, answered by key.
        await send(pilot, "TOOL now")
        await see(pilot, "Permission requested", "ctrl+g to answer by key")
        await see(pilot, "bash  echo hi  waiting")  # the tool row waits for us, it is not "running"
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: app.pane.permission.has_focus_within, what="the prompt focused")
        await see(pilot, "Allow once [y]")
        await pilot.press("y")
        await see(pilot, "done: hi")
        tools = [i for i in engine_of(app).manager.history(sid) if i.kind is ItemKind.TOOL]
        assert [t.tool_status for t in tools] == ["completed"] and "✓" in screen_text(app)
        await wait_for(pilot, lambda: "Idle" in status_line(app), timeout=AGENT_WAIT)
        assert app.pane.editor.has_focus

        # Stop in the middle of a streamed reply: what arrived stays, the session answers again.
        await send(pilot, "SLOW please")
        await wait_for(pilot, lambda: "Writing" in status_line(app), timeout=AGENT_WAIT, what="the reply streaming")
        await wait_for(pilot, lambda: len(engine_of(app).manager.streaming_text(sid)) > 20, timeout=AGENT_WAIT)
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: "Stopped" in status_line(app), timeout=30, what="Stopped on screen")
        partial = [i for i in engine_of(app).manager.history(sid) if i.kind is ItemKind.ASSISTANT][-1]
        assert partial.interrupted and partial.text.strip()
        await see(pilot, "interrupted")

        # Reconnect: a fresh CLI resumes the same agent session; the status is no longer "stopped".
        await pilot.press("ctrl+r")
        await see(pilot, "Session reconnected: resumed")
        await wait_for(pilot, lambda: engine_of(app).manager.view(sid).status is SessionStatus.IDLE, timeout=AGENT_WAIT)
        await wait_for(pilot, lambda: "Idle" in status_line(app), timeout=10, what='the status no longer "Stopped"')
        await send(pilot, "after the reconnect")
        await see(pilot, "echo: after the reconnect")
        await wait_for(pilot, lambda: engine_of(app).manager.view(sid).turns == 4, timeout=AGENT_WAIT)
        await pilot.press(*"an unsent draft")
        history = [(i.kind, i.text) for i in engine_of(app).manager.history(sid)]
        agent_session = engine_of(app).manager.view(sid).agent_session_id

    # Quit and start again on the same state folder: the session, its history and the draft
    # are back, and the agent session resumes by id on the next prompt.
    again = dashboard(state, agents, "copilot", stop_grace_seconds=8)
    async with again.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: again.selected == sid, what="the session restored and on screen")
        assert [(i.kind, i.text) for i in engine_of(again).manager.history(sid)] == history
        await see(pilot, "echo: after the reconnect", "done: hi")
        assert again.pane.editor.text == "an unsent draft"
        again.pane.editor.load_text("")
        await send(pilot, "after the restart")
        await see(pilot, "echo: after the restart")
        assert engine_of(again).manager.view(sid).agent_session_id == agent_session
        # The model saw the earlier conversation: the agent session really resumed.
        last = model_server.model_requests()[-1]
        assert "hello from the dashboard" in last.text()
