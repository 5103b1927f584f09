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
    hunk = Hunk(10, 2, 10, 3, "def main():", (DiffLine(LineKind.CONTEXT, "x", 10, 10),))
    assert hunk.header == "@@ -10,2 +10,3 @@ def main():"


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
