"""The diff view driven by keys and clicks, on a changeset parsed from a real git repository."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.filter import DimFilter, Monochrome
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import OptionList, TextArea

from polypilot_tui.domain.changeset import Changeset, FileDiff, FileStatus, ReviewComment, Side, review_prompt
from polypilot_tui.ui.screens.diff_view import DiffViewScreen, diff_title
from polypilot_tui.ui.screens.review_comment import ReviewCommentScreen
from polypilot_tui.ui.widgets.diff_highlight import clean, highlight_line, highlight_runs, lexer_for
from polypilot_tui.ui.widgets.diff_lines import FRESH_LINES, SCREENFULS_KEPT, WARM_PAGES, DiffLines
from polypilot_tui.ui.widgets.diff_rows import RowKind, layout
from polypilot_tui.workspace.diff_parse import parse_diff
from tests.support.diff_app import DiffHostApp, sample_repo
from tests.support.heap import tracked_in

SIZE = (120, 40)


@pytest.fixture
def changes(tmp_path: Path) -> Changeset:
    return sample_repo(tmp_path / "repo")[1]


def diff_lines(app: DiffHostApp) -> DiffLines:
    return app.diff_screen.query_one(DiffLines)


def row_of(lines: DiffLines, text: str) -> int:
    """The first row whose drawn text contains ``text``."""
    for i in range(len(lines.rows)):
        if text in lines.row_text(i):
            return i
    raise AssertionError(f"no row shows {text!r}")


async def test_n_and_p_move_between_files_and_the_list_follows(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        files = app.diff_screen.query_one("#diff-files", OptionList)
        assert lines.cursor == 0 and [f.path for f in changes.files][0] == "docs/README.md"
        await pilot.press("n", "n")
        await pilot.pause()
        assert lines.cursor == lines.file_rows[2] and files.highlighted == 2
        assert "old.txt" in lines.row_text(lines.cursor)
        await pilot.press("down", "p")  # inside a file, p goes to that file's header first
        assert lines.cursor == lines.file_rows[2]
        await pilot.press("p")
        assert lines.cursor == lines.file_rows[1]
        await pilot.press("end", "n")  # past the last file, n stays on it
        assert lines.cursor == lines.file_rows[-1]


async def test_choosing_a_file_in_the_list_jumps_to_it(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        app.diff_screen.query_one("#diff-files", OptionList).focus()
        await pilot.press("down", "down", "down", "enter")
        await pilot.pause()
        lines = diff_lines(app)
        assert lines.has_focus and lines.cursor == lines.file_rows[3]
        assert "src/app.py" in lines.row_text(lines.cursor)


async def test_split_pairs_removed_and_added_lines_and_keeps_the_cursor(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        lines.cursor = row_of(lines, "+ It does many things.")
        await pilot.press("s")
        await pilot.pause()
        assert lines.split
        row = lines.row_text(lines.cursor)  # still on the changed line, now paired
        left, right = row.split("│")
        assert "5 - It does things." in left and "5 + It does many things." in right
        assert cell_len(row) == lines.scrollable_content_region.width
        await pilot.press("s")
        assert not lines.split and "+ It does many things." in lines.row_text(lines.cursor)


async def test_every_row_is_as_wide_as_it_says_at_any_width(changes: Changeset) -> None:
    """Line rows are packed from their segments without a Strip measuring them: the width each
    row claims is the width its pieces make, in both modes, down to a split row too narrow
    for its two halves and the bar between them."""
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        for split in (False, True):
            lines.split = split
            await pilot.pause()
            kinds = {row.kind for row in lines.rows}
            assert {RowKind.FILE, RowKind.HUNK, RowKind.LINE} <= kinds
            for width in (*range(1, 30), lines.scrollable_content_region.width):
                for index in range(len(lines.rows)):
                    strip = lines.row_strip(index, width)
                    assert strip.cell_length == width
                    assert sum(cell_len(segment.text) for segment in strip) == width, (split, width, index)


async def test_split_cuts_long_lines_with_an_ellipsis(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=(90, 30)) as pilot:
        lines = diff_lines(app)
        await pilot.press("s")
        row = lines.row_text(row_of(lines, "print(greet(sys"))
        assert row.endswith("…") and "world" not in row.split("│")[1]


async def test_comment_edit_delete_and_send(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        lines.cursor = row_of(lines, "+ import sys")
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ReviewCommentScreen)
        await pilot.press(*"why sys?", "ctrl+s")
        await pilot.pause()
        screen = app.diff_screen
        assert screen.comments == (ReviewComment("src/app.py", 2, "why sys?", Side.NEW, quote=("import sys",)),)
        assert lines.row_text(lines.cursor).startswith("●")
        assert "│ why sys?" in lines.row_text(lines.cursor + 1)
        assert "1 comment" in str(screen.query_one("#diff-title").render())

        lines.cursor += 1  # on the comment itself
        await pilot.press("e")
        await pilot.pause()
        assert app.screen.query_one(TextArea).text == "why sys?"
        await pilot.press(*" Use argparse.", "ctrl+s")
        await pilot.pause()
        assert screen.comments[0].text == "why sys? Use argparse."

        lines.cursor = row_of(lines, "@@ -1,10 +1,11 @@")  # a hunk header: the whole hunk
        await pilot.press("c", *"tidy", "ctrl+s")
        await pilot.pause()
        hunk_comment = screen.comments[1]
        assert (hunk_comment.line, hunk_comment.end_line, hunk_comment.side) == (1, 11, Side.NEW)
        assert hunk_comment.quote[:2] == ("import os", "import sys")

        lines.cursor = row_of(lines, "- obsolete")  # a removed line counts in the old file
        await pilot.press("c", *"keep it", "ctrl+s")
        await pilot.pause()
        assert screen.comments[2].where == "old.txt:1 (a removed line)"

        lines.cursor = row_of(lines, "│ keep it")
        await pilot.press("x")
        await pilot.pause()
        assert len(screen.comments) == 2
        assert not any("keep it" in lines.row_text(i) for i in range(len(lines.rows)))

        await pilot.press("R")
        await pilot.pause()
    [result] = app.results
    assert result.send and len(result.comments) == 2
    prompt = review_prompt(result.comments)
    assert "src/app.py:1-11" in prompt and "src/app.py:2\n   > import sys\n   why sys? Use argparse." in prompt


async def test_escape_in_the_composer_keeps_nothing_and_escape_closes_unsent(changes: Changeset) -> None:
    earlier = ReviewComment("old.txt", 2, "earlier remark", Side.OLD)
    app = DiffHostApp(changes, comments=(earlier,))
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        assert "│ earlier remark" in lines.row_text(row_of(lines, "- file") + 1)  # shown under its line
        lines.cursor = row_of(lines, "+ import sys")
        await pilot.press("c", *"draft", "escape")
        await pilot.pause()
        assert isinstance(app.screen, DiffViewScreen) and app.screen.comments == (earlier,)
        await pilot.press("R")  # with a comment, R sends; here we close instead
        await pilot.pause()
    assert app.results[0].send and app.results[0].comments == (earlier,)

    app = DiffHostApp(changes, comments=(earlier,))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape")
        await pilot.pause()
    assert [(r.send, r.comments) for r in app.results] == [(False, (earlier,))]


async def test_send_without_comments_stays_and_comment_needs_a_line(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")  # the cursor is on a file header: nothing to comment on
        await pilot.press("R")
        await pilot.pause()
        assert isinstance(app.screen, DiffViewScreen) and app.results == []


async def test_hostile_text_is_drawn_verbatim(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        width = lines.scrollable_content_region.width
        for split in (False, True):
            lines.split = split
            await pilot.pause()
            shown = [lines.row_text(i) for i in range(len(lines.rows))]
            text = "\n".join(shown)
            for expected in (
                "<b>x</b>",
                "[bold]y[/]",
                "+ red",
                "🎉 party 🎉",
                "漢字かな混じり",
                "+     indented    cells",
            ):
                assert expected in text, (split, expected)
            assert "\x1b" not in text and "\t" not in text
            assert all(cell_len(row) == width for row in shown)  # wide characters keep the columns


async def test_click_moves_the_cursor(changes: Changeset) -> None:
    app = DiffHostApp(changes)
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        await pilot.click(DiffLines, offset=(10, 4))
        assert lines.cursor == 4


async def test_empty_changeset_says_so() -> None:
    app = DiffHostApp(Changeset("main"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.diff_screen
        assert str(screen.query_one("#diff-empty").render()) == "No changes against main."
        assert not screen.query_one("#diff-body").display
        await pilot.press("n", "s", "c", "x")  # nothing to move to or comment on: no crash


def test_title_names_session_branch_base_and_stats(changes: Changeset) -> None:
    title = diff_title("refactor", "polypilot/refactor", changes)
    assert title == f"Changes of refactor · polypilot/refactor vs {changes.base[:12]} · 5 files +11 −6"
    assert diff_title("s", "", Changeset("HEAD")) == "Changes of s · vs HEAD · 0 files +0 −0"


def test_layout_marks_binary_and_omitted_files_and_places_stale_comments() -> None:
    changes = Changeset(
        "HEAD",
        (
            FileDiff("img.png", FileStatus.ADDED, binary=True),
            FileDiff("big.sql", FileStatus.MODIFIED, 9, 9, omitted="too large to show (40,000 lines)"),
        ),
    )
    stale = ReviewComment("big.sql", 7, "gone?")
    rows = layout(changes, (stale,), split=False).rows
    assert [(row.kind, row.text) for row in rows] == [
        (RowKind.FILE, ""),
        (RowKind.INFO, "binary file: no lines to show"),
        (RowKind.FILE, ""),
        (RowKind.INFO, "too large to show (40,000 lines)"),
        (RowKind.COMMENT, "(no longer in the diff) gone?"),
    ]


async def test_split_puts_each_comment_under_its_own_column(changes: Changeset) -> None:
    old = ReviewComment("docs/README.md", 5, "the old wording was clearer", Side.OLD)
    new = ReviewComment("docs/README.md", 5, "say which things", Side.NEW)
    context = ReviewComment("docs/README.md", 3, "a context line's comment", Side.NEW)
    app = DiffHostApp(changes, comments=(old, new, context))
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        await pilot.press("s")
        await pilot.pause()
        width = lines.scrollable_content_region.width
        middle = (width - 1) // 2  # the column of the bar between the halves
        paired = lines.row_text(row_of(lines, "+ It does many things."))
        left, right = paired.split("│", 1)
        assert left.startswith("●") and right.startswith("●")  # each side marks its own comment
        for comment, column in ((new, "right"), (context, "right"), (old, "left")):
            row = lines.row_text(row_of(lines, comment.text))
            at = row.index("│ " + comment.text)
            assert (at > middle) == (column == "right"), (comment.text, at, middle, row)
        await pilot.press("s")  # unified: every comment under the one column
        await pilot.pause()
        starts = {lines.row_text(row_of(lines, c.text)).index("│ " + c.text) for c in (old, new, context)}
        assert len(starts) == 1


def big_changeset(lines: int = 400) -> Changeset:
    """One Python file with every line changed: ``2 * lines`` diff lines, parsed as git prints them."""
    removed = "".join(f"-value_{i} = compute({i}, 'old')\n" for i in range(lines))
    added = "".join(f"+value_{i} = compute({i}, 'new', cache=True)  # {'x' * (i % 7)}\n" for i in range(lines))
    text = (
        "diff --git a/big.py b/big.py\nindex 1111111..2222222 100644\n--- a/big.py\n+++ b/big.py\n"
        f"@@ -1,{lines} +1,{lines} @@\n{removed}{added}"
    )
    return parse_diff(text, "main")


async def drawn_ahead(pilot: Pilot[None], lines: DiffLines) -> None:
    """Wait (boundedly) until the idle steps have drawn what they draw ahead."""
    async with asyncio.timeout(10):
        while lines.warming:
            await pilot.pause(0.01)


async def test_a_frame_draws_few_fresh_rows_in_full_and_the_rest_are_coloured_next() -> None:
    """A jump (or a held key) reaches rows not drawn ahead: the frame highlights FRESH_LINES
    lines of them (a split row of this diff has two: half as many rows) and shows the rest
    uncoloured (the same characters), coloured in the next idle steps; the screenfuls below
    the view are drawn ahead meanwhile."""
    app = DiffHostApp(big_changeset())
    async with app.run_test(size=SIZE) as pilot:
        for split in (False, True):
            lines = diff_lines(app)
            lines.split = split
            await pilot.pause()
            await drawn_ahead(pilot, lines)
            height = lines.scrollable_content_region.height
            lines.jump_to_file(0)
            lines.cursor = len(lines.rows) // 2  # far from anything drawn ahead
            lines.scroll_to_cursor(top=True)
            top = lines.scroll_offset.y
            before = lines.drawn
            shown = [lines.render_line(y) for y in range(height)]  # one frame, no idle step between
            fresh = FRESH_LINES // 2 if split else FRESH_LINES  # every split row here has both sides
            assert lines.drawn - before == fresh
            await drawn_ahead(pilot, lines)
            # The idle steps drew every row on screen in full, and the screenfuls below the view.
            before = lines.drawn
            final = [lines.render_line(y) for y in range(height)]
            ahead = range(top + height, min(len(lines.rows), top + (1 + WARM_PAGES) * height))
            assert [lines.row_text(i) for i in ahead] and lines.drawn == before
            assert [strip.text for strip in shown] == [strip.text for strip in final]  # the same characters
            assert shown[:fresh] == final[:fresh] and shown[fresh] != final[fresh]  # now coloured


def test_rows_made_when_read_are_the_rows_a_commented_file_gets() -> None:
    """A file without comments keeps its line rows as runs made when read; a file with a
    comment has each row made while laying out. Both give the same rows, in both modes:
    context, changes in blocks of unequal sides, and git's "no newline" notes."""
    text = (
        "diff --git a/m.py b/m.py\nindex 1111111..2222222 100644\n--- a/m.py\n+++ b/m.py\n"
        "@@ -1,7 +1,8 @@\n a = 1\n-b = 2\n-c = 3\n-d = 4\n+b = 20\n e = 5\n+f = 6\n+g = 7\n-h = 8\n+h = 80\n"
        "-i = 9\n\\ No newline at end of file\n+i = 90\n+j = 10\n\\ No newline at end of file\n"
        "@@ -20,2 +21,2 @@\n-x = 1\n+x = 2\n y = 3\n"
    )
    changes = parse_diff(text, "main")
    nowhere = ReviewComment("m.py", 999, "stale", Side.NEW)  # puts m.py on the commented path
    for split in (False, True):
        lazy = list(layout(changes, (), split=split).rows)
        made = [row for row in layout(changes, (nowhere,), split=split).rows if row.kind is not RowKind.COMMENT]
        assert lazy == made and len(lazy) > 10
        rows = layout(changes, (), split=split).rows
        assert rows[-1] == lazy[-1] and rows[1:4] == lazy[1:4]
        with pytest.raises(IndexError):
            rows[len(lazy)]


