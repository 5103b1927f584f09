"""The chat log on virtual time: big histories open fast, streams become rows, rows update in place."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import ContentSwitcher, Static

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.events import EventType
from polypilot_tui.domain.history import PAGE as HISTORY_PAGE
from polypilot_tui.domain.history import History
from polypilot_tui.domain.session import Session
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.theming import APP_VARIABLES
from polypilot_tui.ui.widgets import chat_log
from polypilot_tui.ui.widgets.assistant_message import AssistantMessage
from polypilot_tui.ui.widgets.chat_log import FIRST, PAGE, ChatLog, least_height
from polypilot_tui.ui.widgets.notice_message import NoticeMessage
from polypilot_tui.ui.widgets.tool_call_row import ToolCallRow
from polypilot_tui.ui.widgets.user_message import UserMessage
from tests.snapshots.fakes import Driver, build_app
from tests.ui.helpers import engine_of, screen_lines, wait_for


def fill(session, count: int) -> None:
    for i in range(count // 4):
        session.add_item(ItemKind.USER, f"prompt {i}", 0.0)
        session.add_item(ItemKind.ASSISTANT, f"Reply {i} with **bold** and `code`\n\n- a\n- b", 0.0)
        session.add_item(
            ItemKind.TOOL,
            "line 1\nline 2",
            0.0,
            tool_call_id=f"c{i}",
            tool_name="bash",
            tool_status="completed",
            tool_detail="ls",
        )
        session.add_item(ItemKind.SYSTEM, f"note {i}", 0.0)


async def test_opening_a_session_with_2000_messages_mounts_a_screenful(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        d = Driver(pilot)
        await d.settle()
        sid = await d.restored("big", lambda session: fill(session, 2000))
        started = time.perf_counter()
        app.select(sid)
        await app.dashboard.flush()
        await pilot.pause()
        elapsed = time.perf_counter() - started
        log = app.pane.log_for(sid)
        assert log is not None and log.mounted_rows <= FIRST
        assert log.max_scroll_y > 0, "the first rows do not fill the pane"
        await wait_for(pilot, lambda: log.mounted_rows == FIRST, what="the rest of the first page")
        assert elapsed < 10.0, f"opening took {elapsed:.2f} s"  # hang guard; bench/chat_open.py measures
        earlier = log.query_one("#show-earlier")
        assert earlier.display and "1,980 not shown" in str(earlier.label)
        log.scroll_home(animate=False)
        await pilot.pause()
        await pilot.click(earlier)
        await pilot.pause()
        assert log.mounted_rows == FIRST + PAGE
        # New rows still go to the end, after a page was loaded above.
        await engine_of(app).manager.send(sid, "one more")
        await d.settle()
        assert log.mounted_rows == FIRST + PAGE + 1
        assert list(log.children)[-1].__class__.__name__ == "UserMessage"


def one_line_notes(session: Session) -> None:
    for i in range(1000):
        session.add_item(ItemKind.SYSTEM, f"note {i}", 0.0)


async def opened(app: PolypilotApp, pilot: Pilot[Any], rows: Callable[[Session], None]) -> tuple[str, ChatLog]:
    """A session restored with ``rows``, then selected: its id and its log."""
    d = Driver(pilot)
    await d.settle()
    sid = await d.restored("big", rows)
    app.select(sid)
    await app.dashboard.flush()
    log = app.pane.log_for(sid)
    assert log is not None
    return sid, log


async def test_one_line_rows_in_a_tall_pane_are_paged_in_until_it_is_full(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(100, 120)) as pilot:
        _, log = await opened(app, pilot, one_line_notes)
        await wait_for(pilot, lambda: log.max_scroll_y > 0, what="the rows to fill the pane")
        assert FIRST < log.mounted_rows < 1000


async def test_a_scroll_position_saved_far_back_is_restored(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        sid, log = await opened(app, pilot, lambda session: fill(session, 2000))
        await pilot.pause()
        app.pane.scroll_back(sid, 500)  # lines: far more than the first rows hold
        await wait_for(pilot, lambda: log.scroll_back == 500, what="the saved position to be restored")
        assert log.mounted_rows > FIRST


@pytest.mark.parametrize("lines", [1, 3])
async def test_a_scroll_position_saved_a_few_lines_back_is_restored_there(tmp_path: Path, lines: int) -> None:
    """The rows of a first page past those that fill the pane are mounted after its first frame,
    above: a position restored before they were laid out came back 10-40 lines higher."""
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        sid, log = await opened(app, pilot, lambda session: fill(session, 200))
        app.pane.scroll_back(sid, lines)
        # Waited for, not a count of pauses: on a busy machine five did not always see the page
        # mounted, laid out and the position restored.
        await wait_for(
            pilot,
            lambda: log.mounted_rows >= FIRST and log.scroll_back == lines,
            what=lambda: f"the whole first page, {lines} lines back ({log.mounted_rows} rows, {log.scroll_back} back)",
        )
        for _ in range(5):  # and laid out again: a position restored too early moves up now
            await pilot.pause()
        assert log.scroll_back == lines


async def test_a_chat_at_its_end_reads_as_not_scrolled_back_however_short(tmp_path: Path) -> None:
    """What is saved at quit and restored at the next start: a chat following its end must
    read 0, or the next start hides the end of a reply finished meanwhile. Textual sets an
    anchored log shorter than its pane to a negative scroll_y (Textualize/textual#6652)."""
    app = build_app(tmp_path)
    async with app.run_test(size=(150, 45)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.send("s1", "SLOW")
        d.turn_start("s1")
        log = app.pane.log_for("s1")
        assert log is not None
        for i in range(120):  # from a few lines, while the pane is far from full, to past its end
            d.stream("s1", f"word{i} ")
            await d.settle()
            assert log.scroll_back == 0, f"after word{i}: {log.scroll_y=} {log.max_scroll_y=}"
        await d.finished_turn("s1", "more", "\n\n".join(f"line {i}" for i in range(40)))
        await d.settle()
        assert log.max_scroll_y > 0 and log.scroll_back == 0  # past the pane, still at its end
        log.scroll_relative(y=-5, animate=False, immediate=True)  # the user scrolls back
        await pilot.pause()
        assert log.scroll_back == 5


async def test_streamed_reply_becomes_the_history_row(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.send("s1", "hello")
        d.turn_start("s1")
        d.stream("s1", "Hello **wor")
        await d.settle()
        log = app.pane.log_for("s1")
        streaming = log.query(AssistantMessage).last()
        assert streaming.has_class("-streaming") and streaming.text == "Hello **wor"
        d.stream("s1", "ld**")
        await d.settle()
        assert log.query(AssistantMessage).last() is streaming and streaming.text == "Hello **world**"
        d.tool("s1", "bash", "ls", output=None)  # the engine flushes the text before the tool row
        await d.settle()
        assert log.query(AssistantMessage).last() is streaming and not streaming.has_class("-streaming")
        assert len(log.query(AssistantMessage)) == 1
        assert isinstance(list(log.children)[-1], ToolCallRow)


async def test_tool_row_updates_in_place(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.send("s1", "build")
        d.turn_start("s1")
        call = d.tool("s1", "bash", "make", output=None)
        await d.settle()
        row = app.pane.log_for("s1").query_one(ToolCallRow)
        assert row.has_class("-running")
        d.emit(
            "s1",
            EventType.TOOL_COMPLETE,
            toolCallId=call,
            toolName="bash",
            success=True,
            result={"content": "built 3 targets"},
        )
        await d.settle()
        assert app.pane.log_for("s1").query_one(ToolCallRow) is row
        assert row.has_class("-completed") and "built 3 targets" in str(row.render())


async def test_stop_marks_the_streamed_reply_interrupted(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.send("s1", "essay")
        d.turn_start("s1")
        d.stream("s1", "Once upon a time")
        await d.settle()
        await engine_of(app).manager.stop("s1")
        await d.settle()
        message = app.pane.log_for("s1").query(AssistantMessage).last()
        assert message.interrupted and message.has_class("-interrupted")
        assert app.pane.log_for("s1").streaming == ""


@pytest.mark.in_process(
    "a history replaced in place, with no change record, is seen only in process; attached, a shorter "
    "history comes in a resync (tests/service/test_stream_bounds.py)"
)
async def test_a_replaced_shorter_history_rebuilds_the_log(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.finished_turn("s1", "one", "first reply")
        await d.settle()
        session = engine_of(app).manager.session("s1")
        session.history = History(session.history[:1])
        session.revision += 1
        await app.dashboard.heartbeat()
        await d.settle()
        log = app.pane.log_for("s1")
        assert log.mounted_rows == 1 and not log.query(AssistantMessage)
        await d.finished_turn("s1", "two", "second reply")
        await d.settle()
        assert [m.text for m in log.query(AssistantMessage)] == ["second reply"]


async def test_pageup_in_the_prompt_scrolls_the_chat_and_typing_in_the_chat_goes_to_the_prompt(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        sid = await d.restored("long", lambda session: fill(session, 40))
        app.select(sid)
        await d.settle()
        log = app.pane.log_for(sid)
        assert log is not None
        log.scroll_end(animate=False)
        await pilot.pause()
        bottom = log.scroll_y
        await pilot.press(*"draft", "pageup")
        await wait_for(pilot, lambda: log.scroll_y < bottom, what="the chat scrolled up a page")
        assert app.pane.editor.text == "draft" and app.pane.editor.has_focus
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: log.scroll_y == bottom, what="the chat back at the end")
        # The user clicked into the chat (to scroll or select) and types on: nothing is lost.
        app.screen.set_focus(log)
        await pilot.press(*" more", "enter")
        await wait_for(
            pilot, lambda: engine_of(app).manager.session(sid).last_prompt == "draft more", what="the prompt sent"
        )


class LogHost(App[None]):
    """One ChatLog beside another pane, as the chat pane switches between sessions."""

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="other"):
            yield Static("another session", id="other")

    async def show_log(self) -> ChatLog:
        """A new session's log, added and shown as the chat pane does."""
        log = ChatLog(id="log")
        switcher = self.query_one(ContentSwitcher)
        await switcher.add_content(log)
        switcher.current = "log"
        return log


def notes(count: int) -> list[ChatItem]:
    return [ChatItem(ItemKind.SYSTEM, f"note {i}", 0.0) for i in range(count)]


async def test_history_arriving_in_a_laid_out_log_pages_in_without_a_race() -> None:
    """A page filling the pane must not start while the first rows are still being mounted
    (it read the history before it was kept, and the app died of an IndexError)."""
    app = LogHost()
    async with app.run_test(size=(100, 150)) as pilot:
        log = await app.show_log()
        await pilot.pause()  # laid out, empty
        await log.sync(notes(3000), "")
        await wait_for(pilot, lambda: log.max_scroll_y > 0, what="the rows to fill the pane")
        assert FIRST < log.mounted_rows < 3000
        await log.sync(notes(5), "")  # replaced by a shorter history: paged in afresh
        await wait_for(pilot, lambda: log.mounted_rows == 5, what="the new history alone")
        assert len(log.children) == 5 + 1  # the rows and the empty note: no "show earlier" without earlier rows


async def test_a_hidden_log_pages_nothing_in() -> None:
    """A hidden widget keeps its last size: paging by it loaded a whole history for nothing."""
    app = LogHost()
    async with app.run_test(size=(100, 40)) as pilot:
        log = await app.show_log()
        switcher = app.query_one(ContentSwitcher)
        await pilot.pause()
        await log.sync(notes(3000), "")
        switcher.current = "other"
        log.call_after_refresh(log.restore_scroll_back, 500)
        for _ in range(10):
            await pilot.pause()
        assert log.mounted_rows < 200
        switcher.current = "log"  # shown again: it fills the pane, no more
        await wait_for(pilot, lambda: log.max_scroll_y > 0, what="the rows to fill the pane")
        assert log.mounted_rows < 200


async def test_a_saved_history_is_read_from_disk_only_as_far_as_the_log_shows_it() -> None:
    """A restored session's rows stay on disk (domain/history.py): the log looks at the rows
    it mounts and no others, so opening it reads a page, not the whole history."""
    saved = notes(3000)
    read: list[int] = []

    def from_disk(start: int, stop: int) -> list[ChatItem]:
        read.extend(range(start, stop))
        return saved[start:stop]

    history = History(saved=3000, read=from_disk)
    app = LogHost()
    async with app.run_test(size=(100, 60)) as pilot:
        log = await app.show_log()
        await pilot.pause()
        await log.sync(history, "")
        await wait_for(pilot, lambda: log.max_scroll_y > 0, what="the rows to fill the pane")
        assert 0 < len(read) <= log.mounted_rows + HISTORY_PAGE < 3000
        history.append(ChatItem(ItemKind.USER, "a new prompt", 0.0))
        mounted, reads = log.mounted_rows, len(read)
        await log.sync(history, "")
        assert log.mounted_rows == mounted + 1 and len(read) == reads  # nothing more read for it


async def test_rows_that_could_not_be_read_are_redrawn_as_what_they_are_once_read() -> None:
    """Shown as unreadable while the file could not be read (with no query per row, per sync);
    read at last, each becomes the widget of its own kind, not an error line showing its text."""
    saved = [ChatItem(ItemKind.USER if i % 2 == 0 else ItemKind.ASSISTANT, f"row {i}", 0.0) for i in range(10)]
    disk = {"up": False, "reads": 0}

    def from_disk(start: int, stop: int) -> list[ChatItem] | None:
        disk["reads"] += 1
        return saved[start:stop] if disk["up"] else None

    history = History(saved=10, read=from_disk)
    app = LogHost()
    async with app.run_test(size=(100, 40)) as pilot:
        log = await app.show_log()
        await pilot.pause()
        await log.sync(history, "")
        await pilot.pause()
        assert log.shows_unreadable and log.mounted_rows == 10
        assert disk["reads"] == 1
        await log.sync(history, "")  # the dashboard syncs it again while it shows such rows
        assert disk["reads"] == 1
        disk["up"] = True
        assert history.read_all()  # the background read, trying again
        await log.sync(history, "")
        await pilot.pause()
        assert not log.shows_unreadable
        assert [type(w) for w in log.query(".chat-item")] == [UserMessage, AssistantMessage] * 5


def grows_during_the_next_await(history: list[ChatItem], item: ChatItem) -> list[bool]:
    """The engine appends ``item`` to the live history while the log awaits its mounts (as a
    reply flushed by the agent's next message does); the list says whether it did."""
    appended: list[bool] = []

    def append() -> None:
        history.append(item)
        appended.append(True)

    asyncio.get_running_loop().call_soon(append)
    return appended


async def test_a_reply_flushed_while_the_log_mounts_rows_is_shown() -> None:
    """A tool row and the reply after it arrived between two redraws; the reply was flushed into
    the history while the log mounted the tool row. It was marked shown but never mounted, and
    the next sync (turn over, nothing streaming) removed its streaming widget: lost from screen."""
    history = [ChatItem(ItemKind.USER, "TOOL please", 0.0)]
    app = LogHost()
    async with app.run_test(size=(100, 40)) as pilot:
        log = await app.show_log()
        await pilot.pause()
        await log.sync(history, "Running it.")
        history.append(ChatItem(ItemKind.ASSISTANT, "Running it.", 0.0))
        history.append(
            ChatItem(ItemKind.TOOL, "readme text", 0.0, tool_call_id="c1", tool_name="bash", tool_status="completed")
        )
        appended = grows_during_the_next_await(history, ChatItem(ItemKind.ASSISTANT, "done: readme text", 0.0))
        await log.sync(history, "done: readme text")  # the redraw read it still streaming
        assert appended, "the reply was not flushed during the sync: this test shows nothing"
        await log.sync(history, "")  # the next redraw: the turn is over
        await pilot.pause()
        assert [m.text for m in log.query(AssistantMessage)] == ["Running it.", "done: readme text"]
        assert log.mounted_rows == 4 and log.streaming == ""


async def test_a_row_added_while_the_log_opens_is_shown() -> None:
    """The same race on the first look at a session: rows mounted from the history as it was,
    and a row added meanwhile is the next sync's, not skipped."""
    history = notes(3)
    app = LogHost()
    async with app.run_test(size=(100, 40)) as pilot:
        log = await app.show_log()
        await pilot.pause()
        appended = grows_during_the_next_await(history, ChatItem(ItemKind.USER, "a prompt meanwhile", 0.0))
        await log.sync(history, "")
        assert appended, "the row was not added during the sync: this test shows nothing"
        await log.sync(history, "")
        await pilot.pause()
        assert log.mounted_rows == 4 and isinstance(list(log.children)[-1], UserMessage)


async def test_a_history_arriving_after_an_empty_first_look_keeps_the_placeholders() -> None:
    """Attached, a session is first shown before its history is fetched (an empty look), then
    its rows arrive: they are mounted under the note already there, which is neither removed
    nor mounted again (that cost the frame listing the sessions more widgets), and the log
    follows its end as an opened one does."""
    app = LogHost()
    async with app.run_test(size=(100, 12)) as pilot:
        log = await app.show_log()
        await log.sync((), "")  # the empty first look
        await pilot.pause()
        (empty,) = log.children  # "no messages yet"
        assert log.mounted_rows == 0
        await log.sync(notes(FIRST + 30), "")
        await wait_for(pilot, lambda: log.mounted_rows >= FIRST, what="the first page")
        earlier, kept, *rows = log.children
        assert kept is empty and len(rows) == log.mounted_rows  # the very note, kept
        assert earlier.id == "show-earlier" and not empty.display  # rows: no "no messages yet"
        await wait_for(pilot, lambda: log.max_scroll_y > 0, what="the rows laid out")
        assert log.scroll_back == 0  # at the end, where the newest row is
        assert str(log.query(NoticeMessage).last().content) == f"note {FIRST + 29}"


LONG = "lorem ipsum dolor sit amet " * 12
KINDS_OF_ROWS = [
    ChatItem(ItemKind.USER, LONG, 0.0),
    ChatItem(ItemKind.USER, "one\n\ntwo\nthree " + "x" * 150, 0.0),
    ChatItem(ItemKind.SYSTEM, LONG, 0.0),
    ChatItem(ItemKind.ERROR, "it failed: " + LONG, 0.0),
    ChatItem(ItemKind.ASSISTANT, LONG, 0.0),
    ChatItem(ItemKind.ASSISTANT, f"# Title\n\n**{LONG}**\n\n- a {LONG}\n- b\n\n> quoted {LONG}", 0.0),
    ChatItem(ItemKind.ASSISTANT, f"See [the docs](https://example.com/{'a' * 120}) &amp; &lt;tags&gt; {LONG}", 0.0),
    ChatItem(ItemKind.ASSISTANT, f"Setext\n{'=' * 150}\n\n[ref]: https://example.com/{'b' * 150}\n\n{LONG}", 0.0),
    ChatItem(ItemKind.ASSISTANT, f"code:\n\n```python\n{'y = 1  ' * 60}\n```\n", 0.0),
    ChatItem(ItemKind.ASSISTANT, f"| a | b |\n|---|---|\n| {LONG} | c |", 0.0),
    ChatItem(ItemKind.ASSISTANT, "    indented code " + "z" * 200, 0.0),
    ChatItem(ItemKind.TOOL, "out\n" * 30, 0.0, tool_call_id="c1", tool_name="bash", tool_status="completed"),
    ChatItem(ItemKind.TOOL, "", 0.0, tool_call_id="c2", tool_name="bash", tool_status="completed"),  # after a tool
    ChatItem(ItemKind.REASONING, LONG, 0.0),
]


class ThemedLogHost(LogHost):
    """A log styled as the dashboard styles it (rows' margins, borders, padding)."""

    CSS_PATH = str(Path(chat_log.__file__).parent / "chat_pane.tcss")

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLES)  # the colours the dashboard's stylesheet names


@pytest.mark.parametrize("themed", [False, True], ids=["bare", "themed"])
@pytest.mark.parametrize("width", [30, 70, 120])
async def test_the_least_height_of_a_row_is_never_more_than_it_takes(width: int, themed: bool) -> None:
    """Opening a chat mounts first the rows whose least heights fill the pane: a row drawn in
    fewer lines than its least height would leave the pane short for a frame. Bare rows (no
    padding, no margin) are the fewest lines a row can take; themed ones have a gap above
    (none for a tool row after a tool row)."""
    app = ThemedLogHost() if themed else LogHost()
    async with app.run_test(size=(width, 40)) as pilot:
        log = await app.show_log()
        await log.sync(KINDS_OF_ROWS, "")
        await wait_for(pilot, lambda: log.mounted_rows == len(KINDS_OF_ROWS), what="every row")
        await pilot.pause()
        gap = log._row_gap()  # noqa: SLF001 - the margin the stylesheet gives a row
        assert gap == (1 if themed else 0)
        rows = [child for child in log.children if child.has_class("chat-item")]
        above = rows[0].region.y - gap
        for item, row in zip(KINDS_OF_ROWS, rows, strict=True):
            taken, above = row.region.bottom - above, row.region.bottom  # its lines and the gap above it
            assert least_height(item, log.size.width, gap) <= taken, item.text[:40]
        assert least_height(KINDS_OF_ROWS[0], width) > 1  # long prose counts its lines, not one


async def first_frame_of_an_opened_chat(history: list[ChatItem]) -> tuple[list[str], int]:
    """The first frame drawn once ``history`` is synced into a new log, and the rows mounted
    then (the rest of the first page is there after)."""
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        log = await app.show_log()
        await pilot.pause()
        frames: list[list[str]] = []
        mounted: list[int] = []
        display = app._display  # noqa: SLF001 - every frame drawn, as the terminal gets it

        def drawn(screen: Any, renderable: Any) -> None:
            if renderable is not None and not frames:
                frames.append(screen_lines(app))
                mounted.append(log.mounted_rows)
            display(screen, renderable)

        app._display = drawn  # type: ignore[method-assign]  # noqa: SLF001
        await log.sync(history, "")
        await wait_for(pilot, lambda: log.mounted_rows >= FIRST, what="the rest of the first page")
        await wait_for(pilot, lambda: bool(frames), what="a frame")
        assert log.scroll_back == 0  # at the end all along
        return frames[0], mounted[0]


async def test_opening_a_chat_draws_the_rows_that_fill_the_pane_then_the_rest_of_the_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first frame of an opened chat is drawn from the rows it shows (what is not on
    screen loads after it) and is the frame the whole first page drew."""
    history = [ChatItem(ItemKind.USER if i % 2 else ItemKind.ASSISTANT, f"row {i}: {LONG}", 0.0) for i in range(50)]
    frame, mounted = await first_frame_of_an_opened_chat(history)
    assert 0 < mounted < FIRST  # a screenful: each row takes 4 lines of the 30
    assert "row 49" in "".join(frame)
    monkeypatch.setattr(chat_log, "least_height", lambda item, width, gap: 0)  # as before: the page at once
    whole_page, mounted = await first_frame_of_an_opened_chat(history)
    assert mounted >= FIRST and frame == whole_page
