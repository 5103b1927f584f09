"""Hostile agent text in the chat pane: what is on screen is what the agent wrote.

Each test mounts the real widget in a small app and reads the composed screen (what a
terminal would show), not the widget's source text.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.ui.formatting import safe_text
from polypilot_tui.ui.widgets.assistant_message import AssistantMessage
from polypilot_tui.ui.widgets.code_block import CodeBlock, highlight
from polypilot_tui.ui.widgets.prompt_editor import PromptEditor
from polypilot_tui.ui.widgets.prose_view import ProseRun, ProseView
from polypilot_tui.ui.widgets.reasoning_block import ReasoningBlock
from tests.snapshots.fakes import Driver, build_app
from tests.ui.helpers import screen_lines, terminal_writes, toasts, widget_lines


class OneWidget(App[None]):
    """A scrolling pane holding the widgets under test."""

    def __init__(self, *widgets: Widget) -> None:
        super().__init__()
        self.widgets = widgets

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield from self.widgets


async def shown(text: str, size: tuple[int, int] = (80, 40)) -> list[str]:
    """The screen rows an AssistantMessage of ``text`` occupies."""
    message = AssistantMessage(text)
    app = OneWidget(message)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        return widget_lines(message)


def joined(lines: list[str]) -> str:
    return "\n".join(line.rstrip() for line in lines)


async def test_angle_brackets_and_inline_html_are_shown_verbatim() -> None:
    screen = joined(await shown("Use List<String> and <br> here."))
    assert "Use List<String> and <br> here." in screen


async def test_block_html_is_shown_as_text() -> None:
    screen = await shown("<div>x</div>\n\n<details><summary>more</summary>\n\nbody\n</details>")
    assert [line.strip() for line in screen if line.strip()] == [
        "<div>x</div>",
        "<details><summary>more</summary>",
        "body",
        "</details>",
    ]


async def test_html_in_a_table_cell_is_shown_verbatim() -> None:
    screen = joined(await shown("| a | b |\n|---|---|\n| <b>two</b> | <i>x</i> |"))
    assert "<b>two</b>" in screen and "<i>x</i>" in screen


async def test_a_long_table_cell_wraps_and_keeps_its_last_word() -> None:
    # Long words (paths, identifiers, URLs) are what a renderer is tempted to cut with "…".
    cell = "the change is in " + "src/polypilot_tui/ui/widgets/" * 3 + "LASTWORD.py and nowhere else"
    screen = await shown(f"| key | value |\n|---|---|\n| k | {cell} |", size=(60, 40))
    table = [line.rstrip() for line in screen if line.strip()]
    flat = "".join(line.replace("│", "").replace(" ", "") for line in table)
    assert cell.replace(" ", "") in flat and "…" not in joined(table)  # all of it, in order
    assert len(table) > 5  # the row took several lines
    assert len({cell_len(line) for line in table}) == 1  # and every line of the table is as wide


async def test_wide_characters_and_emoji_stay_aligned_in_a_table() -> None:
    screen = await shown("| name | icon |\n|---|---|\n| 漢字テーブル | 😀🎉 |\n| ascii | x |")
    table = [line.rstrip() for line in screen if line.strip()]
    assert any("漢字テーブル" in line for line in table) and any("😀🎉" in line for line in table)
    # Every row ends at the same column, and the column bar sits at the same cell in each.
    assert len({cell_len(line) for line in table}) == 1
    bars = {cell_len(line[: line.index(bar, 1)]) for line in table for bar in "│┬┼┴" if bar in line[1:]}
    assert len(bars) == 1


async def test_a_long_code_line_scrolls_sideways_instead_of_wrapping() -> None:
    line = "x = '" + "y" * 290 + "END'"
    message = AssistantMessage(f"```python\n{line}\nprint(x)\n```")
    app = OneWidget(message)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        code = message.query_one(CodeBlock)
        screen = widget_lines(code)
        assert code.virtual_size.width == len(line) > code.size.width
        assert code.max_scroll_x > 0
        assert sum("yyyy" in row for row in screen) == 1  # one screen row: not wrapped
        assert any(row.strip() == "print(x)" for row in screen)
        assert "END" not in joined(screen)
        code.scroll_to(x=code.max_scroll_x, animate=False)
        await pilot.pause()
        assert "END'" in joined(widget_lines(code))


async def test_markup_is_shown_literally() -> None:
    screen = joined(await shown("Say [bold]literal[/bold] and [red]x[/] and [@click=app.quit]q[/]"))
    assert "Say [bold]literal[/bold] and [red]x[/] and [@click=app.quit]q[/]" in screen


async def test_escape_and_osc_sequences_are_stripped() -> None:
    text = "a\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07link\x1b]8;;\x07 \x1b]0;title\x07b\x07c"
    screen = joined(await shown(text))
    assert "ared link bc" in screen
    assert "\x1b" not in screen and "evil" not in screen and "title" not in screen


async def test_links_show_their_address_and_are_not_clickable() -> None:
    message = AssistantMessage("See [the docs](https://example.com/docs).")
    app = OneWidget(message)
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        assert "See the docs (https://example.com/docs)." in joined(widget_lines(message))
        strips = message.render_lines(message.region.reset_offset)  # prose alone: drawn by the message
        assert not any(
            seg.style and (seg.style.link or "@click" in seg.style.meta) for strip in strips for seg in strip
        )


async def test_nothing_is_dropped_from_lists_quotes_and_references() -> None:
    text = (
        "1. first <T>\n2. second\n   ```sh\n   make <target>\n   ```\n3. third\n\n"
        "> quoted <q>\n\n[ref]: http://example.com\n\n- [ ] task\n\n| a | b |\n|---|---|\n| 1 | 2 | 3 |"
    )
    screen = joined(await shown(text))
    for piece in (
        "1. first <T>",
        "2. second",
        "make <target>",
        "3. third",
        "▌ quoted <q>",
        "[ref]: http://example.com",
        "• [ ] task",
        "│ 3 │",
    ):
        assert piece in screen, piece


async def test_text_nested_deeper_than_the_parser_goes_is_still_shown() -> None:
    screen = joined(await shown(">" * 30 + " deep quote\n\n" + "- " * 30 + "deep list", size=(120, 20)))
    assert "deep quote" in screen and "deep list" in screen


def test_code_blocks_lists_every_code_block_in_order() -> None:
    text = "```py\nfirst()\n```\n\ntext\n\n    indented()\n\n- item\n\n  ```\n  nested()\n  ```\n"
    assert AssistantMessage(text).code_blocks == ["first()", "indented()", "nested()"]


def test_a_code_block_is_coloured_for_its_language_and_keeps_its_text() -> None:
    code = "def f(x):\n    return x  # [bold]not markup[/bold]\n"
    coloured = highlight(code, "python")
    assert coloured.plain == code
    assert coloured.spans  # the keyword, the name, the comment…
    assert highlight(code, "no-such-language").spans == []


PROSE_ONLY = textwrap.dedent(
    """
    import asyncio, sys
    from textual.app import App
    from polypilot_tui.ui.widgets.assistant_message import AssistantMessage

    REPLY = "Some **prose**, a list:\\n\\n- one\\n- `two`\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n"

    class One(App):
        def compose(self):
            yield AssistantMessage(REPLY)

    async def draw():
        async with One().run_test() as pilot:
            await pilot.pause()
            strips = pilot.app.screen._compositor.render_strips()  # as tests/ui/helpers.py reads the screen
            print(" ".join(" ".join(strip.text for strip in strips).split()))

    asyncio.run(draw())
    print(sorted({m.split(".")[0] for m in sys.modules} & {"pygments"}))
    """
)


def test_a_reply_without_code_is_drawn_without_pygments() -> None:
    """pygments (its lexer tables, ~14 ms) is imported when a first code block is coloured:
    most replies have none, and the dashboard's start draws replies."""
    done = subprocess.run([sys.executable, "-c", PROSE_ONLY], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    drawn, imported = done.stdout.strip().splitlines()[-2:]
    assert "prose" in drawn and "two" in drawn
    assert imported == "[]"


async def test_the_copy_button_copies_the_code_block_and_says_so() -> None:
    code_text = "def f(x):\n    return x  # [bold]not markup[/bold]\n"
    message = AssistantMessage(f"Here:\n\n```python\n{code_text}```\n")
    app = OneWidget(message)
    async with app.run_test(size=(80, 20), notifications=True) as pilot:
        await pilot.pause()
        code = message.query_one(CodeBlock)
        written = terminal_writes(app)
        copy_x = code.content_region.right - code.region.x - 3  # on the " copy " label of the header row
        await pilot.click(code, offset=(copy_x, 0))
        await pilot.pause()
        assert app.clipboard == code_text.rstrip("\n")
        # OSC 52: the terminal (local, or at the end of an SSH connection) sets its clipboard.
        assert f"\x1b]52;c;{base64.b64encode(app.clipboard.encode()).decode()}\a" in written
        assert [n.message for n in toasts(app)] == ["Copied 2 lines of code"]


async def test_text_selected_with_the_mouse_is_copied_with_ctrl_c() -> None:
    text = (
        "A paragraph long enough to wrap across two rows of this narrow pane, about List<String>.\n\n"
        "```\nline one\nline two\n```"
    )
    message = AssistantMessage(text)
    app = OneWidget(message)
    async with app.run_test(size=(50, 20)) as pilot:
        await pilot.pause()
        prose = message.query_one(ProseView)
        code = message.query_one(CodeBlock)
        assert prose.size.height >= 2  # the paragraph wrapped
        await pilot.mouse_down(prose, offset=(0, 0))
        await pilot.hover(code, offset=(1 + len("line"), 2))  # row 0 is the header; into "line two"
        await pilot.mouse_up(code, offset=(1 + len("line"), 2))
        await pilot.press("ctrl+c")
        # The wrapped paragraph comes back as one line: word wrap adds no line breaks.
        assert app.clipboard == (
            "A paragraph long enough to wrap across two rows of this narrow pane, about List<String>.\n\nline one\nline"
        )


async def test_reasoning_is_shown_verbatim_when_unfolded() -> None:
    text = "Think about List<String> and <br>; [bold]not bold[/bold]\x1b[2J done"
    block = ReasoningBlock(ChatItem(ItemKind.REASONING, text, 0.0))
    app = OneWidget(block)
    async with app.run_test(size=(80, 20)) as pilot:
        block.collapsed = False
        await pilot.pause()
        screen = joined(screen_lines(app))
        assert "Think about List<String> and <br>; [bold]not bold[/bold] done" in screen


UNIT = (
    "## Step {i}\n\nSome **bold** text with `code`, List<String> and a [link](http://x/{i}).\n"
    "A second line of the paragraph, and <br> too.\n\n- item one\n- item two\n  1. nested\n\n"
    "| a | b |\n|---|---|\n| {i} | <b>two</b> a longer cell |\n\n> quote {i}\n\n"
)
CODE = "```python\ndef f_{i}(x):\n    return x * {i}\n```\n\n"


def long_reply(size: int) -> str:
    parts: list[str] = []
    i = 0
    while sum(map(len, parts)) < size:
        parts.append(UNIT.format(i=i) + (CODE.format(i=i) if i % 25 == 0 else ""))
        i += 1
    return "".join(parts)


def drawn(message: AssistantMessage) -> str:
    """What each child draws (prose as logical lines at its width, code as its text)."""
    out = []
    for child in message.children:
        if isinstance(child, ProseView):
            out.append(child.visual.text(child.size.width))
        elif isinstance(child, CodeBlock):
            out.append(f"<code {child.lang}>{child.code}</code>")
    return "\n".join(out)


async def test_streaming_a_long_reply_redraws_only_its_last_block() -> None:
    full = long_reply(200_000) + "\x1b[31m"
    streaming = AssistantMessage("")
    app = OneWidget(streaming)
    async with app.run_test(size=(100, 40)) as pilot:
        steps = 0
        for end in range(2000, len(full) + 2000, 2000):
            streaming.stream(full[:end])
            steps += 1
            assert streaming.text == safe_text(full[:end])
            await pilot.pause()
        streaming.show(ChatItem(ItemKind.ASSISTANT, full, 0.0))
        await pilot.pause()
        # Re-parsing everything on each of the ~100 steps would parse ~50x the reply.
        assert steps >= 100 and streaming.parsed_chars < 1.2 * len(full)
        proses = [c for c in streaming.children if isinstance(c, ProseView)]
        layouts, items = sum(p.visual.layouts for p in proses), sum(len(p.items) for p in proses)
        rows_drawn, rows = sum(p.visual.rows_drawn for p in proses), sum(p.size.height for p in proses)
        assert layouts < 3 * items  # each item laid out about once, not once per step
        assert rows_drawn < rows  # only rows on screen were drawn, and not again on every step
        fresh = AssistantMessage(full)
        await app.query_one(VerticalScroll).mount(fresh)
        await pilot.pause()
        assert drawn(streaming) == drawn(fresh)
        assert streaming.code_blocks == fresh.code_blocks and len(fresh.code_blocks) >= 10


async def test_a_reply_of_prose_alone_is_one_widget_that_grows_children_when_needed() -> None:
    message = AssistantMessage("A reply of prose alone, long enough to wrap in this narrow pane: List<String>.")
    app = OneWidget(message)
    async with app.run_test(size=(40, 20)) as pilot:
        await pilot.pause()
        assert not message.children  # drawn by the message itself: opening a session mounts less
        await pilot.mouse_down(message, offset=(0, 0))
        await pilot.hover(message, offset=(12, 2))
        await pilot.mouse_up(message, offset=(12, 2))
        await pilot.press("ctrl+c")
        assert app.clipboard == "A reply of prose alone, long enough to wrap in this narrow pane: List<String>."
        message.show(
            ChatItem(ItemKind.ASSISTANT, "Now with code:\n\n```\nx = 1\n```\n\nand after.", 0.0, interrupted=True)
        )
        await pilot.pause()
        assert [type(c).__name__ for c in message.children] == ["ProseView", "CodeBlock", "ProseView", "Static"]
        assert [" ".join(line.split()) for line in widget_lines(message) if line.strip()] == [
            "Now with code:",
            "code · 1 line copy",
            "x = 1",
            "and after.",
            "(interrupted — the reply was cut short;",
            "what arrived is kept)",
        ]


FRAGMENTS = [
    "Para <b>x</b> List<String>\n",
    "\n",
    "- item\n",
    "  - nested\n",
    "1. one\n",
    "> quote\n",
    "```py\n",
    "code()\n",
    "```\n",
    "| a | b |\n",
    "|---|---|\n",
    "| 1 | 2 | 3 |\n",
    "# head\n",
    "---\n",
    "    indented\n",
    "text `code` *em* [l](http://u)\n",
    "[ref]: http://x\n",
    "<div>\n",
    "\x1b[31m",
    "漢字 😀 ",
    "word " * 30,
]


def pieces(message: AssistantMessage, width: int) -> str:
    """What the message draws, prose and code in order, however the prose is split into widgets."""
    out = []
    for widget in message.pieces:
        out.append(widget.visual.text(width) if isinstance(widget, ProseRun) else f"<code>{widget.code}")
    return "\n".join(out)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=30), st.lists(st.floats(0, 1), max_size=8))