async def test_the_screenfuls_drawn_ahead_follow_the_way_the_cursor_goes() -> None:
    app = DiffHostApp(big_changeset())
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        await pilot.press("end")
        await drawn_ahead(pilot, lines)
        await pilot.press("pageup")  # now going up: the screenfuls above are drawn next
        await drawn_ahead(pilot, lines)
        top, height = lines.scroll_offset.y, lines.scrollable_content_region.height
        before = lines.drawn
        assert [lines.row_text(i) for i in range(max(0, top - WARM_PAGES * height), top)]
        assert lines.drawn == before


def test_a_line_kept_highlighted_is_what_the_highlighter_made_and_the_collector_skips_it() -> None:
    """The view keeps a thousand highlighted lines: kept as Content and Spans they were ~9
    objects a line that every full garbage collection walked (most of a scroll's pauses);
    kept as plain tuples, the young collections (two: a line lives longer) stop tracking them.
    Nothing is lost on the way: the same text (tabs expanded, wide characters, hostile text)
    cut in the same styled pieces (a line without tabs is cut from the lexer's tokens directly)."""
    lexer = lexer_for("src/app.py")
    texts = [
        "value = compute(1, 'new', cache=True)  # a note",
        "\tif x:\treturn [y]",
        "漢字 = '🎉'",
        "[b]x[/b]",
        "",
        "@decorator(r'\\d+', b'\\x00')  # escapes, bytes, a decorator",
        '    return f"{a!r:>{width}}" if a else None',
        '"""a docstring that goes on',
    ]
    kept = [highlight_runs(clean(text), lexer) for text in texts]
    gc.collect(0)
    gc.collect(1)
    assert not [body for body in kept if gc.is_tracked(body)]
    for text, body in zip(texts, kept, strict=True):
        content = highlight_line(clean(text), lexer)
        assert isinstance(body, tuple) and body[0] == content.plain
        styled = [
            (start, end, style) for start, end, style in zip((0, *body[1][:-1]), body[1], body[2], strict=True) if style
        ]
        assert styled == [(span.start, span.end, span.style) for span in content.spans]
        assert body[1][-1] == len(content.plain)  # every character in a piece
    assert len(kept[0][2]) > 5  # coloured: names, numbers, strings, the comment


