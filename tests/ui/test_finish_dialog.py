"""The Finish dialog on real worktrees: commit, merge, a conflict, push, discard that asks twice."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Checkbox, Static, TextArea

from polypilot_tui.domain.changeset import ReviewComment, Side, review_prompt
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.engine import verbs
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.screens.confirm import ConfirmScreen
from polypilot_tui.ui.screens.finish import FinishScreen
from polypilot_tui.workspace.worktrees import create_worktree, inspect_folder
from tests.ui.helpers import demo_app, engine_of, notifications, session_added, wait_for
from tests.workspace.repos import IDENTITY, commit, make_repo, run

REAL_WHICH = shutil.which


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)


async def worktree(tmp_path: Path, repo: Path, branch: str = "polypilot/fix") -> Workspace:
    return await create_worktree(await inspect_folder(str(repo)), branch, "main", tmp_path / "worktrees")


async def open_finish(
    pilot: Pilot[Any], app: PolypilotApp, workspace: Workspace | None, *, sid: str | None = None
) -> FinishScreen:
    """A session on ``workspace`` (or the session ``sid``), selected, with the Finish dialog
    open (F5) and looked at."""
    await wait_for(pilot, lambda: app.selected == "s1")
    if sid is None:
        sid = await session_added(pilot, "demo", name="fix", workspace=workspace)
    else:
        workspace = engine_of(app).manager.session(sid).workspace
    app.select(sid)
    await app.dashboard.flush()  # F5 applies to the session on screen, as last drawn
    await pilot.press("f5")
    await wait_for(pilot, lambda: isinstance(app.screen, FinishScreen), what="the finish dialog")
    screen = app.screen
    assert isinstance(screen, FinishScreen)
    if workspace is not None and workspace.owned:
        await wait_for(pilot, lambda: screen.query_one("#commit-message", TextArea).text, what="the draft message")
    return screen


def result(screen: FinishScreen) -> str:
    return str(screen.query_one("#finish-result", Static).render())


async def press(pilot: Pilot[Any], screen: FinishScreen, button: str) -> None:
    await pilot.click(f"#{button}")
    await wait_for(pilot, lambda: not screen.busy and result(screen), what=f"{button} to end")


async def test_commit_then_merge_fast_forward_into_main(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    ws = await worktree(tmp_path, repo)
    (Path(ws.folder) / "login.py").write_text("fixed = True\n")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_finish(pilot, app, ws)
        assert "1 uncommitted file" in str(screen.query_one("#finish-state", Static).render())
        message = screen.query_one("#commit-message", TextArea)
        assert "login.py" in message.text
        message.load_text("Fix the login\n\nFor real.")
        await press(pilot, screen, "commit")
        assert "Committed" in result(screen)
        assert run(Path(ws.folder), "log", "-1", "--format=%s") == "Fix the login"
        assert screen.query_one(Checkbox).value  # fast-forward only by default
        await pilot.click("#merge")
        await wait_for(pilot, lambda: "merged into main" in result(screen), what="the merge")
        assert run(repo, "rev-parse", "main") == run(Path(ws.folder), "rev-parse", "HEAD")
        await wait_for(pilot, lambda: "merged, nothing to finish" in str(screen.query_one("#finish-state").render()))


async def test_a_conflicting_merge_is_reported_and_nothing_is_lost(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\n"})
    ws = await worktree(tmp_path, repo)
    (Path(ws.folder) / "a.txt").write_text("theirs\n")
    branch_head = commit(Path(ws.folder), "branch side")
    (repo / "a.txt").write_text("ours\n")
    main_head = commit(repo, "main side")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_finish(pilot, app, ws)
        screen.query_one(Checkbox).value = False  # a merge commit: fast-forward is impossible anyway
        await press(pilot, screen, "merge")
        said = result(screen)
        assert "conflicts with main" in said and "a.txt" in said and "nothing changed" in said
        assert run(repo, "rev-parse", "main") == main_head
        assert run(repo, "status", "--porcelain") == ""
        assert run(Path(ws.folder), "rev-parse", "HEAD") == branch_head
        assert (repo / "a.txt").read_text() == "ours\n"
        assert (Path(ws.folder) / "a.txt").read_text() == "theirs\n"


async def test_push_to_a_bare_repository(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    run(tmp_path, "init", "--quiet", "--bare", str(origin))
    repo = make_repo(tmp_path / "repo")
    run(repo, "remote", "add", "origin", str(origin))
    ws = await worktree(tmp_path, repo)
    (Path(ws.folder) / "b.txt").write_text("b\n")
    head = commit(Path(ws.folder), "work")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_finish(pilot, app, ws)
        await wait_for(pilot, lambda: "1 commit not pushed" in str(screen.query_one("#finish-state").render()))
        await press(pilot, screen, "push")
        assert "pushed to origin" in result(screen)
        assert run(origin, "rev-parse", "polypilot/fix") == head
        await wait_for(pilot, lambda: "all pushed" in str(screen.query_one("#finish-state").render()))


async def test_discard_asks_twice_naming_the_work_at_risk(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.env\n"})
    ws = await worktree(tmp_path, repo)
    (Path(ws.folder) / "draft.txt").write_text("unsaved thoughts\n")
    (Path(ws.folder) / "secret.env").write_text("TOKEN=x\n")  # git-ignored: the only copy
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44), notifications=True) as pilot:
        screen = await open_finish(pilot, app, ws)
        await pilot.click("#discard")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the first question")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, ConfirmScreen) and "1 uncommitted file" in screen_message(app),
            what="the second question, naming the loss",
        )
        assert "draft.txt" in screen_message(app) and "git-ignored file or folder (secret.env)" in screen_message(app)
        await pilot.press("n")  # not this time: all is kept
        await wait_for(pilot, lambda: app.screen is screen and "Nothing was discarded" in result(screen))
        assert (Path(ws.folder) / "draft.txt").exists()
        await pilot.click("#discard")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) and "uncommitted" in screen_message(app))
        await pilot.press("y")
        await wait_for(pilot, lambda: "are removed" in result(screen), what="discarded")
        assert not Path(ws.folder).exists()
        assert run(repo, "branch", "--list", "polypilot/fix") == ""
        assert screen.query_one("#merge", Button).disabled
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is not screen, what="the dialog closed")
        await wait_for(pilot, lambda: any("its conversation stays" in n for n in notifications(app)), what="the note")
        sid = app.selected
        assert sid is not None
        await wait_for(
            pilot, lambda: "is gone" in engine_of(app).manager.view(sid).workspace_problem, what="⚠ on the row"
        )
        # Its agent would work in a deleted folder: a prompt is refused, said, and kept.
        app.pane.editor.load_text("one more thing")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("Send failed" in n for n in notifications(app)), what="the refusal")
        assert any("takes no more prompts" in n and "worktree was discarded" in n for n in notifications(app))
        assert app.pane.editor.text == "one more thing"
        assert "one more thing" not in [i.text for i in app.engine.history(sid)]


def which_but_gh(name: str, *args: Any, **kwargs: Any) -> str | None:
    """shutil.which as on a machine without the GitHub CLI."""
    return None if name == "gh" else REAL_WHICH(name, *args, **kwargs)


def screen_message(app: PolypilotApp) -> str:
    return str(app.screen.query_one("#confirm-message", Static).render())


async def test_a_session_without_its_own_worktree_is_offered_nothing_destructive(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_finish(pilot, app, Workspace(str(repo), repo=str(repo), branch="main"))
        assert "not in a worktree of its own" in str(screen.query_one("#finish-not-owned", Static).render())
        assert not screen.query("#discard") and not screen.query("#merge")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, FinishScreen))


async def test_open_pull_request_is_disabled_with_the_reason_without_gh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    ws = await worktree(tmp_path, repo)
    monkeypatch.setattr(shutil, "which", which_but_gh)
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_finish(pilot, app, ws)
        assert screen.query_one("#pull-request", Button).disabled
        assert "GitHub CLI (gh)" in str(screen.query_one("#pull-request-note", Static).render())


async def test_the_drafted_message_is_the_sessions_first_request_never_a_review(tmp_path: Path) -> None:
    """The same draft as `polypilot finish commit` makes: the first real prompt, whole words."""
    repo = make_repo(tmp_path / "repo")
    ws = await worktree(tmp_path, repo)
    (Path(ws.folder) / "login.py").write_text("fixed = True\n")
    app = demo_app(tmp_path / "state")
    request = (
        "Fix the login redirect so that users who sign in from a deep link land on the page they asked for. "
        "Keep the old behaviour for the home page."
    )
    review = review_prompt([ReviewComment("login.py", 1, "name it better", Side.NEW)])
    async with app.run_test(size=(120, 44)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        sid = await session_added(pilot, "demo", name="fix", workspace=ws)
        for prompt in (request, review):
            await app.engine.call(verbs.SEND, verbs.Send(sid, prompt))
            await wait_for(pilot, lambda: engine_of(app).manager.session(sid).turn is None, what="the turn")
        screen = await open_finish(pilot, app, None, sid=sid)
        await wait_for(pilot, lambda: screen.query_one("#commit-message", TextArea).text, what="the draft")
        text = screen.query_one("#commit-message", TextArea).text
        subject, _, body = text.partition("\n\n")
        assert subject == "Fix the login redirect so that users who sign in from a deep link land"
        assert "…" not in text and "Review of your changes" not in text
        assert body.startswith(request) and body.endswith("- login.py")
