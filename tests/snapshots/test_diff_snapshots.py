"""Snapshots of the diff view: unified, split, a 60-column terminal, and the comment composer.

The changeset comes from a real git repository with fixed dates; its base is renamed to
``main`` so the title does not depend on a commit id. Review with ``rsvg-convert`` first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import TextArea

from polypilot_tui.domain.changeset import ReviewComment, Side
from polypilot_tui.ui.widgets.diff_lines import DiffLines
from tests.support.diff_app import DiffHostApp, sample_repo

COMMENT = ReviewComment("src/app.py", 5, "Keep the old name too:\ncallers outside this repo use it.", Side.NEW)


@dataclass(frozen=True)
class Case:
    size: tuple[int, int]
    press: tuple[str, ...] = ()
    cursor_on: str = "+ import sys"
    """The cursor goes to the first row showing this text."""


CASES = {
    "diff_unified": Case((120, 36)),
    "diff_split": Case((120, 36), press=("s",)),
    "diff_narrow": Case((60, 30)),
    "diff_comment_composer": Case((100, 30), press=("c", *"Why sys here?", "enter", *"argparse?")),
}


def run_before_for(case: Case) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.pause()
        app = pilot.app
        assert isinstance(app, DiffHostApp)
        lines = app.diff_screen.query_one(DiffLines)
        lines.cursor = next(i for i in range(len(lines.rows)) if case.cursor_on in lines.row_text(i))
        await pilot.press(*case.press)
        await pilot.pause()
        for area in app.screen.query(TextArea):
            area.cursor_blink = False
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("name", list(CASES))
def test_diff_snapshot(name: str, snap_compare: Any, tmp_path: Path) -> None:
    case = CASES[name]
    changes = replace(sample_repo(tmp_path / "repo")[1], base="main")
    app = DiffHostApp(changes, comments=(COMMENT,))
    assert snap_compare(app, terminal_size=case.size, run_before=run_before_for(case))
