"""``polypilot new``, ``diff`` and ``finish`` as a script runs them: real processes, real git (``new``
starts the state folder's engine, which the test ends)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.domain.changeset import ReviewComment, Side, review_prompt
from polypilot_tui.engine.verbs import SESSION_VIEW, SessionRef
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.client import EngineClient
from polypilot_tui.storage.history import HISTORY_FILE
from polypilot_tui.storage.saved_rows import SavedRows
from tests.support.waiting import until_answer, until_blocking
from tests.workspace.hostile import hostile_repo
from tests.workspace.repos import IDENTITY, make_repo, run

POLYPILOT = [sys.executable, "-m", "polypilot_tui.cli"]

pytestmark = pytest.mark.slow  # each drives a real engine and git: 8-17 s a test on 2 busy cores


def polypilot(state: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env.update(IDENTITY, POLYPILOT_STATE_DIR=str(state))
    return subprocess.run(
        [*POLYPILOT, *args], cwd=cwd or state.parent, env=env, capture_output=True, text=True, timeout=60
    )


def test_new_session_in_a_worktree_then_diff_commit_merge_and_discard(tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo = make_repo(tmp_path / "repo")
    made = polypilot(state, "new", "--name", "Login fix", "--worktree", cwd=repo)
    assert made.returncode == 0, made.stderr
    sid, where = made.stdout.strip().split("\t")
    folder = Path(where.removesuffix(" on polypilot/login-fix"))
    assert folder.is_dir() and folder.is_relative_to(state / "worktrees")
    listed = json.loads(polypilot(state, "status", "--json").stdout)
    [row] = listed["sessions"] if isinstance(listed, dict) else listed
    assert (row["id"], row["branch"], row["worktree"], row["cwd"]) == (sid, "polypilot/login-fix", True, str(folder))

    (folder / "README.md").write_text("hello\nfixed\n")
    (folder / "new.txt").write_text("a\nb\n")
    stat = polypilot(state, "diff", "Login fix", "--stat")
    assert stat.returncode == 0, stat.stderr
    assert stat.stdout.splitlines() == ["+1\t\u22120\tREADME.md", "+2\t\u22120\tnew.txt (new)", "2 files +3 \u22120"]
    whole = polypilot(state, "diff", sid)
    assert "+fixed" in whole.stdout and "+++ b/new.txt" in whole.stdout

    refused = polypilot(state, "finish", sid, "discard")
    assert refused.returncode == 1 and "2 uncommitted files" in refused.stderr and "--force" in refused.stderr
    committed = polypilot(state, "finish", sid, "commit", "-m", "Fix the login")
    assert committed.returncode == 0, committed.stderr
    merged = polypilot(state, "finish", sid, "merge", "--ff-only")
    assert merged.returncode == 0, merged.stderr
    assert run(repo, "log", "-1", "--format=%s", "main") == "Fix the login"
    assert polypilot(state, "finish", sid, "discard").returncode == 0  # merged: nothing at risk
    assert not folder.exists()
    assert polypilot(state, "engine", "stop").returncode == 0


def test_bad_requests_say_why_and_change_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo = make_repo(tmp_path / "repo")
    run(repo, "branch", "taken")
    taken = polypilot(state, "new", "--worktree", "--branch", "taken", cwd=repo)
    assert taken.returncode == 1 and "'taken' exists already" in taken.stderr
    missing = polypilot(state, "new", "--cwd", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    not_git = polypilot(state, "new", "--cwd", str(plain), "--worktree")
    assert not_git.returncode == 1 and "not in a git repository" in not_git.stderr
    assert polypilot(state, "status", "--json").stdout.count('"id"') == 0  # nothing was added
    made = polypilot(state, "new", "--cwd", str(plain), "--name", "notes")
    assert made.returncode == 0, made.stderr
    no_git = polypilot(state, "diff", "notes")
    assert no_git.returncode == 1 and "does not work in a git repository" in no_git.stderr
    unknown = polypilot(state, "diff", "nobody")
    assert unknown.returncode == 1 and "no session 'nobody'" in unknown.stderr
    in_place = polypilot(state, "new", "--name", "here", cwd=repo)
    assert in_place.returncode == 0, in_place.stderr
    (repo / "mine.txt").write_text("the user's own work\n")
    refused = polypilot(state, "finish", "here", "commit", "-m", "sweep")
    assert refused.returncode == 1 and "not in a worktree of its own" in refused.stderr
    assert run(repo, "status", "--porcelain") == "?? mine.txt"  # nothing was added or committed
    assert polypilot(state, "engine", "stop").returncode == 0  # `new` started it; the conftest also ends it


def saved_prompts(state: Path, sid: str, count: int, timeout: float = 10.0) -> list[str]:
    """The session's prompts once the engine has saved ``count`` of them (it writes within a second)."""
    rows = SavedRows(state / HISTORY_FILE)

    def saved() -> list[str] | None:
        prompts = rows.prompts(sid) if (state / HISTORY_FILE).exists() else None
        return prompts if prompts is not None and len(prompts) >= count else None

    try:
        return until_blocking(saved, timeout, f"{count} prompts of {sid} saved")
    finally:
        rows.close()


