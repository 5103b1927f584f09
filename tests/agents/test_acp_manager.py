"""The real SessionManager and engine driving AcpBackend on the fake ACP agent.

These check that the events the ACP backend emits mean to the engine what they should:
a tool turn completes with its tool row, Stop during a permission prompt aborts cleanly,
and a crashed agent is reconnected (resumed) on the next send.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from polypilot_tui.agents.acp.backend import AcpBackend
from polypilot_tui.agents.base import ALLOW_ONCE, EventSink
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.engine.manager import SessionManager
from tests.agents.acp_support import FAKE_AGENT
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def manager(tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("readme text\n")
    agent = AgentConfig(
        name="fake",
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_AGENT)],
        env={"FAKE_ACP_STATE": str(tmp_path / "agent-state")},
    )
    settings = Settings.read(state_dir=tmp_path / "state", stop_grace_seconds=3.0)
    clock = SystemClock()

    def factory(name: str, sink: EventSink, workdir: Path) -> AcpBackend:
        return AcpBackend(agent, sink, clock, settings, workdir, cwd=workspace)

    mgr = SessionManager(settings, AgentCatalog({"fake": agent}), clock, backend_factory=factory)
    yield mgr
    await mgr.shutdown()


async def test_tool_turn_completes_with_its_tool_row(manager: SessionManager) -> None:
    sid = await manager.create_session("fake")
    session = manager.session(sid)
    await manager.send(sid, "TOOL please")
    await until(lambda: session.turn is not None and bool(session.turn.pending_permissions))
    [request_id] = list(session.turn.pending_permissions)
    await manager.answer_permission(sid, request_id, ALLOW_ONCE)
    await until(lambda: session.turn is None)
    assert session.last_outcome.outcome is Outcome.COMPLETED
    [tool] = [i for i in session.history if i.kind is ItemKind.TOOL]
    assert (tool.tool_name, tool.tool_status, tool.text) == ("bash", "completed", "readme text\n")
    assert tool.tool_detail == "cat README.md"
    replies = [i.text for i in session.history if i.kind is ItemKind.ASSISTANT]
    assert replies[-1] == "done: readme text Hello from the fake agent."
    assert session.usage.context_used == 123


async def test_stop_during_a_permission_prompt(manager: SessionManager) -> None:
    sid = await manager.create_session("fake")
    session = manager.session(sid)
    await manager.send(sid, "TOOL please")
    await until(lambda: session.turn is not None and bool(session.turn.pending_permissions))
    began = time.monotonic()
    await manager.stop(sid)
    assert time.monotonic() - began < 2.0
    assert session.turn is None and session.last_outcome.outcome is Outcome.ABORTED
    assert session.connected and not session.lost
    await manager.send(sid, "hello")
    await until(lambda: session.turn is None)
    assert session.last_outcome.outcome is Outcome.COMPLETED


async def test_crashed_agent_is_resumed_on_the_next_send(manager: SessionManager) -> None:
    sid = await manager.create_session("fake")
    session = manager.session(sid)
    agent_session = session.agent_session_id
    await manager.send(sid, "CRASH")
    await until(lambda: session.turn is None)
    assert session.last_outcome.outcome is Outcome.FAILED and "exit code 3" in session.lost
    assert any(i.text == "about to crash" for i in session.history)  # partial reply kept
    await manager.send(sid, "hello")
    await until(lambda: session.turn is None)
    assert session.last_outcome.outcome is Outcome.COMPLETED
    assert session.agent_session_id == agent_session
    assert any("reconnected: resumed" in i.text for i in session.history if i.kind is ItemKind.SYSTEM)


async def test_an_agent_failure_is_said_in_words_with_the_agents_own_stderr(manager: SessionManager) -> None:
    sid = await manager.create_session("fake")
    session = manager.session(sid)
    await manager.send(sid, "MODELDOWN")
    await until(lambda: session.turn is None)
    [error] = [i.text for i in session.history if i.kind is ItemKind.ERROR]
    first, fix, *rest = error.split("\n")
    # The failure named, the agent's own message (not a dict dump), the fix, then its last stderr lines.
    assert first.startswith(
        "Model server unreachable — agent error: stream disconnected before completion: error sending request"
    )
    assert fix.startswith("Fix: check that the model server is running")
    assert "{" not in first and "(Internal error)" in first
    assert "fake agent: error sending request for url (http://127.0.0.1:9/v1/responses)" in "\n".join(rest)
    details = manager.details(sid)
    assert any("error sending request" in line for line in details.stderr_tail)
    assert dict(details.log_paths)["Agent stderr"].endswith("agent-stderr.log")


async def test_a_crash_keeps_the_agents_last_stderr_lines_for_the_user(manager: SessionManager) -> None:
    sid = await manager.create_session("fake")
    session = manager.session(sid)
    await manager.send(sid, "CRASH")
    await until(lambda: session.turn is None)
    [error] = [i.text for i in session.history if i.kind is ItemKind.ERROR]
    assert "exit code 3" in error and "panic: scripted crash in the model loop" in error
    assert manager.details(sid).stderr_tail[-1] == "fake agent: panic: scripted crash in the model loop"


async def test_a_resume_that_falls_back_to_a_new_agent_session_says_the_context_is_gone(tmp_path: Path) -> None:
    agent = AgentConfig(
        name="fake",
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_AGENT)],
        env={"FAKE_ACP_STATE": str(tmp_path / "agent-state"), "FAKE_ACP_CAPS": ""},
    )
    settings = Settings.read(state_dir=tmp_path / "state", stop_grace_seconds=3.0)
    mgr = SessionManager(settings, AgentCatalog({"fake": agent}), SystemClock())
    try:
        sid = await mgr.create_session("fake")
        session = mgr.session(sid)
        await mgr.send(sid, "hello")
        await until(lambda: session.turn is None)
        await mgr.reconnect(sid)  # the agent offers neither load nor resume
        warning = [i.text for i in session.history if i.kind is ItemKind.ERROR][-1]
        assert "could not resume its earlier session" in warning and "does not remember" in warning
        assert not any("reconnected" in i.text for i in session.history if i.kind is ItemKind.SYSTEM)
    finally:
        await mgr.shutdown()
