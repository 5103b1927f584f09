"""The scrolling history of one session, kept in sync incrementally.

Opening a session mounts only its last :data:`FIRST` items; older ones come :data:`PAGE` at
a time when the log is scrolled to its top or its "show earlier" button is pressed: the log
asks (:class:`ChatLog.Earlier`), the app reads that page from the engine (from storage when
the engine does not hold it) and hands it back. After that each :meth:`ChatLog.sync` touches
only what changed:
rows replaced in history (a tool that completed) are redrawn in place, new rows are mounted
at the end, and the streaming reply is one Markdown widget that grows by appends and becomes
the history row once the engine flushes it. Nothing is ever recomposed wholesale.
"""

from __future__ import annotations

from typing import Protocol

from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Static

from polypilot_tui.domain.chat import ChatItem, HistoryPage, ItemKind
from polypilot_tui.ui.formatting import safe_text
from polypilot_tui.ui.widgets.assistant_message import AssistantMessage
from polypilot_tui.ui.widgets.notice_message import NoticeMessage
from polypilot_tui.ui.widgets.reasoning_block import ReasoningBlock
from polypilot_tui.ui.widgets.tool_call_row import ToolCallRow
from polypilot_tui.ui.widgets.user_message import UserMessage

FIRST = 20
"""History rows mounted when a session is first shown: more than a screen holds of most chats
(a log they do not fill asks for the page above at once, as does scrolling to the top)."""
PAGE = 60
"""History rows read per "show earlier"."""

EMPTY_TEXT = "No messages yet. Type a prompt below."
DEMO_HINT = " The demo agent knows !help."


class ItemWidget(Protocol):
    """What every chat row widget offers."""

    def show(self, item: ChatItem) -> None: ...


def make_item_widget(item: ChatItem, previous: ChatItem | None = None) -> Widget:
    """The widget for one history row (tool rows right after a tool row sit closer)."""
    if item.kind is ItemKind.TOOL:
        row = ToolCallRow(item)
        row.set_class(previous is not None and previous.kind is ItemKind.TOOL, "-after-tool")
        return row
    if item.kind is ItemKind.USER:
        return UserMessage(item)
    if item.kind is ItemKind.ASSISTANT:
        return AssistantMessage.from_item(item)
    if item.kind is ItemKind.REASONING:
        return ReasoningBlock(item)
    return NoticeMessage(item)