def test_a_reply_streamed_in_any_steps_draws_what_the_whole_reply_draws(parts: list[str], cuts: list[float]) -> None:
    full = "".join(parts)
    streaming = AssistantMessage("")
    for cut in sorted(int(f * len(full)) for f in cuts):
        streaming.stream(full[:cut])
        assert streaming.text == safe_text(full[:cut])
    streaming.show(ChatItem(ItemKind.ASSISTANT, full, 0.0))
    fresh = AssistantMessage(full)
    assert pieces(streaming, 60) == pieces(fresh, 60)
    assert streaming.code_blocks == fresh.code_blocks


async def test_in_the_dashboard_a_drag_over_a_reply_and_ctrl_c_copy_it(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.finished_turn("s1", "hi", "Use List<String> here.\n\n```\nmake <target>\n```")
        await d.settle()
        assert isinstance(app.focused, PromptEditor)  # the prompt has the focus, as when the user types
        reply = app.pane.log_for("s1").query(AssistantMessage).last()
        code = reply.query_one(CodeBlock)
        await pilot.mouse_down(reply, offset=(2 + len("Use "), 0))
        await pilot.hover(code, offset=(1 + len("make <target>"), 1))
        await pilot.mouse_up(code, offset=(1 + len("make <target>"), 1))
        await pilot.press("ctrl+c")
        assert app.clipboard == "List<String> here.\n\nmake <target>"
