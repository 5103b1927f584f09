"""Tool rows: every status reads differently, and the whole output can be unfolded."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.ui.widgets.tool_call_row import EXPANDED_HEAD, EXPANDED_TAIL, TOOL_STATES, ToolCallRow
from tests.ui.helpers import widget_lines

STATUSES = ("running", "waiting", "completed", "failed", "rejected", "interrupted", "cancelled")


def tool(output: str, status: str = "completed") -> ChatItem:
    return ChatItem(
        ItemKind.TOOL, output, 0.0, tool_call_id="c1", tool_name="bash", tool_status=status, tool_detail="make test"
    )


class Rows(App[None]):
    def __init__(self, *rows: ToolCallRow) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield from self.rows


def test_every_status_has_its_own_glyph_and_word() -> None:
    glyphs = {status: TOOL_STATES[status][0] for status in STATUSES}
    assert len(set(glyphs.values())) == len(STATUSES)
    assert TOOL_STATES["waiting"] == ("?", "waiting for permission")


async def test_a_waiting_row_does_not_read_as_running() -> None:
    waiting, running = ToolCallRow(tool("", "waiting")), ToolCallRow(tool("", "running"))
    app = Rows(waiting, running)
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        assert widget_lines(waiting)[0].startswith("? bash  make test  waiting for permission")
        assert widget_lines(running)[0].startswith("◐ bash  make test  running")
        assert waiting.has_class("-waiting") and not waiting.has_class("-running")
        waiting.show(tool("done", "rejected"))
        assert waiting.has_class("-rejected") and not waiting.has_class("-waiting")


async def test_unfolding_a_tool_row_shows_its_whole_output() -> None:
    lines = [f"line {n} <b>[bold]x[/bold]</b>" for n in range(1, 30)]
    lines.append("a long line " + "word " * 100 + "END")
    row = ToolCallRow(tool("\n".join(lines)))
    app = Rows(row)
    async with app.run_test(size=(80, 60)) as pilot:
        await pilot.pause()
        folded = widget_lines(row)
        assert folded[1].strip() == "line 1 <b>[bold]x[/bold]</b>"
        assert folded[5].strip() == "▸ 26 more lines — show all"
        await pilot.click(row, offset=(3, 5))
        await pilot.pause()
        assert row.expanded
        shown = "\n".join(line.rstrip() for line in widget_lines(row))
        for line in lines[:-1]:
            assert f"\n{line}\n" in shown
        assert " ".join(shown.split("a long line ", 1)[1].split()).startswith("word " * 100 + "END")
        assert shown.endswith("▾ show less")
        row.show(tool("\n".join(lines), "failed"))  # a newer version keeps it unfolded
        await pilot.pause()
        assert row.expanded and "line 17" in "\n".join(widget_lines(row))


async def test_a_huge_output_unfolds_to_its_head_and_tail_with_a_note() -> None:
    output = "\n".join(f"out {n}" for n in range(1, 2001))
    row = ToolCallRow(tool(output))
    app = Rows(row)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        row.action_toggle_output()
        await pilot.pause()
        text = str(row.visual).split("\n")
        hidden = 2000 - EXPANDED_HEAD - EXPANDED_TAIL
        assert text[1 : EXPANDED_HEAD + 1] == [f"out {n}" for n in range(1, EXPANDED_HEAD + 1)]
        assert text[EXPANDED_HEAD + 1].startswith(f"··· {hidden:,} more lines not shown")
        assert text[EXPANDED_HEAD + 2 : -1] == [f"out {n}" for n in range(2001 - EXPANDED_TAIL, 2001)]
        assert row.size.height >= len(text)  # all of it drawn (long lines wrap)


def test_a_folded_row_offers_whole_lines_when_a_line_was_cut() -> None:
    row = ToolCallRow(tool("x" * 300))
    text = str(row.visual).split("\n")
    assert text[1].endswith("…") and text[2] == "▸ show whole lines"
    row.action_toggle_output()
    assert str(row.visual).split("\n")[1] == "x" * 300
