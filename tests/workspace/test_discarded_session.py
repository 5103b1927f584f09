"""A session whose folder is gone (its worktree discarded, the folder deleted by hand) takes no
prompt: its agent would work in a deleted folder. Real git, the demo agent, virtual time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from polypilot_tui.engine.api import EngineError
from polypilot_tui.workspace.finish import discard
from polypilot_tui.workspace.worktrees import create_worktree, inspect_folder
from tests.workspace.repos import make_repo
from tests.workspace.test_change_counter import harness


async def test_a_discarded_worktrees_session_refuses_prompts_and_says_why(tmp_path: Path) -> None:
    h = harness(tmp_path)
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/gone", "", tmp_path / "wt")
    sid = h.manager.add_session("demo", "gone", workspace=tree, connect=False)
    await h.manager.send(sid, "hello")
    await h.until_rest(sid)
    turns = len(h.outcomes(sid))
    await discard(tree)
    with pytest.raises(
        EngineError, match=r"'gone' takes no more prompts: its folder .* is gone \(its worktree was discarded\)"
    ):
        await h.manager.send(sid, "are you there?")
    session = h.manager.session(sid)
    assert session.queue == [] and session.turn is None and len(h.outcomes(sid)) == turns
    assert "are you there?" not in h.texts(sid)
    await h.manager.quit()


async def test_a_folder_deleted_mid_turn_holds_the_queue_and_refuses_the_rest(tmp_path: Path) -> None:
    h = harness(tmp_path)
    folder = tmp_path / "notes"
    folder.mkdir()
    sid = h.manager.add_session("demo", "notes", cwd=str(folder), connect=False)
    await h.manager.send(sid, "!slow")
    assert await h.manager.send(sid, "then this") == "queued"
    shutil.rmtree(folder)  # deleted by hand while the turn runs
    await h.until_rest(sid)
    session = h.manager.session(sid)
    assert [p.text for p in session.queue] == ["then this"]  # kept, not sent
    assert session.queue_held and session.turn is None
    for refused in (h.manager.send(sid, "more"), h.manager.send_queued(sid)):
        with pytest.raises(EngineError, match="its folder .* is gone. Close the session"):
            await refused
    assert [p.text for p in session.queue] == ["then this"]
    folder.mkdir()  # back: the user decides, and the queue goes
    assert await h.manager.send_queued(sid)
    await h.until_rest(sid)
    assert session.queue == []
    await h.manager.quit()
