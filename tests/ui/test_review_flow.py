"""From the dashboard: a session's changes in its worktree, a comment, the review sent to
its agent (the demo agent answers with what it got). Real git, real app."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import TextArea

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.ui.screens.diff_view import DiffViewScreen
from polypilot_tui.ui.screens.review_comment import ReviewCommentScreen
from polypilot_tui.ui.widgets.diff_lines import DiffLines
from polypilot_tui.workspace.worktrees import create_worktree, inspect_folder
from tests.ui.helpers import demo_app, engine_of, notifications, session_added, wait_for
from tests.workspace.repos import IDENTITY, make_repo


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)


async def test_review_a_worktree_and_send_the_comments_to_the_agent(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"app.py": "def greet():\n    return 'hi'\n"})
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/greet", "", tmp_path / "wt")
    app = demo_app(tmp_path / "state", speed=50)
    async with app.run_test(size=(130, 40), notifications=True) as pilot:
        sid = await session_added(pilot, "demo", name="greet", workspace=tree)
        app.select(sid)
        Path(tree.folder, "app.py").write_text("def greet(name):\n    return f'hi {name}'\n")
        Path(tree.folder, "notes.md").write_text("# Notes\n")
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen), what="the diff view")
        screen = app.screen
        lines = screen.query_one(DiffLines)
        assert [f.path for f in screen.changes.files] == ["app.py", "notes.md"]
        row = next(i for i in range(len(lines.rows)) if "return f'hi {name}'" in lines.row_text(i))
        lines.cursor = row
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewCommentScreen), what="the comment composer")
        app.screen.query_one(TextArea).insert("Say hello, not hi.")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is screen, what="back in the diff")
        await pilot.press("R")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffViewScreen), what="the review sent")
        # Looked for now: the toast lasts 4 s of real time, the agent's turn may take longer on a loaded machine.
        await wait_for(pilot, lambda: any("Review sent" in n for n in notifications(app)), what="the toast")
        await wait_for(pilot, lambda: engine_of(app).manager.view(sid).turns == 1, timeout=20, what="the agent's turn")
        prompt = [i.text for i in engine_of(app).manager.history(sid) if i.kind is ItemKind.USER][-1]
        assert prompt.startswith("Review of your changes: 1 comment.")
        assert "1. app.py:2\n   >     return f'hi {name}'\n   Say hello, not hi." in prompt
        # app.py: both lines changed (+2 −2); notes.md is new (+1)
        await wait_for(
            pilot, lambda: engine_of(app).manager.view(sid).changes == ChangeStats(2, 3, 2), what="the count"
        )


async def test_comments_not_sent_wait_for_the_next_look(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/later", "", tmp_path / "wt")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(130, 40)) as pilot:
        sid = await session_added(pilot, "demo", name="later", workspace=tree)
        app.select(sid)
        Path(tree.folder, "README.md").write_text("hello\nmore\n")
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen), what="the diff view")
        lines = app.screen.query_one(DiffLines)
        lines.cursor = next(i for i in range(len(lines.rows)) if "more" in lines.row_text(i))
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewCommentScreen))
        app.screen.query_one(TextArea).insert("Why more?")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffViewScreen))
        assert not [i for i in engine_of(app).manager.history(sid) if i.kind is ItemKind.USER]  # nothing sent
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen))
        assert [c.text for c in app.screen.comments] == ["Why more?"]
        Path(tree.folder, "later.txt").write_text("new\n")  # the agent goes on working
        await pilot.press("r")
        screen = app.screen
        await wait_for(
            pilot, lambda: [f.path for f in screen.changes.files] == ["README.md", "later.txt"], what="the re-read"
        )
        assert [c.text for c in screen.comments] == ["Why more?"]  # comments survive a refresh


async def test_a_session_outside_git_has_no_changes_to_show(tmp_path: Path) -> None:
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(130, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected is not None)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: any("does not work in a git repository" in n for n in notifications(app)))
        assert not isinstance(app.screen, DiffViewScreen)
