"""A dashboard opens on the session the user was on, and opens no other on the way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.ui_state import UiState, save_ui_state
from tests.ui.helpers import demo_app, engine_of, wait_for


async def opens_only_the_saved_one(tmp_path: Path, before: Callable[[PolypilotApp], Awaitable[None]]) -> None:
    """Two sessions, the second saved as where the user was; ``before`` runs where the start
    shows its sessions, before it does: the second is on screen, and the first never was."""
    app = demo_app(tmp_path)
    manager = engine_of(app).manager
    first, second = manager.add_session("demo", "first"), manager.add_session("demo", "second")
    assert save_ui_state(tmp_path, UiState(selected=second)) == ""
    show_sessions = app.dashboard.show_sessions

    async def shown_after() -> None:
        await before(app)
        await show_sessions()

    app.dashboard.show_sessions = shown_after  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.pane.log_for(second) is not None, what="the saved session's chat")
        assert app.selected == second
        assert app.pane.log_for(first) is None, "the first session was opened on the way"


async def test_a_start_opens_the_saved_session_and_no_other_first(tmp_path: Path) -> None:
    """Attached, the snapshot's sessions arrive before the saved place is read back: the first
    redraw put the first session on screen, fetched its history and mounted its chat, and the
    saved one replaced it a moment later (two histories fetched, on some starts)."""

    async def redrawn_first(app: PolypilotApp) -> None:  # the snapshot's redraw comes first
        await app.dashboard.flush()

    await opens_only_the_saved_one(tmp_path, redrawn_first)


async def test_a_redraw_before_the_saved_session_is_there_keeps_it_for_when_it_is(tmp_path: Path) -> None:
    """A first redraw with no sessions yet (a fleet's hosts' redraws come before their sessions)
    used up the saved place: the next one opened the first session on the way."""

    async def redrawn_empty_first(app: PolypilotApp) -> None:
        engine = app.dashboard.engine
        views = engine.views
        engine.views = lambda: ()  # type: ignore[method-assign]  # a redraw before any session arrived
        await app.dashboard.flush()
        engine.views = views  # type: ignore[method-assign]
        await app.dashboard.flush()

    await opens_only_the_saved_one(tmp_path, redrawn_empty_first)


async def test_a_start_draws_its_sessions_in_one_redraw(tmp_path: Path) -> None:
    """The snapshot of an attach asks for a redraw: showing the sessions then drew them all again
    at once, and the list's frame waited for both (200 sessions: ~12 ms of CPU of an attach).
    One redraw shows them, the saved place included."""
    app = demo_app(tmp_path)
    manager = engine_of(app).manager
    ids = [manager.add_session("demo", f"session {i}") for i in range(5)]
    assert save_ui_state(tmp_path, UiState(selected=ids[3])) == ""
    show_sessions = app.dashboard.show_sessions
    redraws_in_show: list[int] = []

    async def counted() -> None:
        before = app.dashboard.redraws
        await show_sessions()
        redraws_in_show.append(app.dashboard.redraws - before)

    app.dashboard.show_sessions = counted  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.sidebar.session_list.session_ids == ids, what="every session listed")
        await wait_for(pilot, lambda: app.pane.session_id == ids[3], what="the saved session on screen")
        assert redraws_in_show == [0]
        assert app.selected == ids[3] and app.sidebar.highlighted == ids[3]
