"""The footer is rebuilt only when the keys it shows change (ui/widgets/key_footer.py): moving
between two idle sessions keeps its key widgets; a key that becomes
usable (Esc once a session is marked) rebuilds it, and it shows the change."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._footer import FooterKey

from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.widgets.key_footer import KeyFooter
from tests.ui.helpers import demo_app, session_added, wait_for


def keys(app: PolypilotApp) -> list[FooterKey]:
    return list(app.screen.query_one(KeyFooter).query(FooterKey))


def clear_marks_usable(app: PolypilotApp) -> bool:
    return any(key.action == "clear_marks" and not key.disabled for key in keys(app))


async def test_the_same_keys_keep_their_widgets_and_a_changed_key_is_redrawn(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1", what="the first session")
        await session_added(pilot, "demo", name="two")
        await wait_for(pilot, lambda: len(app.sidebar.session_list.session_ids) == 2, what="two sessions")
        await wait_for(pilot, lambda: bool(keys(app)), what="the footer's keys")
        shown = keys(app)
        assert not clear_marks_usable(app)
        for key, now in (("ctrl+down", "s2"), ("ctrl+up", "s1")):  # both idle: the same keys apply
            await pilot.press(key)
            await wait_for(pilot, lambda now=now: app.pane.editor.session_id == now, what=f"{now} on screen")
            await pilot.pause()
            assert keys(app) == shown  # the very widgets: not recomposed
        await pilot.press("ctrl+t")  # marked: Esc now clears the marks
        await wait_for(pilot, lambda: clear_marks_usable(app), what="Esc usable in the footer")
        assert keys(app) != shown
