"""A dashboard opens on the session the user was on, and opens no other on the way."""

from __future__ import annotations

from pathlib import Path

from polypilot_tui.ui.ui_state import UiState, save_ui_state
from tests.ui.helpers import demo_app, engine_of, wait_for


async def test_a_start_opens_the_saved_session_and_no_other_first(tmp_path: Path) -> None:
    """Attached, the snapshot's sessions arrive before the saved place is read back: the first
    redraw put the first session on screen, fetched its history and mounted its chat, and the
    saved one replaced it a moment later (two histories fetched on every start)."""
    app = demo_app(tmp_path)
    manager = engine_of(app).manager
    first, second = manager.add_session("demo", "first"), manager.add_session("demo", "second")
    assert save_ui_state(tmp_path, UiState(selected=second)) == ""
    show_sessions = app.dashboard.show_sessions

    async def redrawn_first() -> None:  # the snapshot's redraw comes first, as it did on some starts
        await app.dashboard.flush()
        await show_sessions()

    app.dashboard.show_sessions = redrawn_first  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.pane.log_for(second) is not None, what="the saved session's chat")
        assert app.selected == second
        assert app.pane.log_for(first) is None, "the first session was opened on the way"


async def test_a_redraw_before_the_saved_session_is_there_keeps_it_for_when_it_is(tmp_path: Path) -> None:
    """A first redraw with no sessions yet (a fleet's hosts' redraws come before their sessions)
    used up the saved place: the next one opened the first session on the way."""
    app = demo_app(tmp_path)
    manager = engine_of(app).manager
    first, second = manager.add_session("demo", "first"), manager.add_session("demo", "second")
    assert save_ui_state(tmp_path, UiState(selected=second)) == ""
    show_sessions, engine = app.dashboard.show_sessions, app.dashboard.engine
    views = engine.views

    async def redrawn_empty_first() -> None:
        engine.views = lambda: ()  # type: ignore[method-assign]  # a redraw before any session arrived
        await app.dashboard.flush()
        engine.views = views  # type: ignore[method-assign]
        await app.dashboard.flush()
        await show_sessions()

    app.dashboard.show_sessions = redrawn_empty_first  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.pane.log_for(second) is not None, what="the saved session's chat")
        assert app.selected == second
        assert app.pane.log_for(first) is None, "the first session was opened on the way"