async def moved_and_drawn_ahead(pilot: Pilot[None], lines: DiffLines, cursor: int) -> tuple[int, int, range]:
    """Move the cursor to ``cursor`` and wait until the rows ahead are drawn: the view's top
    row, its height, and the rows drawn ahead below it."""
    await pilot.pause()
    lines.cursor = cursor
    await pilot.pause()
    await drawn_ahead(pilot, lines)
    top, height = lines.scroll_offset.y, lines.scrollable_content_region.height
    return top, height, range(top + height, top + (1 + WARM_PAGES) * height)


async def test_the_rows_kept_drawn_follow_the_height_so_a_tall_view_keeps_what_it_draws_ahead() -> None:
    """Rows are kept drawn for SCREENFULS_KEPT screenfuls of the view's height, set again at
    each resize: few on a small terminal (each kept row is objects the garbage collector
    walks), and on a tall one still every row drawn ahead (a fixed 400 dropped the first
    rows drawn ahead while it drew the last, and the warm drew them again and again)."""
    app = DiffHostApp(big_changeset(lines=700))
    async with app.run_test(size=(100, 30)) as pilot:
        lines = diff_lines(app)
        for size in ((100, 30), (100, 210)):
            await pilot.resize_terminal(*size)
            top, height, below = await moved_and_drawn_ahead(pilot, lines, 50)  # drawn ahead at this size
            assert lines.strips_kept == SCREENFULS_KEPT * height
            before = lines.drawn
            ahead = [lines.row_text(i) for i in below]
            assert len(ahead) == WARM_PAGES * height and lines.drawn == before
        assert len(ahead) > 400


