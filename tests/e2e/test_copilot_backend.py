"""CopilotBackend against the real Copilot CLI and the scripted model, fully offline."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from polypilot_tui.agents.base import ALLOW_ONCE, REJECT_ONCE
from polypilot_tui.agents.copilot.backend import CopilotBackend
from polypilot_tui.config import AgentConfig
from tests.support.copilot_e2e import Collector, copilot_agent, make_backend, wait_on_disk
from tests.support.copilot_harness import running_under
from tests.support.model_server import ModelServer
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture
def agent(copilot_cli: Path, model_server: ModelServer, tmp_path: Path) -> AgentConfig:
    return copilot_agent(copilot_cli, model_server, tmp_path / "copilot-home", tmp_path / "work")


@pytest.fixture
async def connected(agent: AgentConfig, tmp_path: Path):
    backend, sink = make_backend(agent, tmp_path / "session")
    result = await backend.connect(None)
    assert result.agent_session_id and not result.resumed
    try:
        yield backend, sink
    finally:
        await backend.close()


async def approve_next(backend: CopilotBackend, sink: Collector, since: int, option: str = ALLOW_ONCE) -> str:
    request = await sink.wait("permission.requested", since)
    # A session-wide approval is offered only when the CLI says it can give one.
    can = (request.get("permissionRequest") or {}).get("canOfferSessionApproval") is not False
    offered = {o["optionId"] for o in request.get("options")}
    assert offered == {"allow_once", "reject_once"} | ({"allow_always"} if can else set())
    await backend.answer_permission(request.text("requestId"), option)
    return request.text("toolCallId")


async def test_tool_turn_runs_the_shell_and_answers(connected) -> None:
    backend, sink = connected
    await backend.send("please TOOL now")
    request = await sink.wait("permission.requested")
    assert request.get("kind") == "shell" and request.get("detail") == "echo hi"
    await backend.answer_permission(request.text("requestId"), ALLOW_ONCE)
    await sink.idle()
    [start] = sink.of("tool.execution_start")
    [done] = sink.of("tool.execution_complete")
    assert start.text("toolCallId") == done.text("toolCallId") == request.text("toolCallId")
    assert done.get("success") is True
    assert "done: hi" in sink.messages()
    assert len(sink.of("permission.completed")) == 1
    probes = backend.probe()
    assert probes is not None and probes.agent_alive is True


async def test_deny_then_approve(connected) -> None:
    backend, sink = connected
    await backend.send("TOOL one")
    await approve_next(backend, sink, 0, REJECT_ONCE)
    await sink.idle()
    [denied] = sink.of("tool.execution_complete")
    assert denied.get("success") is False
    mark = sink.mark()
    await backend.send("TOOL two")
    await approve_next(backend, sink, mark, ALLOW_ONCE)
    await sink.idle(mark)
    done = await sink.wait("tool.execution_complete", mark)
    assert done.get("success") is True and "done: hi" in sink.messages(mark)


async def test_abort_mid_stream_then_next_prompt_works(connected) -> None:
    backend, sink = connected
    await backend.send("tell me something SLOW")
    await sink.wait("assistant.message_delta")
    await backend.abort()
    idle = await sink.idle()
    assert idle.get("aborted") is True
    mark = sink.mark()
    await backend.send("hello again")
    await sink.idle(mark)
    assert "echo: hello again" in sink.messages(mark)


async def test_abort_mid_tool_closes_the_open_tool(connected) -> None:
    backend, sink = connected
    await backend.send("SLEEPTOOL please")
    call_id = await approve_next(backend, sink, 0)
    await sink.wait("tool.execution_start")
    assert backend.pid is not None
    await until(lambda: running_under(backend.pid, "sleep"), 10, "the tool's sleep to run")
    await backend.abort()
    done = await sink.wait("tool.execution_complete", where=lambda e: e.text("toolCallId") == call_id)
    assert done.get("success") is False and done.get("error") == {"message": "aborted", "code": "aborted"}
    await sink.idle()
    mark = sink.mark()
    await backend.send("still there?")
    await sink.idle(mark)
    assert "echo: still there?" in sink.messages(mark)


async def test_hanging_model_abort_leaves_session_usable(connected, model_server: ModelServer) -> None:
    backend, sink = connected
    await backend.send("HANG forever")
    await asyncio.to_thread(model_server.wait_for_requests, 1, 20)
    await asyncio.sleep(0.3)
    await backend.abort()
    assert (await sink.idle()).get("aborted") is True
    mark = sink.mark()
    await backend.send("are you back")
    await sink.idle(mark)
    assert "echo: are you back" in sink.messages(mark)


async def test_sigkill_mid_turn_then_resume_keeps_history(
    agent: AgentConfig, tmp_path: Path, model_server: ModelServer
) -> None:
    first, sink = make_backend(agent, tmp_path / "s1")
    await first.connect(None)
    await first.send("remember the word PELICAN")
    await sink.idle()
    await first.send("now something SLOW")
    await sink.wait("assistant.message_delta")
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    lost = await sink.wait("connection.lost", timeout=10)
    assert "exited" in lost.text("reason") or "closed" in lost.text("reason")
    assert first.probe().agent_alive is False
    await first.close()

    second, sink2 = make_backend(agent, tmp_path / "s2")
    result = await second.connect(first.session_id)
    try:
        assert result.resumed and result.agent_session_id == first.session_id
        before = len(model_server.model_requests())
        await second.send("what was the word")
        await sink2.idle()
        assert "echo: what was the word" in sink2.messages()
        request = model_server.model_requests()[before]
        assert "PELICAN" in request.text(), "the resumed session lost its history"
    finally:
        await second.close()


async def test_pending_permission_survives_a_restart(agent: AgentConfig, tmp_path: Path) -> None:
    first, sink = make_backend(agent, tmp_path / "s1")
    await first.connect(None)
    await first.send("TOOL before the crash")
    asked = await sink.wait("permission.requested")
    await wait_on_disk(first.log_path, asked.text("requestId"))
    await first.kill()
    assert (await sink.wait("connection.lost")).get("reason") == "killed"
    await first.close()

    second, sink2 = make_backend(agent, tmp_path / "s2")
    result = await second.connect(first.session_id)
    try:
        assert result.resumed and not result.interrupted_tool
        assert result.still_processing and not result.lost_turn  # the CLI carries the turn on
        again = await sink2.wait("permission.requested", timeout=5)
        assert again.text("requestId") == asked.text("requestId") and again.get("detail") == "echo hi"
        await second.answer_permission(again.text("requestId"), ALLOW_ONCE)
        done = await sink2.wait("tool.execution_complete")
        assert done.get("success") is True
        await sink2.idle()
        assert "done: hi" in sink2.messages()
    finally:
        await second.close()


async def test_killed_mid_tool_resume_reports_the_lost_turn(
    agent: AgentConfig, tmp_path: Path, model_server: ModelServer
) -> None:
    model_server.settings = replace(model_server.settings, sleep_cmd="sleep 30")
    first, sink = make_backend(agent, tmp_path / "s1")
    await first.connect(None)
    await first.send("SLEEPTOOL")
    call_id = await approve_next(backend=first, sink=sink, since=0)
    await sink.wait("tool.execution_start")
    await wait_on_disk(first.log_path, '"permission.completed"')
    await first.kill()
    await first.close()

    second, sink2 = make_backend(agent, tmp_path / "s2")
    result = await second.connect(first.session_id)
    try:
        # The CLI drops a turn whose tool died with it, and closes that tool itself.
        assert result.resumed and result.lost_turn and not result.still_processing
        closed = await sink2.wait("tool.execution_complete", where=lambda e: e.text("toolCallId") == call_id)
        assert closed.get("success") is False
        await second.send("fresh start")
        await sink2.idle()
        assert "echo: fresh start" in sink2.messages()
    finally:
        await second.close()


async def test_resume_of_an_unknown_session_falls_back_to_a_new_one(agent: AgentConfig, tmp_path: Path) -> None:
    backend, sink = make_backend(agent, tmp_path / "s")
    result = await backend.connect("00000000-0000-0000-0000-000000000000")
    try:
        assert not result.resumed and result.how.startswith("new session (resume failed: ")
        assert "Session not found" in result.how
        await backend.send("hi")
        await sink.idle()
        assert "echo: hi" in sink.messages()
    finally:
        await backend.close()


async def test_cancelled_connect_leaves_no_cli_behind(agent: AgentConfig, tmp_path: Path) -> None:
    backend, sink = make_backend(agent, tmp_path / "s")
    task = asyncio.create_task(backend.connect(None))
    proc = None
    for _ in range(500):
        proc = getattr(backend.connection.client, "_cli_process", None)
        if proc is not None:
            break
        await asyncio.sleep(0.01)
    assert proc is not None, "the CLI never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert proc.poll() is not None
    assert "connection.lost" not in sink.types()


async def test_three_sessions_at_once(agent: AgentConfig, tmp_path: Path) -> None:
    pairs = [make_backend(agent, tmp_path / f"s{i}") for i in range(3)]

    async def one(i: int, backend: CopilotBackend, sink: Collector) -> str:
        await backend.connect(None)
        await backend.send(f"TOOL CMD=`echo session{i}`")
        await approve_next(backend, sink, 0)
        await sink.idle()
        return sink.messages()

    try:
        answers = await asyncio.gather(*(one(i, b, s) for i, (b, s) in enumerate(pairs)))
    finally:
        await asyncio.gather(*(b.close() for b, _ in pairs))
    for i, text in enumerate(answers):
        assert f"done: session{i}" in text
    assert len({b.session_id for b, _ in pairs}) == 3
