"""A code block from an agent reply: long lines scroll sideways, a header offers "copy".

It is a Line API widget (:class:`~textual.scroll_view.ScrollView`): only the lines on
screen are drawn, so a 5,000-line block streaming in costs what its visible part costs.
The header row (language, line count, ``copy``) stays put while the code scrolls under it.
"copy" puts the block's exact text on the clipboard with ``App.copy_to_clipboard`` (OSC 52,
which works over SSH) and confirms with a short notification; the text can also be
selected with the mouse, like the rest of the chat.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content, Span
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style

from polypilot_tui.ui.formatting import plural

TAB_SIZE = 4
COPY_LABEL = " copy "
HEADER_STYLE = "$foreground-muted"
COPY_STYLE = "bold $text-accent"


def highlight(code: str, lang: str) -> Content:
    """``code`` coloured by pygments for ``lang``; exactly the same text, or plain if unsure."""
    if not lang or not code:
        return Content(code)
    # Imported here, when a first block is coloured: pygments' lexer tables (with Textual's
    # highlight module, which imports pygments too) took ~14 ms of every reply's first drawing.
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound
    from textual.highlight import HighlightTheme

    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False, tabsize=0)
    except ClassNotFound:
        return Content(code)
    spans: list[Span] = []
    position = 0
    styles = HighlightTheme.STYLES
    for token_type, value in lexer.get_tokens(code):
        end = position + len(value)
        for kind in reversed(token_type.split()):  # the token's own style, else its nearest parent's
            if style := styles.get(kind):
                spans.append(Span(position, end, style))
                break
        position = end
    if position != len(code):  # the lexer changed the text (it should not): show it as it is
        return Content(code)
    return Content(code, spans=spans)


def _char_at_cell(text: str, cell: int) -> tuple[int, int]:
    """Index of the character covering column ``cell`` of ``text``, and the column it starts at."""
    if text.isascii():
        index = min(cell, len(text))
        return index, index
    used = 0
    for index, char in enumerate(text):
        width = cell_len(char)
        if used + width > cell:
            return index, used
        used += width
    return len(text), used


class CodeBlock(ScrollView, can_focus=False):
    """One code block: a fixed header row, then the code, scrolling sideways when it is wide."""

    DEFAULT_CSS = """
    CodeBlock {
        width: 1fr;
        height: auto;
        overflow-x: auto;
        overflow-y: hidden;
        scrollbar-size-horizontal: 1;
        background: $surface;
        padding: 0 1;
    }
    """

    def __init__(
        self,
        code: str,
        lang: str = "",
        *,
        label: str = "",
        indent: int = 0,
        gap: bool = False,
        highlighted: bool = True,
    ) -> None:
        super().__init__()
        self.code = ""
        """The block's text, as copied."""
        self.lang = lang
        self.label = label or lang
        """What the header calls the block (the fence's info string)."""
        self._lines: list[Content] = []
        self._highlighted = False
        self._width = 0
        self.styles.margin = (1 if gap else 0, 0, 0, indent)
        self.set_code(code, lang, highlighted=highlighted)

    def set_code(self, code: str, lang: str, *, highlighted: bool = True) -> None:
        """Show ``code``; while streaming (not ``highlighted``) only new lines are rebuilt."""
        if self._lines and (code, lang, highlighted) == (self.code, self.lang, self._highlighted):
            return
        if (
            not highlighted
            and not self._highlighted
            and lang == self.lang
            and self._lines
            and code.startswith(self.code)
        ):
            start = self.code.rfind("\n") + 1  # the old last line may have grown
            new_lines = self._split(Content(code[start:]))
            self._lines[-1:] = new_lines
            self._width = max(self._width, *(line.cell_length for line in new_lines))
        else:
            self._lines = self._split(highlight(code, lang) if highlighted else Content(code))
            self._width = max((line.cell_length for line in self._lines), default=0)
        self.code, self.lang, self._highlighted = code, lang, highlighted
        self.virtual_size = Size(self._width, len(self._lines) + 1)  # a new size lays the chat out again
        self.refresh()

    @staticmethod
    def _split(content: Content) -> list[Content]:
        return [line.expand_tabs(TAB_SIZE) for line in content.split("\n", allow_blank=True)]

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        style = self.visual_style
        if y == 0:
            return self._header(width, style)
        index = y - 1 + round(self.scroll_offset.y)
        if index >= len(self._lines):
            return Strip.blank(width, style.rich_style)
        line = self._lines[index]
        selection = self.text_selection
        if selection is not None and (span := selection.get_span(index)) is not None:
            start, end = span
            end = len(line.plain) if end == -1 else end
            if start < end:
                selected = Style.from_styles(self.screen.get_component_styles("screen--selection"))
                line = line.stylize(selected, start, end)
        scroll_x = round(self.scroll_offset.x)
        first, at = _char_at_cell(line.plain, scroll_x)
        x = first
        segments: list[Segment] = []
        for part, part_style in line[first:].render(style, end="", parse_style=self._get_style):
            segments.append(Segment(part, (style + part_style).rich_style_with_offset(x, index)))
            x += len(part)
        strip = Strip(segments)
        if at < scroll_x:
            strip = strip.crop(scroll_x - at, strip.cell_length)
        return strip.crop_extend(0, width, style.rich_style)

    def _header(self, width: int, style: Style) -> Strip:
        label = f"{self.label or 'code'} · {plural(len(self._lines), 'line')}"
        # Style strings, not component classes: those cost a stylesheet pass per block on mount.
        header = (style + self._get_style(HEADER_STYLE)).rich_style
        copy = (style + self._get_style(COPY_STYLE)).rich_style + RichStyle.from_meta({"@click": "copy_code"})
        base = style.rich_style
        room = max(0, width - len(COPY_LABEL))
        label = label[: max(0, room - 1)]
        segments = [Segment(label, header), Segment(" " * (room - len(label)), base), Segment(COPY_LABEL, copy)]
        return Strip(segments).crop_extend(0, width, base)

    def action_copy_code(self) -> None:
        """Copy the block's text (OSC 52) and say so."""
        self.app.copy_to_clipboard(self.code)
        lines = self.code.count("\n") + 1 if self.code else 0
        self.notify(f"Copied {plural(lines, 'line')} of code", timeout=3)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(line.plain for line in self._lines)), "\n"
