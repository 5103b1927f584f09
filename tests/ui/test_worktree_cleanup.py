"""At start the dashboard removes worktrees no session uses that hold nothing, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.workspace.finish import commit_all
from polypilot_tui.workspace.worktrees import create_worktree, inspect_folder
from tests.ui.helpers import demo_app, notifications, wait_for
from tests.workspace.repos import IDENTITY, make_repo


async def test_unused_clean_merged_worktrees_go_and_work_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    repo = make_repo(tmp_path / "repo")
    root = tmp_path / "worktrees"
    info = await inspect_folder(str(repo))
    merged = await create_worktree(info, "done", "", root)  # nothing on it: merged and clean
    work = await create_worktree(info, "work", "", root)
    Path(work.folder, "idea.txt").write_text("keep me\n")
    await commit_all(work, "an idea")  # a commit nobody merged or pushed
    app = demo_app(tmp_path / "state", attach=attach_persistence, worktrees_dir=root)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: not Path(merged.folder).exists(), what="the orphan removed")
        await wait_for(pilot, lambda: any("Removed 1 worktree" in n for n in notifications(app)), what="the notice")
    assert Path(work.folder, "idea.txt").read_text() == "keep me\n"
