"""A saved chat after a restart: the pane shows its last page, read from history.db when the
session is first shown, and "show earlier" reads the page above from there — the engine holds
none of those rows; new rows still go to the end."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.ui.widgets.chat_log import FIRST, PAGE, ChatLog
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


async def test_older_rows_are_paged_from_storage_on_scroll_and_show_earlier(tmp_path: Path) -> None:
    seed(tmp_path, {"big": chat(SIZE), "small": chat(3)})
    app = demo_app(tmp_path, attach=attach_persistence)
    copies: list[str] = []
    whole = app.engine.history
    app.engine.history = lambda sid: copies.append(sid) or whole(sid)  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "big", what="the first saved session on screen")
        log = app.pane.log_for("big")
        assert log is not None
        await wait_for(pilot, lambda: log.first == SIZE - FIRST, what="its last rows")
        session = app.engine.manager.session("big")
        assert session.history == [] and session.history_start == SIZE  # read for the pane, not held
        assert shown(log) == [f"saved row {i}" for i in range(log.first, SIZE)]
        earlier = log.query_one("#show-earlier", Button)
        assert earlier.display and f"{log.first:,} not shown" in str(earlier.label)
        earlier.press()
        await wait_for(pilot, lambda: log.first == SIZE - FIRST - PAGE, what="the page above")
        log.scroll_end(animate=False)
        await pilot.pause()
        while log.first > 0:  # scrolling to the top reads the next page up, to the first row
            first = log.first
            log.scroll_home(animate=False)
            await wait_for(pilot, lambda: log.first == max(0, first - PAGE), what="the page above")  # noqa: B023
            log.scroll_end(animate=False)
            await pilot.pause()
        assert shown(log) == [f"saved row {i}" for i in range(SIZE)] and not earlier.display
        assert session.history == []  # still only on disk
        app.select("small")
        await wait_for(pilot, lambda: app.pane.session_id == "small", what="the other session")
        app.select("big")
        await wait_for(pilot, lambda: app.pane.session_id == "big", what="back")
        assert copies == []  # the pane never asked for a whole history
        # A prompt after the paging goes to the end, after the saved rows.
        await app.engine.send("big", "one more")
        await wait_for(pilot, lambda: isinstance(list(log.children)[-1], UserMessage), what="the prompt drawn")
        assert app.engine.view("big").history_len > SIZE


async def test_a_screen_the_last_rows_do_not_fill_reads_the_page_above_at_once(tmp_path: Path) -> None:
    seed(tmp_path, {"big": chat(SIZE)})
    app = demo_app(tmp_path, attach=attach_persistence)
    async with app.run_test(size=(120, 100)) as pilot:  # FIRST notes are ~40 lines: not a screenful
        await wait_for(pilot, lambda: app.selected == "big")
        log = app.pane.log_for("big")
        assert log is not None
        await wait_for(pilot, lambda: log.first == SIZE - FIRST - PAGE, what="the page above, unasked")
        await pilot.pause()
        assert log.first == SIZE - FIRST - PAGE and log.max_scroll_y > 0  # filled: no more is read
        assert shown(log) == [f"saved row {i}" for i in range(log.first, SIZE)]


async def test_a_saved_scroll_back_above_the_first_rows_reads_up_to_it(tmp_path: Path) -> None:
    seed(tmp_path, {"big": chat(SIZE)})
    (tmp_path / "ui-state.json").write_text('{"selected": "big", "scroll_back": {"big": 300}}')
    app = demo_app(tmp_path, attach=attach_persistence)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "big")
        log = app.pane.log_for("big")
        assert log is not None
        await wait_for(pilot, lambda: log.scroll_back == 300, what="the scroll-back restored")
        assert log.first < SIZE - FIRST  # the rows it reaches were read first


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
