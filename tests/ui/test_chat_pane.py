"""The chat pane switches only to logs it has mounted, whatever order shows, removals and quits come in."""

from __future__ import annotations

from textual.app import App, ComposeResult

from polypilot_tui.domain.view import SessionStatus, SessionView
from polypilot_tui.ui.theming import APP_VARIABLES
from polypilot_tui.ui.widgets.chat_pane import ChatPane, log_id


def view(sid: str) -> SessionView:
    return SessionView(id=sid, name=sid, agent="demo", status=SessionStatus.IDLE, reason="", revision=1)


class PaneApp(App[None]):
    """The pane alone, unstyled: only which log it mounts and shows matters here."""

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLES)  # the colours the pane's widgets name

    def compose(self) -> ComposeResult:
        yield ChatPane(id="pane")


def pane_of(app: PaneApp) -> ChatPane:
    return app.query_one(ChatPane)


async def test_a_show_that_comes_while_the_pane_is_taken_down_switches_to_no_log() -> None:
    # The order the fleet test met by chance: the app quits (its widgets are pruned) while the
    # redraw that shows a host's session for the first time is under way.
    app = PaneApp()
    async with app.run_test() as pilot:
        pane = pane_of(app)
        await pane.show(view("s1"), (), "", 0.0)
        taken_down = pane.remove()  # not awaited yet: the show below runs while it is pending
        await pane.show(view("d1"), (), "", 0.0)
        assert pane.session_id != "d1" and pane.log_for("d1") is None
        assert pane.logs.current in (None, log_id("s1"))
        await taken_down
        await pilot.pause()


async def test_a_session_closed_on_screen_and_back_with_its_id_is_shown_again() -> None:
    # A host drops (its sessions go) and comes back with the same ids: the new log is the one shown.
    app = PaneApp()
    async with app.run_test() as pilot:
        pane = pane_of(app)
        await pane.show(view("d1"), (), "", 0.0)
        await pane.forget("d1")
        assert pane.session_id is None
        await pane.show(view("d1"), (), "", 0.0)
        await pilot.pause()
        log = pane.log_for("d1")
        assert log is not None and log.parent is pane.logs and log.display
        assert pane.logs.current == log_id("d1") and pane.logs.visible_content is log


async def test_the_pane_follows_removals_and_selections_in_any_order() -> None:
    app = PaneApp()
    async with app.run_test() as pilot:
        pane = pane_of(app)
        for sid in ("a", "b", "a"):
            await pane.show(view(sid), (), "", 0.0)
        await pane.forget("b")  # not on screen
        await pane.show(view("b"), (), "", 0.0)  # back: a fresh log, mounted before it is shown
        await pane.forget("a")
        await pane.show(None, (), "", 0.0)
        await pane.show(view("a"), (), "", 0.0)
        await pilot.pause()
        shown = [log.id for log in pane.logs.children if log.display]
        assert shown == [log_id("a")] and pane.session_id == "a"
