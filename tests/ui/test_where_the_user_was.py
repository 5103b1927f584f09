"""A dashboard opens on the session the user was on, and opens no other on the way."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.screens.dashboard import RENDER_INTERVAL
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


@pytest.mark.in_process(
    "the engine here publishes as the call returns: the direct flush comes before the screen's queue"
)
async def test_a_redraw_asked_for_and_drawn_at_once_is_not_drawn_again(tmp_path: Path) -> None:
    """Showing the sessions draws what the engine's start asked for at once (sooner than the
    screen's queue would); the redraw then posted drew the same sessions again (200 of them: ~12
    ms of CPU before the frame that lists them)."""
    app = demo_app(tmp_path)
    manager = engine_of(app).manager
    sid = manager.add_session("demo", "first")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.sidebar.session_list.session_ids == [sid], what="the session listed")
        before = app.dashboard.redraws
        manager.rename(sid, "renamed")  # its change asks for a redraw
        await app.dashboard.flush()  # drawn at once, as a start's show does
        entry = app.sidebar.session_list.entry(sid)
        assert entry is not None and entry.name == "renamed"
        settled = time.monotonic() + 3 * RENDER_INTERVAL  # a coalesced redraw would have come by then
        await wait_for(pilot, lambda: time.monotonic() > settled, what="the redraw interval passed")
        assert app.dashboard.redraws - before == 1
