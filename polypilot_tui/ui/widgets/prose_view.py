"""A run of laid-out markdown prose (paragraphs, lists, quotes, tables) that the mouse can select.

It renders a Textual :class:`~textual.visual.Visual` of its own rather than a Rich renderable:
Rich renderables carry no selection offsets, so text drawn through them cannot be selected.
Each drawn character is tagged with its place in a *logical* line, so a selection copies
paragraphs without the breaks word wrap put in. Layout is cached per item and width: adding
an item to a streaming reply lays out only that item.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from textual.css.styles import RulesMap
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual
from textual.widget import Widget

from polypilot_tui.ui.markdown.blocks import ProseItem, item_size
from polypilot_tui.ui.markdown.layout import Laid, Row, lay_out


class ProseVisual(Visual):
    """Prose items drawn at whatever width the widget has."""

    def __init__(
        self, items: Sequence[ProseItem], previous: ProseVisual | None = None, *, keep_strips: bool = False
    ) -> None:
        self.items = list(items)
        # The previous visual of the same widget hands over its caches (same class).
        laid = previous._laid if previous is not None else {}  # noqa: SLF001
        drawn = previous._drawn if previous is not None else {}  # noqa: SLF001
        self._laid: dict[int, tuple[int, Laid]] = {id(i): laid[id(i)] for i in self.items if id(i) in laid}
        """Per item (by identity; ``items`` keeps them alive): the width it was laid out at, and how."""
        self._drawn: dict[int, tuple[tuple[int, int, Style], list[Strip]]] = {
            id(i): drawn[id(i)] for i in self.items if id(i) in drawn
        }
        """Per item: its strips and what they were drawn for (width, first logical line, style).
        A streaming reply redraws only its changed last item, not the whole run."""
        self._keep_strips = keep_strips
        """Only a streaming reply keeps its strips: a row of history is drawn once and Textual
        caches that; a second copy would only give the garbage collector more to walk."""
        self._layout: tuple[int, list[Row], list[str], list[int]] | None = None
        self.layouts = 0
        """Items laid out so far (tests count these to check streaming stays incremental)."""
        self.rows_drawn = 0
        """Rows turned into strips so far."""
        if previous is not None:
            self.layouts, self.rows_drawn = previous.layouts, previous.rows_drawn

    def _laid_out(self, item: ProseItem, width: int) -> Laid:
        cached = self._laid.get(id(item))
        if cached is None or cached[0] != width:
            cached = (width, lay_out(item, width))
            self._laid[id(item)] = cached
            self.layouts += 1
        return cached[1]

    def layout(self, width: int) -> tuple[list[Row], list[str]]:
        """All rows and logical lines at ``width``."""
        if self._layout is None or self._layout[0] != width:
            rows: list[Row] = []
            logical: list[str] = []
            bases: list[int] = []
            for item in self.items:
                laid, base = self._laid_out(item, width), len(logical)
                bases.append(base)
                rows.extend(row if not base else Row(row.indent, row.text, row.x, row.y + base) for row in laid.rows)
                logical.extend(laid.logical)
            self._layout = (width, rows, logical, bases)
        return self._layout[1], self._layout[2]

    def text(self, width: int) -> str:
        """The logical lines at ``width`` (what selecting everything copies)."""
        return "\n".join(self.layout(width)[1])

    def render_strips(self, width: int, height: int | None, style: Style, options: RenderOptions) -> list[Strip]:
        _rows, logical = self.layout(width)
        assert self._layout is not None
        bases = self._layout[3]
        selection = options.selection if options.selection_style is not None else None
        strips: list[Strip] = []
        for item, base in zip(self.items, bases, strict=True):
            key = (width, base, style)
            cached = self._drawn.get(id(item))
            if selection is None and cached is not None and cached[0] == key:
                strips.extend(cached[1])
                continue
            drawn = [
                self._strip(row, base, logical, style, options, selection) for row in self._laid_out(item, width).rows
            ]
            self.rows_drawn += len(drawn)
            if selection is None and self._keep_strips:
                self._drawn[id(item)] = (key, drawn)
            strips.extend(drawn)
        return strips if height is None else strips[:height]

    @staticmethod
    def _strip(
        row: Row, base: int, logical: list[str], style: Style, options: RenderOptions, selection: Selection | None
    ) -> Strip:
        """One row: every character tagged with its (x, logical line) for mouse selection."""
        get_style = options.get_style
        y = row.y + base
        segments: list[Segment] = []
        if row.indent is not None:
            # One segment per indent cell, each pointing at the row's first character, so
            # a drag that starts in the indent selects from the start of the row's text.
            for part, part_style in row.indent.render(style, end="", parse_style=get_style):
                rich_style = (style + part_style).rich_style_with_offset(row.x, y)
                segments.extend(Segment(char, rich_style) for char in part)
        text = row.text
        if selection is not None and (span := selection.get_span(y)) is not None:
            start, end = span
            end = len(logical[y]) if end == -1 else end
            start, end = max(start, row.x) - row.x, min(end, row.x + len(text)) - row.x
            if start < end:
                text = text.stylize(options.selection_style, start, end)  # type: ignore[arg-type]
        x = row.x
        for part, part_style in text.render(style, end="", parse_style=get_style):
            segments.append(Segment(part, (style + part_style).rich_style_with_offset(x, y)))
            x += len(part)
        return Strip(segments)

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width

    def get_height(self, rules: RulesMap, width: int) -> int:
        return self.height(width)

    def height(self, width: int) -> int:
        """Rows at ``width``."""
        return len(self.layout(width)[0])


class ProseRun:
    """Prose items of one reply and their visual; drawn by a ProseView, or by the message itself.

    Not a widget: a reply of prose alone (most replies) is drawn by its AssistantMessage,
    and a widget made only to hold these would still cost its construction and the objects
    the garbage collector walks on every full pass.
    """

    __slots__ = ("visual", "frozen", "owner", "streaming")

    def __init__(self, items: Sequence[ProseItem], live: Sequence[ProseItem] = ()) -> None:
        self.visual = ProseVisual([*items, *live])
        self.frozen = len(items)
        """How many leading items are final; the others (``live``) belong to a reply still streaming."""
        self.owner: Widget | None = None
        """The widget drawing this run (refreshed when it changes)."""
        self.streaming = False
        """Set while its reply streams: its visuals then keep each item's strips between draws."""

    @property
    def items(self) -> list[ProseItem]:
        return self.visual.items

    @property
    def frozen_size(self) -> int:
        """Characters in the final items (a run stops taking more past a bound)."""
        return sum(map(item_size, self.visual.items[: self.frozen]))

    def set_items(self, items: Sequence[ProseItem], live: Sequence[ProseItem] = ()) -> None:
        """Show ``items`` then ``live``; items already shown keep their layout."""
        owner = self.owner
        width = owner.size.width if owner is not None else 0
        old_height = self.visual.height(width) if width else -1
        self.visual = ProseVisual([*items, *live], self.visual, keep_strips=self.streaming)
        self.frozen = len(items)
        if owner is not None:
            # A streaming reply usually grows within its last line: then only this widget is
            # repainted, and the chat is not laid out again (that costs per widget in the log).
            owner.refresh(layout=not width or self.visual.height(width) != old_height)

    def freeze(self, items: Sequence[ProseItem]) -> None:
        """Add final items after the final ones (the live ones are dropped: they are re-sent)."""
        self.set_items([*self.visual.items[: self.frozen], *items])

    def set_live(self, live: Sequence[ProseItem]) -> None:
        """Replace the items after the final ones."""
        if live or self.frozen != len(self.visual.items):
            self.set_items(self.visual.items[: self.frozen], live)


class ProseView(Widget):
    """Draws a :class:`ProseRun` (the run refreshes it when its items change)."""

    DEFAULT_CSS = """
    ProseView {
        height: auto;
        width: 1fr;
    }
    """

    def __init__(self, run: ProseRun) -> None:
        super().__init__()
        self.auto_links = False  # nothing here is a link: spare Textual restyling every strip for them
        self.run = run
        run.owner = self

    @property
    def visual(self) -> ProseVisual:
        return self.run.visual

    @property
    def items(self) -> list[ProseItem]:
        return self.run.items

    def render(self) -> Visual:
        return self.run.visual

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        # The blank line above a code block is its margin, not text: copy it as a line break.
        siblings = list(self.parent.children) if self.parent is not None else [self]
        after = siblings[siblings.index(self) + 1 :]
        ending = "\n\n" if after and after[0].styles.margin.top else "\n"
        return selection.extract(self.run.visual.text(self.size.width)), ending
