"""AcpBackend against the scripted fake ACP agent (a real subprocess speaking the protocol)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
from acp.client.connection import ClientSideConnection

from polypilot_tui.agents.acp.backend import STDERR_LOG, TRANSCRIPT, AcpBackend
from polypilot_tui.agents.base import BackendError
from polypilot_tui.config import ProviderConfig
from tests.agents.acp_support import Recorder, fake_backend
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def rec() -> Recorder:
    return Recorder()


@pytest.fixture
async def backend(tmp_path: Path, rec: Recorder):
    b = fake_backend(tmp_path, rec)
    result = await b.connect(None)
    assert result.how == "new session" and result.agent_session_id.startswith("fake-")
    yield b
    await b.close()


async def run_turn(b: AcpBackend, rec: Recorder, prompt: str, timeout: float = 15.0) -> dict:
    start = len(rec.events)
    await b.send(prompt)
    idle = await rec.wait_for("session.idle", after=start, timeout=timeout)
    return dict(idle.data)


async def test_plain_reply_streams_and_ends_with_turn_end_then_idle(
    backend: AcpBackend, rec: Recorder, tmp_path: Path
) -> None:
    idle = await run_turn(backend, rec, "hello")
    assert idle == {"stopReason": "end_turn", "aborted": False}
    types = rec.types()
    assert types[0] == "assistant.turn_start"
    assert types[-2:] == ["assistant.turn_end", "session.idle"]
    assert rec.text() == "Hello from the fake agent."
    message = rec.of("assistant.message")[-1]
    assert message.get("content") == "Hello from the fake agent." and "toolRequests" not in message.data
    assert {d.get("messageId") for d in rec.of("assistant.message_delta")} == {message.get("messageId")}
    assert rec.of("session.usage_info")[-1].data == {"currentTokens": 123, "tokenLimit": 1000}
    lines = [json.loads(x) for x in (tmp_path / "w1" / TRANSCRIPT).read_text().splitlines()]
    assert {x["dir"] for x in lines} == {"in", "out"}
    assert any(x["msg"].get("method") == "session/prompt" for x in lines)
    assert (tmp_path / "w1" / STDERR_LOG).exists()


async def test_thoughts_become_reasoning(backend: AcpBackend, rec: Recorder) -> None:
    await run_turn(backend, rec, "THINK first")
    assert "".join(e.text("deltaContent") for e in rec.of("assistant.reasoning_delta")) == "Let me think."
    assert rec.of("assistant.reasoning")[0].get("content") == "Let me think."


async def test_tool_call_with_permission_allowed_reads_a_file(backend: AcpBackend, rec: Recorder) -> None:
    await backend.send("TOOL please")
    ask = await rec.wait_for("permission.requested")
    assert ask.get("toolCallId") == "call-1" and ask.get("detail") == "cat README.md"
    assert ask.get("kind") == "execute"
    assert [o["optionId"] for o in ask.get("options")] == ["allow", "always", "reject"]
    assert backend.probe().agent_alive is True
    await backend.answer_permission(ask.get("requestId"), "allow_once")  # generic id → the agent's "allow"
    await rec.wait_for("session.idle")
    start = rec.of("tool.execution_start")[0]
    assert start.get("toolName") == "bash" and start.get("kind") == "execute"
    done = rec.of("tool.execution_complete")[0]
    assert done.get("success") is True and done.get("result") == {"content": "readme text\n"}
    assert done.get("toolName") == "bash"
    assert any(e.get("progressMessage") == "reading…" for e in rec.of("tool.execution_progress"))
    completed = rec.of("permission.completed")[0].data
    assert completed["optionId"] == "allow" and completed["result"] == {"kind": "approved"}
    assert [e.get("entries")[0]["status"] for e in rec.of("plan")] == ["in_progress", "completed"]
    assert "done: readme text" in rec.text()
    types = rec.types()
    assert (
        types.index("permission.requested")
        < types.index("permission.completed")
        < types.index("tool.execution_complete")
    )


async def test_rejected_tool_fails_and_the_turn_ends_normally(backend: AcpBackend, rec: Recorder) -> None:
    await backend.send("TOOL please")
    ask = await rec.wait_for("permission.requested")
    await backend.answer_permission(ask.get("requestId"), "reject_once")
    idle = await rec.wait_for("session.idle")
    assert idle.get("stopReason") == "end_turn"
    done = rec.of("tool.execution_complete")[0]
    assert done.get("success") is False and "rejected" in done.get("error")["message"]
    assert rec.of("permission.completed")[0].get("result") == {"kind": "denied-interactively-by-user"}


async def test_answers_are_checked_and_stale_ones_ignored(backend: AcpBackend, rec: Recorder) -> None:
    await backend.answer_permission("perm-404", "allow")  # nothing pending: ignored
    await backend.send("TOOL please")
    ask = await rec.wait_for("permission.requested")
    with pytest.raises(BackendError, match="not offered"):
        await backend.answer_permission(ask.get("requestId"), "bogus")
    await backend.answer_permission(ask.get("requestId"), "allow")
    await rec.wait_for("session.idle")


async def test_permission_before_its_tool_call_is_accepted(backend: AcpBackend, rec: Recorder) -> None:
    await backend.send("EARLYPERM")
    ask = await rec.wait_for("permission.requested")
    assert ask.get("toolCallId") == "early-1" and ask.get("title") == "cat README.md"
    assert not rec.of("tool.execution_start")
    await backend.answer_permission(ask.get("requestId"), "allow")
    await rec.wait_for("session.idle")
    assert [e.get("toolCallId") for e in rec.of("tool.execution_start")] == ["early-1"]
    assert rec.of("tool.execution_complete")[0].get("success") is True


async def test_stop_while_a_permission_prompt_is_open(backend: AcpBackend, rec: Recorder) -> None:
    await backend.send("TOOL please")
    ask = await rec.wait_for("permission.requested")
    began = time.monotonic()
    await backend.abort()
    assert time.monotonic() - began < 4.0  # answered by the cancel, not by the 5 s kill
    completed = rec.of("permission.completed")[0]
    assert completed.get("requestId") == ask.get("requestId") and completed.get("outcome") == "cancelled"
    tool = rec.of("tool.execution_complete")[0]
    assert tool.get("success") is False and tool.get("status") == "cancelled"
    idle = rec.of("session.idle")[-1]
    assert idle.get("aborted") is True and idle.get("stopReason") == "cancelled"
    assert not rec.of("connection.lost")
    assert (await run_turn(backend, rec, "again"))["stopReason"] == "end_turn"  # still usable


async def test_stop_a_slow_stream(backend: AcpBackend, rec: Recorder) -> None:
    await backend.send("SLOW")
    await rec.wait_for("assistant.message_delta")
    began = time.monotonic()
    await backend.abort()
    assert time.monotonic() - began < 4.0  # stopReason cancelled, not the 5 s kill
    assert rec.of("session.idle")[-1].get("aborted") is True
    assert rec.of("assistant.message")[-1].get("content").startswith("chunk 0")  # partial text flushed
    assert not rec.of("connection.lost")


async def test_stop_that_the_agent_ignores_kills_it(tmp_path: Path, rec: Recorder) -> None:
    b = fake_backend(tmp_path, rec, grace=0.5)
    try:
        await b.connect(None)
        await b.send("STUBBORN")
        await rec.wait_for("assistant.message_delta")
        await b.abort()
        lost = await rec.wait_for("connection.lost", timeout=5)
        assert "killed" in lost.get("reason")
        assert b.probe().agent_alive is False
        assert len(rec.of("connection.lost")) == 1
        with pytest.raises(BackendError):
            await b.send("more")
    finally:
        await b.close()


async def test_agent_crash_mid_turn_is_reported_within_a_second(backend: AcpBackend, rec: Recorder) -> None:
    await backend.send("CRASH")
    await rec.wait_for("assistant.message_delta")
    began = time.monotonic()
    lost = await rec.wait_for("connection.lost", timeout=3)
    assert time.monotonic() - began < 3.0  # at once, not after a watchdog tier
    assert "exit code 3" in lost.get("reason")
    assert rec.of("assistant.message")[-1].get("content") == "about to crash"  # flushed before the loss
    await asyncio.sleep(0.3)
    assert len(rec.of("connection.lost")) == 1
    assert backend.probe().agent_alive is False
    with pytest.raises(BackendError, match="not connected"):
        await backend.send("hello?")


async def test_agent_exit_while_idle_is_reported(backend: AcpBackend, rec: Recorder) -> None:
    await run_turn(backend, rec, "EXITLATER")
    lost = await rec.wait_for("connection.lost", timeout=3)
    assert "exit code 0" in lost.get("reason")


async def test_two_megabytes_of_stderr_do_not_hang(backend: AcpBackend, rec: Recorder, tmp_path: Path) -> None:
    await run_turn(backend, rec, "STDERR", timeout=10)
    log = tmp_path / "w1" / STDERR_LOG
    # Our reader drains the pipe on its own thread: give it a moment. All of it is kept (2 MB is within the cap).
    await until(lambda: log.stat().st_size >= 2_000_000, 10, "2 MB of stderr in the log")


async def test_update_that_fails_the_schema_is_still_mapped(backend: AcpBackend, rec: Recorder) -> None:
    await run_turn(backend, rec, "BADUPDATE")
    assert {"tokenLimit": 1000} in [e.data for e in rec.of("session.usage_info")]


async def test_update_for_an_unknown_tool_creates_it(backend: AcpBackend, rec: Recorder) -> None:
    await run_turn(backend, rec, "GHOSTCALL")
    assert rec.of("tool.execution_start")[0].get("toolCallId") == "ghost-1"
    assert rec.of("tool.execution_complete")[0].get("result") == {"content": "boo"}


async def test_tool_left_open_is_closed_when_the_turn_ends(backend: AcpBackend, rec: Recorder) -> None:
    await run_turn(backend, rec, "DANGLING")
    done = rec.of("tool.execution_complete")[0]
    assert done.get("toolCallId") == "dangle-1" and done.get("success") is False
    assert rec.types().index("tool.execution_complete") < rec.types().index("session.idle")


async def test_fs_write_inside_and_read_outside_the_cwd(backend: AcpBackend, rec: Recorder, tmp_path: Path) -> None:
    await run_turn(backend, rec, "WRITE OUTSIDE")
    assert (tmp_path / "ws" / "out.txt").read_text() == "written by fake agent\n"
    assert "outside read refused" in rec.text() and "outside the session folder" in rec.text()


async def test_agent_error_is_a_session_error(backend: AcpBackend, rec: Recorder) -> None:
    await backend.send("FAIL")
    error = await rec.wait_for("session.error")
    assert "scripted failure" in error.get("message")
    assert not rec.of("session.idle")
    assert (await run_turn(backend, rec, "hello"))["stopReason"] == "end_turn"


@pytest.mark.expect_errors(r"ACP prompt failed\nRuntimeError: a bug under the prompt")
async def test_a_bug_under_a_prompt_is_logged_in_full_and_still_ends_the_turn_visibly(
    backend: AcpBackend, rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: ClientSideConnection, **kwargs: object) -> None:
        raise RuntimeError("a bug under the prompt")

    monkeypatch.setattr(ClientSideConnection, "prompt", broken)
    await backend.send("hello")
    error = await rec.wait_for("session.error")
    assert "RuntimeError: a bug under the prompt" in error.get("message")


@pytest.mark.parametrize(("keyword", "reason"), [("REFUSE", "refusal"), ("MAXTOKENS", "max_tokens")])
async def test_unusual_stop_reasons_are_noted(backend: AcpBackend, rec: Recorder, keyword: str, reason: str) -> None:
    idle = await run_turn(backend, rec, keyword)
    assert idle["stopReason"] == reason and idle["note"]
    assert rec.of("system.message")


def _since(rec: Recorder, mark: int) -> tuple[list[str], str]:
    events = rec.events[mark:]
    return [e.type for e in events], "".join(
        e.text("deltaContent") for e in events if e.type == "assistant.message_delta"
    )


async def test_send_while_the_agent_is_still_on_a_closed_turn_cancels_that_turn_quietly(
    backend: AcpBackend, rec: Recorder
) -> None:
    # The engine sends only after it has ended the previous turn (its watchdog completed or
    # gave up on it); what the agent still says about that turn must not reach the next one.
    await backend.send("SLOW")
    await rec.wait_for("assistant.message_delta")
    mark = len(rec.events)
    idle = await run_turn(backend, rec, "hello")
    types, text = _since(rec, mark)
    assert idle == {"stopReason": "end_turn", "aborted": False}
    assert types[0] == "assistant.turn_start" and types.count("session.idle") == 1
    assert text == "Hello from the fake agent."


async def test_send_while_the_agent_ignores_cancel_of_a_closed_turn_restarts_it(tmp_path: Path, rec: Recorder) -> None:
    b = fake_backend(tmp_path, rec, grace=0.5)
    try:
        await b.connect(None)
        first_pid, session_id = b.pid, b.session_id
        await b.send("STUBBORN")
        await rec.wait_for("assistant.message_delta")
        mark = len(rec.events)
        idle = await run_turn(b, rec, "hello")
        types, text = _since(rec, mark)
        assert idle["stopReason"] == "end_turn" and text == "Hello from the fake agent."
        assert b.pid != first_pid and b.session_id == session_id  # restarted, same session
        assert "connection.lost" not in types and "system.message" not in types  # resumed: nothing to say
    finally:
        await b.close()


async def test_usage_updates_are_no_sign_of_life(backend: AcpBackend, rec: Recorder) -> None:
    # #230: a tool runs, then only usage arrives; the probe must see the agent go quiet.
    await backend.send("CHAOS usage-flood")
    await rec.wait_for("tool.execution_start")
    await asyncio.sleep(1.0)
    assert len(rec.of("session.usage_info")) >= 5
    assert backend.probe().log_age >= 0.9
    await backend.abort()


async def test_probe_reports_liveness_and_log_age(backend: AcpBackend, rec: Recorder) -> None:
    await run_turn(backend, rec, "hello")
    probe = backend.probe()
    assert probe.agent_alive is True and probe.log_age is not None and probe.log_age < 5
    assert probe.log_size is None and probe.log_last_type is None


async def test_close_during_a_turn_never_raises(tmp_path: Path, rec: Recorder) -> None:
    b = fake_backend(tmp_path, rec)
    await b.connect(None)
    await b.send("TOOL please")
    await rec.wait_for("permission.requested")
    began = time.monotonic()
    await b.close()
    await b.close()
    assert time.monotonic() - began < 6
    assert not rec.of("connection.lost")


async def test_missing_command_is_a_backend_error(tmp_path: Path, rec: Recorder) -> None:
    b = fake_backend(tmp_path, rec, command="/nonexistent/agent-binary")
    with pytest.raises(BackendError, match="cannot start"):
        await b.connect(None)
    await b.close()


# ---------------------------------------------------------------- reconnect after a crash


async def crash_then_reconnect(tmp_path: Path, caps: str, resume_with: str | None = None):
    first = Recorder()
    b1 = fake_backend(tmp_path, first, caps=caps)
    sid = (await b1.connect(None)).agent_session_id
    await run_turn(b1, first, "hello")
    await b1.send("TOOL please")
    ask = await first.wait_for("permission.requested")
    await b1.answer_permission(ask.get("requestId"), "allow")
    await first.wait_for("session.idle", after=first.events.index(ask))
    await b1.send("CRASH")
    await first.wait_for("connection.lost")
    await b1.close()
    second = Recorder()
    b2 = fake_backend(tmp_path, second, caps=caps, name="w2")
    result = await b2.connect(resume_with or sid)
    return sid, result, b2, second


async def test_reconnect_after_crash_resumes(tmp_path: Path) -> None:
    sid, result, b2, rec2 = await crash_then_reconnect(tmp_path, "load,resume")
    try:
        assert (result.agent_session_id, result.how, result.resumed) == (sid, "resumed", True)
        assert result.history == ()
        assert (await run_turn(b2, rec2, "after"))["stopReason"] == "end_turn"
    finally:
        await b2.close()


async def test_reconnect_after_crash_loads_and_replays_history(tmp_path: Path) -> None:
    sid, result, b2, rec2 = await crash_then_reconnect(tmp_path, "load")
    try:
        assert (result.agent_session_id, result.how) == (sid, "loaded (history replayed)")
        kinds = [e.type for e in result.history]
        users = [e.get("content") for e in result.history if e.type == "user.message"]
        assert users == ["hello", "TOOL please", "CRASH"]
        replies = [e.get("content") for e in result.history if e.type == "assistant.message"]
        assert replies[0] == "Hello from the fake agent." and replies[-1] == "about to crash"
        assert "tool.execution_start" in kinds and "plan" in kinds
        tool_done = [e for e in result.history if e.type == "tool.execution_complete"][0]
        assert tool_done.get("success") is True
        assert not rec2.of("assistant.message_delta")  # replay goes to history, not the live sink
        assert (await run_turn(b2, rec2, "after"))["stopReason"] == "end_turn"
    finally:
        await b2.close()


async def test_reconnect_to_an_agent_that_cannot_resume(tmp_path: Path) -> None:
    sid, result, b2, _ = await crash_then_reconnect(tmp_path, "")
    try:
        assert result.how == "new session (agent cannot resume)" and result.agent_session_id != sid
        assert result.resumed is False
    finally:
        await b2.close()


async def test_failed_resume_falls_back_to_a_new_session(tmp_path: Path) -> None:
    _, result, b2, _ = await crash_then_reconnect(tmp_path, "resume", resume_with="fake-unknown")
    try:
        assert result.how.startswith("new session (resume failed: session/resume failed")
        assert result.agent_session_id != "fake-unknown"
    finally:
        await b2.close()


async def test_connect_twice_on_one_backend_replaces_the_process(tmp_path: Path, rec: Recorder) -> None:
    b = fake_backend(tmp_path, rec)
    try:
        sid = (await b.connect(None)).agent_session_id
        result = await b.connect(sid)
        assert result.how == "resumed"
        assert (await run_turn(b, rec, "hello"))["stopReason"] == "end_turn"
        assert not rec.of("connection.lost")
    finally:
        await b.close()


async def test_cancelled_answer_before_abort_still_cancels_first(
    backend: AcpBackend, rec: Recorder, tmp_path: Path
) -> None:
    """The manager answers open prompts "cancelled" before it calls abort()."""
    await backend.send("TOOL please")
    ask = await rec.wait_for("permission.requested")
    await backend.answer_permission(ask.get("requestId"), "cancelled")
    await backend.abort()
    assert rec.of("session.idle")[-1].get("stopReason") == "cancelled"
    lines = [json.loads(x) for x in (tmp_path / "w1" / TRANSCRIPT).read_text().splitlines()]
    outgoing = [x["msg"].get("method") or "answer" for x in lines if x["dir"] == "out"]
    assert outgoing.count("session/cancel") == 1
    assert outgoing.index("session/cancel") < outgoing.index("answer")  # cancel reached the agent first


async def test_transcript_and_stderr_log_are_private_and_never_hold_a_key(
    tmp_path: Path, rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, token = "provider-key-0123456789", "configured-token-9876543210"
    monkeypatch.setenv("LLM_ACCESS", key)  # a variable whose name does not look secret
    b = fake_backend(
        tmp_path,
        rec,
        provider=ProviderConfig(base_url="http://127.0.0.1:9", api_key_env="LLM_ACCESS"),
        env={"SERVICE_TOKEN": token},
    )
    try:
        await b.connect(None)
        await run_turn(b, rec, f"echo {key} and {token}")  # the agent echoes the prompt back
    finally:
        await b.close()
    for name in (TRANSCRIPT, STDERR_LOG):
        path = tmp_path / "w1" / name
        assert path.stat().st_mode & 0o777 == 0o600, name
    text = (tmp_path / "w1" / TRANSCRIPT).read_text()
    assert key not in text and token not in text and "echo [redacted] and [redacted]" in text


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o700)
    return str(path)


async def test_a_program_that_does_not_speak_acp_is_named_as_such_within_seconds(tmp_path: Path, rec: Recorder) -> None:
    command = _script(tmp_path, "chatty", 'echo "this is not json-rpc"\nexec sleep 60\n')
    b = fake_backend(tmp_path, rec, command=command)
    started = time.monotonic()
    try:
        with pytest.raises(BackendError) as caught:
            await b.connect(None)
        assert time.monotonic() - started < 20  # not the 90 s initialize timeout
        assert "does not speak ACP" in str(caught.value) and "this is not json-rpc" in str(caught.value)
        assert any("this is not json-rpc" in line for line in b.diagnostics().stderr_tail)
    finally:
        await b.close()


async def test_an_agent_that_exits_during_initialize_says_its_exit_code(tmp_path: Path, rec: Recorder) -> None:
    command = _script(tmp_path, "quits", 'echo "usage: quits [--stdio]"\necho "quits: bad flag" >&2\nexit 7\n')
    b = fake_backend(tmp_path, rec, command=command)
    try:
        with pytest.raises(BackendError) as caught:
            await b.connect(None)
        assert "exited during initialize (exit code 7)" in str(caught.value)
        assert "usage: quits [--stdio]" in str(caught.value)
        assert "quits: bad flag" in b.diagnostics().stderr_tail
    finally:
        await b.close()


@pytest.mark.parametrize(("signum", "said"), [(signal.SIGKILL, "SIGKILL (9)"), (signal.SIGTERM, "SIGTERM (15)")])
async def test_an_agent_killed_by_a_signal_is_said_so_by_name(
    backend: AcpBackend, rec: Recorder, signum: signal.Signals, said: str
) -> None:
    await backend.send("SLOW")
    await rec.wait_for("assistant.message_delta")
    assert backend.pid is not None
    os.kill(backend.pid, signum)  # not asked to stop: a crash, an OOM kill
    lost = await rec.wait_for("connection.lost", timeout=5)
    assert f"killed by {said}" in lost.get("reason") and "code -" not in lost.get("reason"), lost.get("reason")
