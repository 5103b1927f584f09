"""Issue 27 with real agents: a sandboxed session of the Copilot CLI and of an ACP agent,
each in a worktree made by the engine, on the scripted model server.

One turn per agent runs a shell tool that writes in its worktree and commits there (works),
writes into ``~/.ssh`` (a temp home) and into polypilot's state folder and reads the saved
session list (all refused, nothing there), and leaves a ``setsid`` background process
behind. A second turn's tool leaves another and runs on: Stop ends both (not the first
turn's), and the same agent runs the third turn's shell tool, whose read of the hidden
``~/.ssh`` reads "refused by the sandbox". Closing the session (the kill of its agent) ends
the first turn's process too. The app's SIGKILL (the leash) is tested on a sandboxed tree in
tests/unit/test_sandbox_launch.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.agents.catalog import builtin_tables
from polypilot_tui.agents.sandbox import sandbox_problem
from polypilot_tui.config import AgentCatalog, AgentConfig, PermissionPolicy, Settings
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from polypilot_tui.domain.workspace import Isolation
from polypilot_tui.engine import verbs
from polypilot_tui.engine.builder import build_engine
from tests.support.copilot_e2e import KEY, copilot_agent
from tests.support.model_server import ModelServer
from tests.support.processes import bwrapped, sleeping
from tests.support.waiting import until
from tests.workspace.repos import IDENTITY, make_repo, run

ON = Sandbox(SandboxMode.WORKSPACE)
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(sandbox_problem(ON) is not None, reason=f"no sandbox here: {sandbox_problem(ON)}"),
]
WAIT = 120.0


def agent_for(name: str, copilot_cli: Path, server: ModelServer, home: Path) -> AgentConfig:
    """The agent on the scripted model, with its built-in catalog's state folders (their defaults
    tested). The ACP agent is the Copilot CLI in its ``--acp`` mode (opencode passes the same
    test by hand, at 25 s against 5 s: too dear for CI)."""
    if name == "copilot":
        agent = copilot_agent(copilot_cli, server, home / ".copilot", home / "unused")
    else:
        env = {
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": server.base_url,
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_MODEL": "gpt-4.1",
            "COPILOT_PROVIDER_API_KEY": KEY,
        }
        agent = AgentConfig(name=name, kind="acp", command=str(copilot_cli), args=["--acp"], env=env)
    return structs.replace(agent, **{"sandbox_writable": builtin_tables()[name]["sandbox_writable"]})


@pytest.mark.parametrize("name", ["copilot", "copilot-acp"])
async def test_a_sandboxed_agent_writes_and_commits_its_worktree_and_nothing_else(
    name: str, copilot_cli: Path, model_server: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("the user's key\n")
    # git's identity as users have it (ACP agents get no GIT_* variables): readable in the sandbox.
    (home / ".gitconfig").write_text("[user]\n\tname = Test\n\temail = test@example.invalid\n")
    monkeypatch.setenv("HOME", str(home))  # the sandbox hides this home's secrets
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    repo = make_repo(tmp_path / "repo")
    state = tmp_path / "state"
    settings = Settings.read(None, state_dir=state, record=False, permission_policy=PermissionPolicy.ALLOW)
    engine = build_engine(settings, AgentCatalog({name: agent_for(name, copilot_cli, model_server, home)}))
    await engine.start()
    # Argvs no other test's process has, long enough to outlive the test unless ended.
    marker, stopped, foreground = (f"{n}.{os.getpid() % 1000}{len(name)}" for n in (4700, 4800, 4900))
    try:
        request = verbs.NewSession(name, "boxed", str(repo), Isolation.WORKTREE, "polypilot/boxed", sandbox=ON)
        sid = await engine.call(verbs.NEW_SESSION, request)
        tree = Path(engine.view(sid).workspace.folder)  # type: ignore[union-attr]
        assert tree.is_relative_to(state)  # the worktree lies in the hidden state folder
        await until(lambda: (state / "sessions.json").exists(), 10, "the session list saved")
        script = (
            "echo inside > inside.txt && git add inside.txt && git commit -qm sandboxed && echo COMMITTED; "
            f"echo evil > {home}/.ssh/evil; echo evil > {state}/evil; cat {state}/sessions.json | head -c 20; "
            f"cat {home}/.ssh/id_ed25519; (setsid sleep {marker} > /dev/null 2>&1 &); echo BACKGROUND"
        )
        await engine.call(verbs.SEND, verbs.Send(sid, f"TOOL CMD=`{script}`"))
        await until(lambda: engine.view(sid).turns >= 1, WAIT, f"{name}'s sandboxed turn")
        answer = engine.history(sid)[-1].text
        assert "COMMITTED" in answer and "BACKGROUND" in answer, answer
        assert "Read-only file system" in answer, answer
        assert "the user's key" not in answer and '"sessions"' not in answer, answer
        assert (tree / "inside.txt").read_text() == "inside\n"
        assert run(repo, "log", "-1", "--format=%s", "polypilot/boxed") == "sandboxed"
        assert not (home / ".ssh" / "evil").exists() and not (state / "evil").exists()
        assert sleeping(marker), "the tool's background process should outlive its turn"
        # Stop ends what the stopped turn's tools left, not the agent nor an earlier turn's.
        agent = set(bwrapped(tree))
        script = f"(setsid sleep {stopped} > /dev/null 2>&1 &); sleep {foreground}"
        await engine.call(verbs.SEND, verbs.Send(sid, f"TOOL CMD=`{script}`"))
        await until(lambda: sleeping(stopped) and sleeping(foreground), WAIT, "the tool of the turn to stop")
        await engine.call(verbs.STOP, verbs.SessionRef(sid))
        await until(lambda: not sleeping(stopped) and not sleeping(foreground), 15, "the stopped turn's processes")
        assert sleeping(marker), "an earlier turn's background process is not the stopped turn's"
        # The same agent runs the next turn's tool; a secret it cannot see reads as refused.
        await engine.call(verbs.SEND, verbs.Send(sid, f"TOOL CMD=`echo AFTER; cat {home}/.ssh/id_ed25519`"))
        await until(lambda: engine.view(sid).turns >= 3, WAIT, f"{name}'s turn after the Stop")
        assert "AFTER" in engine.history(sid)[-1].text and set(bwrapped(tree)) == agent
        row = [item for item in engine.history(sid) if item.tool_call_id][-1]
        assert row.tool_status == "refused", row
        await engine.call(verbs.CLOSE, verbs.SessionRef(sid))  # kills the agent's tree
        await until(lambda: not sleeping(marker), 15, "the background process to end with its agent")
    finally:
        await engine.close()
        for pid in sleeping(marker) + sleeping(stopped) + sleeping(foreground):
            os.kill(pid, 9)