async def test_rows_kept_drawn_are_nothing_the_collector_walks_and_textual_gets_strips_of_its_own() -> None:
    """The view keeps SCREENFULS_KEPT screenfuls of rows drawn: kept as strips they were ~30
    objects a row that every full garbage collection walked while the user scrolled; kept as
    plain strings and numbers, only the strips on screen are left. Each frame gets a strip of
    its own, as kept (what Textual derives from a strip stays inside it and dies with it)."""
    app = DiffHostApp(big_changeset())
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        for split in (False, True):
            lines.split = split
            cursor = 3 * lines.scrollable_content_region.height  # screenfuls drawn above and below
            top, height, below = await moved_and_drawn_ahead(pilot, lines, cursor)
            width = lines.scrollable_content_region.width
            kept = [*range(max(0, top - height), top), *below]
            before = lines.drawn
            off_screen = {lines.row_text(i) for i in kept}  # drawn ahead, not on screen
            assert len(off_screen) == len(kept) > 2 * height and lines.drawn == before  # all kept
            for y in range(height):
                shown, again = lines.render_line(y), lines.row_strip(top + y, width)
                assert shown == again and shown.cell_length == again.cell_length == width
                assert shown is not again
            del shown, again
            gc.collect()
            assert not [o for o in gc.get_objects() if isinstance(o, Strip) and o.text in off_screen]


