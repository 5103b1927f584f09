"""The diff model's own rules: stats, hunk headers, where a comment points, the review prompt."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.changeset import (
    Changeset,
    ChangeStats,
    DiffLine,
    FileDiff,
    FileStatus,
    Hunk,
    HunkLines,
    LineKind,
    ReviewComment,
    Side,
    review_prompt,
)


def test_stats_add_up_every_file() -> None:
    changes = Changeset(
        "abc", (FileDiff("a.py", FileStatus.MODIFIED, 3, 1), FileDiff("b.bin", FileStatus.ADDED, binary=True))
    )
    assert changes.stats == ChangeStats(2, 3, 1)
    assert changes.stats.short() == "2 files +3 \u22121"
    assert ChangeStats(1, 0, 9).short() == "1 file +0 \u22129"
    assert not ChangeStats() and ChangeStats(1)


def test_a_hunk_header_reads_as_git_writes_it() -> None:
    hunk = Hunk(10, 2, 10, 3, "def main():", HunkLines.of([DiffLine(LineKind.CONTEXT, "x", 10, 10)]))
    assert hunk.header == "@@ -10,2 +10,3 @@ def main():"


def test_a_hunks_lines_read_back_as_they_were_given() -> None:
    """A hunk keeps its lines as columns and makes a DiffLine when one is read: the same lines,
    in order, by index from either end, by slice; columns that do not make lines are refused."""
    given = [
        DiffLine(LineKind.CONTEXT, "a = 1", 1, 1),
        DiffLine(LineKind.REMOVED, "b = 2", 2, None),
        DiffLine(LineKind.ADDED, "b = 20", None, 2),
        DiffLine(LineKind.NOTE, "\\ No newline at end of file"),
    ]
    lines = HunkLines.of(given)
    assert list(lines) == given and len(lines) == 4 and DiffLine(LineKind.ADDED, "b = 20", None, 2) in lines
    assert (lines[0], lines[-1], lines[1:3]) == (given[0], given[-1], HunkLines.of(given[1:3]))
    assert lines == HunkLines.of(given) and hash(lines) == hash(HunkLines.of(given))
    assert lines != HunkLines.of(given[:3]) and HunkLines() == HunkLines.of([]) and not HunkLines()
    assert repr(HunkLines.of(given[:1])) == f"HunkLines(({given[0]!r},))"
    with pytest.raises(IndexError):
        lines[4]
    with pytest.raises(ValueError, match="as long as each other"):
        HunkLines("+-", ("a",), (None,), (1,))
    with pytest.raises(ValueError, match="a line's kind"):
        HunkLines("?", ("a",), (1,), (1,))
    with pytest.raises(AttributeError, match="read-only"):  # a frozen Hunk is hashed by them
        lines.texts = ("x",) * 4
    assert lines == HunkLines.of(given)


def test_the_review_prompt_orders_comments_and_names_every_place() -> None:
    comments = [
        ReviewComment("b.py", 7, "Name this better.", quote=("x = 1",)),
        ReviewComment("a.py", 40, "Why was this removed?", side=Side.OLD, quote=("check()",)),
        ReviewComment(
            "a.py", 3, "Split this function.\nIt does two things.", end_line=9, quote=tuple(f"l{i}" for i in range(9))
        ),
    ]
    prompt = review_prompt(comments)
    assert prompt.startswith("Review of your changes: 3 comments.")
    assert prompt.index("a.py:3-9") < prompt.index("a.py:40 (a removed line)") < prompt.index("b.py:7")
    assert "   > l5\n   > … (3 more lines)" in prompt and "   It does two things." in prompt
    assert "   > x = 1\n   Name this better." in prompt
    with pytest.raises(ValueError):
        review_prompt([])
