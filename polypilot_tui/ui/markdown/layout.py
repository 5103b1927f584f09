"""Prose items laid out at a width: word wrap that never cuts, tables that wrap their cells.

A laid-out item is a list of *rows* (screen lines) over *logical lines* (what a mouse
selection copies). A wrapped paragraph is one logical line drawn on several rows, so a
copied paragraph has no line breaks the terminal width put in; its continuation rows start
with an indent that is not part of the text. Widths are terminal cells (``rich.cells``):
CJK and emoji take two, so tables stay aligned.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from textual.content import Content

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.ui.markdown.blocks import Prose, ProseItem, Rule, Table
from polypilot_tui.ui.markdown.styles import TABLE_BORDER, TABLE_HEADER

_WORD = re.compile(r"[^ ]* *")


@dataclass(frozen=True, slots=True)
class Row:
    """One screen line: ``indent`` (not selectable text) then ``text`` from logical line ``y`` at ``x``."""

    indent: Content | None
    text: Content
    x: int
    y: int


@dataclass(frozen=True, slots=True)
class Laid:
    """An item at one width; ``y`` in rows counts from the item's first logical line."""

    rows: list[Row]
    logical: list[str]


def wrap_spans(text: str, width: int) -> list[tuple[int, int]]:
    """Where to break ``text`` into lines of at most ``width`` cells: at spaces, folding longer words.

    Returns (start, end) character ranges that cover the text; trailing spaces stay with
    the line they end (the caller trims them for display).
    """
    width = max(1, width)
    if len(text) <= width and (text.isascii() or cell_len(text) <= width):
        return [(0, len(text))]
    spans: list[tuple[int, int]] = []
    start = used = 0
    for match in _WORD.finditer(text):
        begin, end = match.span()
        if begin == end:
            continue
        word = match.group().rstrip(" ")
        cells = cell_len(word)
        if used and used + cells > width:
            spans.append((start, begin))
            start, used = begin, 0
        if cells > width:  # a word wider than the line: fold it, character by character
            position = begin
            for char in word:
                size = cell_len(char)
                if used + size > width and used:
                    spans.append((start, position))
                    start, used = position, 0
                used += size
                position += 1
            used += end - position
        else:
            used += cells + (end - begin - len(word))
    spans.append((start, len(text)))
    return spans


def lay_out(item: ProseItem, width: int) -> Laid:
    """Rows and logical lines of one prose item at ``width`` cells (gap line included)."""
    rows: list[Row] = []
    logical: list[str] = []

    def line(text: Content) -> None:
        rows.append(Row(None, text, 0, len(logical)))
        logical.append(text.plain)

    if item.gap is not None:
        line(item.gap)
    indent = cell_len(item.rest.plain)
    if isinstance(item, Prose):
        for number, body in enumerate(item.body.split("\n", allow_blank=True)):
            prefix = item.first if number == 0 else item.rest
            full = prefix + body
            y, skip = len(logical), len(prefix)
            logical.append(full.plain)
            for index, (start, end) in enumerate(wrap_spans(body.plain, width - indent)):
                end = start + len(body.plain[start:end].rstrip(" ")) if end > start else end
                if index == 0:
                    rows.append(Row(None, full if skip + end == len(full) else full[: skip + end], 0, y))
                else:
                    rows.append(Row(item.rest, full[skip + start : skip + end], skip + start, y))
    elif isinstance(item, Table):
        for number, text in enumerate(table_lines(item, width - indent)):
            line((item.first if number == 0 else item.rest) + text)
    elif isinstance(item, Rule):
        line(item.first + Content.styled("─" * max(1, width - indent), TABLE_BORDER))
    return Laid(rows, logical)


# ---- tables ---------------------------------------------------------------------------
def column_widths(minimum: list[int], natural: list[int], space: int) -> list[int]:
    """Fit columns into ``space`` cells: natural widths if they fit, else share what is left.

    Every column first gets its longest word (shrunk, widest first, if even those do not
    fit); the remaining cells go to the columns in proportion to how much more they want.
    """
    if sum(natural) <= space:
        return list(natural)
    widths = [min(m, n, space) for m, n in zip(minimum, natural, strict=True)]
    while sum(widths) > space and max(widths) > 1:
        widest = widths.index(max(widths))
        widths[widest] -= 1
    spare = space - sum(widths)
    wants = [max(0, n - w) for n, w in zip(natural, widths, strict=True)]
    total = sum(wants)
    if spare > 0 and total:
        shares = [spare * want // total for want in wants]
        for index in sorted(range(len(wants)), key=lambda i: -(spare * wants[i] % total))[: spare - sum(shares)]:
            shares[index] += 1
        widths = [w + s for w, s in zip(widths, shares, strict=True)]
    return widths


def _cell_lines(cell: Content, width: int) -> list[Content]:
    lines: list[Content] = []
    for part in cell.split("\n", allow_blank=True):
        for start, end in wrap_spans(part.plain, width):
            lines.append(part[start : start + len(part.plain[start:end].rstrip(" "))])
    return lines or [Content("")]


def _aligned(text: Content, width: int, align: str) -> Content:
    space = max(0, width - text.cell_length)
    if align == "right":
        return Content(" " * space) + text
    if align == "center":
        return Content(" " * (space // 2)) + text + " " * (space - space // 2)
    return text + " " * space


def table_lines(table: Table, width: int) -> list[Content]:
    """Box-drawn table in at most ``width`` cells where possible; cells wrap, nothing is cut."""
    columns = len(table.header)
    if not columns:
        return []
    every = (table.header, *table.rows)
    natural = [
        max(max((cell_len(line) for line in row[c].plain.split("\n")), default=0) for row in every)
        for c in range(columns)
    ]
    minimum = [
        max(max((cell_len(w) for w in row[c].plain.split()), default=0) for row in every) for c in range(columns)
    ]
    space = max(columns, width - (3 * columns + 1))
    widths = column_widths([max(1, m) for m in minimum], [max(1, n) for n in natural], space)

    def border(left: str, middle: str, right: str) -> Content:
        return Content.styled(left + middle.join("─" * (w + 2) for w in widths) + right, TABLE_BORDER)

    bar = Content.styled("│", TABLE_BORDER)
    out = [border("┌", "┬", "┐")]
    laid = [[_cell_lines(row[c], widths[c]) for c in range(columns)] for row in every]
    multi = any(len(cell) > 1 for row in laid for cell in row)
    for number, cells in enumerate(laid):
        if number == 1 or (number > 1 and multi):
            out.append(border("├", "┼", "┤"))
        for index in range(max(len(cell) for cell in cells)):
            parts: list[Content | str] = [bar]
            for c, cell in enumerate(cells):
                text = cell[index] if index < len(cell) else Content("")
                if number == 0:
                    text = text.stylize_before(TABLE_HEADER)
                parts += [" ", _aligned(text, widths[c], table.aligns[c]), " ", bar]
            out.append(Content.assemble(*parts))
    out.append(border("└", "┴", "┘"))
    return out
