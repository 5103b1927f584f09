"""The dashboard attached to an engine service, driven by keys: quitting leaves turns running,
two dashboards show the same state, and a killed engine is replaced without losing anything."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.engine import verbs
from tests.support.engine_service import attached_dashboard, kill_engine_of, running_engine, short_state_dir
from tests.support.waiting import until_answer
from tests.ui.helpers import notifications, screen_text, type_text, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SIZE = (140, 40)


@pytest.fixture
def demo_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engines started by a test (or by its dashboard) stream the demo fast and record nothing."""
    monkeypatch.setenv("POLYPILOT_DEMO_SPEED", "20")
    monkeypatch.setenv("POLYPILOT_RECORD", "false")


async def send(pilot: object, text: str) -> None:
    await type_text(pilot, text)  # type: ignore[arg-type]
    await pilot.press("enter")  # type: ignore[attr-defined]


async def test_quitting_mid_turn_leaves_it_running_and_the_next_dashboard_shows_the_reply(demo_env: None) -> None:
    # The reply lasts ~7 s: a loaded machine's quit must not outlast it (at the usual 20x it did).
    async with running_engine(env={"POLYPILOT_DEMO_SPEED": "4"}) as engine:
        app = attached_dashboard(engine.state)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.selected is not None, what="the first session")
            sid = app.selected
            await send(pilot, "!slow a long one")
            await wait_for(pilot, lambda: "word3" in app.engine.streaming_text(sid), what="the reply streaming")
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: "Quit while turns run?" in screen_text(app), what="the quit question")
            assert "1 turn running" in screen_text(app) and "Stop the engine too" in screen_text(app)
            await pilot.press("y")
        assert app.return_code == 0
        # The turn goes on in the engine with nobody attached, and ends there.
        view = await engine.http.get(f"/sessions/{sid}")
        assert view["status"] in ("writing", "thinking") and (await engine.info())["attached"] == 0, view["status"]
        await until_answer(
            lambda: engine.http.get(f"/sessions/{sid}"),
            lambda v: v["turns"] == 1 and v["status"] == "idle",
            60,
            "the turn's end",
        )
        again = attached_dashboard(engine.state)
        async with again.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: again.selected == sid, what="the session back on screen")
            await wait_for(pilot, lambda: len(again.engine.history(sid)) >= 2, what="the history fetched")
            reply = [i.text for i in again.engine.history(sid) if i.kind is ItemKind.ASSISTANT]
            assert reply and "word59" in reply[-1] and "interrupted" not in reply[-1]
            await wait_for(pilot, lambda: "word59" in screen_text(again), what="the finished reply on screen")
            await pilot.press("ctrl+q")  # nothing running: it quits at once, the engine stays
        assert (await engine.info())["sessions"] == 1


async def test_two_dashboards_show_the_same_state_and_a_permission_answered_in_one_leaves_the_other(
    demo_env: None,
) -> None:
    async with running_engine() as engine:
        first, second = attached_dashboard(engine.state), attached_dashboard(engine.state)
        async with first.run_test(size=SIZE) as one, second.run_test(size=SIZE) as two:
            await wait_for(one, lambda: first.selected is not None, what="a session in the first")
            sid = first.selected
            await wait_for(two, lambda: second.engine.ids() == [sid], what="the same session in the second")
            await send(one, "!permission please write")
            for app, pilot in ((first, one), (second, two)):
                await wait_for(pilot, lambda app=app: app.engine.view(sid).pending_permission is not None, what="ask")
                await wait_for(pilot, lambda app=app: "Allow" in screen_text(app), what="the prompt on screen")
            await two.press("ctrl+g", "y")  # answered in the second dashboard
            await wait_for(one, lambda: first.engine.view(sid).pending_permission is None, what="gone in the first")
            await wait_for(one, lambda: first.engine.view(sid).turns == 1, what="the turn's end in the first")
            assert first.engine.history(sid) == second.engine.history(sid)
            await send(one, "typed in the first")
            await wait_for(two, lambda: any(i.text == "typed in the first" for i in second.engine.history(sid)))
            # Attention alerts ring in the terminal that had the focus last, not in both.
            bells = {"first": 0, "second": 0}
            first.bell = lambda: bells.__setitem__("first", bells["first"] + 1)  # type: ignore[method-assign]
            second.bell = lambda: bells.__setitem__("second", bells["second"] + 1)  # type: ignore[method-assign]
            await second.engine.focus()
            await wait_for(one, lambda: not first.engine.alerts_here() and second.engine.alerts_here())
            other = await first.engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", "off screen"))
            await first.engine.call(verbs.SEND, verbs.Send(other, "!permission write it"))
            await wait_for(two, lambda: bells["second"] == 1, what="the bell in the focused terminal")
            await wait_for(one, lambda: first.engine.view(other).pending_permission is not None)
            await one.pause(0.3)
            assert bells == {"first": 0, "second": 1}
            await one.press("ctrl+q")
            await two.press("ctrl+q")


