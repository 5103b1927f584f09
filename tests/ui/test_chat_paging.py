"""A saved chat after a restart: the pane shows its last page, read from history.db when the
session is first shown, and "show earlier" reads the page above from there — the engine holds
none of those rows; new rows still go to the end."""

from __future__ import annotations

from pathlib import Path

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.ui.widgets.chat_log import PAGE, ChatLog
from polypilot_tui.ui.widgets.notice_message import NoticeMessage
from polypilot_tui.ui.widgets.user_message import UserMessage
from tests.ui.helpers import demo_app, wait_for
from tests.unit.test_lazy_restore import seed

SIZE = 500


def chat(n: int) -> list[ChatItem]:
    return [ChatItem(ItemKind.SYSTEM, f"saved row {i}", 1.0) for i in range(n)]


def shown(log: ChatLog) -> list[str]:
    """The notes' texts, top to bottom (the rows seeded here are all notes)."""
    return [str(w.render()) for w in log.query(NoticeMessage)]


async def test_show_earlier_pages_older_rows_from_storage(tmp_path: Path) -> None:
    seed(tmp_path, {"big": chat(SIZE), "small": chat(3)})
    app = demo_app(tmp_path, attach=attach_persistence)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "big", what="the first saved session on screen")
        log = app.pane.log_for("big")
        assert log is not None
        await wait_for(pilot, lambda: log.mounted_rows == PAGE, what="its last page")
        session = app.engine.manager.session("big")
        assert session.history == [] and session.history_start == SIZE  # read for the pane, not held
        assert log.first == SIZE - PAGE
        assert shown(log) == [f"saved row {i}" for i in range(SIZE - PAGE, SIZE)]
        earlier = log.query_one("#show-earlier")
        assert earlier.display and f"{SIZE - PAGE:,} not shown" in str(earlier.label)
        log.scroll_home(animate=False)
        await pilot.pause()
        await pilot.click(earlier)
        await wait_for(pilot, lambda: log.mounted_rows == 2 * PAGE, what="the page above")
        assert shown(log) == [f"saved row {i}" for i in range(SIZE - 2 * PAGE, SIZE)]
        assert session.history == []  # still only on disk
        for _ in range((SIZE - 2 * PAGE) // PAGE + 1):
            log.scroll_home(animate=False)
            await pilot.pause()
            await pilot.click(earlier)
            await pilot.pause()
        await wait_for(pilot, lambda: log.mounted_rows == SIZE, what="every row")
        assert shown(log) == [f"saved row {i}" for i in range(SIZE)] and not earlier.display
        # A prompt after the paging goes to the end, after the saved rows.
        await app.engine.send("big", "one more")
        await wait_for(pilot, lambda: isinstance(list(log.children)[-1], UserMessage), what="the prompt drawn")
        assert app.engine.view("big").history_len > SIZE


async def test_a_small_saved_chat_opens_whole_and_says_nothing_is_hidden(tmp_path: Path) -> None:
    seed(tmp_path, {"small": chat(3)})
    app = demo_app(tmp_path, attach=attach_persistence)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "small")
        log = app.pane.log_for("small")
        assert log is not None
        await wait_for(pilot, lambda: log.mounted_rows == 3, what="its rows")
        assert shown(log) == ["saved row 0", "saved row 1", "saved row 2"]
        assert not log.query_one("#show-earlier").display
