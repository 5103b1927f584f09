"""The scrolling history of one session, kept in sync incrementally.

Opening a session mounts only its last :data:`FIRST` items (more pages while they do not fill
the pane): first the rows that surely fill the pane (by :func:`least_height`), the others of
the :data:`FIRST` once that frame is drawn (what is not on screen loads after it); older ones
load a page at a time from a button at the top. After that each
:meth:`ChatLog.sync` touches only what changed: rows replaced in history (a tool that
completed) are redrawn in place, new rows are mounted at the end, and the streaming reply is
one Markdown widget that grows by appends and becomes the history row once the engine flushes
it. Nothing is ever recomposed wholesale.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from rich.cells import cell_len
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Static

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.history import UNREADABLE
from polypilot_tui.ui.formatting import safe_text
from polypilot_tui.ui.widgets.notice_message import NoticeMessage
from polypilot_tui.ui.widgets.reasoning_block import ReasoningBlock
from polypilot_tui.ui.widgets.tool_call_row import ToolCallRow
from polypilot_tui.ui.widgets.user_message import UserMessage

if TYPE_CHECKING:  # replies' markdown is imported with the first reply shown, after the first frame
    from polypilot_tui.ui.widgets.assistant_message import AssistantMessage

FIRST = 20
"""History rows mounted when a session is opened: what it costs must not grow with the
history, and 20 usual rows are more than a screen; where they are not (a tall pane, one-line
rows), earlier pages follow until the pane is full."""
PAGE = 60
"""History rows mounted per "show earlier" press (and per page while filling the pane)."""

EMPTY_TEXT = "No messages yet. Type a prompt below."

_NOT_DRAWN = re.compile(r"&#?\w+;|[*_`#>~\\\[\]()<=+-]")
"""Markdown source a reply may draw as less than itself: emphasis, heading and list marks,
link brackets, entities (``&amp;`` is one cell)."""
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]*\]:.*$", re.MULTILINE)
"""A link reference definition: not drawn at all."""
_VERBATIM = re.compile(r"```|~~~|\t|\||^ {4}", re.MULTILINE)
"""Markdown whose lines need not wrap (code scrolls sideways) or wrap in columns (tables)."""


def least_height(item: ChatItem, width: int, gap: int = 0) -> int:
    """The fewest lines a history row takes in a log ``width`` cells wide, with ``gap`` blank
    lines above it (the rows' top margin; a tool row's not counted: after a tool row it has
    none): a lower bound (a wider log, fewer lines; borders and padding not counted), never a
    guess that could fall short.

    Plain text (prompts, notes) wraps: each line takes at least its cells over the width
    (a word wrap drops at most one space a line). A reply's prose paragraphs likewise, counted
    without the markdown marks that may not be drawn; a reply with code or a table, a tool row
    and a reasoning block (both folded): one line."""
    width = max(1, width) + 1  # + the space a wrap may drop
    if item.kind is ItemKind.TOOL:
        return 1
    if item.kind is ItemKind.REASONING:
        return 1 + gap
    text = safe_text(item.text)
    if item.kind is ItemKind.ASSISTANT:
        if _VERBATIM.search(text):
            return 1 + gap
        text = _LINK_DEFINITION.sub("", text)
        paragraphs = (" ".join(line.strip() for line in part.split("\n")) for part in re.split(r"\n\s*\n", text))
        lines = sum(-(-len(_NOT_DRAWN.sub("", paragraph)) // width) for paragraph in paragraphs)
    else:
        lines = sum(max(1, -(-cell_len(line) // width)) for line in text.strip().split("\n"))
    return max(1, lines) + gap


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
        from polypilot_tui.ui.widgets.assistant_message import AssistantMessage

        return AssistantMessage.from_item(item)
    if item.kind is ItemKind.REASONING:
        return ReasoningBlock(item)
    return NoticeMessage(item)


class ChatLog(VerticalScroll):
    """History rows of one session plus its live streaming reply."""

    def __init__(self, *, id: str | None = None, empty_text: str = EMPTY_TEXT) -> None:
        super().__init__(id=id, classes="chat-log")
        self._empty_text = empty_text
        self._history: Sequence[ChatItem] = ()
        """The history as last synced (never copied whole: rows saved before a restart are
        read from disk as they are looked at, and only the shown ones are looked at)."""
        self._length = 0
        """``len(self._history)`` at the last sync."""
        self._seen: dict[int, ChatItem] = {}
        """The row each mounted widget shows, by index (a replaced row is redrawn)."""
        self._first = 0
        """Index of the oldest mounted history row."""
        self._rows: dict[int, Widget] = {}
        self._stream: AssistantMessage | None = None
        self._earlier: Button | None = None
        """"Show earlier", mounted once there are earlier rows (most logs never have them)."""
        self._empty = Static(empty_text, classes="chat-empty", markup=False)
        self._loading = asyncio.Lock()
        """Held while rows are mounted or removed as a whole (open, reset, an earlier page): a
        page is mounted above rows that are all there, never above rows being removed."""
        self._fill_due = False
        self._opened = 0
        """Times the log was paged in afresh (a page due from before is not mounted after)."""
        self._due: int | None = None
        """Where the rows of the first page not mounted yet start (None: none are due)."""
        self._due_asked = False
        """The rest of the first page is asked for (after the frame of the rows that fill the pane)."""
        self._unlaid = False
        """Rows were mounted above since the last layout: ``max_scroll_y`` does not count them yet."""

    @property
    def mounted_rows(self) -> int:
        """How many history rows are on screen (not counting the stream)."""
        return len(self._rows)

    @property
    def streaming(self) -> str:
        """The streaming text on screen ("" when no reply is streaming)."""
        return self._stream.text if self._stream is not None else ""

    def on_mount(self) -> None:
        self.anchor()

    @property
    def scroll_back(self) -> int:
        """Lines above the end the user has scrolled back to (0: following the end)."""
        # Clamped as Textual's own validator would: its compositor sets an anchored log shorter
        # than the pane to a negative scroll_y (Textualize/textual#6652), which read as
        # "scrolled back" and, saved at quit, hid the end of the reply at the next start.
        return max(0, round(self.max_scroll_y - max(0.0, self.scroll_y)))

    async def restore_scroll_back(self, lines: int) -> None:
        """Scroll back to ``lines`` above the end (as saved at the last quit)."""
        if lines <= 0 or not self._laid_out():
            return  # hidden meanwhile: its layout says nothing, and paging in blind costs rows
        # A log still following its end past max_scroll_y: rows mounted above are laid out
        # (the anchor followed them) but the scrollable size is not updated yet; measured from
        # it the position came back 11 lines too far on a busy machine.
        if self._due is not None or self._unlaid or self.scroll_y > self.max_scroll_y:
            # The rest of the first page goes above first, and is laid out, or the end it is
            # measured from moves after the scroll (a position saved 3 lines back came back 14).
            if self._due is not None:
                await self._load_down_to(self._due, self._opened)
            self.call_after_refresh(self.restore_scroll_back, lines)
            return
        if self.max_scroll_y < lines and self._first:
            # Not that far back mounted yet: a page more, and again once it is laid out.
            if not self._loading.locked():
                await self.load_earlier()
            self.call_after_refresh(self.restore_scroll_back, lines)
            return
        # As if the user had scrolled there: scrolling back to the end follows it again.
        self.scroll_to(y=max(0, self.max_scroll_y - lines), animate=False, immediate=True)
        self.release_anchor()

    def on_resize(self) -> None:
        self._fill_later()

    def on_show(self) -> None:
        self._fill_later()

    def _fill_later(self) -> None:
        if not self._fill_due:
            self._fill_due = self.call_after_refresh(self._fill)

    def _laid_out(self) -> bool:
        """On screen with a layout to go by (a hidden widget keeps its last size)."""
        return self.is_attached and self.display and bool(self.region.height)

    async def _fill(self) -> None:
        """Earlier pages while the mounted rows do not fill the pane (nothing to scroll yet)."""
        self._fill_due = False
        if self._due is not None or not (self._first and self._laid_out() and self.max_scroll_y == 0):
            return  # the rest of the first page is coming: looked at again once it is there
        if not self._loading.locked():  # else rows are coming or going: look again after
            await self.load_earlier()
        self._fill_later()

    def follow_end(self) -> None:
        """Jump to the end and follow new content (after the user sends a prompt)."""
        self.anchor()

    async def sync(self, history: Sequence[ChatItem], streaming: str) -> None:
        """Bring the log up to date with ``history`` and the ``streaming`` reply so far.

        The engine's history is live: it grows while this awaits its mounts. The log goes by
        its length at the call, the moment ``streaming`` was read; a row added meanwhile is
        the next sync's (its change asks for the next redraw). Taking the length after the
        mounts marked such a row shown without mounting it, and the reply it flushed vanished
        with its streaming widget.
        """
        length = len(history)
        following = False
        if length < self._length or (length and not self._length and (self._rows or self._stream is not None)):
            following = self.scroll_back == 0  # the end was on screen: it stays there
            await self._reset()  # replaced, or rows that arrived after a stream: paged in afresh
        if not self._length:  # nothing shown yet (or only what an empty first look said)
            await self._open(history, length)
            if following:
                self.anchor()
        else:
            await self._redraw_changed(history, length)
            await self._append(history, length)
        self._history, self._length = history, length
        await self._sync_stream(streaming)
        await self._sync_placeholders()
        if self._due is not None and not self._due_asked:  # the rest of the first page, after this frame
            self._due_asked = True
            self.call_after_refresh(self._load_down_to, self._due, self._opened)

    async def load_earlier(self) -> None:
        """Mount the previous page of history above what is shown."""
        await self._load_down_to(self._first - PAGE, self._opened)

    async def _load_down_to(self, start: int, opened: int) -> None:
        """Mount the rows from ``start`` above what is shown (nothing if the log was paged in
        afresh since ``opened`` was read)."""
        async with self._loading:
            if opened != self._opened or not 0 < self._first <= self._length or start >= self._first:
                return
            start = max(0, start)
            widgets = [self._widget(self._history, i) for i in range(start, self._first)]
            anchor = self._rows.get(self._first)
            self._first = start
            if self._due is not None and start <= self._due:
                self._due = None
            if anchor is not None:
                await self.mount_all(widgets, before=anchor)
            else:
                await self.mount_all(widgets)
            if not self._unlaid:
                self._unlaid = True
                self.call_after_refresh(self._laid_out_again)
            await self._sync_placeholders()
        self._fill_later()

    def _laid_out_again(self) -> None:
        self._unlaid = False

    async def _reset(self) -> None:
        """History shrank (it was replaced): start over with fresh widgets."""
        async with self._loading:
            self._history, self._length, self._first, self._rows, self._seen, self._stream = (), 0, 0, {}, {}, None
            self._opened += 1
            self._due = None
            await self.remove_children()
        self._earlier = None
        self._empty = Static(self._empty_text, classes="chat-empty", markup=False)

    def set_empty_text(self, text: str) -> None:
        """What the log says while it has no rows (it may change: the agents found are known later)."""
        if text != self._empty_text:
            self._empty_text = text
            self._empty.update(text)

    async def _open(self, history: Sequence[ChatItem], length: int) -> None:
        """The last page of ``history`` under the placeholders (mounted by an empty first look
        already, else now: a history that arrives after it costs its rows, no more): the rows
        that surely fill the pane now, the rest of the page once they are drawn."""
        async with self._loading:
            self._history, self._length = history, length
            page = max(0, self._length - FIRST)
            self._first = self._filling(history, page, length)
            self._due, self._due_asked = (page if page < self._first else None), False
            rows = [self._widget(history, i) for i in range(self._first, self._length)]
            placeholders = [self._empty] if self._empty.parent is not self else []
            if not (placeholders or rows):
                return
            await self.mount_all([*placeholders, *rows])
        self._fill_later()

    def _filling(self, history: Sequence[ChatItem], start: int, end: int) -> int:
        """The index from which rows ``start .. end-1`` surely fill the pane (``start`` if none do)."""
        pane = self.parent if isinstance(self.parent, Widget) and self.parent.size.area else self.screen
        width, height = pane.size
        gap = self._row_gap()
        index, lines = end, 0
        while index > start and lines < height:
            index -= 1
            lines += least_height(history[index], width, gap)
        return index

    def _row_gap(self) -> int:
        """The rows' top margin as the stylesheet sets it for a ``chat-item`` (0 without a theme)."""
        probe = Widget(classes="chat-item")  # never mounted: only styled
        self.app.stylesheet.apply(probe)
        return max(0, probe.styles.margin.top)

    def _widget(self, history: Sequence[ChatItem], index: int) -> Widget:
        """The widget of row ``index`` (kept by index, with the row it shows)."""
        item = self._seen[index] = history[index]
        widget = self._rows[index] = make_item_widget(item, history[index - 1] if index else None)
        return widget

    @property
    def shows_unreadable(self) -> bool:
        """Some row on screen is a saved row that could not be read (yet): sync again later."""
        return any(item is UNREADABLE for item in self._seen.values())

    async def _redraw_changed(self, history: Sequence[ChatItem], length: int) -> None:
        for index, shown in list(self._seen.items()):
            if index >= length or (item := history[index]) is shown:
                continue
            self._seen[index] = item
            old = self._rows[index]
            if item.kind is shown.kind and shown is not UNREADABLE:
                old.show(item)  # type: ignore[attr-defined]
            else:  # a row read at last (it showed as unreadable): a widget of its kind
                async with self._loading:  # never beside a page being mounted above it
                    new = self._widget(history, index)
                    await self.mount(new, before=old)
                    await old.remove()

    async def _append(self, history: Sequence[ChatItem], length: int) -> None:
        new: list[Widget] = []
        for index in range(self._length, length):
            item = self._seen[index] = history[index]
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
            widget = self._widget(history, index)
            if self._stream is not None:
                await self.mount(widget, before=self._stream)
            else:
                new.append(widget)
        if new:
            await self.mount_all(new)

    async def _sync_stream(self, streaming: str) -> None:
        text = streaming if streaming.strip() else ""
        if text and self._stream is None:
            from polypilot_tui.ui.widgets.assistant_message import AssistantMessage

            self._stream = AssistantMessage(text)
            self._stream.add_class("-streaming")
            await self.mount(self._stream)
        elif text and self._stream is not None:
            self._stream.stream(text)
        elif not text and self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.remove()

    async def _sync_placeholders(self) -> None:
        hidden = self._first if self._due is None else self._due  # rows coming are not "earlier"
        if hidden and self._earlier is None:
            self._earlier = Button("", id="show-earlier", classes="show-earlier", compact=True)
            await self.mount(self._earlier, before=0)
        if self._earlier is not None:
            self._earlier.display = hidden > 0
            if hidden:
                self._earlier.label = f"▲ Show {min(PAGE, hidden)} earlier ({hidden:,} not shown)"
        self._empty.display = not self._rows and self._stream is None

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self._earlier:
            event.stop()
            await self.load_earlier()
