"""The engine keeps each session's change counts fresh: when it appears, after each turn,
on request — and says so when its folder is gone. Real git, the demo agent, virtual time."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.engine import verbs
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.workspace.worktrees import create_worktree, in_place, inspect_folder
from tests.support.engine import Harness, demo_harness
from tests.workspace.repos import make_repo


def harness(tmp_path: Path) -> Harness:
    return demo_harness(Settings.read(None, state_dir=tmp_path / "state", record=False))


async def test_counts_follow_the_turns_and_a_vanished_folder_is_said(tmp_path: Path) -> None:
    h = harness(tmp_path)
    counter = h.engine.changes
    repo = make_repo(tmp_path / "repo")
    info = await inspect_folder(str(repo))
    tree = await create_worktree(info, "polypilot/one", "", tmp_path / "wt")
    sid = h.manager.add_session("demo", "one", workspace=tree, connect=False)
    plain = h.manager.add_session("demo", "plain", connect=False)  # no workspace: never counted
    await counter.idle()
    view = h.manager.view(sid)
    assert (view.branch, view.worktree, view.changes) == ("polypilot/one", True, ChangeStats())

    Path(tree.folder, "README.md").write_text("hello\nworld\n")  # the agent edits…
    Path(tree.folder, "new.py").write_text("print(1)\n")
    assert h.manager.view(sid).changes == ChangeStats()  # …nothing is polled meanwhile
    await h.manager.send(sid, "hello")
    await h.until_rest(sid)
    await counter.idle()
    assert h.manager.view(sid).changes == ChangeStats(2, 2, 0)

    Path(tree.folder, "new.py").unlink()
    counter.refresh(sid)  # on request
    counter.refresh(sid)  # a second request while counting runs once more, not twice at once
    await counter.idle()
    assert h.manager.view(sid).changes == ChangeStats(1, 1, 0)
    assert h.manager.view(plain).changes == ChangeStats()

    shutil.rmtree(tree.folder)
    counter.check_folders()  # the dashboard's heartbeat: a stat per session, no git
    await counter.idle()
    view = h.manager.view(sid)
    assert "is gone" in view.workspace_problem and view.changes == ChangeStats()
    await counter.close()
    await h.manager.quit()


async def test_a_session_in_the_checkout_counts_against_its_head(tmp_path: Path) -> None:
    h = harness(tmp_path)
    counter = h.engine.changes
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("changed\n")
    sid = h.manager.add_session("demo", workspace=in_place(await inspect_folder(str(repo))), connect=False)
    await counter.idle()
    view = h.manager.view(sid)
    assert (view.branch, view.worktree, view.changes, view.cwd) == ("main", False, ChangeStats(1, 1, 1), str(repo))
    await counter.close()
    await h.manager.quit()


async def test_a_restart_keeps_each_sessions_folder_and_worktree(tmp_path: Path) -> None:
    from polypilot_tui.engine.persistence import attach_persistence

    repo = make_repo(tmp_path / "repo")
    info = await inspect_folder(str(repo))
    tree = await create_worktree(info, "polypilot/kept", "", tmp_path / "wt")
    first = harness(tmp_path)
    saved = attach_persistence(first.manager, first.manager.settings)
    in_tree = first.manager.add_session("demo", "tree", workspace=tree, connect=False)
    in_repo = first.manager.add_session("demo", "repo", workspace=in_place(info), connect=False)
    await first.engine.changes.idle()  # the counts the sessions started end here, not cancelled at teardown
    await saved.close()
    await first.manager.quit()

    again = harness(tmp_path)
    restored = attach_persistence(again.manager, again.manager.settings)
    assert again.manager.session(in_tree).workspace == tree
    assert again.manager.session(in_repo).workspace == in_place(info)
    assert again.manager.view(in_tree).cwd == tree.folder
    await again.engine.changes.idle()
    await restored.close()
    await again.manager.quit()


def test_the_details_view_names_the_branch_the_changes_and_a_problem() -> None:
    from polypilot_tui.domain.view import SessionDetails, SessionStatus, SessionView
    from polypilot_tui.ui.screens.details import details_text

    view = SessionView(
        "s1",
        "fix",
        "demo",
        SessionStatus.IDLE,
        "",
        1,
        branch="polypilot/fix",
        worktree=True,
        changes=ChangeStats(3, 120, 4),
        workspace_problem="its folder /x is gone",
    )
    text = details_text(SessionDetails(view, "demo", "built in", "/x", "/state/sessions/s1"))
    assert "Branch         polypilot/fix (its own worktree)" in text
    assert "Changes        3 files +120 \u22124" in text
    assert "Workspace      cannot be read: its folder /x is gone" in text


async def test_a_session_works_in_the_folder_asked_for_else_in_its_agents_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine makes the workspace (in git: counted and diffed); the dashboard's first
    session asks for the folder polypilot started in, unless the agent has one of its own."""
    from polypilot_tui.config import AgentCatalog, demo_agent
    from polypilot_tui.ui.launch import first_folder

    repo = make_repo(tmp_path / "repo")
    plain = tmp_path / "plain"
    plain.mkdir()
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    monkeypatch.chdir(repo)
    assert first_folder(settings, load_agents(None)) == str(repo)
    elsewhere = AgentCatalog({"demo": structs.replace(demo_agent(), **{"cwd": plain})})
    assert first_folder(settings, elsewhere) is None  # the engine starts it in its agent's folder
    gone = AgentCatalog({"demo": structs.replace(demo_agent(), **{"cwd": tmp_path / "nowhere"})})
    for catalog, folder, expected in (
        (load_agents(None), str(repo), (str(repo), "main", str(repo))),
        (elsewhere, None, (str(plain), "", "")),
        (gone, None, None),  # the agent's own cwd, as before: no workspace
    ):
        engine = build_engine(settings, catalog, FakeClock(), persist=False)
        try:
            sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", folder=folder))
            workspace = engine.view(sid).workspace
            assert (None if workspace is None else (workspace.folder, workspace.branch, workspace.repo)) == expected
            await engine.manager.connect(sid)  # its agent, connecting in the background, is let finish
        finally:
            await engine.close()


