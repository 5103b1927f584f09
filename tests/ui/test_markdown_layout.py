"""Prose and table layout: lines fit the width, and every character is still there."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.content import Content

from polypilot_tui.ui.markdown.blocks import Code, Table, parse
from polypilot_tui.ui.markdown.layout import column_widths, lay_out, table_lines, wrap_spans
from polypilot_tui.ui.markdown.verbatim import kept

TEXT = st.text(alphabet=st.sampled_from("ab <>/x漢字😀   \t-"), max_size=200)


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(2, 60))
def test_wrap_spans_cover_the_text_and_fit_the_width(text: str, width: int) -> None:
    spans = wrap_spans(text, width)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))  # contiguous: nothing dropped
    assert all(cell_len(text[start:end].rstrip(" ")) <= width for start, end in spans)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(TEXT.map(lambda t: t.replace("\n", " ")), min_size=3, max_size=3), min_size=2, max_size=5),
    st.integers(30, 100),
)
def test_table_lines_keep_every_cell_and_share_one_width(rows: list[list[str]], width: int) -> None:
    table = Table(
        tuple(Content(c) for c in rows[0]),
        tuple(tuple(Content(c) for c in r) for r in rows[1:]),
        ("left", "center", "right"),
        Content(""),
        Content(""),
        None,
        0,
    )
    lines = [line.plain for line in table_lines(table, width)]
    assert len({cell_len(line) for line in lines}) == 1 and cell_len(lines[0]) <= max(width, 3 * 3 + 1 + 3)
    flat = "".join(lines).replace(" ", "")
    for cell in (c for row in rows for c in row):
        for word in cell.split():
            assert word.replace(" ", "") in flat or all(ch in flat for ch in word)


def test_columns_share_the_width_by_what_they_want() -> None:
    assert column_widths([3, 5], [10, 20], 40) == [10, 20]  # everything fits
    widths = column_widths([3, 5], [10, 80], 40)
    assert sum(widths) == 40 and widths[0] >= 3 and widths[1] > widths[0]
    assert sum(column_widths([30, 30], [30, 30], 20)) <= 20  # even the longest words shrink to fit


def test_a_wrapped_list_item_keeps_its_indent_and_one_logical_line() -> None:
    [item] = parse("- " + "word " * 20).items
    laid = lay_out(item, 30)
    texts = [((row.indent.plain if row.indent else "") + row.text.plain) for row in laid.rows]
    assert texts[0].startswith("• word") and all(t.startswith("  word") for t in texts[1:])
    assert laid.logical == ["• " + ("word " * 20).strip()]


SYNTAX = st.lists(
    st.sampled_from(
        [
            "a",
            "b7",
            "Z",
            "漢",
            " ",
            "\n",
            "\n\n",
            ">",
            "- ",
            "* ",
            "1. ",
            "#",
            "`",
            "```",
            "~~",
            "**",
            "_",
            "|",
            "---",
            "[",
            "](",
            ")",
            "!",
            "<",
            ">",
            "&amp;",
            "&#65;",
            "\\",
            "    ",
            ":",
            "<div>",
            "http://x.y/%20z",
        ]
    ),
    max_size=60,
).map("".join)


def drawn_text(source: str, width: int = 50) -> str:
    """Everything the parsed and laid-out reply shows: prose as logical lines, code as code."""
    out = []
    for item in parse(source).items:
        if isinstance(item, Code):
            out.append(f"{item.info} {item.code}")
        else:
            out.extend(lay_out(item, width).logical)
    return "\n".join(out)


@settings(max_examples=400, deadline=None)
@given(SYNTAX)
def test_every_letter_and_digit_the_agent_wrote_is_drawn(source: str) -> None:
    assert kept(source, drawn_text(source))


def test_text_nested_past_the_parser_limit_is_shown_as_written() -> None:
    deep_quote = ">" * 60 + " deep quote"
    deep_list = "- " * 60 + "deep list"
    assert deep_quote in drawn_text(deep_quote, 200)
    assert deep_list.strip() in drawn_text(deep_list, 200)
    assert kept("x" + "**" * 60 + "y", drawn_text("x" + "**" * 60 + "y"))