@pytest.mark.expect_errors("The engine stopped unexpectedly; starting a new one")
async def test_a_killed_engine_is_told_at_once_replaced_and_the_lost_turn_offered_again(demo_env: None) -> None:
    state = short_state_dir()
    # The reply lasts ~7 s: the kill must come mid-turn on a loaded machine too (at 20x it ended first).
    async with running_engine(state, env={"POLYPILOT_DEMO_SPEED": "4"}) as engine:
        app = attached_dashboard(state)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await wait_for(pilot, lambda: app.selected is not None, what="the first session")
            sid = app.selected
            await send(pilot, "!slow a long one")
            await wait_for(pilot, lambda: "word3" in app.engine.streaming_text(sid), what="the reply streaming")
            # Saves are written behind (0.2 s, 0.5 s): a kill within that window loses them by design.
            await wait_for(pilot, lambda: saved_mid_turn(state, sid, "word3"), what="the turn saved as in flight")
            seen = list(app.engine.history(sid))
            loop = asyncio.get_running_loop()
            os.kill(engine.process.pid, signal.SIGKILL)
            killed_at = loop.time()
            await wait_for(pilot, lambda: any("The engine stopped" in n for n in notifications(app)), timeout=5)
            assert loop.time() - killed_at < 3.0  # told on the stream's end (~0.1 s idle, 1.7 s seen under load)
            await wait_for(
                pilot, lambda: any("Attached to the engine again" in n for n in notifications(app)), timeout=60
            )
            await wait_for(pilot, lambda: app.engine.view(sid).interrupted_prompt == "!slow a long one", timeout=60)
            await wait_for(pilot, lambda: len(app.engine.history(sid)) > len(seen), what="the history fetched")
            history = app.engine.history(sid)
            assert [(i.kind, i.text) for i in history[: len(seen)]] == [(i.kind, i.text) for i in seen]
            assert any(i.kind is ItemKind.ASSISTANT and "word3" in i.text for i in history)  # the partial reply
            app.clear_notifications()  # the toasts cover the reply's line ends (they go after 10-20 s)
            await pilot.press("ctrl+y")  # the lost prompt, sent again to the new engine
            await wait_for(pilot, lambda: app.engine.view(sid).turns >= 1 and "word59" in screen_text(app), timeout=60)
            app.stop_engine_on_quit = True
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: "Stop the engine too" in screen_text(app) or not app.is_running)
    kill_engine_of(state)


def saved_mid_turn(state: Path, sid: str, reply_has: str) -> bool:
    """The registry says the session's turn is in flight and the history holds its prompt and
    the reply so far, up to ``reply_has`` at least (what a restore brings back)."""
    try:
        saved = json.loads((state / "sessions.json").read_text())
        with contextlib.closing(sqlite3.connect(f"file:{state / 'history.db'}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT count(*) FROM items WHERE session_id = ?", (sid,)).fetchone()[0]
            drafts = [text for (text,) in db.execute("SELECT text FROM drafts WHERE session_id = ?", (sid,))]
    except (OSError, ValueError, sqlite3.Error):
        return False
    in_flight = any(s.get("id") == sid and s.get("turn_in_flight") for s in saved.get("sessions", []))
    return in_flight and rows >= 1 and any(reply_has in text for text in drafts)


def a_long_saved_chat(state: Path) -> str:
    """A state folder whose one saved session (demo agent) holds 12 prompts and replies of 40
    lines each (more than the first page the chat mounts); its id."""
    import time

    from polypilot_tui.domain.chat import ChatItem
    from polypilot_tui.storage.registry import SessionRecord
    from polypilot_tui.storage.store import Store

    store = Store(state)
    now = time.time()
    record = SessionRecord(
        id="long",
        name="long chat",
        agent="demo",
        cwd=str(state),
        agent_session_id="demo-000000000001",
        created_at=now - 3600,
        status="idle",
        last_activity_at=now - 60,
    )
    store.registry.save([record], now)
    kinds = (ItemKind.USER, ItemKind.ASSISTANT)
    texts = [
        f"prompt {i // 2}" if i % 2 == 0 else "\n\n".join(f"- line {j} of reply {i // 2}" for j in range(40))
        for i in range(24)
    ]
    store.history.write([(record.id, i, ChatItem(kinds[i % 2], text, now - 3000 + i)) for i, text in enumerate(texts)])
    store.close()
    return record.id


async def test_a_chat_scrolled_back_comes_back_where_it_was(demo_env: None) -> None:
    """Where the user had scrolled the shown chat back to is kept at quit and found again at the
    next start, measured in the rows the engine sends after the first frame."""
    state = short_state_dir()
    sid = a_long_saved_chat(state)
    async with running_engine(state) as engine:
        app = attached_dashboard(engine.state)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "line 39 of reply 11" in screen_text(app), what="the chat's last row")
            await pilot.press("pageup", "pageup")
            log = app.pane.log_for(sid)
            assert log is not None
            await wait_for(pilot, lambda: log.scroll_back > 0, what="the chat scrolled back")
            await pilot.pause(0.3)
            back = log.scroll_back
            await pilot.press("ctrl+q")
        again = attached_dashboard(engine.state)
        async with again.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: (log := again.pane.log_for(sid)) is not None and log.scroll_back == back)
            shown = screen_text(again)
            await pilot.pause(0.5)  # and it stays there
            assert again.pane.log_for(sid).scroll_back == back and screen_text(again) == shown  # type: ignore[union-attr]
