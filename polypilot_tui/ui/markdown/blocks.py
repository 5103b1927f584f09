"""A reply's markdown as a flat list of items: prose lines, tables, rules and code blocks.

markdown-it (the parser Rich uses) runs with HTML *off*, so ``List<String>``, ``<br>`` and
``<div>x</div>`` are plain text instead of tags a renderer would drop; reference
definitions are off too, so ``[ref]: url`` stays visible. Nothing else is dropped: table
cells past the header's count (which GFM ignores) are kept, unknown tokens show their text,
and a top-level block whose letters and digits did not all make it into the items (deep
nesting past markdown-it's limit) is shown as its source text (``verbatim.py``).

Nesting (lists, quotes) is flattened into prefixes: an item knows what its first line
starts with (``"• "``) and what its other lines start with (``"  "``). Code blocks are
their own items (``Code``) because they are drawn by a widget that scrolls sideways; a code
block inside a list keeps its indent. Every item records ``top``, the index of the
top-level block it came from: a streaming reply re-parses only its last top-level block.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.cells import cell_len
from textual.content import Content

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.ui.markdown.inline import inline_content
from polypilot_tui.ui.markdown.styles import BULLET_STYLE, HEADING_STYLE, HEADING_STYLES, QUOTE_STYLE
from polypilot_tui.ui.markdown.verbatim import kept

_MD = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    .enable(["table", "strikethrough"])
    .disable("reference")
)

BULLETS = ("• ", "◦ ", "▪ ")
QUOTE = "▌ "
EMPTY = Content("")
"""Shared by the many items with no prefix (fewer objects for the garbage collector to walk)."""


@dataclass(frozen=True, eq=False, slots=True)
class Prose:
    """Text whose first logical line starts with ``first`` and the others with ``rest``."""

    body: Content
    """May hold newlines: each is a logical line (soft breaks are kept as the agent wrote them)."""
    first: Content
    rest: Content
    gap: Content | None
    """A blank line drawn above the item, showing this prefix (``None``: no blank line)."""
    top: int


@dataclass(frozen=True, eq=False, slots=True)
class Table:
    """A GFM table; laid out (wrapped, never cut) at draw time."""

    header: tuple[Content, ...]
    rows: tuple[tuple[Content, ...], ...]
    aligns: tuple[str, ...]
    first: Content
    rest: Content
    gap: Content | None
    top: int


@dataclass(frozen=True, eq=False, slots=True)
class Rule:
    """A thematic break (``---``)."""

    first: Content
    rest: Content
    gap: Content | None
    top: int


@dataclass(frozen=True, eq=False, slots=True)
class Code:
    """A fenced or indented code block, drawn by its own scrolling widget."""

    code: str
    """The block's text without its final newline: what "copy" puts on the clipboard."""
    lang: str
    """The info string's first word, for syntax colouring."""
    info: str
    """The whole info string, shown in the block's header."""
    indent: int
    """Cells of list/quote indentation the block sits under."""
    gap: bool
    top: int


Item = Prose | Table | Rule | Code
ProseItem = Prose | Table | Rule


@dataclass(frozen=True, slots=True)
class Parsed:
    items: list[Item]
    tops: list[int]
    """Source line where each top-level block starts."""


def parse(source: str, *, continued: bool = False) -> Parsed:
    """Split ``source`` (already sanitised) into items.

    ``continued``: the source follows earlier blocks (a streaming reply's tail), so its
    first item gets the blank line that separates blocks.
    """
    walker = _Walker(_MD.parse(source), source)
    if continued:
        walker.continued, walker.last_top = True, -1
    return walker.run()


def item_size(item: Item) -> int:
    """Roughly how many characters an item draws (to bound one prose widget's work)."""
    if isinstance(item, Prose):
        return len(item.body) + 1
    if isinstance(item, Table):
        return sum(len(cell) for row in (item.header, *item.rows) for cell in row) + 1
    if isinstance(item, Code):
        return len(item.code) + 1
    return 1


def item_text(item: Item) -> str:
    """The text an item draws (prefixes and borders aside), to check nothing was lost."""
    if isinstance(item, Prose):
        return item.body.plain
    if isinstance(item, Table):
        return " ".join(cell.plain for row in (item.header, *item.rows) for cell in row)
    if isinstance(item, Code):
        return f"{item.info} {item.code}"
    return ""


