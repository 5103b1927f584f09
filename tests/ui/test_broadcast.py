"""Multi-select in the sidebar and a prompt broadcast to the marked sessions, on the demo agent.

ctrl+t marks the session on screen (✓ in its row), Esc clears the marks; marks stay on their
sessions whichever is on screen and when one of them closes. With sessions marked, Enter
sends to each of them (the box says so); a session that refuses is named with its reason, and
the text is never lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.engine import verbs
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.widgets.chat_log import ChatLog
from polypilot_tui.ui.widgets.prompt_editor import PromptEditor
from tests.ui.helpers import demo_app, engine_of, notifications, session_added, type_text, wait_for


def user_prompts(app: PolypilotApp, sid: str) -> list[str]:
    return [item.text for item in engine_of(app).history(sid) if item.kind is ItemKind.USER]


def row(app: PolypilotApp, sid: str) -> str:
    rendered = app.sidebar.session_list.rendered(sid)
    assert rendered is not None
    return rendered[0]


async def three_sessions(pilot: Pilot[Any], app: PolypilotApp) -> None:
    await wait_for(pilot, lambda: app.selected == "s1", what="the first session")
    for name in ("two", "three"):
        await session_added(pilot, "demo", name=name)
    await wait_for(pilot, lambda: app.sidebar.session_list.session_ids == ["s1", "s2", "s3"])


async def mark(pilot: Pilot[Any], app: PolypilotApp, *sids: str) -> None:
    for sid in sids:
        app.select(sid)
        await wait_for(pilot, lambda sid=sid: app.pane.editor.session_id == sid, what=f"{sid} on screen")
        await pilot.press("ctrl+t")


async def test_marks_show_in_rows_follow_their_sessions_and_esc_clears_them(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await three_sessions(pilot, app)
        await mark(pilot, app, "s1", "s3")
        await wait_for(pilot, lambda: "✓" in row(app, "s3"), what="the mark drawn")
        assert "✓" in row(app, "s1") and "✓" not in row(app, "s2")
        assert "2 marked" in str(app.sidebar.query_one(".sidebar-title").render())
        assert app.pane.editor.border_title == "to 2 marked sessions"
        # Moving around keeps the marks; ctrl+t again unmarks only the session on screen.
        await pilot.press("ctrl+up")
        await wait_for(pilot, lambda: app.selected == "s2")
        await pilot.press("ctrl+t", "ctrl+t")  # marked, then unmarked
        await wait_for(pilot, lambda: app.dashboard.marks.ids == {"s1", "s3"}, what="s2 unmarked again")
        # Closing a marked session leaves the other marks where they were.
        await engine_of(app).call(verbs.CLOSE, verbs.SessionRef("s1"))
        await wait_for(pilot, lambda: "s1" not in app.sidebar.session_list.session_ids, what="s1 gone")
        await wait_for(pilot, lambda: app.dashboard.marks.ids == {"s3"}, what="only s3 marked")
        assert "✓" in row(app, "s3") and app.pane.editor.border_title == "to 1 marked session"
        await pilot.press("escape")
        await wait_for(pilot, lambda: "✓" not in row(app, "s3"), what="the marks cleared")
        assert not app.dashboard.marks.ids and app.pane.editor.border_title is None
        assert "Message " in app.pane.editor.placeholder and "marked" not in app.pane.editor.placeholder


async def test_enter_sends_to_each_marked_session_and_only_those(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await three_sessions(pilot, app)
        await mark(pilot, app, "s3", "s1")
        app.select("s2")  # the session on screen is not marked: the prompt goes to the marked ones
        await wait_for(pilot, lambda: app.pane.editor.session_id == "s2")
        assert "2 marked sessions" in app.pane.editor.placeholder
        await type_text(pilot, "hello all")
        await pilot.press("enter")
        await wait_for(pilot, lambda: user_prompts(app, "s1") == user_prompts(app, "s3") == ["hello all"])
        assert user_prompts(app, "s2") == []
        assert app.pane.editor.text == ""
        await wait_for(pilot, lambda: any("Sent to 2 sessions" in n for n in notifications(app)))


async def test_a_refusal_is_named_and_its_text_kept_in_that_sessions_draft(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        gone = await session_added(pilot, "demo", name="gone", cwd=str(folder))
        folder.rmdir()  # its agent would work in a deleted folder: the engine refuses its prompts
        await mark(pilot, app, "s1", gone)
        await type_text(pilot, "status?")
        await pilot.press("enter")
        await wait_for(pilot, lambda: user_prompts(app, "s1") == ["status?"])
        await wait_for(pilot, lambda: any("Not sent to 1 session" in n for n in notifications(app)))
        said = next(n for n in notifications(app) if "Not sent to 1 session" in n)
        assert "Sent to 1 of 2" in said and "gone: " in said and str(folder) in said
        assert app.pane.editor.session_id == gone and app.pane.editor.text == "status?"  # its draft
        assert user_prompts(app, gone) == []
        # Only the session that refused stays marked: Enter again never sends it twice to s1.
        await wait_for(pilot, lambda: app.dashboard.marks.ids == {gone}, what="s1 unmarked")
        assert "only they stay marked" in said
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("No marked session took it" in n for n in notifications(app)))
        assert user_prompts(app, "s1") == ["status?"] and app.pane.editor.text == "status?"


async def test_when_no_marked_session_takes_it_the_text_stays_in_the_box(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    folders = [tmp_path / "a", tmp_path / "b"]
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        ids = []
        for folder in folders:
            folder.mkdir()
            ids.append(await session_added(pilot, "demo", name=folder.name, cwd=str(folder)))
            folder.rmdir()
        await mark(pilot, app, *ids)
        app.select("s1")  # typed in an unmarked session's box
        await wait_for(pilot, lambda: app.pane.editor.session_id == "s1")
        await type_text(pilot, "deploy")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("Not sent to 2 sessions" in n for n in notifications(app)))
        said = next(n for n in notifications(app) if "Not sent to 2 sessions" in n)
        assert "back in the prompt" in said and "a: " in said and "b: " in said
        assert app.pane.editor.text == "deploy"  # the box it was typed in, once
        assert app.pane.editor.drafts.get(ids[0]) is None and app.pane.editor.drafts.get(ids[1]) is None
        assert all(user_prompts(app, sid) == [] for sid in ["s1", *ids])


async def test_a_busy_marked_session_queues_it_and_the_others_get_it_at_once(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await three_sessions(pilot, app)
        engine = engine_of(app)
        await engine.call(verbs.SEND, verbs.Send("s2", "!hang"))  # a turn that never ends by itself
        await wait_for(pilot, lambda: engine.view("s2").status.busy, what="s2 hanging")
        await mark(pilot, app, "s1", "s2", "s3")
        await type_text(pilot, "report")
        await pilot.press("enter")
        await wait_for(pilot, lambda: user_prompts(app, "s1") == user_prompts(app, "s3") == ["report"])
        await wait_for(pilot, lambda: len(engine.view("s2").queue) == 1, what="queued in the hanging session")
        await wait_for(pilot, lambda: any("Sent to 3 sessions (1 queued" in n for n in notifications(app)))


async def test_the_prompt_names_its_session_before_the_history_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first frame (and each switch) shows where Enter sends at once: the hint is set
    before the chat's rows are mounted, not after (a long history drew first, the hint later)."""
    seen: list[str] = []
    draw = ChatLog.sync

    async def sync(log: ChatLog, *args: Any, **kwargs: Any) -> None:
        seen.append(log.app.query_one(PromptEditor).placeholder)
        await draw(log, *args, **kwargs)

    monkeypatch.setattr(ChatLog, "sync", sync)
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await three_sessions(pilot, app)
        assert seen and "Message demo-1" in seen[0], seen  # the first frame's hint
        for sid, name in (("s2", "two"), ("s3", "three")):
            seen.clear()
            app.select(sid)
            await wait_for(pilot, lambda sid=sid: app.pane.editor.session_id == sid, what=f"{sid} on screen")
            await wait_for(pilot, lambda: bool(seen), what="its history drawn")
            assert f"Message {name}" in seen[0], seen
        await mark(pilot, app, "s1", "s2")
        seen.clear()
        app.select("s3")
        await wait_for(pilot, lambda: bool(seen) and app.pane.editor.session_id == "s3", what="s3 on screen")
        assert "2 marked sessions" in seen[0], seen
