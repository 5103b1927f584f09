"""Every session as two lines (icon, name, marks / compact status) in one Line API widget;
with a fleet, each machine's sessions under a two-line header (its name and state) that the
highlight steps over.

One widget draws the whole list, a line at a time and only the lines on screen: restoring
hundreds of sessions costs one widget's styling, not one per row (a mounted widget per
session made the first frame with 200 saved sessions several times slower than an empty
start). Colours still come from the theme, through component classes styled in
``session_sidebar.tcss``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style as RichStyle
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Offset, Region, Size, Spacing
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.hosts import HostState
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.ui.formatting import (
    BRANCH_MARK,
    MARKED_MARK,
    STATUS_ICONS,
    UNREAD_MARK,
    WARNING_MARK,
    SessionEntry,
)
from polypilot_tui.ui.host_text import HostHeader

Row = SessionEntry | HostHeader
"""A session, or the header of a machine's sessions."""

ROW_HEIGHT = 2
"""Lines per session: icon, name and marks; then the compact status."""


def _fit(text: str, width: int) -> str:
    """``text`` in exactly ``width`` cells: padded, or cut with an ellipsis."""
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return set_cell_size(text, width)
    return set_cell_size(text, width - 1) + "…"


class SessionList(ScrollView, can_focus=True):
    """The sessions; the highlighted row is the selection (the app decides what that means)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "session-list--row",
        "session-list--row-hover",
        "session-list--row-highlighted",
        "session-list--mark",
        "session-list--icon",
        "session-list--icon-busy",
        "session-list--icon-attention",
        "session-list--icon-permission",
        "session-list--name",
        "session-list--name-unread",
        "session-list--unread",
        "session-list--warning",
        "session-list--sandbox",
        "session-list--added",
        "session-list--removed",
        "session-list--status",
        "session-list--status-attention",
        "session-list--status-permission",
        "session-list--tree",
        "session-list--note",
        "session-list--stale",
        "session-list--host",
        "session-list--host-icon",
        "session-list--host-live",
        "session-list--host-down",
        "session-list--host-status",
    }
    """Row backgrounds (plain, hover, highlighted), then one class per part of a row (the
    broadcast mark first), with
    variants by status: busy, needing the user, awaiting permission; a row whose host stopped
    answering (stale); a host's header (its icon live or down, its state)."""

    DEFAULT_CSS = """
    SessionList {
        overflow-x: hidden;
        overflow-y: auto;
    }
    """

    index: reactive[int | None] = reactive(None, repaint=False)
    """The highlighted row, or None when there are no sessions."""

    _hover: reactive[int | None] = reactive(None, repaint=False)
    """The row under the mouse."""

    @dataclass
    class Highlighted(Message):
        """The highlight moved to a session (by key, click or :meth:`highlight`)."""

        session_id: str

    @dataclass
    class Selected(Message):
        """The user chose a session (enter or click)."""

        session_id: str

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._entries: list[Row] = []
        self._index_of: dict[str, int] = {}
        self._strips: LRUCache[tuple[object, ...], tuple[Strip, Strip]] = LRUCache(512)
        self._styles: dict[tuple[bool, tuple[str, ...]], RichStyle] = {}
        self._padding: Spacing | None = None

    # ---- data ----------------------------------------------------------------------
    @property
    def session_ids(self) -> list[str]:
        """Sessions in the order they are listed."""
        return [entry.session_id for entry in self._entries if isinstance(entry, SessionEntry)]

    @property
    def highlighted_id(self) -> str | None:
        """The session of the highlighted row (never a header: the highlight steps over them)."""
        index = self.index
        entry = self._entries[index] if index is not None else None
        return entry.session_id if isinstance(entry, SessionEntry) else None

    def entry(self, session_id: str) -> SessionEntry | None:
        """The row of a session, as last set."""
        index = self._index_of.get(session_id)
        entry = None if index is None else self._entries[index]
        return entry if isinstance(entry, SessionEntry) else None

    def set_entries(self, entries: Sequence[Row]) -> None:
        """Show these rows; only rows that differ from the last ones are redrawn.

        The highlight stays on its session when rows move; it moves silently (no message)
        to a neighbour when its session goes away.
        """
        old, old_highlight = self._entries, self.highlighted_id
        self._entries = list(entries)
        self._index_of = {
            entry.session_id: i for i, entry in enumerate(self._entries) if isinstance(entry, SessionEntry)
        }
        if len(old) != len(self._entries):
            self._update_virtual_size()
            self.refresh()
        else:
            for i, (before, after) in enumerate(zip(old, self._entries, strict=True)):
                if before is not after and before != after:  # a row kept by the sidebar is the same object
                    self.refresh_lines(i * ROW_HEIGHT, ROW_HEIGHT)
        if old_highlight in self._index_of:
            index: int | None = self._index_of[old_highlight]
        else:
            index = self._session_row(min(self.index or 0, len(self._entries) - 1), 1)
        if index != self.index:
            self.set_reactive(SessionList.index, index)
            self.refresh()
            self.scroll_to_highlight()
        hover = self._hover
        if hover is not None and hover >= len(self._entries):
            self._hover = None
        self._update_tooltip()

    def highlight(self, session_id: str) -> None:
        """Follow the app's selection: move the highlight silently.

        No :class:`Highlighted` goes back to the app: by the time it arrived the user may
        have moved on (ctrl+down in a burst of keys), and it would drag the selection back.
        """
        index = self._index_of.get(session_id)
        if index is None or index == self.index:
            return
        old = self.index
        self.set_reactive(SessionList.index, index)
        for row in (old, index):
            if row is not None:
                self.refresh_lines(row * ROW_HEIGHT, ROW_HEIGHT)
        self.scroll_to_highlight()

    def _session_row(self, index: int, step: int) -> int | None:
        """The session row at ``index`` or, past headers, the next one in ``step``'s direction
        (else the other way); None when no row is a session's."""
        for direction in (step, -step):
            i = index
            while 0 <= i < len(self._entries):
                if isinstance(self._entries[i], SessionEntry):
                    return i
                i += direction
        return None

    # ---- geometry ------------------------------------------------------------------
    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self._entries) * ROW_HEIGHT)

    def row_offset(self, session_id: str) -> Offset | None:
        """Where a session's first line is, relative to this widget (None when scrolled away)."""
        index = self._index_of.get(session_id)
        if index is None:
            return None
        y = index * ROW_HEIGHT - self.scroll_offset.y
        if not 0 <= y < self.scrollable_content_region.height:
            return None
        gutter = self.styles.gutter
        return Offset(gutter.left + 2, gutter.top + y)

    def _row_at(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)
        if offset is None:
            return None
        index = (offset.y + self.scroll_offset.y) // ROW_HEIGHT
        return index if 0 <= index < len(self._entries) else None

    def scroll_to_highlight(self) -> None:
        """Scroll just enough to show the highlighted row."""
        if self.index is None or not self.is_mounted:
            return
        region = Region(0, self.index * ROW_HEIGHT, self.scrollable_content_region.width, ROW_HEIGHT)
        self.scroll_to_region(region, animate=False, force=True, immediate=True)

    def _on_resize(self, event: events.Resize) -> None:
        self._update_virtual_size()
        self._strips.clear()
        self.scroll_to_highlight()

    def on_show(self) -> None:
        self.scroll_to_highlight()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # a new theme or focus state draws in new colours
        self._styles.clear()
        self._padding = None
        self.refresh()

    # ---- drawing -------------------------------------------------------------------
    def _style(self, *names: str) -> RichStyle:
        # Cached here too: Textual's own cache key (hover, focus, disabled) costs more to
        # compute than the lookup, and a screenful of rows asks for ~150 styles.
        key = (self.has_focus, names)
        style = self._styles.get(key)
        if style is None:
            style = self._styles[key] = self.get_visual_style(*names).rich_style
        return style

    def row_strips(self, index: int, width: int) -> tuple[Strip, Strip]:
        entry = self._entries[index]
        if isinstance(entry, HostHeader):
            return self._header_strips(entry, index, width)
        if index == self.index:
            row = "session-list--row-highlighted"
        elif index == self._hover:
            row = "session-list--row-hover"
        else:
            row = ""
        key = (entry, width, row, self.has_focus)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        rows = ("session-list--row", row) if row else ("session-list--row",)
        if entry.stale:  # its host stopped answering: every part of the row dimmed
            rows = (*rows, "session-list--stale")
        status = entry.status
        variant = (
            "permission"
            if status is SessionStatus.AWAITING_PERMISSION
            else "attention"
            if status.needs_user
            else "busy"
            if status.busy
            else ""
        )
        icon = (*rows, "session-list--icon") + ((f"session-list--icon-{variant}",) if variant else ())
        status_line = (*rows, "session-list--status") + (
            (f"session-list--status-{variant}",) if variant in ("permission", "attention") else ()
        )
        name = (*rows, "session-list--name") + (("session-list--name-unread",) if entry.unread else ())
        if self._padding is None:
            self._padding = self.get_component_styles("session-list--row").padding
        padding = self._padding
        base = self._style(*rows)
        left, right = " " * padding.left, " " * padding.right
        room = max(0, width - padding.left - padding.right)
        marks: list[Segment] = []
        if entry.sandbox:  # first: it says what the agent may do, not what it did
            marks.append(Segment(f" {entry.sandbox}", self._style(*rows, "session-list--sandbox")))
        if entry.unread:
            marks.append(Segment(f" {UNREAD_MARK}", self._style(*rows, "session-list--unread")))
        if entry.warning:
            marks.append(Segment(f" {WARNING_MARK}", self._style(*rows, "session-list--warning")))
        if entry.changed:  # what the agent changed, at a glance: +adds −dels
            marks.append(Segment(f" +{entry.added}", self._style(*rows, "session-list--added")))
            marks.append(Segment(f" \u2212{entry.removed}", self._style(*rows, "session-list--removed")))
        # Marked for a broadcast: before the icon, so a column of marks reads at a glance.
        marked = [Segment(f"{MARKED_MARK} ", self._style(*rows, "session-list--mark"))] if entry.marked else []
        used = sum(segment.cell_length for segment in marks + marked)
        # A worker hangs under its orchestrator: "└ " at its depth, its status line under its name.
        indent = "  " * (entry.depth - 1) + "└ " if entry.depth else ""
        tree = [Segment(indent, self._style(*rows, "session-list--tree"))] if indent else []
        name_room = max(1, room - 2 - used - len(indent))
        top = Strip(
            [
                Segment(left, base),
                *tree,
                *marked,
                Segment(f"{STATUS_ICONS[status]} ", self._style(*icon)),
                Segment(_fit(entry.name, name_room), self._style(*name)),
                *marks,
                Segment(right, base),
            ]
        )
        lead = "  " * entry.depth + "  "
        if entry.note:  # a bound reached or a stall says more than "Idle": it takes the line
            text, line_style = f"{WARNING_MARK} {entry.note}", self._style(*rows, "session-list--note")
        else:
            text = entry.status_text + (f" · {BRANCH_MARK} {entry.branch}" if entry.branch else "")
            line_style = self._style(*status_line)
        if cell_len(text) > room - len(lead):
            text = _fit(text, max(1, room - len(lead)))
        bottom = Strip([Segment(left + lead, base), Segment(text, line_style)])
        strips = (top.adjust_cell_length(width, base), bottom.adjust_cell_length(width, base))
        self._strips[key] = strips
        return strips

    def _header_strips(self, entry: HostHeader, index: int, width: int) -> tuple[Strip, Strip]:
        """A host's two lines: its icon, name and session count; its state."""
        row = "session-list--row-hover" if index == self._hover else ""
        key = (entry, width, row, self.has_focus)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        rows = ("session-list--row", row) if row else ("session-list--row",)
        if self._padding is None:
            self._padding = self.get_component_styles("session-list--row").padding
        padding = self._padding
        base = self._style(*rows)
        left = " " * padding.left
        room = max(1, width - padding.left - padding.right - 2)
        live = "session-list--host-live" if entry.state is HostState.LIVE else "session-list--host-down"
        top = Strip(
            [
                Segment(left, base),
                Segment(f"{entry.icon} ", self._style(*rows, "session-list--host-icon", live)),
                Segment(_fit(entry.title, room), self._style(*rows, "session-list--host")),
            ]
        )
        bottom = Strip(
            [
                Segment(left + "  ", base),
                Segment(_fit(entry.status_text, room), self._style(*rows, "session-list--host-status")),
            ]
        )
        strips = (top.adjust_cell_length(width, base), bottom.adjust_cell_length(width, base))
        self._strips[key] = strips
        return strips

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        index, line = divmod(self.scroll_offset.y + y, ROW_HEIGHT)
        if index >= len(self._entries):
            return Strip.blank(width, self._style("session-list--row"))
        return self.row_strips(index, width)[line]

    def rendered(self, session_id: str) -> tuple[str, str] | None:
        """A session's two lines as plain text, as drawn at the current width."""
        index = self._index_of.get(session_id)
        if index is None:
            return None
        top, bottom = self.row_strips(index, self.scrollable_content_region.width)
        return top.text, bottom.text

    def rendered_rows(self) -> list[tuple[str, str]]:
        """Every row's two lines (headers too) as plain text, at the current width."""
        width = self.scrollable_content_region.width
        return [
            (top.text, bottom.text) for top, bottom in (self.row_strips(i, width) for i in range(len(self._entries)))
        ]

    # ---- highlight and mouse -------------------------------------------------------
    def validate_index(self, index: int | None) -> int | None:
        if index is None or not self._entries:
            return None
        return self._session_row(max(0, min(index, len(self._entries) - 1)), 1)

    def watch_index(self, old: int | None, new: int | None) -> None:
        for index in (old, new):
            if index is not None:
                self.refresh_lines(index * ROW_HEIGHT, ROW_HEIGHT)
        entry = self._entries[new] if new is not None else None
        if isinstance(entry, SessionEntry):
            self.scroll_to_highlight()
            self.post_message(self.Highlighted(entry.session_id))

    def watch__hover(self, old: int | None, new: int | None) -> None:
        for index in (old, new):
            if index is not None:
                self.refresh_lines(index * ROW_HEIGHT, ROW_HEIGHT)
        self._update_tooltip()

    def _update_tooltip(self) -> None:
        hover = self._hover
        tooltip = Content(self._entries[hover].tooltip) if hover is not None else None
        if tooltip != self.tooltip:
            self.tooltip = tooltip

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        self._hover = self._row_at(event)

    def _on_leave(self, event: events.Leave) -> None:
        self._hover = None

    async def _on_click(self, event: events.Click) -> None:
        index = self._row_at(event)
        entry = self._entries[index] if index is not None else None
        if isinstance(entry, SessionEntry):  # a host's header is read (its tooltip), not chosen
            self.index = index
            self.post_message(self.Selected(entry.session_id))

    # ---- keys ----------------------------------------------------------------------
    def _move(self, index: int, step: int) -> None:
        """Highlight the session row at ``index``, or past headers the next one in ``step``'s
        direction (at the end of the list: the nearest the other way)."""
        if self._entries:
            self.index = self._session_row(max(0, min(index, len(self._entries) - 1)), step)

    def action_cursor_up(self) -> None:
        """Highlight the session above."""
        self._move(self.index - 1 if self.index is not None else 0, -1)

    def action_cursor_down(self) -> None:
        """Highlight the session below."""
        self._move(self.index + 1 if self.index is not None else 0, 1)

    def action_first(self) -> None:
        """Highlight the first session."""
        self._move(0, 1)

    def action_last(self) -> None:
        """Highlight the last session."""
        self._move(len(self._entries) - 1, -1)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height // ROW_HEIGHT)

    def action_page_up(self) -> None:
        """Highlight a screenful above."""
        self._move((self.index or 0) - self._page(), -1)

    def action_page_down(self) -> None:
        """Highlight a screenful below."""
        self._move((self.index or 0) + self._page(), 1)

    def action_select(self) -> None:
        """Choose the highlighted session."""
        session_id = self.highlighted_id
        if session_id is not None:
            self.post_message(self.Selected(session_id))