def group(items: Sequence[Item], cap: int) -> Iterator[list[Item]]:
    """Runs of prose items (a new run past ``cap`` characters, at a top-level boundary); each code item alone."""
    run: list[Item] = []
    size = 0
    for item in items:
        if isinstance(item, Code):
            if run:
                yield run
            run, size = [], 0
            yield [item]
            continue
        if run and size >= cap and item.top != run[-1].top:
            yield run
            run, size = [], 0
        run.append(item)
        size += item_size(item)
    if run:
        yield run


class _Box:
    """One level of nesting: a list item or a quote."""

    __slots__ = ("first", "rest", "pending", "tight", "fresh")

    def __init__(self, first: Content, rest: Content, pending: bool, tight: bool | None) -> None:
        self.first, self.rest, self.pending, self.tight = first, rest, pending, tight
        self.fresh = True
        """Nothing drawn inside it yet: a blank line above its first item does not show its prefix."""


class _List:
    """An open list: the next item's number (-1 for bullets) and whether it is tight."""

    __slots__ = ("number", "tight")

    def __init__(self, number: int, tight: bool) -> None:
        self.number, self.tight = number, tight


class _Walker:
    def __init__(self, tokens: list[Token], source: str) -> None:
        self.tokens = tokens
        self.source = source
        self.boxes: list[_Box] = []
        self.lists: list[_List] = []
        self.lines: list[str] | None = None
        """The source's lines, split only if a table needs them."""
        self.items: list[Item] = []
        self.tops: list[int] = []
        self.last_top: int | None = None
        self.continued = False

    @property
    def top(self) -> int:
        return len(self.tops) - 1

    def run(self) -> Parsed:
        tokens, index = self.tokens, 0
        while index < len(tokens):
            token = tokens[index]
            if token.level == 0 and token.nesting >= 0 and token.map is not None:
                self.tops.append(token.map[0])
            index = self.visit(index, token)
        return Parsed(self.checked(), self.tops)

    def checked(self) -> list[Item]:
        """The items, except that a block whose letters were not all drawn becomes its source text."""
        drawn: dict[int, list[Item]] = {}
        for item in self.items:
            drawn.setdefault(item.top, []).append(item)
        if self.lines is None:
            self.lines = self.source.split("\n")
        items: list[Item] = []
        for top, start in enumerate(self.tops):
            end = self.tops[top + 1] if top + 1 < len(self.tops) else len(self.lines)
            source = "\n".join(self.lines[start:end]).strip("\n")
            block = drawn.get(top, [])
            if kept(source, " ".join(map(item_text, block))):
                items.extend(block)
            else:
                gap = EMPTY if top or self.continued else None
                items.append(Prose(Content(source).expand_tabs(4), EMPTY, EMPTY, gap, top))
        return items

    def visit(self, index: int, token: Token) -> int:
        """Handle the token at ``index``; return the index of the next one to visit."""
        kind = token.type
        if kind in ("paragraph_open", "heading_open"):
            body = inline_content(self.tokens[index + 1])
            if kind == "heading_open":
                body = body.stylize_before(HEADING_STYLES.get(token.tag, HEADING_STYLE))
            self.emit_prose(body)
            return index + 3
        if kind in ("bullet_list_open", "ordered_list_open"):
            start = int(token.attrs.get("start", 1) or 1) if kind == "ordered_list_open" else -1
            self.lists.append(_List(start, self._tight(index)))
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.lists.pop()
        elif kind == "list_item_open":
            current = self.lists[-1]
            if current.number < 0:
                bullet = BULLETS[(len(self.lists) - 1) % len(BULLETS)]
            else:
                bullet = f"{current.number}. "
                current.number += 1
            self.boxes.append(
                _Box(Content.styled(bullet, BULLET_STYLE), Content(" " * len(bullet)), True, current.tight)
            )
        elif kind == "list_item_close":
            if self.boxes[-1].pending:  # an empty item still shows its bullet
                self.emit_prose(Content(""))
            self.boxes.pop()
        elif kind == "blockquote_open":
            bar = Content.styled(QUOTE, QUOTE_STYLE)
            self.boxes.append(_Box(bar, bar, False, None))
        elif kind == "blockquote_close":
            self.boxes.pop()
        elif kind in ("fence", "code_block"):
            self.emit_code(token)
        elif kind == "hr":
            gap, (first, rest) = self._gap(), self._prefixes()
            self._add(Rule(first, rest, gap, self.top))
        elif kind == "table_open":
            return self.emit_table(index)
        elif token.nesting == 0 and token.content:  # html_block if ever enabled, or anything new
            self.emit_prose(Content(token.content.rstrip("\n")))
        return index + 1

    # ---- emitting -------------------------------------------------------------------
    def emit_prose(self, body: Content) -> None:
        gap, (first, rest) = self._gap(), self._prefixes()
        self._add(Prose(body.expand_tabs(4), first, rest, gap, self.top))

    def emit_code(self, token: Token) -> None:
        gap = self._gap()
        if any(box.pending for box in self.boxes):  # "- ```": the bullet gets a line of its own
            first, rest = self._prefixes()
            self._add(Prose(Content(""), first, rest, gap, self.top))
            gap = None
        indent = cell_len("".join(box.rest.plain for box in self.boxes))
        code = token.content[:-1] if token.content.endswith("\n") else token.content
        info = token.info.strip()
        self._add(Code(code, info.split()[0] if info else "", info, indent, gap is not None, self.top))

    def emit_table(self, index: int) -> int:
        tokens = self.tokens
        header: list[Content] = []
        aligns: list[str] = []
        rows: list[list[Content]] = []
        row: list[Content] = []
        row_map: list[int] | None = None
        index += 1
        while tokens[index].type != "table_close":
            token = tokens[index]
            if token.type == "tr_open":
                row, row_map = [], token.map
            elif token.type in ("th_open", "td_open"):
                row.append(inline_content(tokens[index + 1]))
                if token.type == "th_open":
                    aligns.append(_align(str(token.attrs.get("style", ""))))
                index += 1
            elif token.type == "tr_close":
                row += self._extra_cells(row_map, len(aligns))
                if header:
                    rows.append(row)
                else:
                    header = row
            index += 1
        width = max([len(header), *map(len, rows)])
        header += [Content("")] * (width - len(header))
        aligns += ["left"] * (width - len(aligns))
        gap, (first, rest) = self._gap(), self._prefixes()
        body = tuple(tuple(r + [Content("")] * (width - len(r))) for r in rows)
        self._add(Table(tuple(header), body, tuple(aligns), first, rest, gap, self.top))
        return index + 1

    def _extra_cells(self, row_map: list[int] | None, columns: int) -> list[Content]:
        """Cells past the header's count, which GFM ignores: kept as plain text."""
        if row_map is None or not columns:
            return []
        if self.lines is None:
            self.lines = self.source.split("\n")
        line = self.lines[row_map[0]] if row_map[0] < len(self.lines) else ""
        cells = re.split(r"(?<!\\)\|", line.strip().removeprefix("|").removesuffix("|"))
        return [Content(cell.strip()) for cell in cells[columns:]]

    def _add(self, item: Item) -> None:
        self.items.append(item)
        self.last_top = self.top

    def _gap(self) -> Content | None:
        if self.last_top is None:
            return None
        list_boxes = [box for box in self.boxes if box.tight is not None]
        if self.last_top == self.top and list_boxes and list_boxes[-1].tight:
            return None
        if not self.boxes:
            return EMPTY
        return Content.assemble(*(box.rest for box in self.boxes if not box.fresh)).rstrip()

    def _prefixes(self) -> tuple[Content, Content]:
        if not self.boxes:
            return EMPTY, EMPTY
        first = Content.assemble(*(box.first if box.pending else box.rest for box in self.boxes))
        for box in self.boxes:
            box.pending = box.fresh = False
        return first, Content.assemble(*(box.rest for box in self.boxes))

    def _tight(self, index: int) -> bool:
        """markdown-it hides the paragraphs of a tight list; look at its first one."""
        level = self.tokens[index].level
        for token in self.tokens[index + 1 :]:
            if token.level == level and token.nesting < 0:
                break
            if token.type == "paragraph_open" and token.level == level + 2:
                return token.hidden
        return True


def _align(style: str) -> str:
    match = re.search(r"text-align:\s*(left|center|right)", style)
    return match.group(1) if match else "left"
