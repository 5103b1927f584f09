"""The diff view, Finish and ctrl+n in a dashboard attached to an engine service (the default
path): every git call and folder listing is the engine's, answered over its socket. Real git,
a real ``polypilot serve`` process, the dashboard driven by keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input, TextArea

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.workspace import Isolation
from polypilot_tui.engine import verbs
from polypilot_tui.ui.screens.confirm import ConfirmScreen
from polypilot_tui.ui.screens.diff_view import DiffViewScreen
from polypilot_tui.ui.screens.finish import FinishScreen
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.screens.review_comment import ReviewCommentScreen
from polypilot_tui.ui.widgets.diff_lines import DiffLines
from tests.support.engine_service import attached_dashboard, running_engine
from tests.ui.helpers import notifications, wait_for, widget_lines
from tests.workspace.repos import IDENTITY, make_repo, run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SIZE = (140, 44)


@pytest.fixture
def demo_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The engine (started by the test) commits as the test identity and streams the demo fast."""
    for name, value in {**IDENTITY, "POLYPILOT_DEMO_SPEED": "20", "POLYPILOT_RECORD": "false"}.items():
        monkeypatch.setenv(name, value)
    yield


async def test_review_then_finish_a_worktree_through_the_engine(tmp_path: Path, demo_env: None) -> None:
    repo = make_repo(tmp_path / "repo", files={"app.py": "def greet():\n    return 'hi'\n"})
    async with running_engine() as engine:
        request = verbs.NewSession("demo", "greet", str(repo), Isolation.WORKTREE)
        sid = await engine.client.call(verbs.NEW_SESSION, request)
        workspace = (await engine.client.call(verbs.SESSION_VIEW, verbs.SessionRef(sid))).workspace
        assert workspace is not None and workspace.owned
        folder = Path(workspace.folder)
        (folder / "app.py").write_text("def greet(name):\n    return f'hi {name}'\n")
        (folder / "notes.md").write_text("# Notes\n")
        app = attached_dashboard(engine.state)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await wait_for(pilot, lambda: app.selected == sid, what="the session on screen")
            await pilot.press("ctrl+o")
            await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen), what="the diff view")
            screen = app.screen
            assert isinstance(screen, DiffViewScreen)
            assert [f.path for f in screen.changes.files] == ["app.py", "notes.md"] and screen.changes.base == "main"
            lines = screen.query_one(DiffLines)
            lines.cursor = next(i for i in range(len(lines.rows)) if "return f'hi {name}'" in lines.row_text(i))
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, ReviewCommentScreen), what="the comment composer")
            app.screen.query_one(TextArea).insert("Say hello.")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.screen is screen, what="back in the diff")
            await pilot.press("R")
            await wait_for(pilot, lambda: any("Review sent" in n for n in notifications(app)), what="the review")
            await wait_for(pilot, lambda: app.engine.view(sid).turns == 1, timeout=30, what="the agent's turn")
            prompts = [i.text for i in app.engine.history(sid) if i.kind is ItemKind.USER]
            assert "1. app.py:2\n   >     return f'hi {name}'\n   Say hello." in prompts[-1]

            await pilot.press("f5")
            await wait_for(pilot, lambda: isinstance(app.screen, FinishScreen), what="the finish dialog")
            finish = app.screen
            assert isinstance(finish, FinishScreen)
            message = finish.query_one("#commit-message", TextArea)
            await wait_for(pilot, lambda: message.text and finish.state is not None, what="state and draft")
            assert finish.state is not None and finish.state.uncommitted == 2
            message.load_text("Greet by name")
            await pilot.click("#commit")
            await wait_for(pilot, lambda: "Committed" in str(finish.query_one("#finish-result").render()))
            assert run(folder, "log", "-1", "--format=%s") == "Greet by name"
            await pilot.click("#merge")
            await wait_for(pilot, lambda: "merged into main" in str(finish.query_one("#finish-result").render()))
            assert run(repo, "log", "-1", "--format=%s", "main") == "Greet by name"
            await wait_for(pilot, lambda: finish.state is not None and finish.state.merged, what="merged")
            await pilot.click("#discard")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="discard asks")
            await pilot.press("y")  # merged: nothing at risk, so it asks once
            await wait_for(pilot, lambda: finish.discarded, what="the worktree removed")
            assert not folder.exists()
            await pilot.press("escape")
            await wait_for(pilot, lambda: "is gone" in app.engine.view(sid).workspace_problem, what="said gone")
            await pilot.press("ctrl+q")


async def test_ctrl_n_lists_the_engines_folders_and_the_engine_makes_the_worktree(
    tmp_path: Path, demo_env: None
) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "repo-notes").mkdir()
    async with running_engine() as engine:
        app = attached_dashboard(engine.state)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.selected is not None, what="the first session")
            app.dashboard.new_session.launch_folder = str(tmp_path)
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the dialog")
            screen = app.screen
            assert isinstance(screen, NewSessionScreen)
            folder = screen.query_one("#folder", Input)
            folder.focus()
            folder.value = ""
            await pilot.press(*"rep")  # relative to the launch folder; completed by the engine's listing
            await wait_for(pilot, lambda: "repo/" in "".join(widget_lines(folder)), what="the suggestion shown")
            await pilot.press("right")
            assert folder.value == "repo/"
            await wait_for(pilot, lambda: screen.folder_info is not None and screen.folder_info.is_git)
            await pilot.click("#worktree")
            name = screen.query_one("#name", Input)
            name.value = "Attached"
            name.focus()
            await pilot.press("enter")  # Enter creates from every field
            await wait_for(pilot, lambda: len(app.engine.ids()) == 2, what="the new session")
            sid = app.engine.ids()[-1]
            workspace = app.engine.view(sid).workspace
            assert workspace is not None and workspace.branch == "polypilot/attached"
            assert workspace.repo == str(repo) and Path(workspace.folder).is_relative_to(engine.state / "worktrees")
            assert str(Path(workspace.folder)) in run(repo, "worktree", "list")
            await pilot.press("ctrl+q")
