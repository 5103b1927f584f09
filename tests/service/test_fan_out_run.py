"""``polypilot run --fan-out`` as a CI job runs it: the real CLI in a process of its own, demo
agents, a real git repository, a real shell for the check. It waits for every attempt (a hung
one ends at its watchdog tier), prints one JSON summary, and its exit code says whether every
attempt completed; bad input is refused before anything is made."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.test_commands import finish, start
from tests.support.engine_service import short_state_dir
from tests.support.waiting import until
from tests.workspace.repos import IDENTITY, make_repo, run

pytestmark = pytest.mark.slow

AGENTS = '[hanging]\nkind = "demo"\nscript = "hang"\n'


@pytest.fixture
def state() -> Iterator[Path]:
    """The run's state folder (its worktrees are made there), removed at the end."""
    folder = short_state_dir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def env_for(tmp_path: Path) -> dict[str, str]:
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    return {
        **IDENTITY,
        "POLYPILOT_AGENTS_FILE": str(agents),
        "POLYPILOT_WATCHDOG__INACTIVITY": "1",
        "POLYPILOT_DEMO_SPEED": "50",
    }


async def test_every_attempt_is_waited_for_and_summed_up(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    env = env_for(tmp_path)
    args = ("run", "--fan-out", "demo:2,hanging", "hi there", "--folder", str(repo), "--check", "ls README.md")
    done = await finish(await start(state, *args, env=env))
    assert done.code == 1, done  # the hung attempt did not complete
    summary = json.loads(done.out)
    ends = [(a["agent"], a["turn_end"]) for a in summary["attempts"]]
    assert ends == [("demo", "completed"), ("demo", "completed"), ("hanging", "stuck")]
    assert summary["base"] == "main" and summary["exit_code"] == 1 and summary["repo"] == str(repo)
    for attempt in summary["attempts"]:
        assert attempt["check"]["exit_code"] == 0 and attempt["check"]["output"] == "README.md\n"
        assert attempt["seconds"] > 0 and set(attempt["changes"]) == {"files", "added", "removed"}
        assert Path(attempt["folder"]).is_dir()  # kept: the user merges the best
        assert "reported" in attempt["usage"]
    assert "stuck" in done.err and "git merge BRANCH" in done.err

    passed = await finish(await start(state, "run", "--fan-out", "demo:2", "hi", "--folder", str(repo), env=env))
    assert passed.code == 0, passed
    failing = ("run", "--fan-out", "demo", "hi", "--folder", str(repo), "--check", "exit 7")
    checked = await finish(await start(state, *failing, env=env))
    assert checked.code == 5 and json.loads(checked.out)["attempts"][0]["check"]["exit_code"] == 7


async def test_bad_input_is_refused_and_makes_nothing(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    plain = tmp_path / "plain"
    plain.mkdir()
    env = env_for(tmp_path)
    cases = [
        (("demo:0",), "the count must be 1 or more"),
        (("nosuch:1",), "nosuch"),
        ((":x",), "names no agent"),
        (("demo:x",), "whole number"),
        (("demo:9",), "more than 8 attempts"),
        (("demo", "--folder", str(plain)), "not in a git repository"),
        (("demo", "--agent", "demo"), "no --agent"),
        (("demo", "--check-timeout", "0"), "timeout"),
    ]
    for extra, words in cases:
        spec, *rest = extra
        folder = [] if "--folder" in rest else ["--folder", str(repo)]
        done = await finish(await start(state, "run", "--fan-out", spec, "task", *folder, *rest, env=env))
        assert done.code == 2 and words in done.err and done.out == "", (extra, done)
    assert run(repo, "branch", "--format=%(refname:short)") == "main"
    assert run(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert subprocess.run(["git", "status", "--porcelain"], cwd=plain, capture_output=True, check=False).returncode


async def test_a_permission_nobody_can_answer_is_refused_and_said(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    env = env_for(tmp_path)
    args = ("run", "--fan-out", "demo:2", "write the file please", "--folder", str(repo))
    done = await finish(await start(state, *args, env=env))
    assert done.code == 3, done  # completed, but the tool it asked for did not run
    attempts = json.loads(done.out)["attempts"]
    assert all(a["turn_end"] == "completed" and a["refused_permissions"] for a in attempts)
    assert done.err.count("but the policy leaves it to you and a fan-out asks nobody; rejected") == 2
    allowed = await finish(await start(state, *args, "--allow-tools", env=env))
    assert allowed.code == 0 and not any(a["refused_permissions"] for a in json.loads(allowed.out)["attempts"])


async def test_ctrl_c_stops_every_attempt(tmp_path: Path, state: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {**env_for(tmp_path), "POLYPILOT_WATCHDOG__INACTIVITY": "600"}
    process = await start(state, "run", "--fan-out", "hanging:2", "task", "--folder", str(repo), env=env)
    worktrees = state / "worktrees"
    await until(lambda: len(list(worktrees.glob("*/*"))) == 2, 30, "both worktrees made")
    process.send_signal(signal.SIGINT)
    done = await finish(process, 30)
    assert done.code == 4 and "SIGINT" in done.err, done