class ChatLog(VerticalScroll):
    """History rows of one session plus its live streaming reply."""

    class Earlier(Message):
        """The user asked for the page above the oldest row shown (the app reads it from the
        engine and hands it to :meth:`ChatLog.prepend`)."""

        def __init__(self, chat: ChatLog, start: int, end: int) -> None:
            super().__init__()
            self.chat = chat
            self.start = start
            self.end = end
            """One past the last row asked for (the oldest row shown)."""

    def __init__(self, *, id: str | None = None, empty_text: str = EMPTY_TEXT, session_id: str = "") -> None:
        super().__init__(id=id, classes="chat-log")
        self.session_id = session_id
        """Whose history it shows."""
        self._empty_text = empty_text
        self._total = 0
        """Rows in the history as last synced."""
        self._first = 0
        """Index of the oldest mounted history row."""
        self._rows: dict[int, Widget] = {}
        self._items: dict[int, ChatItem] = {}
        """The item each mounted row shows (a row is redrawn when the engine's is another)."""
        self._stream: AssistantMessage | None = None
        self._asked = False
        """An Earlier is on its way (one at a time)."""
        self._scroll_back_wanted = 0
        """A scroll-back to restore once the rows it reaches are mounted."""
        self._earlier = Button("", id="show-earlier", classes="show-earlier", compact=True)
        self._empty = Static(empty_text, classes="chat-empty", markup=False)

    @property
    def mounted_rows(self) -> int:
        """How many history rows are on screen (not counting the stream)."""
        return len(self._rows)

    @property
    def first(self) -> int:
        """Index of the oldest row on screen (rows before it are one "show earlier" away)."""
        return self._first

    @property
    def opened(self) -> bool:
        """It has shown its session's history once (later syncs only bring changes)."""
        return bool(self.children)

    @property
    def streaming(self) -> str:
        """The streaming text on screen ("" when no reply is streaming)."""
        return self._stream.text if self._stream is not None else ""

    def on_mount(self) -> None:
        self.anchor()
        self.watch(self, "scroll_y", self._scrolled, init=False)

    def _scrolled(self, old: float, new: float) -> None:
        if new <= 0 < old:  # scrolled to the top: the page above comes
            self.ask_earlier()

    def _fill(self) -> None:
        """After a layout: read further up while the rows do not fill the screen, or do not
        reach the scroll-back being restored."""
        if self._scroll_back_wanted:
            self.restore_scroll_back(self._scroll_back_wanted)
        elif self.size.height and self.max_scroll_y == 0:
            self.ask_earlier()

    @property
    def scroll_back(self) -> int:
        """Lines above the end the user has scrolled back to (0: following the end)."""
        return max(0, round(self.max_scroll_y - self.scroll_y))

    def restore_scroll_back(self, lines: int) -> None:
        """Scroll back to ``lines`` above the end (as saved at the last quit)."""
        if lines > self.max_scroll_y and self._first > 0:
            self._scroll_back_wanted = lines  # above the rows mounted: read them first
            self.ask_earlier()
            return
        self._scroll_back_wanted = 0
        if lines > 0:
            # As if the user had scrolled there: scrolling back to the end follows it again.
            self.scroll_to(y=max(0, self.max_scroll_y - lines), animate=False, immediate=True)
            self.release_anchor()

    def follow_end(self) -> None:
        """Jump to the end and follow new content (after the user sends a prompt)."""
        self.anchor()

    async def sync(self, page: HistoryPage, streaming: str) -> None:
        """Bring the log up to date with ``page`` (rows up to the end of the history; the
        first sync mounts its last :data:`PAGE`) and the ``streaming`` reply so far."""
        if page.total < self._total:
            following = self.scroll_back == 0  # the end was on screen: it stays there
            await self._reset()  # the history was replaced: paged in afresh
            await self._open(page)
            if following:
                self.anchor()
        elif not self.opened:
            await self._open(page)
        else:
            self._redraw_changed(page)
            await self._append(page)
        await self._sync_stream(streaming)
        await self._sync_placeholders()

    def ask_earlier(self) -> None:
        """Ask the app for the page above the oldest row shown."""
        if self._first > 0 and not self._asked:
            self._asked = True
            self.post_message(self.Earlier(self, max(0, self._first - PAGE), self._first))

    async def prepend(self, page: HistoryPage) -> None:
        """Mount ``page`` (the rows just above the oldest one shown) above what is shown."""
        self._asked = False
        if not page.items or page.stop != self._first:
            self._scroll_back_wanted = 0
            await self._sync_placeholders()  # not readable now, or the log moved on: asked again later
            return
        rows = range(page.start, page.stop)
        widgets = [make_item_widget(page[i], page[i - 1] if i > page.start else None) for i in rows]
        after = self._items.get(self._first)
        if after is not None and after.kind is ItemKind.TOOL:  # the row below may now follow a tool row
            self._rows[self._first].set_class(page.items[-1].kind is ItemKind.TOOL, "-after-tool")
        anchor = self._rows.get(self._first)
        for offset, widget in enumerate(widgets):
            self._rows[page.start + offset] = widget
            self._items[page.start + offset] = page.items[offset]
        self._first = page.start
        if anchor is not None:
            await self.mount_all(widgets, before=anchor)
        else:
            await self.mount_all(widgets)
        await self._sync_placeholders()
        self.call_after_refresh(self._fill)

    async def _reset(self) -> None:
        """History shrank (it was replaced): start over with fresh widgets."""
        await self.remove_children()
        self._total, self._first, self._rows, self._items, self._stream = 0, 0, {}, {}, None
        self._earlier = Button("", id="show-earlier", classes="show-earlier", compact=True)
        self._empty = Static(self._empty_text, classes="chat-empty", markup=False)

    async def _open(self, page: HistoryPage) -> None:
        self._first = max(page.start, page.stop - FIRST)
        widgets: list[Widget] = [self._earlier, self._empty]
        for index in range(self._first, page.stop):
            widget = make_item_widget(page[index], page[index - 1] if index > page.start else None)
            self._rows[index] = widget
            self._items[index] = page[index]
            widgets.append(widget)
        self._total = page.stop
        await self.mount_all(widgets)
        self.call_after_refresh(self._fill)

    def _redraw_changed(self, page: HistoryPage) -> None:
        for index in range(max(self._first, page.start), min(self._total, page.stop)):
            item = page[index]
            if item is not self._items.get(index, item):
                self._items[index] = item
                self._rows[index].show(item)  # type: ignore[attr-defined]

    async def _append(self, page: HistoryPage) -> None:
        if page.start > self._total:
            return  # rows in between are not at hand yet (a mirror still fetching): next sync
        new: list[Widget] = []
        for index in range(self._total, page.stop):
            item = page[index]
            self._items[index] = item
            stream = self._stream
            if (
                stream is not None
                and not new
                and item.kind is ItemKind.ASSISTANT
                and safe_text(item.text) == stream.text
            ):
                # The engine flushed the reply we were streaming: that widget becomes the row.
                self._stream = None
                stream.remove_class("-streaming")
                stream.show(item)
                self._rows[index] = stream
                continue
            previous = page[index - 1] if index > page.start else self._items.get(index - 1)
            widget = make_item_widget(item, previous)
            self._rows[index] = widget
            if self._stream is not None:
                await self.mount(widget, before=self._stream)
            else:
                new.append(widget)
        self._total = max(self._total, page.stop)
        if new:
            await self.mount_all(new)

    async def _sync_stream(self, streaming: str) -> None:
        text = streaming if streaming.strip() else ""
        if text and self._stream is None:
            self._stream = AssistantMessage(text)
            self._stream.add_class("-streaming")
            await self.mount(self._stream)
        elif text and self._stream is not None:
            self._stream.stream(text)
        elif not text and self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.remove()

    async def _sync_placeholders(self) -> None:
        hidden = self._first
        self._earlier.display = hidden > 0
        if hidden:
            self._earlier.label = f"▲ Show {min(PAGE, hidden)} earlier ({hidden:,} not shown)"
        self._empty.display = not self._rows and self._stream is None

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self._earlier:
            event.stop()
            self.ask_earlier()
