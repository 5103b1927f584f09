"""AcpBackend driving real opencode and codex-acp against the scripted model, offline.

Each test is parametrized over both agents (see conftest.py). The tool command writes a
file, so codex (which runs read-only commands without asking) must ask too.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.agents.acp.backend import AcpBackend
from polypilot_tui.agents.acp.process import descendants
from polypilot_tui.agents.base import ALLOW_ONCE, REJECT_ONCE
from tests.agents.acp_support import Recorder
from tests.support.model_server import ModelServer
from tests.support.processes import alive
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

TOOL_PROMPT = "TOOL CMD=`echo made > out.txt && cat out.txt`"
Make = Callable[..., tuple[AcpBackend, Recorder]]


async def connected(make: Make, name: str = "s1", **kwargs) -> tuple[AcpBackend, Recorder, str]:
    backend, rec = make(name, **kwargs)
    result = await backend.connect(None)
    assert result.how == "new session" and result.agent_session_id
    return backend, rec, result.agent_session_id


async def answer_next(backend: AcpBackend, rec: Recorder, option: str, after: int = 0) -> dict:
    ask = await rec.wait_for("permission.requested", after=after, timeout=60)
    assert any(o["kind"] == option for o in ask.get("options")), ask.get("options")
    await backend.answer_permission(ask.get("requestId"), option)
    return dict(ask.data)


async def test_tool_call_allowed(make_backend: Make, workspace: Path, agent_name: str) -> None:
    backend, rec, _ = await connected(make_backend)
    try:
        await backend.send(TOOL_PROMPT)
        ask = await answer_next(backend, rec, ALLOW_ONCE)
        assert "out.txt" in ask["detail"] or "out.txt" in ask["title"], ask
        idle = await rec.wait_for("session.idle", timeout=60)
        assert idle.get("stopReason") == "end_turn"
        assert (workspace / "out.txt").read_text().strip() == "made"
        [start] = rec.of("tool.execution_start")
        assert "out.txt" in start.get("detail"), start.data  # the command, even when it came late
        done = [e for e in rec.of("tool.execution_complete") if e.get("success")]
        assert done, rec.types()
        assert "done:" in rec.text() and "made" in rec.text()
        assert rec.types().index("assistant.turn_end") < rec.types().index("session.idle")
    finally:
        await backend.close()


async def test_tool_call_rejected(make_backend: Make, workspace: Path, agent_name: str) -> None:
    backend, rec, _ = await connected(make_backend)
    try:
        await backend.send(TOOL_PROMPT)
        await answer_next(backend, rec, REJECT_ONCE)
        idle = await rec.wait_for("session.idle", timeout=60)
        assert not (workspace / "out.txt").exists()
        if agent_name == "codex":
            # codex's reject option is "abort": it ends the turn as cancelled and never
            # announces the tool call it asked about.
            assert idle.get("stopReason") == "cancelled" and not rec.of("tool.execution_start")
        else:
            assert idle.get("stopReason") == "end_turn"
            failed = [e for e in rec.of("tool.execution_complete") if not e.get("success")]
            assert failed, rec.types()
        mark = len(rec.events)
        await backend.send("hello again")  # the session still works after a rejection
        await rec.wait_for("session.idle", after=mark, timeout=60)
        assert "echo: hello again" in "".join(
            e.text("deltaContent") for e in rec.events[mark:] if e.type == "assistant.message_delta"
        )
    finally:
        await backend.close()


async def test_cancel_while_a_permission_prompt_is_open(make_backend: Make, workspace: Path) -> None:
    backend, rec, _ = await connected(make_backend)
    try:
        await backend.send(TOOL_PROMPT)
        ask = await rec.wait_for("permission.requested", timeout=60)
        began = time.monotonic()
        await backend.abort()
        assert time.monotonic() - began < 10
        idle = rec.of("session.idle")[-1]
        assert idle.get("aborted") is True and idle.get("stopReason") == "cancelled"
        completed = rec.of("permission.completed")[0]
        assert completed.get("requestId") == ask.get("requestId") and completed.get("outcome") == "cancelled"
        assert not rec.of("connection.lost")
        assert not (workspace / "out.txt").exists()
        mark = len(rec.events)
        await backend.send("hello after cancel")
        await rec.wait_for("session.idle", after=mark, timeout=60)
    finally:
        await backend.close()


async def test_crash_and_kill_mid_turn_then_reconnect(make_backend: Make) -> None:
    backend, rec, sid = await connected(make_backend)
    try:
        # One finished turn first: codex writes its session file asynchronously, and a crash
        # during the very first turn sometimes leaves nothing to resume (the backend then
        # falls back to a new session and says "resume failed: … not found").
        await backend.send("hello")
        await rec.wait_for("session.idle", timeout=60)
        mark = len(rec.events)
        await backend.send("tell me something SLOW")
        await rec.wait_for("assistant.message_delta", after=mark, timeout=60)
        began = time.monotonic()
        os.kill(backend.pid, signal.SIGKILL)  # a crash: nobody asked it to stop
        lost = await rec.wait_for("connection.lost", timeout=5)
        assert time.monotonic() - began < 2.5  # about at once (1 s is tight on a loaded 2-core box)
        assert "killed by SIGKILL (9)" in lost.get("reason") and "-9" not in lost.get("reason")
        assert backend.probe().agent_alive is False
    finally:
        await backend.close()
    again, rec2 = make_backend("s2")
    try:
        result = await again.connect(sid)
        assert (result.agent_session_id, result.how) == (sid, "resumed"), result.how
        await again.send("hello after the crash")
        await rec2.wait_for("session.idle", timeout=60)
        assert "echo: hello after the crash" in rec2.text()
        mark = len(rec2.events)
        await again.send("tell me something SLOW")
        await rec2.wait_for("assistant.message_delta", after=mark, timeout=60)
        children = descendants(again.pid)
        await again.kill()
        lost = await rec2.wait_for("connection.lost", timeout=5)
        assert "killed" in lost.get("reason")
        # No orphans left: each one is gone, or a zombie waiting for init to reap it (dead).
        await until_gone(children)
    finally:
        await again.close()


async def test_restart_then_resume_keeps_the_conversation(make_backend: Make, model_server: ModelServer) -> None:
    backend, rec, sid = await connected(make_backend)
    try:
        await backend.send("remember PINEAPPLE")
        await rec.wait_for("session.idle", timeout=60)
    finally:
        await backend.close()
    again, rec2 = make_backend("s2")
    try:
        result = await again.connect(sid)
        assert (result.agent_session_id, result.how, result.resumed) == (sid, "resumed", True)
        await again.send("what did I say")
        await rec2.wait_for("session.idle", timeout=60)
        last = [r for r in model_server.model_requests() if "what did I say" in r.text()][-1]
        assert "PINEAPPLE" in last.text()  # the agent still had the earlier turn
    finally:
        await again.close()


async def test_restart_then_load_replays_history(make_backend: Make) -> None:
    backend, rec, sid = await connected(make_backend)
    try:
        await backend.send("remember MANGO")
        await rec.wait_for("session.idle", timeout=60)
    finally:
        await backend.close()
    again, rec2 = make_backend("s2", prefer_load=True)
    try:
        result = await again.connect(sid)
        assert (result.agent_session_id, result.how) == (sid, "loaded (history replayed)")
        users = [e.get("content") for e in result.history if e.type == "user.message"]
        replies = [e.get("content") for e in result.history if e.type == "assistant.message"]
        assert any("remember MANGO" in u for u in users), result.history
        assert any("echo: remember MANGO" in r for r in replies), result.history
        assert not rec2.of("assistant.message_delta")
    finally:
        await again.close()


async def until_gone(pids: list[int], timeout: float = 5.0) -> None:
    """Every pid dead within ``timeout`` (a SIGKILL is delivered at once, the reaping may lag)."""
    await until(lambda: not any(alive(pid) for pid in pids), timeout, lambda: f"{[p for p in pids if alive(p)]} gone")
