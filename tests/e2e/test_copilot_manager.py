"""The SessionManager driving the real Copilot CLI (default backend factory, SystemClock).

The agents catalog has one entry of kind ``copilot``: the cached CLI as command, the
scripted model server as BYOK provider, its key in a test env var. Every wait polls a
condition with a deadline; statuses are what the sidebar showed (StatusLog).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from polypilot_tui.agents.base import ALLOW_ONCE, REJECT_ONCE
from polypilot_tui.config import WatchdogSettings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import attach_persistence
from tests.support.copilot_e2e import wait_on_disk
from tests.support.copilot_harness import (
    AGENT,
    StatusLog,
    alive,
    cli_pid,
    in_order,
    make_manager,
    running_under,
    texts,
)
from tests.support.model_server import ModelServer
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

MakeManager = Callable[..., SessionManager]


@pytest.fixture
async def managers(copilot_cli: Path, model_server: ModelServer, tmp_path: Path) -> AsyncIterator[MakeManager]:
    """``make(**settings)`` → a manager; every one is shut down and its CLIs checked gone."""
    made: list[SessionManager] = []

    def make(**settings: object) -> SessionManager:
        manager = make_manager(copilot_cli, model_server, tmp_path, **settings)  # type: ignore[arg-type]
        made.append(manager)
        return manager

    yield make
    pids = [p for m in made for sid in m.ids() if (p := cli_pid(m, sid))]
    for manager in made:
        await manager.shutdown()
    await until(lambda: not any(alive(p) for p in pids), 15, "every CLI to exit after shutdown")


@pytest.fixture
def manager(managers: MakeManager) -> SessionManager:
    return managers()


async def settled(manager: SessionManager, sid: str, turns: int, timeout: float = 45) -> float:
    """Until the session has ended ``turns`` turns and is at rest."""
    session = manager.session(sid)
    return await until(
        lambda: session.turn is None and len(session.turns) >= turns, timeout, f"turn {turns} of {sid} to end"
    )


async def pending(manager: SessionManager, sid: str) -> str:
    """The id of the permission request the session waits on."""
    session = manager.session(sid)
    await until(lambda: session.turn is not None and bool(session.turn.pending_permissions), 30, "a permission request")
    assert session.turn is not None
    [request_id] = list(session.turn.pending_permissions)
    return request_id


async def test_tool_turn_asks_permission_then_runs(manager: SessionManager) -> None:
    statuses = StatusLog(manager)
    sid = await manager.create_session(AGENT)
    await manager.send(sid, "please TOOL now")
    request_id = await pending(manager, sid)
    view = manager.view(sid)
    assert view.status.value == "awaiting_permission"
    assert view.pending_permission is not None and "echo hi" in (
        view.pending_permission.detail + view.pending_permission.title
    )
    await manager.answer_permission(sid, request_id, ALLOW_ONCE)
    await settled(manager, sid, 1)
    assert manager.session(sid).last_outcome.outcome is Outcome.COMPLETED
    seen = statuses.since(sid)
    assert in_order(seen, ["awaiting_permission", "working", "idle"]), seen
    assert seen[-1] == "idle"
    [tool] = [i for i in manager.history(sid) if i.kind is ItemKind.TOOL]
    assert tool.tool_status == "completed" and tool.text.splitlines()[0] == "hi"
    assert any("done: hi" in t for t in texts(manager, sid, ItemKind.ASSISTANT))


async def test_deny_then_approve(manager: SessionManager) -> None:
    sid = await manager.create_session(AGENT)
    await manager.send(sid, "TOOL one")
    await manager.answer_permission(sid, await pending(manager, sid), REJECT_ONCE)
    await settled(manager, sid, 1)
    assert manager.session(sid).last_outcome.outcome is Outcome.COMPLETED  # the model answers the denial
    assert [i.tool_status for i in manager.history(sid) if i.kind is ItemKind.TOOL] == ["rejected"]

    await manager.send(sid, "TOOL two")
    await manager.answer_permission(sid, await pending(manager, sid), ALLOW_ONCE)
    await settled(manager, sid, 2)
    assert [i.tool_status for i in manager.history(sid) if i.kind is ItemKind.TOOL] == ["rejected", "completed"]
    assert "done: hi" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
    assert manager.view(sid).status.value == "idle"


async def test_stop_mid_stream_then_the_session_answers_again(manager: SessionManager) -> None:
    statuses = StatusLog(manager)
    sid = await manager.create_session(AGENT)
    pid = cli_pid(manager, sid)
    session = manager.session(sid)
    await manager.send(sid, "tell me something SLOW")
    await until(lambda: session.turn is not None and session.turn.streamed_chars > 0, 30, "streamed text")
    began = time.monotonic()
    await manager.stop(sid)
    assert time.monotonic() - began < manager.settings.stop_grace_seconds
    assert session.last_outcome.outcome is Outcome.ABORTED and manager.view(sid).status.value == "stopped"
    assert cli_pid(manager, sid) == pid, "Stop must abort the turn, not kill the agent"
    streamed = [i for i in manager.history(sid) if i.kind is ItemKind.ASSISTANT]
    assert streamed and streamed[-1].text.startswith("word0"), "the text streamed before Stop is kept"

    await manager.send(sid, "hello again")  # at once: a late echo of the abort must not end this turn
    await settled(manager, sid, 2)
    assert [t.outcome for t in session.turns] == [Outcome.ABORTED, Outcome.COMPLETED]
    assert "echo: hello again" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
    assert in_order(statuses.since(sid), ["thinking", "stopped", "idle"])


async def test_stop_mid_tool_closes_the_tool_and_the_session_works(managers: MakeManager) -> None:
    manager = managers(permission_policy="allow")
    sid = await manager.create_session(AGENT)
    session = manager.session(sid)
    await manager.send(sid, "SLEEPTOOL please")
    await until(lambda: session.turn is not None and bool(session.turn.active_tools), 30, "the tool to start")
    pid = cli_pid(manager, sid)
    assert pid is not None
    await until(lambda: running_under(pid, "sleep"), 10, "the tool's sleep to run")
    await manager.stop(sid)
    assert manager.view(sid).status.value == "stopped"
    [tool] = [i for i in manager.history(sid) if i.kind is ItemKind.TOOL]
    assert tool.tool_status != "running", "a stopped tool must not stay running"

    await manager.send(sid, "still there?")
    await settled(manager, sid, 2)
    assert session.last_outcome.outcome is Outcome.COMPLETED
    assert "echo: still there?" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
    # The model heard that the tool was interrupted, and no second sleep started.
    assert not any(i.tool_status == "running" for i in manager.history(sid) if i.kind is ItemKind.TOOL)


async def test_stop_while_a_permission_prompt_is_open(manager: SessionManager, model_server: ModelServer) -> None:
    sid = await manager.create_session(AGENT)
    session = manager.session(sid)
    await manager.send(sid, "TOOL CMD=`echo must-not-run`")
    await pending(manager, sid)
    began = time.monotonic()
    await manager.stop(sid)
    assert time.monotonic() - began < manager.settings.stop_grace_seconds  # no kill was needed
    assert manager.view(sid).status.value == "stopped" and manager.view(sid).pending_permission is None
    await manager.send(sid, "anything else")
    await settled(manager, sid, 2)
    assert session.last_outcome.outcome is Outcome.COMPLETED
    assert "echo: anything else" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
    tools = [i for i in manager.history(sid) if i.kind is ItemKind.TOOL]
    assert all("must-not-run" not in t.text for t in tools), "a cancelled permission must not run the tool"


async def test_hanging_model_ends_stuck_by_the_watchdog(managers: MakeManager, model_server: ModelServer) -> None:
    manager = managers(watchdog=WatchdogSettings(inactivity=5))
    statuses = StatusLog(manager)
    sid = await manager.create_session(AGENT)
    session = manager.session(sid)
    began = time.monotonic()
    await manager.send(sid, "HANG forever")
    took = await settled(manager, sid, 1, timeout=20)
    assert session.last_outcome.outcome is Outcome.STUCK, session.last_outcome
    assert 4.5 <= time.monotonic() - began <= 9, f"stuck after {time.monotonic() - began:.1f} s (tier 5 s)"
    assert took <= 9
    assert manager.view(sid).status.value == "stuck"
    assert in_order(statuses.since(sid), ["sending", "stuck"])

    await manager.send(sid, "are you back")
    await settled(manager, sid, 2)
    assert session.last_outcome.outcome is Outcome.COMPLETED, session.last_outcome
    assert "echo: are you back" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
    assert manager.view(sid).status.value == "idle"


async def _kill_mid_turn(manager: SessionManager, sid: str, server: ModelServer) -> tuple[int, float]:
    """Remember a word, start a SLOW turn, SIGKILL the CLI; returns (pid, seconds to disconnected)."""
    session = manager.session(sid)
    await manager.send(sid, "remember the word PELICAN")
    await settled(manager, sid, 1)
    backend = manager.backend(sid)
    await wait_on_disk(backend.log_path, "PELICAN")  # the CLI batches its log writes
    await manager.send(sid, "now something SLOW")
    await until(lambda: session.turn is not None and session.turn.streamed_chars > 0, 30, "streamed text")
    pid = cli_pid(manager, sid)
    assert pid is not None
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    await until(lambda: manager.view(sid).status.value == "disconnected", 5, "status disconnected")
    took = time.monotonic() - killed
    assert session.last_outcome.outcome is Outcome.FAILED and "disconnected" in session.last_outcome.reason
    assert time.monotonic() - killed < 5
    return pid, took


async def test_sigkill_mid_turn_then_next_send_resumes(manager: SessionManager, model_server: ModelServer) -> None:
    sid = await manager.create_session(AGENT)
    agent_sid = manager.session(sid).agent_session_id
    pid, took = await _kill_mid_turn(manager, sid, model_server)
    assert took < 2, f"disconnected only after {took:.1f} s"
    assert manager.view(sid).reason  # the sidebar says why

    before = len(model_server.model_requests())
    await manager.send(sid, "what was the word")
    await settled(manager, sid, 3)
    session = manager.session(sid)
    assert session.last_outcome.outcome is Outcome.COMPLETED, session.last_outcome
    assert session.agent_session_id == agent_sid, "the next send must resume, not replace, the session"
    assert cli_pid(manager, sid) not in (None, pid)
    request = next(r for r in model_server.model_requests()[before:] if "what was the word" in r.text())
    assert "PELICAN" in request.text(), "the resumed session lost its history"
    assert manager.view(sid).status.value == "idle"


async def test_sigkill_mid_turn_then_reconnect_resumes(manager: SessionManager, model_server: ModelServer) -> None:
    sid = await manager.create_session(AGENT)
    agent_sid = manager.session(sid).agent_session_id
    await _kill_mid_turn(manager, sid, model_server)
    result = await asyncio.wait_for(manager.reconnect(sid), 60)
    assert result.resumed and result.agent_session_id == agent_sid
    assert manager.view(sid).status.value != "disconnected"
    before = len(model_server.model_requests())
    await manager.send(sid, "what was the word")
    await settled(manager, sid, 3)
    assert manager.session(sid).last_outcome.outcome is Outcome.COMPLETED
    request = next(r for r in model_server.model_requests()[before:] if "what was the word" in r.text())
    assert "PELICAN" in request.text()


async def test_three_sessions_at_once(manager: SessionManager) -> None:
    sids = list(await asyncio.gather(*(manager.create_session(AGENT, f"s{i}") for i in range(3))))
    await asyncio.gather(*(manager.send(sid, f"TOOL CMD=`echo session{i}`") for i, sid in enumerate(sids)))

    async def approve(sid: str) -> None:
        await manager.answer_permission(sid, await pending(manager, sid), ALLOW_ONCE)
        await settled(manager, sid, 1)

    await asyncio.gather(*(approve(sid) for sid in sids))
    for i, sid in enumerate(sids):
        assert manager.session(sid).last_outcome.outcome is Outcome.COMPLETED
        [tool] = [t for t in manager.history(sid) if t.kind is ItemKind.TOOL]
        assert tool.text.splitlines()[0] == f"session{i}"
        assert f"done: session{i}" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
    assert len({manager.session(s).agent_session_id for s in sids}) == 3
    assert len({cli_pid(manager, s) for s in sids}) == 1  # one agent configuration, one shared CLI


async def test_a_tool_with_credentials_in_its_command_leaves_them_in_no_file(
    managers: MakeManager, tmp_path: Path
) -> None:
    """The real CLI runs a shell tool whose command holds a URL with a password and a token:
    its title, arguments, permission detail, output and the model's reply hold them. Every
    file of the state folder (history, recordings, registry, logs) is searched for them."""
    password, token = "Zr8-" + "k3Lm" * 5, "ghp_" + "Ab3dEf6hIj9kLm2nOp5q" * 2
    manager = managers(record=True)
    persistence = attach_persistence(manager, manager.settings)
    sid = await manager.create_session(AGENT)
    await manager.send(sid, f"please TOOL CMD=`echo postgres://app:{password}@db/x {token}`")
    await manager.answer_permission(sid, await pending(manager, sid), ALLOW_ONCE)
    await settled(manager, sid, 1)
    shown = [(i.kind, i.tool_name, i.text, i.tool_detail) for i in manager.history(sid)]
    assert any(f"app:{password}@db" in str(i) for i in shown), shown  # on screen as said
    await persistence.flush()
    await manager.shutdown()
    await persistence.close()
    state = tmp_path / "state"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name == "history.db" for p in files) and any("recordings" in p.parts for p in files)
    for path in files:
        data = path.read_bytes()
        assert password[:8].encode() not in data and token[4:14].encode() not in data, path.relative_to(state)
