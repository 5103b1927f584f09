"""The dashboard with ACP agents — the scripted fake agent and the real codex-acp — driven by
keys and checked on screen: prompt, reply, a tool's permission answered by key, Stop
mid-reply, Reconnect, then quit and start again. The fake agent offers only
``session/load``, so the restart also checks that a replayed conversation is history, never
the answer to the next prompt.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.config import AgentConfig
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.view import SessionStatus
from tests.agents.acp_support import FAKE_AGENT
from tests.e2e.dashboard import AGENT_WAIT, dashboard, see, send, status_line
from tests.support.acp_agents import CODEX_ACP, OPENCODE, codex_agent, opencode_agent
from tests.support.model_server import ModelServer
from tests.ui.helpers import screen_text, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SIZE = (150, 50)


class Script:
    """What to type for each step on one agent, and what its answer looks like."""

    def __init__(self, hello: str, hello_reply: str, tool: str, tool_reply: str, slow: str) -> None:
        self.hello, self.hello_reply, self.tool, self.tool_reply, self.slow = hello, hello_reply, tool, tool_reply, slow


def fake_setup(tmp_path: Path, model_server: ModelServer, npm_agent: Callable[..., Path]) -> tuple[AgentConfig, Script]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("readme text\n")
    agent = AgentConfig(
        name="fake",
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_AGENT)],
        cwd=work,
        env={"FAKE_ACP_STATE": str(tmp_path / "agent-state"), "FAKE_ACP_CAPS": "load"},
    )
    return agent, Script("hello", "Hello from the fake agent.", "TOOL please", "done: readme text", "SLOW please")


def codex_setup(
    tmp_path: Path, model_server: ModelServer, npm_agent: Callable[..., Path]
) -> tuple[AgentConfig, Script]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("readme text\n")
    agent = structs.replace(codex_agent(npm_agent(CODEX_ACP), model_server, tmp_path / "home"), cwd=work)
    # codex runs read-only commands without asking: a write forces the permission prompt.
    return agent, Script(
        "hello there",
        "echo: hello there",
        "TOOL CMD=`echo x > out.txt && cat README.md`",
        "Process exited with code 0",
        "SLOW please",
    )


def opencode_setup(
    tmp_path: Path, model_server: ModelServer, npm_agent: Callable[..., Path]
) -> tuple[AgentConfig, Script]:
    work = tmp_path / "work"
    work.mkdir()
    agent = structs.replace(opencode_agent(npm_agent(OPENCODE), model_server, tmp_path / "home"), cwd=work)
    return agent, Script("hello there", "echo: hello there", "TOOL now", "done: hi", "SLOW please")


SETUPS = {"fake": fake_setup, "codex": codex_setup, "opencode": opencode_setup}


@pytest.mark.parametrize("name", sorted(SETUPS))
async def test_an_acp_session_from_prompt_to_restore(
    name: str, model_server: ModelServer, npm_agent: Callable[..., Path], tmp_path: Path
) -> None:
    agent, script = SETUPS[name](tmp_path, model_server, npm_agent)
    state = tmp_path / "state"
    app = dashboard(state, {name: agent}, name, stop_grace_seconds=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected is not None, what="the first session")
        sid = app.selected
        await wait_for(
            pilot,
            lambda: app.engine.manager.view(sid).status is SessionStatus.IDLE,
            timeout=AGENT_WAIT,
            what="the agent connected",
        )

        await send(pilot, script.hello)
        await see(pilot, script.hello_reply)
        await wait_for(pilot, lambda: "Idle" in status_line(app), timeout=AGENT_WAIT, what="the turn's end drawn")

        await send(pilot, script.tool)
        await see(pilot, "Permission requested", "ctrl+g to answer by key")
        if name == "fake":  # codex asks before it announces the tool call: no row yet
            await see(pilot, "waiting")  # its tool row waits for us; it is not "running"
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: app.pane.permission.has_focus_within, what="the prompt focused")
        await see(pilot, " [y]", " [n]")  # the keys shown once they answer; every option, none cut off
        await pilot.press("y")
        await see(pilot, script.tool_reply)
        await wait_for(pilot, lambda: "Idle" in status_line(app), timeout=AGENT_WAIT)
        tools = [i for i in app.engine.manager.history(sid) if i.kind is ItemKind.TOOL]
        assert tools and tools[-1].tool_status == "completed", [t.tool_status for t in tools]

        await send(pilot, script.slow)
        await wait_for(
            pilot,
            lambda: len(app.engine.manager.streaming_text(sid)) > 10,
            timeout=AGENT_WAIT,
            what="the reply streaming",
        )
        assert "Writing" in status_line(app)
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: "Stopped" in status_line(app), timeout=30, what="Stopped on screen")
        assert [i for i in app.engine.manager.history(sid) if i.kind is ItemKind.ASSISTANT][-1].interrupted

        await pilot.press("ctrl+r")
        await see(pilot, "Session reconnected")
        await wait_for(pilot, lambda: app.engine.manager.view(sid).status is SessionStatus.IDLE, timeout=AGENT_WAIT)
        await wait_for(pilot, lambda: "Idle" in status_line(app), timeout=10, what='the status no longer "Stopped"')
        history = [(i.kind, i.text) for i in app.engine.manager.history(sid)]
        turns_before = app.engine.manager.view(sid).turns

    again = dashboard(state, {name: agent}, name, stop_grace_seconds=8)
    async with again.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: again.selected == sid, what="the session restored")
        assert [(i.kind, i.text) for i in again.engine.manager.history(sid)] == history
        await see(pilot, script.tool_reply)
        await send(pilot, script.hello)
        await wait_for(
            pilot,
            lambda: again.engine.manager.view(sid).turns == turns_before + 1,
            timeout=AGENT_WAIT,
            what="the first turn after the restart (the count carries over)",
        )
        new_rows = again.engine.manager.history(sid)[len(history) :]
        replies = [i.text for i in new_rows if i.kind is ItemKind.ASSISTANT]
        # Exactly one answer, and it answers this prompt: a conversation the agent replayed
        # while reconnecting (session/load) is never shown as the reply.
        assert len(replies) == 1 and script.hello_reply in replies[0], replies
        assert script.tool_reply not in replies[0]
        await wait_for(  # before and after the restart (drawn by the next coalesced redraw)
            pilot, lambda: screen_text(again).count(script.hello_reply) >= 2, timeout=10, what="both replies drawn"
        )
