"""A changeset drawn a line at a time: file headers, hunks, numbered lines, review comments.

A Line API widget like :mod:`session_list`: the layout (:mod:`diff_rows`) is one flat list
built when the data or the mode changes, and :meth:`DiffLines.render_line` indexes it, so
drawing a screenful costs the same whatever the diff's size. Lines are syntax-highlighted
by file extension when first drawn and cached; idle steps draw the next screenfuls ahead,
and a frame that outruns them (a held key, a jump) highlights a few rows and shows the rest
uncoloured until the next idle step, so no frame holds the event loop long. Agent text is drawn as Text segments, never
read as markup; control characters are stripped and tabs expanded.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import ClassVar, Generic, TypeVar

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual import events
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.content import Content
from textual.filter import ANSIToTruecolor, DimFilter, LineFilter, Monochrome, NoColor
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.style import Style

from polypilot_tui.domain.changeset import Changeset, DiffLine, FileStatus, LineKind, ReviewComment, Side
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.ui.widgets.diff_highlight import Highlighted, clean, highlight_runs, lexer_for
from polypilot_tui.ui.widgets.diff_rows import Row, RowKind, Rows, layout

COMMENT_MARK = "●"
STATUS_GLYPHS = {
    FileStatus.ADDED: "A",
    FileStatus.MODIFIED: "M",
    FileStatus.DELETED: "D",
    FileStatus.RENAMED: "R",
    FileStatus.UNTRACKED: "?",
}
_SIGNS = {LineKind.ADDED: "+", LineKind.REMOVED: "-", LineKind.CONTEXT: " ", LineKind.NOTE: "\\"}
_KIND_CLASS = {
    LineKind.ADDED: "diff-lines--added",
    LineKind.REMOVED: "diff-lines--removed",
    LineKind.CONTEXT: "diff-lines--context",
    LineKind.NOTE: "diff-lines--note",
}


WARM_STEP = 0.004
"""Seconds of drawing ahead per idle step: a key press waits at most about this long."""
WARM_PAGES = 2
"""Screenfuls drawn ahead the way the cursor last went (and one the other way) while the user reads."""
SCREENFULS_KEPT = WARM_PAGES + 3
"""Screenfuls of rows kept drawn: those drawn ahead (WARM_PAGES, and one the other way), the
one on screen and one of margin: as many as the warm needs, or it draws rows again and again."""
TEXTS_KEPT = 1000
"""Lines kept highlighted (a split row and a cursor's redraw reuse them)."""
WARM_PAUSE = 0.001
"""Seconds between drawing steps: the loop serves keys, frames and everything else between."""
WARM_LOST = 0.5
"""Seconds after which a drawing step asked for and not run is taken as lost and asked again."""
FRESH_LINES = 12
"""Lines a frame highlights for rows that were not drawn ahead (a split row has two); the rest
of a page reached faster than its rows could be drawn ahead (a held key, a jump) is drawn
uncoloured at once and coloured in the next idle steps, so no frame blocks the event loop
for long. Counted in lines, not rows: highlighting is most of a row's cost, so a split frame
that counted rows paid twice a unified one's (and split pages outrun the drawing ahead most:
twice the lines a page)."""


Packed = tuple[tuple[str, ...], tuple[int, ...], int]
"""A row kept drawn: its pieces' texts, each one's style (an index into the view's palette)
and its width in cells. Plain strings and numbers: the garbage collector stops tracking them
the first time it sees them, where a kept Strip was ~30 objects (the strip, its seven caches,
its segments) walked by every full collection while the user scrolled. Each frame makes a
strip of its own from it, which dies with the frame, young, with all that Textual derives from it."""

SEGMENT_FILTERS = (ANSIToTruecolor, DimFilter, Monochrome, NoColor)
"""Textual's line filters that change each segment's style by the style alone (not its text nor
its neighbours): the view applies them once per style, not once per segment of every frame."""
NO_GUTTER = Spacing(0, 0, 0, 0)

ScreenFor = tuple[tuple[LineFilter, ...], Color, RichStyle, int]
Shown = tuple[bool, bool, Strip]
"""A row on screen as Textual was last given it: with the cursor on it, uncoloured, the strip."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Kept(Generic[K, V]):
    """The ``maxsize`` values last set or read: one ordered dict, where Textual's LRUCache links
    each entry in a list of its own that every full garbage collection walks."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.maxsize:
            self._items.popitem(last=False)

    def __contains__(self, key: K) -> bool:
        return key in self._items

    def clear(self) -> None:
        self._items.clear()


class DiffLines(ScrollView, can_focus=True):
    """The rows of a changeset with a cursor row; ``split`` shows old and new side by side."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(False)", "First", show=False),
        Binding("end", "edge(True)", "Last", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "diff-lines--file",
        "diff-lines--status",
        "diff-lines--stat-added",
        "diff-lines--stat-removed",
        "diff-lines--info",
        "diff-lines--hunk",
        "diff-lines--gutter",
        "diff-lines--context",
        "diff-lines--added",
        "diff-lines--removed",
        "diff-lines--note",
        "diff-lines--filler",
        "diff-lines--comment",
        "diff-lines--mark",
        "diff-lines--cursor",
    }
    """Row kinds (file header, info, hunk, line kinds, comment), the parts of a header, the
    gutter and its comment mark, the empty half of a split row, and the cursor on top."""

    DEFAULT_CSS = """
    DiffLines {
        overflow-x: hidden;
        overflow-y: auto;
    }
    """

    split: reactive[bool] = reactive(False, repaint=False)
    """Old and new side by side instead of one column."""

    cursor: reactive[int] = reactive(0, repaint=False)
    """The row under the cursor."""

    @dataclass
    class CursorMoved(Message):
        """The cursor is on a row of file ``file`` (an index into the changeset's files)."""

        file: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.changes = Changeset("")
        self.comments: tuple[ReviewComment, ...] = ()
        self._layout = layout(self.changes, (), split=False)
        self._kept: _Kept[tuple[int, int, bool], Packed] = _Kept(SCREENFULS_KEPT * 24)
        """Rows drawn, by row, width and cursor (on the row or not)."""
        self._palette: list[RichStyle | None] = []
        """The styles of the kept rows' pieces (a row keeps their indices)."""
        self._palette_index: dict[RichStyle | None, int] = {}
        self._screen_palette: list[RichStyle | None] = []
        """The palette as the screen shows it (Textual's line filters applied), for ``_screen_for``."""
        self._screen_styles: dict[RichStyle | None, RichStyle | None] = {}
        self._screen_for: ScreenFor | None = None
        """The line filters, background, pad style and width the rows on screen were finished for."""
        self._shown: dict[int, Shown] = {}
        self._past_end: Strip | None = None
        """The rows on screen, finished as Textual shows them, by row: a frame remakes only those
        that changed (scrolled in, the cursor's, coloured since)."""
        self._texts: _Kept[tuple[int, str], Highlighted] = _Kept(TEXTS_KEPT)
        self._styles: dict[tuple[bool, tuple[str, ...]], Style] = {}
        self._rich: dict[tuple[Style, str | None], RichStyle] = {}
        self.warming = False
        """Rows are being drawn ahead in idle steps."""
        self._warm_asked = 0.0
        self._upward = False
        """The cursor last moved up: the screenfuls above are drawn ahead, not those below."""
        self._fresh = 0
        """Lines highlighted by frames since the last idle step (about FRESH_LINES)."""
        self._plain: set[int] = set()
        """Rows on screen drawn uncoloured, to draw in full in the next idle step."""
        self._whole = True
        """The next frame draws every row in full: the first after the data, the mode, the
        size or the theme changed (a fresh view shows its colours at once)."""
        self.drawn = 0
        """Rows drawn in full so far (each row once per width and cursor: a count the tests read)."""

    # ---- data ----------------------------------------------------------------------
    @property
    def rows(self) -> Rows:
        return self._layout.rows

    @property
    def strips_kept(self) -> int:
        """How many rows are kept drawn at most (SCREENFULS_KEPT screenfuls of this height)."""
        return self._kept.maxsize

    @property
    def file_rows(self) -> tuple[int, ...]:
        """The row of each file's header."""
        return self._layout.file_rows

    def show(self, changes: Changeset, comments: tuple[ReviewComment, ...] = ()) -> None:
        """Draw ``changes`` with ``comments``; the cursor stays on its line where it can."""
        if changes is not self.changes:
            self._texts.clear()
        self.changes, self.comments = changes, comments
        self._relayout()

    def set_comments(self, comments: tuple[ReviewComment, ...]) -> None:
        """Show these comments (added, edited or deleted); the cursor stays on its line."""
        self.comments = comments
        self._relayout()

    def watch_split(self) -> None:
        self._relayout()

    def _relayout(self) -> None:
        here = self.row_at_cursor()
        self._layout = layout(self.changes, self.comments, split=self.split)
        self._kept.clear()
        self._shown.clear()
        self._plain.clear()
        self._whole = True
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.rows))
        self.set_reactive(DiffLines.cursor, self._find(here))
        self.refresh()
        self.scroll_to_cursor()

    def _find(self, row: Row | None) -> int:
        """The row in the new layout that shows what ``row`` showed (else the nearest row)."""
        if row is None or not self.rows:
            return 0
        # A split row with both sides means its new line (as a comment on it would).
        mine = row.right if row.right is not None else row.left
        wanted = {mine} if mine is not None else set()
        for i, other in enumerate(self.rows):
            if (other.file, other.hunk, other.kind) != (row.file, row.hunk, row.kind):
                continue
            if other.kind is RowKind.COMMENT and other.comment == row.comment and other.first:
                return i
            if other.kind is not RowKind.COMMENT and (
                not wanted or wanted & {line for line in (other.left, other.right) if line is not None}
            ):
                return i
        return min(self.cursor, len(self.rows) - 1)

    def row_at_cursor(self) -> Row | None:
        rows = self.rows
        return rows[self.cursor] if 0 <= self.cursor < len(rows) else None

    # ---- cursor ----------------------------------------------------------------------
    def validate_cursor(self, cursor: int) -> int:
        return max(0, min(cursor, len(self.rows) - 1))

    def watch_cursor(self, old: int, new: int) -> None:
        self._upward = new < old
        self.refresh_lines(old)
        self.refresh_lines(new)
        self.scroll_to_cursor()
        if self.rows:
            self.post_message(self.CursorMoved(self.rows[new].file))

    def scroll_to_cursor(self, *, top: bool = False) -> None:
        if not self.is_mounted or not self.rows:
            return
        region = Region(0, self.cursor, 1, 1)
        self.scroll_to_region(region, animate=False, force=True, immediate=True, top=top)

    def jump_to_file(self, index: int) -> None:
        """The cursor to file ``index``'s header, shown at the top."""
        if 0 <= index < len(self.file_rows):
            self.cursor = self.file_rows[index]
            self.scroll_to_cursor(top=True)

    def next_file(self, step: int) -> None:
        """The cursor to the next (``step`` 1) or previous (-1) file's header."""
        row = self.row_at_cursor()
        if row is None:
            return
        at_header = self.cursor == self.file_rows[row.file]
        target = row.file + step if step > 0 or at_header else row.file
        self.jump_to_file(max(0, min(target, len(self.file_rows) - 1)))

    def action_cursor(self, step: int) -> None:
        self.cursor += step

    def action_page(self, step: int) -> None:
        self.cursor += step * max(1, self.scrollable_content_region.height - 1)

    def action_edge(self, end: bool) -> None:
        self.cursor = len(self.rows) - 1 if end else 0

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and 0 <= offset.y + self.scroll_offset.y < len(self.rows):
            self.cursor = offset.y + self.scroll_offset.y

    def _on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.rows))
        self._kept.clear()
        self._kept.maxsize = SCREENFULS_KEPT * max(1, self.scrollable_content_region.height)
        self._shown.clear()
        self._plain.clear()
        self._whole = True

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._kept.clear()
        self._palette.clear()
        self._palette_index.clear()
        self._screen_for = None
        self._shown.clear()
        self._styles.clear()
        self._rich.clear()
        self._whole = True
        self.refresh()

    # ---- drawing -------------------------------------------------------------------
    def _style(self, *names: str) -> Style:
        key = (self.has_focus, names)
        style = self._styles.get(key)
        if style is None:
            style = self._styles[key] = self.get_visual_style(*names)
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        index = self.scroll_offset.y + y
        if not 0 <= index < len(self.rows):
            return Strip.blank(width, self._style("diff-lines--context").rich_style)
        return self._unpacked(self._visible_row(index, width))

    def _visible_row(self, index: int, width: int) -> Packed:
        """Row ``index`` as a frame draws it: kept, else drawn in full while the frame's budget
        of fresh lines lasts, else uncoloured (and coloured by the next idle steps)."""
        if not self.warming or time.monotonic() - self._warm_asked > WARM_LOST:
            self._ask_warm(after_frame=True)
        kept = self._kept.get((index, width, index == self.cursor))
        if kept is not None:
            return kept
        if self._whole or self._fresh < FRESH_LINES:
            row = self.rows[index]
            self._fresh += 2 if self.split and row.left is not None and row.right is not None else 1
            return self._row_packed(index, width)
        self._plain.add(index)
        return self._packed(*self._draw(self.rows[index], width, index == self.cursor, colour=False))

    def render_lines(self, crop: Region) -> list[Strip]:
        """The rows in ``crop`` as Textual's own line rendering finishes them (padded to the
        content's width in the background, its line filters applied), made here in one pass
        from the kept rows: per row Textual's way made three strips and twice the segments
        every frame, most of a scroll frame. A row that did not change since the last frame
        (a cursor move, a repaint) is handed over as it was. A widget with a border, padding,
        an outline, a tint, a hatch, opacity or a filter of another kind is left to Textual."""
        filters = self.get_line_filters()
        styles = self.styles
        if (
            styles.gutter != NO_GUTTER
            or any(edge for edge, _ in styles.outline)
            or styles.tint.a
            or styles.text_opacity != 1.0
            or (styles.has_rule("hatch") and styles.hatch != "none")
            or self.opacity != 1.0
            or not all(isinstance(line_filter, SEGMENT_FILTERS) for line_filter in filters)
        ):
            self._shown.clear()
            return super().render_lines(crop)
        base_background, background = self.background_colors
        pad_style = Style(background=base_background + background).rich_style
        content_width, content_height = self.content_region.size
        screen_for = (tuple(filters), background, pad_style, content_width)
        if screen_for != self._screen_for:
            self._screen_for = screen_for
            self._screen_palette.clear()
            self._screen_styles.clear()
            self._shown.clear()
            self._past_end = None
        width = self.scrollable_content_region.width
        top, cursor, plain, shown, rows = self.scroll_offset.y, self.cursor, self._plain, self._shown, len(self.rows)
        strips: list[Strip] = []
        for y in crop.line_range:
            index = top + y
            if y >= content_height:  # under a horizontal scrollbar (none while overflow-x is hidden)
                strips.append(Strip.blank(content_width, self._on_screen_style(pad_style)))
                continue
            if not 0 <= index < rows:  # past the last row: one blank line for all
                if self._past_end is None:
                    blank = self.render_line(y)
                    line = self._packed(blank, blank.cell_length)
                    self._past_end = self._on_screen(line, content_width, pad_style)
                strips.append(self._past_end)
                continue
            was = shown.get(index)
            if was is not None and was[0] == (index == cursor) and (not was[1] or index in plain):
                strips.append(was[2])
                continue
            strip = self._on_screen(self._visible_row(index, width), content_width, pad_style)
            shown[index] = (index == cursor, index in plain, strip)
            strips.append(strip)
        if len(shown) > content_height:
            self._shown = {index: was for index, was in shown.items() if top <= index < top + content_height}
        if crop.column_span != (0, self.region.width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _on_screen(self, kept: Packed, width: int, pad_style: RichStyle) -> Strip:
        """A kept row as Textual finishes a line: ``width`` cells (padded in ``pad_style``), each
        style through the line filters; the filtered styles kept by palette index."""
        texts, styles, cells = kept
        palette = self._screen_palette
        if len(palette) < len(self._palette):
            palette += [self._on_screen_style(style) for style in self._palette[len(palette) :]]
        segments = [Segment(text, palette[index]) for text, index in zip(texts, styles, strict=True)]
        if cells == width:
            return Strip(segments, cells)
        return Strip(segments, cells).adjust_cell_length(width, self._on_screen_style(pad_style))

    def _on_screen_style(self, style: RichStyle | None) -> RichStyle | None:
        """``style`` through the line filters of ``_screen_for`` (each maps a segment's style alone)."""
        screen = self._screen_styles
        if style in screen:
            return screen[style]
        assert self._screen_for is not None
        filters, background, _, _ = self._screen_for
        shown = style
        for line_filter in filters:
            shown = line_filter.apply([Segment(" ", shown)], background)[0].style
        screen[style] = shown
        return shown

    def _warm(self) -> None:
        """Draw, a few milliseconds per idle step: the rows on screen drawn uncoloured, then
        the next screenfuls below the view and the one above, so that paging finds its rows
        ready (highlighting is most of a fresh page's cost) and a key waits one short step."""
        self._fresh, self._whole = 0, False
        width = self.scrollable_content_region.width
        top, height = self.scroll_offset.y, max(1, self.scrollable_content_region.height)
        below = range(top + height, top + (1 + (WARM_PAGES if not self._upward else 1)) * height)
        above = range(top - 1, max(0, top - (WARM_PAGES if self._upward else 1) * height) - 1, -1)
        ahead = [*above, *below] if self._upward else [*below, *above]  # the way the cursor goes first
        self._plain.intersection_update(range(top, top + height))  # those scrolled away are drawn again
        visible = sorted(self._plain)
        deadline = time.perf_counter() + WARM_STEP
        todo = iter([*visible, *ahead])
        for index in todo:
            if index < len(self.rows) and (index, width, index == self.cursor) not in self._kept:
                self._row_packed(index, width)
                if index in self._plain:
                    self._plain.discard(index)
                    self.refresh_line(index)  # its uncoloured drawing on screen is replaced
                if time.perf_counter() > deadline:
                    break
        else:
            self.warming = False
            return
        if any(i < len(self.rows) and (i, width, i == self.cursor) not in self._kept for i in todo):
            self._ask_warm(after_frame=False)
        else:
            self.warming = False

    def _ask_warm(self, *, after_frame: bool) -> None:
        """A drawing step WARM_PAUSE from now, in this widget's turn; ``after_frame``: WARM_PAUSE
        after the frame being drawn. Not right after that frame (``call_after_refresh`` alone):
        then what fell due during the frame (a key, a timer, the loop's other work) waited for
        the frame and a step back to back: most of a held key's longest pauses. Not Textual's
        ``set_timer``: it skips a one-shot timer that starts late, a busy loop starts it late,
        and then the drawing ahead stopped for good."""
        if after_frame:
            self.warming = self.call_after_refresh(self._ask_warm, after_frame=False)
        else:
            asyncio.get_running_loop().call_later(WARM_PAUSE, self.call_later, self._warm)
            self.warming = True
        self._warm_asked = time.monotonic()

    def row_strip(self, index: int, width: int) -> Strip:
        """Row ``index`` drawn ``width`` cells wide: a strip of its own each time, the row kept
        drawn (as :data:`Packed`)."""
        return self._unpacked(self._row_packed(index, width))

    def _row_packed(self, index: int, width: int) -> Packed:
        cursor = index == self.cursor
        key = (index, width, cursor)
        kept = self._kept.get(key)
        if kept is None:
            self.drawn += 1
            kept = self._kept[key] = self._packed(*self._draw(self.rows[index], width, cursor))
        return kept

    def _packed(self, segments: Iterable[Segment], cells: int) -> Packed:
        texts: list[str] = []
        styles: list[int] = []
        for segment in segments:
            index = self._palette_index.get(segment.style)
            if index is None:
                index = self._palette_index[segment.style] = len(self._palette)
                self._palette.append(segment.style)
            texts.append(segment.text)
            styles.append(index)
        return tuple(texts), tuple(styles), cells

    def _unpacked(self, kept: Packed) -> Strip:
        texts, styles, cells = kept
        palette = self._palette
        return Strip([Segment(text, palette[index]) for text, index in zip(texts, styles, strict=True)], cells)

    def row_text(self, index: int, width: int | None = None) -> str:
        """Row ``index`` as plain text, as drawn (for tests and copy)."""
        return self.row_strip(index, width or self.scrollable_content_region.width).text

    def _draw(self, row: Row, width: int, cursor: bool, *, colour: bool = True) -> tuple[list[Segment], int]:
        """Row ``row`` as segments and their width in cells (``width``); without ``colour`` its
        code is not highlighted (quick). A line row is never made a Strip: it is packed at once
        (:data:`Packed`), and the two Strips its padding made, each with seven caches and thrown
        away at once, were ~15% of drawing a row (a split row: 41 -> 35 us uncoloured), which a
        held key pays twice for most fresh rows (uncoloured, then coloured)."""
        extra = ("diff-lines--cursor",) if cursor else ()
        if row.kind in (RowKind.FILE, RowKind.HUNK, RowKind.INFO, RowKind.COMMENT):
            strip = self._draw_other(row, width, extra)
            return list(strip), strip.cell_length
        if not self.split or row.kind is RowKind.NOTE:
            return self._unified(row, width, extra, colour), width  # fitted to its cells
        left = (width - 1) // 2
        segments = self._half(row, False, left, extra, colour)
        segments.append(Segment("│", self._style("diff-lines--gutter", *extra).rich_style))
        segments += self._half(row, True, width - 1 - left, extra, colour)
        return segments, width  # each half is fitted to its cells, the bar one more

    def _draw_other(self, row: Row, width: int, extra: tuple[str, ...]) -> Strip:
        """A row that is no line of code: a file's header, a hunk's, an info or a comment row."""
        if row.kind is RowKind.FILE:
            return self._file_header(row, width, extra)
        if row.kind is RowKind.HUNK:
            hunk = self.changes.files[row.file].hunks[row.hunk]
            return self._fit([(clean(hunk.header), ("diff-lines--hunk",))], width, ("diff-lines--hunk", *extra))
        gutter = self._layout.number_width * (1 if self.split else 2) + (4 if self.split else 5)
        name = "diff-lines--info" if row.kind is RowKind.INFO else "diff-lines--comment"
        lead = "  " if row.kind is RowKind.INFO else "│ "
        if self.split and row.kind is RowKind.COMMENT and self.comments[row.comment].side is Side.NEW:
            gutter += (width - 1) // 2 + 1  # under the new (right) column, as its mark
        parts = [(" " * gutter + lead, (name,)), (clean(row.text), (name,))]
        return self._fit(parts, width, (name, *extra))

    def _file_header(self, row: Row, width: int, extra: tuple[str, ...]) -> Strip:
        diff = self.changes.files[row.file]
        path = f"{diff.old_path} → {diff.path}" if diff.old_path else diff.path
        parts: list[tuple[str, tuple[str, ...]]] = [
            (f" {STATUS_GLYPHS[diff.status]} ", ("diff-lines--status",)),
            (clean(path), ()),
            (f"  +{diff.added}", ("diff-lines--stat-added",)),
            (f" \u2212{diff.removed}", ("diff-lines--stat-removed",)),
        ]
        if diff.binary or diff.omitted:
            parts.append((f"  {'binary' if diff.binary else clean(diff.omitted)}", ("diff-lines--info",)))
        return self._fit(parts, width, ("diff-lines--file", *extra))

    def _fit(self, parts: Sequence[tuple[str, tuple[str, ...]]], width: int, base: tuple[str, ...]) -> Strip:
        """Plain parts in one row: cut with "…" when too long, padded in the row's style."""
        segments = [Segment(text, self._style(*base[:1], *names, *base[1:]).rich_style) for text, names in parts]
        return self._crop(Strip(segments), width, self._style(*base))

    def _crop(self, strip: Strip, width: int, base: Style) -> Strip:
        if strip.cell_length > width:
            strip = Strip([*strip.crop(0, max(0, width - 1)), Segment("…", base.rich_style)])
        return strip.adjust_cell_length(width, base.rich_style)

    def _fitted(self, segments: list[Segment], width: int, base: Style) -> list[Segment]:
        """``segments`` exactly ``width`` cells wide, as :meth:`_crop` makes them; the usual
        case (they fit) padded in place: a Strip made and thrown away costs 8 objects."""
        length = Segment.get_line_length(segments)
        if length > width:
            return list(self._crop(Strip(segments, length), width, base))
        if length < width:
            segments.append(Segment(" " * (width - length), base.rich_style))
        return segments

    def _line_body(self, row: Row, line: DiffLine, colour: bool) -> Highlighted:
        if not colour:
            return highlight_runs(clean(line.text), None)
        key = (row.file, line.text)
        body = self._texts.get(key)
        if body is None:
            lexer = lexer_for(self.changes.files[row.file].path) if line.kind is not LineKind.NOTE else None
            body = self._texts[key] = highlight_runs(clean(line.text), lexer)
        return body

    def _segments(self, body: Highlighted, base: Style) -> list[Segment]:
        """``body`` in ``base`` as segments: what ``Content.render(base)`` gives, made from its
        pieces directly."""
        if isinstance(body, Content):
            return self._rendered(body, base)
        text, ends, styles = body
        segments = []
        start = 0
        for end, style in zip(ends, styles, strict=True):
            segments.append(Segment(text[start:end], self._rich_style(base, style or None)))
            start = end
        return segments

    def _rich_style(self, base: Style, span: str | None) -> RichStyle:
        """The Rich style of text in ``base`` under a span of style ``span`` (None: no span), as
        :meth:`Content.render` combines them (a screenful has a few dozen, met hundreds of times)."""
        key = (base, span)
        rich = self._rich.get(key)
        if rich is None:
            current = Style.combine([base] if span is None else [base, self._get_style(span)])
            rich = self._rich[key] = (base + current).rich_style
        return rich

    def _rendered(self, content: Content, base: Style) -> list[Segment]:
        return [
            Segment(text, (base + style).rich_style)
            for text, style in content.render(base, end="", parse_style=self._get_style)
        ]

    def _unified(self, row: Row, width: int, extra: tuple[str, ...], colour: bool) -> list[Segment]:
        line = row.left
        assert line is not None
        kind = _KIND_CLASS[line.kind]
        number = self._layout.number_width
        gutter = self._style("diff-lines--gutter", kind, *extra)
        mark = self._style("diff-lines--gutter", kind, "diff-lines--mark", *extra)
        old = "" if line.old_no is None else str(line.old_no)
        new = "" if line.new_no is None else str(line.new_no)
        base = self._style(kind, *extra)
        head = [
            Segment(COMMENT_MARK if row.comment >= 0 else " ", mark.rich_style),
            Segment(f"{old:>{number}} {new:>{number}} ", gutter.rich_style),
            Segment(f"{_SIGNS[line.kind]} ", base.rich_style),
        ]
        head += self._segments(self._line_body(row, line, colour), base)
        return self._fitted(head, width, base)

    def _half(self, row: Row, new_side: bool, width: int, extra: tuple[str, ...], colour: bool) -> list[Segment]:
        number = self._layout.number_width
        line = row.right if new_side else row.left
        if line is None:
            filler = self._style("diff-lines--filler", *extra)
            return [Segment(" " * width, filler.rich_style)]  # as Strip.blank, without a Strip
        kind = _KIND_CLASS[line.kind]
        base = self._style(kind, *extra)
        gutter = self._style("diff-lines--gutter", kind, *extra)
        mark = self._style("diff-lines--gutter", kind, "diff-lines--mark", *extra)
        no = line.new_no if new_side else line.old_no
        mine = any(self._commented(index, line, new_side) for index in row.carried)
        head = [
            Segment(COMMENT_MARK if mine else " ", mark.rich_style),
            Segment(f"{'' if no is None else no:>{number}} ", gutter.rich_style),
            Segment(f"{_SIGNS[line.kind]} ", base.rich_style),
        ]
        head += self._segments(self._line_body(row, line, colour), base)
        return self._fitted(head, width, base)

    def _commented(self, index: int, line: DiffLine, new_side: bool) -> bool:
        """Whether comment ``index`` is on this half of a split row (context lines show it right)."""
        comment = self.comments[index]
        if new_side:
            return comment.side is Side.NEW and comment.line == line.new_no
        return line.kind is LineKind.REMOVED and comment.side is Side.OLD and comment.line == line.old_no