def test_finish_commit_drafts_from_the_first_request_and_discard_names_ignored_files(tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.env\n", "README.md": "hello\n"})
    made = polypilot(state, "new", "--name", "login", "--worktree", cwd=repo)
    assert made.returncode == 0, made.stderr
    sid, where = made.stdout.strip().split("\t")
    folder = Path(where.split(" on ")[0])
    request = "Make the login page remember the last user name. It should also trim spaces."
    review = review_prompt([ReviewComment("login.py", 1, "trim both ends", Side.NEW)])
    for prompt in (request, review):
        sent = polypilot(state, "send", sid, prompt, "--wait")
        assert sent.returncode == 0, sent.stderr
    assert saved_prompts(state, sid, 2)[1] == review
    (folder / "login.py").write_text("remember = True\n")
    (folder / "secret.env").write_text("TOKEN=x\n")
    committed = polypilot(state, "finish", sid, "commit")
    assert committed.returncode == 0, committed.stderr
    message = run(folder, "log", "-1", "--format=%B")
    assert message.startswith("Make the login page remember the last user name\n\n" + request + "\n\n- login.py")
    refused = polypilot(state, "finish", sid, "discard")
    assert refused.returncode == 1 and "git-ignored file or folder (secret.env)" in refused.stderr
    assert "--force" in refused.stderr and (folder / "secret.env").exists()
    assert polypilot(state, "finish", sid, "discard", "--force").returncode == 0
    assert not folder.exists()
    after = polypilot(state, "send", sid, "are you still there?")
    assert (
        after.returncode != 0 and "takes no more prompts" in after.stderr and "worktree was discarded" in after.stderr
    )
    assert polypilot(state, "engine", "stop").returncode == 0


def test_bad_branch_names_are_refused_up_front_and_leave_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo = make_repo(tmp_path / "repo")
    for branch, said in (
        ("@", "'@' is not a valid branch name"),
        ("@{-1}", "is not a valid branch name"),
        ("-x", "is not a valid branch name"),
        ("x" * 300, "the branch name is too long (300 characters, 300 bytes): at most 200 bytes"),
        ("é" * 150, "too long (150 characters, 300 bytes)"),
    ):
        refused = polypilot(state, "new", "--worktree", f"--branch={branch}", cwd=repo)
        assert refused.returncode == 1 and said in refused.stderr, (branch, refused.stderr)
        assert "Traceback" not in refused.stderr
    assert run(repo, "branch", "--list", "--format=%(refname:short)") == "main"
    assert not (state / "worktrees").exists() or not any((state / "worktrees").rglob("*"))
    assert polypilot(state, "engine", "stop").returncode == 0


async def counted(state: Path, sid: str, timeout: float = 15.0) -> dict[str, object]:
    """The session's change counts once the engine has counted them (bounded wait)."""
    client = EngineClient(socket_path(state))
    try:
        view = await until_answer(
            lambda: client.call(SESSION_VIEW, SessionRef(sid)), lambda v: v.changes.files, timeout, "the counts"
        )
    finally:
        await client.aclose()
    return {"files": view.changes.files, "added": view.changes.added, "removed": view.changes.removed}
    raise AssertionError(f"the engine did not count the changes of {sid} within {timeout} s")


async def test_a_hostile_repository_runs_nothing_through_the_engine_and_the_commands(tmp_path: Path) -> None:
    """The engine's own change counts, `polypilot new --worktree` and `polypilot diff`."""
    state = tmp_path / "state"
    repo, marks = hostile_repo(tmp_path)
    (repo / "a.txt").write_text("one\ntwo\nthree\n")
    (repo / "new.txt").write_text("new\n")
    here = polypilot(state, "new", "--name", "here", cwd=repo)
    assert here.returncode == 0, here.stderr
    sid = here.stdout.split("\t")[0]
    assert await counted(state, sid) == {"files": 2, "added": 2, "removed": 0}
    tree = polypilot(state, "new", "--name", "tree", "--worktree", cwd=repo)
    assert tree.returncode == 0, tree.stderr
    diff = polypilot(state, "diff", "here")
    assert diff.returncode == 0 and "+three" in diff.stdout and "+++ b/new.txt" in diff.stdout, diff.stderr
    stat = polypilot(state, "diff", "here", "--stat")
    assert stat.stdout.splitlines()[-1] == "2 files +2 \u22120"
    assert polypilot(state, "engine", "stop").returncode == 0
    assert marks.ran() == []