async def test_a_session_in_the_checkout_counts_only_its_own_changes_after_a_merge(tmp_path: Path) -> None:
    """Another session's worktree merged into main moves the checkout's HEAD: after a restart
    the checkout's session still shows only what it changed itself."""
    from polypilot_tui.engine.persistence import attach_persistence
    from polypilot_tui.workspace.changes import diff_text
    from polypilot_tui.workspace.finish import commit_all, merge_into_base

    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "app.py": "x = 1\n"})
    info = await inspect_folder(str(repo))
    first = harness(tmp_path)
    saved = attach_persistence(first.manager, first.manager.settings)
    here = first.manager.add_session("demo", "here", workspace=in_place(info), connect=False)
    tree = await create_worktree(info, "polypilot/other", "", tmp_path / "wt")
    Path(tree.folder, "feature.py").write_text("".join(f"line {n}\n" for n in range(6)))
    Path(tree.folder, "README.md").write_text("hello, merged\n")
    await commit_all(tree, "the other session's work")
    assert (await merge_into_base(tree, fast_forward_only=True)).merged
    (repo / "app.py").write_text("x = 2\n")  # the checkout's session: its own one-line change
    await saved.close()
    await first.manager.quit()

    again = harness(tmp_path)
    restored = attach_persistence(again.manager, again.manager.settings)
    counter = again.engine.changes
    counter.refresh(here)
    await counter.idle()
    assert again.manager.view(here).changes == ChangeStats(1, 1, 1)
    workspace = again.manager.session(here).workspace
    assert workspace is not None
    text = (await diff_text(workspace)).text
    assert "app.py" in text and "feature.py" not in text and "merged" not in text
    await counter.close()
    await restored.close()
    await again.manager.quit()


CLOSE_DURING_A_COUNT = """
import asyncio, sys
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.workspace.worktrees import in_place, inspect_folder

async def scenario(repo: str, steps: int, state: str) -> None:
    settings = Settings.read(None, state_dir=state, record=False)
    engine = build_engine(settings, load_agents(None), FakeClock(), persist=False)
    workspace = in_place(await inspect_folder(repo))
    sid = engine.manager.add_session("demo", workspace=workspace, connect=False)  # its count starts
    other = engine.manager.add_session("demo", workspace=workspace, connect=False)
    for _ in range(steps):
        await asyncio.sleep(0)
    await engine.manager.close(sid)  # the count is cancelled wherever it stands…
    await engine.close(quitting=True)  # …and the engine closes: the loop ends right after
    engine.changes.refresh(other)  # a commit's answer coming after the close: no count starts

for steps in range(int(sys.argv[3])):
    asyncio.run(scenario(sys.argv[1], steps, sys.argv[2]))
print("every loop ended")
"""


def test_a_count_cut_short_by_a_close_never_hangs_the_loops_end(tmp_path: Path) -> None:
    """A session closed while its count starts git, then the engine closed and its loop ended
    (a headless run's end; the engine service's stop): asyncio cancels every task left at a
    loop's end at once, and a git process being started whose pipes' task is cancelled with
    it never reports its end: the process hung there for good. Each count cut short is now
    waited for inside the loop. Real git; each close lands at another step of the count."""
    repo = make_repo(tmp_path / "repo", files={"a.py": "A = 1\n"})
    (repo / "a.py").write_text("A = 2\n")
    (repo / "new.py").write_text("N = 1\n")
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_DURING_A_COUNT, str(repo), str(tmp_path / "state"), "24"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "every loop ended"
    # No git left unreaped to a closed loop ("Event loop is closed" tracebacks). asyncio's own
    # "Unknown child process" warning may remain: cancelled while being started, a process is
    # reaped by its transport before asyncio's watcher looks (Python 3.11).
    assert "Traceback" not in done.stderr, done.stderr


async def test_a_session_closed_before_its_count_starts_is_counted_again_when_reopened(tmp_path: Path) -> None:
    """A count asked for and cut short before its first step (a discarded attempt: the discard
    asks for a count, the session is closed at once) is waited for and forgotten: the counter
    comes to rest, and the session, brought back, is counted again."""
    h = harness(tmp_path)
    counter = h.engine.changes
    repo = make_repo(tmp_path / "repo", files={"a.py": "A = 1\n"})
    sid = h.manager.add_session("demo", workspace=in_place(await inspect_folder(str(repo))), connect=False)
    await counter.idle()
    (repo / "a.py").write_text("A = 2\n")
    (repo / "new.py").write_text("N = 1\n")
    counter.refresh(sid)
    session = await h.manager.close(sid)  # the count has not taken a step yet
    assert session is not None
    await asyncio.wait_for(counter.idle(), 10)
    h.manager.reopen(session)
    await asyncio.wait_for(counter.idle(), 10)
    assert h.manager.view(sid).changes == ChangeStats(2, 2, 1)
    await counter.close()
    await h.manager.quit()