async def test_what_falls_due_during_a_frame_runs_before_the_drawing_ahead_it_asked_for() -> None:
    """A frame asks for rows to be drawn ahead; that drawing (a step of ~4 ms) starts only after
    what fell due meanwhile (a key, a timer, the loop's other work) has run, never back to back
    with the frame: the two together were a held key's longest pauses."""
    app = DiffHostApp(big_changeset())
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        for split in (False, True):
            lines.split = split
            await pilot.pause()
            await drawn_ahead(pilot, lines)
            seen: list[tuple[int, int]] = []
            done = asyncio.get_running_loop().create_future()

            def due(at_frame: int, seen: list[tuple[int, int]] = seen, done: asyncio.Future[None] = done) -> None:
                seen.append((at_frame, lines.drawn))
                done.set_result(None)

            def frame_drawn() -> None:
                asyncio.get_running_loop().call_later(0, due, lines.drawn)  # due now

            before = lines.drawn
            lines.cursor = len(lines.rows) // 2  # far from what was drawn ahead: the frame asks for more
            lines.call_after_refresh(frame_drawn)
            await asyncio.wait_for(done, 10)
            await drawn_ahead(pilot, lines)
            [(at_frame, when_due)] = seen
            # the frame that jumped drew its rows (every split row here has two lines)
            assert at_frame - before == (FRESH_LINES // 2 if split else FRESH_LINES)
            assert when_due == at_frame < lines.drawn  # nothing drawn ahead before it; drawn after


def test_a_laid_out_diff_is_nothing_the_collector_walks() -> None:
    """A layout lives as long as the view: its rows are made when read, and the pairs of a
    split view are kept as line numbers, so it tracks as many objects for 2,000 lines as for 20."""
    for split in (False, True):
        small, big = (layout(big_changeset(lines), (), split=split) for lines in (10, 1000))
        assert [row.left for row in big.rows if row.kind is RowKind.LINE][-1] is not None  # every row read
        assert len(list(small.rows)) > 10
        assert tracked_in(big) == tracked_in(small)


def textual_lines(lines: DiffLines, crop: Region) -> list[Strip]:
    """The view's lines as Textual's own line rendering makes them from ``render_line``."""
    lines.refresh()  # what Textual kept of its own rendering is drawn again
    return Widget.render_lines(lines, crop)


def assert_same_lines(lines: DiffLines, crop: Region) -> None:
    ours, textual = lines.render_lines(crop), textual_lines(lines, crop)
    assert [list(strip) for strip in ours] == [list(strip) for strip in textual]
    assert [strip.cell_length for strip in ours] == [strip.cell_length for strip in textual]


async def test_the_lines_handed_to_textual_are_what_its_own_line_rendering_makes(
    changes: Changeset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view finishes the rows on screen itself (padded to the content's width, each style
    through Textual's line filters once): the same segments as Textual's own rendering of the
    view's ``render_line``, in both modes, on the cursor and off it, focused or not, cropped,
    past the last row, with the rows a jump leaves uncoloured, and through more filters."""
    comments = (ReviewComment("src/app.py", 5, "why?", Side.NEW), ReviewComment("old.txt", 1, "gone", Side.OLD))
    app = DiffHostApp(changes, comments=comments)
    async with app.run_test(size=(120, 60)) as pilot:
        lines = diff_lines(app)
        for split in (False, True):
            lines.split = split
            await pilot.pause()
            whole = lines.region.reset_offset
            assert lines.virtual_size.height < whole.height  # rows past the last one, blank
            lines.cursor = row_of(lines, "import sys")
            await pilot.pause()
            assert_same_lines(lines, whole)
            before = lines.render_lines(whole)
            lines.cursor += 1  # a frame remakes the two rows the cursor left and reached, no other
            after = lines.render_lines(whole)
            top = lines.scroll_offset.y
            remade = [top + y for y, (old, new) in enumerate(zip(before, after, strict=True)) if old is not new]
            assert remade == [lines.cursor - 1, lines.cursor]
            assert_same_lines(lines, whole)
            assert_same_lines(lines, Region(3, 2, 40, 5))
            monkeypatch.setattr(lines, "get_line_filters", lambda: [*app.get_line_filters(), Monochrome(), DimFilter()])
            assert_same_lines(lines, whole)
            monkeypatch.undo()
            app.diff_screen.query_one("#diff-files", OptionList).focus()
            await pilot.pause()
            assert_same_lines(lines, whole)
            lines.focus()
    app = DiffHostApp(big_changeset())
    async with app.run_test(size=SIZE) as pilot:
        lines = diff_lines(app)
        for split in (False, True):
            lines.split = split
            await pilot.pause()
            await drawn_ahead(pilot, lines)
            lines.cursor = len(lines.rows) // 2  # far from anything drawn ahead
            whole = lines.region.reset_offset
            shown = lines.render_lines(whole)
            assert_same_lines(lines, whole)  # rows drawn uncoloured, the same way
            await drawn_ahead(pilot, lines)
            assert [list(strip) for strip in lines.render_lines(whole)] != [list(strip) for strip in shown]
            assert_same_lines(lines, whole)  # now coloured
