"""A new session's folder and worktree are made by the engine, where it runs: the folder is
named absolutely (or under its home), a check makes nothing, and a worktree made for a session
that could not be added is removed again. Real git, the engine in this process."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.workspace import Isolation, Workspace
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import BadRequest, EngineError
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from tests.workspace.repos import make_repo, run

WORKTREE = Isolation.WORKTREE


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[LocalEngine]:
    ids = itertools.count(1)
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    local = LocalEngine(SessionManager(settings, load_agents(None), SystemClock(), id_factory=lambda: f"s{next(ids)}"))
    yield local
    await local.changes.idle()  # counts end as they would, not cancelled when the loop closes
    await local.close()


def made(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "state").glob("worktrees/*/*"))


async def test_the_engine_makes_the_worktree_on_a_branch_named_after_the_session(
    tmp_path: Path, engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "home" / "repo")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    check = verbs.NewSession("demo", "Fix login", "~/repo", WORKTREE)
    await engine.call(verbs.CHECK_NEW_SESSION, check)
    assert made(tmp_path) == [] and run(repo, "branch", "--list", "polypilot/*") == ""  # a check makes nothing
    sid = await engine.call(verbs.NEW_SESSION, check)
    workspace = engine.view(sid).workspace
    assert workspace is not None and workspace.owned
    assert (workspace.branch, workspace.base, workspace.repo) == ("polypilot/fix-login", "main", str(repo))
    assert Path(workspace.folder).is_dir() and made(tmp_path) == [Path(workspace.folder)]
    unnamed = await engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", folder=str(repo), isolation=WORKTREE))
    assert engine.view(unnamed).branch == "polypilot/demo-2"  # the name the session is given
    with pytest.raises(EngineError, match="exists already"):
        await engine.call(
            verbs.CHECK_NEW_SESSION, verbs.NewSession("demo", "x", str(repo), WORKTREE, "polypilot/demo-2")
        )


async def test_folders_are_absolute_and_a_refused_request_leaves_nothing(tmp_path: Path, engine: LocalEngine) -> None:
    repo = make_repo(tmp_path / "repo")
    refused: list[tuple[Any, type[Exception], str]] = [
        (verbs.NewSession("demo", folder="repo"), BadRequest, "not an absolute folder"),
        (verbs.NewSession("demo", folder=str(repo), isolation=WORKTREE, base="nope"), EngineError, "neither"),
        (verbs.NewSession("demo", folder=str(tmp_path / "gone")), EngineError, "does not exist"),
        (verbs.NewSession("demo", isolation=WORKTREE), BadRequest, "needs the folder of a git repository"),
        (verbs.NewSession("nobody", folder=str(repo)), EngineError, "nobody"),
    ]
    for request, error, said in refused:
        for verb in (verbs.CHECK_NEW_SESSION, verbs.NEW_SESSION):
            with pytest.raises(error, match=said):
                await engine.call(verb, request)
    assert engine.ids() == [] and made(tmp_path) == [] and run(repo, "branch", "--list", "polypilot/*") == ""


async def test_a_worktree_made_for_a_session_that_was_not_added_is_removed(
    tmp_path: Path, engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")

    def taken(*args: object, **kwargs: object) -> str:
        raise ValueError("session s1 already exists")

    monkeypatch.setattr(engine.manager, "add_session", taken)
    with pytest.raises(EngineError, match=r"already exists \(the worktree made for it .* is removed again\)"):
        await engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", "lost", str(repo), WORKTREE))
    assert made(tmp_path) == [] and run(repo, "branch", "--list", "polypilot/*") == ""


async def test_without_git_a_folder_is_plain_and_a_worktree_says_why_not(
    tmp_path: Path, engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "git" else real(name, *a, **k))
    sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", folder=str(repo)))
    assert engine.view(sid).workspace == Workspace(str(repo.resolve()))
    with pytest.raises(EngineError, match="git is not installed"):
        await engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", folder=str(repo), isolation=WORKTREE))
