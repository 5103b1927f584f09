"""A diff line's text for the terminal: control characters out, tabs expanded, syntax colours.

Lines are lexed one at a time (a multi-line string loses its colour past its first line):
that keeps the cost of a frame to the lines on screen, whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePath
from typing import Any

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound
from textual.content import Content, Span
from textual.highlight import HighlightTheme

from polypilot_tui.domain.text import strip_control

TAB_SIZE = 4
_lexers: dict[str, Lexer | None] = {}


def lexer_for(path: str) -> Lexer | None:
    """Pygments' lexer for a file name, cached by suffix (None when it knows none)."""
    suffix = PurePath(path).suffix.lower() or PurePath(path).name
    if suffix not in _lexers:
        try:
            _lexers[suffix] = get_lexer_for_filename(path, stripnl=False, ensurenl=False, tabsize=0)
        except ClassNotFound:
            _lexers[suffix] = None
    return _lexers[suffix]


def clean(text: str) -> str:
    """A line as it may reach the terminal: no control characters, still one line."""
    return strip_control(text).replace("\n", " ")


_token_styles: dict[Any, str] = {}


def _token_style(token_type: Any) -> str:
    """The theme's style for a token: its own, else its nearest parent's (cached: ~20 per line)."""
    style = _token_styles.get(token_type)
    if style is None:
        style = ""
        for kind in reversed(token_type.split()):
            if found := HighlightTheme.STYLES.get(kind):
                style = found
                break
        _token_styles[token_type] = style
    return style


def _styled_spans(text: str, lexer: Lexer) -> list[tuple[int, int, str]] | None:
    """The styled runs of ``text`` as ``lexer`` reads it (start, end, style), a run of tokens of
    one style as one (fewer segments); None when the lexer's tokens are not the text."""
    spans: list[tuple[int, int, str]] = []
    position = 0
    for _, token_type, value in lexer.get_tokens_unprocessed(text):
        end = position + len(value)
        style = _token_style(token_type)
        if style:
            if spans and spans[-1][1] == position and spans[-1][2] == style:
                spans[-1] = (spans[-1][0], end, style)
            else:
                spans.append((position, end, style))
        position = end
    return spans if position == len(text) else None


def highlight_line(text: str, lexer: Lexer | None) -> Content:
    """One line coloured by ``lexer`` (the same characters, or plain when the lexer disagrees)."""
    spans = _styled_spans(text, lexer) if lexer is not None and text else None
    if spans is None:
        return Content(text).expand_tabs(TAB_SIZE)
    return Content(text, spans=[Span(*span) for span in spans]).expand_tabs(TAB_SIZE)


Highlighted = tuple[str, tuple[int, ...], tuple[str, ...]] | Content
"""A line ready to draw, kept compact: its text cut in pieces, where each piece ends and its
style ("" for none); or, when its spans are not such pieces, the Content (drawn the general
way). Plain tuples of numbers and strings: the garbage collector stops tracking them in its
young passes, before they grow old (a kept Content and its Spans, ~9 objects a line, were
walked by every full pass: most of a scrolled diff view's pauses)."""


def highlight_runs(text: str, lexer: Lexer | None) -> Highlighted:
    """:func:`highlight_line`, kept compact (see :data:`Highlighted`).

    A line without tabs is cut straight from the lexer's runs: no Content, Spans and tab
    expansion made to be taken apart at once (about a third of a line's highlighting, on the
    rows drawn ahead while the user pages through)."""
    if lexer is None or not text or "\t" in text:
        content = highlight_line(text, lexer)
        pieces = _pieces(len(content.plain), ((span.start, span.end, span.style) for span in content.spans))
        return content if pieces is None else (content.plain, *pieces)
    spans = _styled_spans(text, lexer)
    pieces = _pieces(len(text), spans or ())
    return (text, (len(text),), ("",)) if pieces is None else (text, *pieces)


def _pieces(length: int, spans: Iterable[tuple[int, int, object]]) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    """Where each piece of a line of ``length`` ends and its style ("" for none), from ``spans``
    in order; None when they are not such pieces (they overlap, or a style is not a name)."""
    ends: list[int] = []
    styles: list[str] = []
    position = 0
    for start, end, style in spans:
        if start >= end:
            continue
        if start < position or not isinstance(style, str) or not style:
            return None
        if start > position:
            ends.append(start)
            styles.append("")
        ends.append(end)
        styles.append(style)
        position = end
    if position < length or not ends:
        ends.append(length)
        styles.append("")
    return tuple(ends), tuple(styles)
