"""A user's long text in the real dashboard, attached to a real engine (``polypilot serve``):
a 3 MB paste stays whole in the prompt box — Enter refuses it with a message and leaves it
there, a quit and a restart of the dashboard and of the engine bring it back whole (it came
back cut at 200,000 characters, and the next words typed were appended and sent); a paste
the box cannot hold is refused and said; a prompt the engine refuses goes back to the box."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from polypilot_tui.domain.limits import DRAFT_CHARS, QUEUE_PROMPTS
from polypilot_tui.ui.app import PolypilotApp
from tests.support.engine_service import attached_dashboard, running_engine, short_state_dir
from tests.ui.helpers import notifications, paste, type_text, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SIZE = (140, 40)
PASTE = "".join(f"line {i:07d} of a long log pasted into the prompt\n" for i in range(64_000))  # 3.2 MB


@pytest.fixture
def demo_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPILOT_DEMO_SPEED", "20")
    monkeypatch.setenv("POLYPILOT_RECORD", "false")


def told(app: PolypilotApp, words: str) -> bool:
    return any(words in note for note in notifications(app))


async def test_a_long_paste_is_refused_on_enter_kept_whole_across_a_restart_and_never_sent(demo_env: None) -> None:
    assert len(PASTE) > 3_000_000
    state = short_state_dir()
    async with running_engine(state, keep=True) as engine:
        app = attached_dashboard(state)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.selected is not None, what="the first session")
            sid = app.selected
            editor = app.pane.editor
            paste(app, PASTE)
            await wait_for(pilot, lambda: editor.text == PASTE, timeout=60, what="the paste in the box")
            await pilot.press("enter")
            await wait_for(pilot, lambda: told(app, "one prompt may hold at most 1.0 MB"), what="the refusal said")
            assert told(app, "Not sent: the prompt is 3.3 MB") and editor.text == PASTE, notifications(app)
            paste(app, "x" * (DRAFT_CHARS - len(PASTE) + 1))  # the box would hold more than it may
            await wait_for(pilot, lambda: told(app, "Not pasted"), what="the paste refused")
            assert editor.text == PASTE
            await pilot.press("ctrl+q")
        view = await engine.http.get(f"/sessions/{sid}")
        assert view["turns"] == 0 and view["status"] == "idle" and view["queue"] == []  # nothing was sent
    async with running_engine(state) as engine:  # the engine restarted too
        again = attached_dashboard(state)
        async with again.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: again.selected == sid, what="the session back")
            editor = again.pane.editor
            await wait_for(pilot, lambda: editor.text == PASTE, timeout=60, what="the draft back whole")
            await type_text(pilot, "and more")
            await wait_for(pilot, lambda: editor.text == PASTE + "and more", what="typing goes on at its end")
            await pilot.press("ctrl+q")
        view = await engine.http.get(f"/sessions/{sid}")
        assert view["turns"] == 0 and (await engine.http.get(f"/sessions/{sid}/history"))["total"] == 0


async def test_a_prompt_the_engine_refuses_comes_back_to_the_box_and_is_said(demo_env: None) -> None:
    async with running_engine() as engine:
        sid = (await engine.http.post("/sessions", {"agent": "demo"}))["id"]
        await engine.http.post(f"/sessions/{sid}/send", {"prompt": "!hang"})
        for i in range(QUEUE_PROMPTS):  # the queue full, from a script
            await engine.http.post(f"/sessions/{sid}/send", {"prompt": f"queued {i}"})
        app = attached_dashboard(engine.state)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.selected == sid, what="the session on screen")
            panel = app.pane.queue
            await wait_for(
                pilot, lambda: len(panel.query(".queued-more")) == 1, what="the queue shown, its rows bounded"
            )
            assert "and 80 more" in str(panel.query_one(".queued-more", Static).render())
            await type_text(pilot, "one too many")
            await pilot.press("enter")
            await wait_for(pilot, lambda: told(app, "prompts are queued in this session already"), what="said")
            await wait_for(pilot, lambda: app.pane.editor.text == "one too many", what="the text back in the box")
            assert app.engine.view(sid).queued == QUEUE_PROMPTS
