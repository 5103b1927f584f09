"""Finishing a worktree through the engine's verbs: only a session's own worktree, work at
risk named before anything is removed, one step at a time per worktree, and the counts follow
without a front end asking. Real git, the engine in this process."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain import workspace
from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import BadRequest, EngineError, UnknownSession
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.workspace.worktrees import create_worktree, in_place, inspect_folder
from tests.workspace.repos import commit, make_repo, run


def engine(tmp_path: Path) -> LocalEngine:
    ids = itertools.count(1)
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    manager = SessionManager(settings, load_agents(None), SystemClock(), id_factory=lambda: f"s{next(ids)}")
    return LocalEngine(manager)


async def test_only_a_sessions_own_worktree_is_finished(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "mine.txt").write_text("the user's own work\n")
    local = engine(tmp_path)
    try:
        here = local.manager.add_session(
            "demo", "here", workspace=in_place(await inspect_folder(str(repo))), connect=False
        )
        plain = local.manager.add_session("demo", "plain", connect=False)
        asks = [
            (verbs.FINISH_STATE, verbs.SessionRef),
            (verbs.COMMIT_MESSAGE, verbs.SessionRef),
            (verbs.COMMIT, lambda sid: verbs.Commit(sid, "sweep")),
            (verbs.MERGE, verbs.Merge),
            (verbs.PUSH, verbs.Push),
            (verbs.PULL_REQUEST, verbs.PullRequest),
            (verbs.DISCARD, lambda sid: verbs.Discard(sid, force=True)),
        ]
        for verb, request in asks:
            with pytest.raises(EngineError, match="not in a worktree of its own"):
                await local.call(verb, request(here))  # type: ignore[operator]
            with pytest.raises(EngineError, match="in its agent's folder, not in a worktree"):
                await local.call(verb, request(plain))  # type: ignore[operator]
            with pytest.raises(UnknownSession):
                await local.call(verb, request("gone"))  # type: ignore[operator]
        assert run(repo, "status", "--porcelain") == "?? mine.txt"  # nothing swept up, nothing removed
    finally:
        await local.close()


async def test_discard_names_the_work_at_risk_and_the_session_then_says_its_folder_is_gone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.env\n", "README.md": "hello\n"})
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/secret", "", tmp_path / "wt")
    Path(tree.folder, "secret.env").write_text("TOKEN=1\n")
    Path(tree.folder, "notes.md").write_text("notes\n")
    local = engine(tmp_path)
    try:
        sid = local.manager.add_session("demo", "secret", workspace=tree, connect=False)
        state = await local.call(verbs.FINISH_STATE, verbs.SessionRef(sid))
        assert state.worktree.untracked == ("notes.md",) and state.worktree.ignored == ("secret.env",)
        with pytest.raises(EngineError, match=r"secret\.env.*nothing was removed"):
            await local.call(verbs.DISCARD, verbs.Discard(sid))
        assert Path(tree.folder, "secret.env").exists()
        with pytest.raises(BadRequest):
            await local.call(verbs.PUSH, verbs.Push(sid, " "))
        said = await local.call(verbs.DISCARD, verbs.Discard(sid, force=True))
        assert "removed" in said and not Path(tree.folder).exists()
        await local.changes.idle()  # counted again by the engine itself: no front end asked
        assert "is gone" in local.view(sid).workspace_problem
    finally:
        await local.close()


async def test_two_commits_at_once_are_one_after_the_other(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/twice", "", tmp_path / "wt")
    for n in range(200):
        Path(tree.folder, f"f{n}.txt").write_text(f"{n}\n")
    local = engine(tmp_path)
    try:
        sid = local.manager.add_session("demo", "twice", workspace=tree, connect=False)
        await local.changes.idle()
        first, second = await asyncio.gather(
            local.call(verbs.COMMIT, verbs.Commit(sid, "one")),
            local.call(verbs.COMMIT, verbs.Commit(sid, "two")),
            return_exceptions=True,
        )
        assert isinstance(first, str) and len(first) == 40
        assert isinstance(second, EngineError) and "nothing to commit" in str(second)  # not an index.lock race
        assert run(Path(tree.folder), "log", "-1", "--format=%s") == "one"
        await local.changes.idle()
        assert local.view(sid).changes == ChangeStats(200, 200, 0)  # committed work still counts against main
    finally:
        await local.close()


async def test_a_conflict_in_many_files_names_a_bounded_few_and_counts_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"f{n}.txt" for n in range(3)]
    repo = make_repo(tmp_path / "repo", dict.fromkeys(names, "base\n"))
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/clash", "", tmp_path / "wt")
    for name in names:
        Path(tree.folder, name).write_text("branch\n")
        (repo / name).write_text("main\n")
    commit(Path(tree.folder), "branch side")
    commit(repo, "main side")
    monkeypatch.setattr(workspace, "MAX_LISTED", 2)
    local = engine(tmp_path)
    try:
        sid = local.manager.add_session("demo", "clash", workspace=tree, connect=False)
        result = await local.call(verbs.MERGE, verbs.Merge(sid))
        assert not result.merged and "in 3 file(s)" in result.message and result.conflicts == ("f0.txt", "f1.txt")
        assert run(repo, "status", "--porcelain") == ""  # undone
    finally:
        await local.close()
