"""Two real Copilot CLIs in two worktrees of one repository, from the dashboard.

Each session's agent writes the same file in its own worktree through its shell tool
(answered by key); neither touches the other's or the checkout. The sidebar counts the
changes after the turn; the diff view shows the file; a review comment goes to the agent as
one prompt, and the scripted model receives it whole. Finally the session is restored with
its worktree after a restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import TextArea

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.domain.workspace import Isolation
from polypilot_tui.engine import verbs
from polypilot_tui.ui.screens.diff_view import DiffViewScreen
from polypilot_tui.ui.screens.review_comment import ReviewCommentScreen
from polypilot_tui.ui.widgets.diff_lines import DiffLines
from tests.e2e.dashboard import AGENT_WAIT, dashboard, see, send
from tests.support.copilot_harness import catalog_entry
from tests.support.model_server import ModelServer
from tests.ui.helpers import engine_of, wait_for
from tests.workspace.repos import IDENTITY, make_repo

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SIZE = (150, 50)


async def test_two_copilot_sessions_in_two_worktrees_then_review_one(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    repo = make_repo(tmp_path / "repo", files={"notes.txt": "from main\n"})
    state = tmp_path / "state"
    agents = {"copilot": catalog_entry(copilot_cli, model_server, tmp_path)}
    app = dashboard(state, agents, "demo")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected is not None, what="the first session")
        sids = []
        for name in ("alpha", "beta"):
            request = verbs.NewSession("copilot", name, str(repo), Isolation.WORKTREE, f"polypilot/{name}", "main")
            sids.append(await app.engine.call(verbs.NEW_SESSION, request))
        for sid, name in zip(sids, ("alpha", "beta"), strict=True):
            app.select(sid)
            await wait_for(
                pilot,
                lambda s=sid: engine_of(app).manager.view(s).status is SessionStatus.IDLE,
                timeout=AGENT_WAIT,
                what=f"{name}'s Copilot CLI connected",
            )
            await send(pilot, f"TOOL CMD=`printf '{name} was here\\n' > notes.txt`")
            await see(pilot, "Permission requested")
            await pilot.press("ctrl+g")
            await wait_for(pilot, lambda: app.pane.permission.has_focus_within, what="the prompt focused")
            await pilot.press("y")
            await wait_for(
                pilot,
                lambda s=sid: engine_of(app).manager.view(s).turns == 1,
                timeout=AGENT_WAIT,
                what=f"{name}'s tool turn",
            )
        folders = [Path(engine_of(app).manager.session(sid).workspace.folder) for sid in sids]  # type: ignore[union-attr]
        assert [(f / "notes.txt").read_text() for f in folders] == ["alpha was here\n", "beta was here\n"]
        assert (repo / "notes.txt").read_text() == "from main\n"  # the checkout is untouched
        for sid in sids:  # counted after the turn, without asking
            await wait_for(
                pilot, lambda s=sid: engine_of(app).manager.view(s).changes == ChangeStats(1, 1, 1), what="a count"
            )
        alpha = sids[0]
        assert "+1 \u22121" in app.sidebar.session_list.rendered(alpha)[0]

        app.select(alpha)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen), timeout=20, what="the diff view")
        lines = app.screen.query_one(DiffLines)
        assert [f.path for f in app.screen.changes.files] == ["notes.txt"]
        lines.cursor = next(i for i in range(len(lines.rows)) if "alpha was here" in lines.row_text(i))
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewCommentScreen), what="the comment composer")
        app.screen.query_one(TextArea).insert("Keep the line from main too.")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen), what="back in the diff")
        before = len(model_server.model_requests())
        await pilot.press("R")
        await wait_for(
            pilot, lambda: engine_of(app).manager.view(alpha).turns == 2, timeout=AGENT_WAIT, what="the review answered"
        )
        asked = [r.last.text for r in model_server.model_requests()[before:]]
        assert any(
            "Review of your changes: 1 comment" in text
            and "notes.txt:1" in text
            and "Keep the line from main too." in text
            for text in asked
        ), asked

    again = dashboard(state, agents, "demo")
    async with again.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: set(sids) <= set(engine_of(again).manager.ids()), what="the sessions restored")
        restored = engine_of(again).manager.session(sids[1]).workspace
        assert restored is not None and restored.folder == str(folders[1]) and restored.branch == "polypilot/beta"
        await wait_for(
            pilot, lambda: engine_of(again).manager.view(sids[1]).changes == ChangeStats(1, 1, 1), what="recount"
        )
