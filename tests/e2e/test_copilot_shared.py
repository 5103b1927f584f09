"""Sessions of one agent configuration share one real Copilot CLI (the engine, SystemClock).

Each test counts the CLI processes of its own ``COPILOT_HOME`` in /proc, runs turns on the
scripted model server at the same time in several sessions, and checks that Stop, Kill,
Reconnect, a model switch and closing stay with the session they are meant for.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.copilot.backend import CopilotBackend
from polypilot_tui.config import PermissionPolicy
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.engine import verbs
from polypilot_tui.engine.manager import SessionManager
from tests.support.copilot_e2e import wait_on_disk
from tests.support.copilot_harness import (
    AGENT,
    alive,
    cli_pid,
    copilot_processes,
    home_processes,
    make_manager,
    texts,
)
from tests.support.model_server import ModelServer
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
async def manager(copilot_cli: Path, model_server: ModelServer, tmp_path: Path) -> AsyncIterator[SessionManager]:
    made = make_manager(copilot_cli, model_server, tmp_path, permission_policy=PermissionPolicy.ALLOW)
    yield made
    await made.shutdown()
    await until(lambda: not home_processes(tmp_path / "copilot-home"), 15, "every CLI to exit after shutdown")


def clis(copilot_cli: Path, tmp_path: Path) -> list[int]:
    """The Copilot CLI processes of this test's COPILOT_HOME."""
    return copilot_processes(copilot_cli, home=tmp_path / "copilot-home")


async def settled(manager: SessionManager, sid: str, turns: int, timeout: float = 60) -> None:
    session = manager.session(sid)
    await until(lambda: session.turn is None and len(session.turns) >= turns, timeout, f"turn {turns} of {sid}")


async def streaming(manager: SessionManager, sids: list[str]) -> None:
    """Until every one of ``sids`` is in a turn that has streamed text (all at once)."""

    def all_streaming() -> bool:
        turns = [manager.session(s).turn for s in sids]
        return all(t is not None and t.streamed_chars > 0 for t in turns)

    await until(all_streaming, 30, "every session to stream at the same time")


async def test_sessions_share_one_cli_and_each_gets_its_own_reply(
    manager: SessionManager, copilot_cli: Path, tmp_path: Path
) -> None:
    folders = [tmp_path / f"folder{i}" for i in range(3)]
    for folder in folders:
        folder.mkdir()
    sids = [await manager.create_session(AGENT, f"s{i}", cwd=str(folders[i])) for i in range(3)]
    assert len(clis(copilot_cli, tmp_path)) == 1, "three sessions of one agent must share one CLI"
    assert len({cli_pid(manager, s) for s in sids}) == 1
    # Each runs a shell tool that takes a while, in its own folder, at the same time.
    for i, sid in enumerate(sids):
        await manager.send(sid, f"TOOL CMD=`sleep 1.5; echo session{i} in $(pwd)`")

    def all_in_tools() -> bool:
        return all(manager.session(s).turn is not None and manager.session(s).turn.used_tools for s in sids)

    await until(all_in_tools, 30, "three tools running at once")
    for sid in sids:
        await settled(manager, sid, 1)
    for i, sid in enumerate(sids):
        assert manager.session(sid).last_outcome.outcome is Outcome.COMPLETED
        assert f"done: session{i} in {folders[i]}" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
    assert len({manager.session(s).agent_session_id for s in sids}) == 3
    assert len(clis(copilot_cli, tmp_path)) == 1


async def test_stop_aborts_one_session_while_the_other_finishes(
    manager: SessionManager, model_server: ModelServer, copilot_cli: Path, tmp_path: Path
) -> None:
    a, b = [await manager.create_session(AGENT, name) for name in ("a", "b")]
    pid = cli_pid(manager, a)
    model_server.hold()  # both replies stay mid-way until the Stop is done
    await manager.send(a, "something SLOW for a")
    await manager.send(b, "something SLOW for b")
    await streaming(manager, [a, b])
    await manager.stop(a)
    assert manager.session(a).last_outcome.outcome is Outcome.ABORTED
    assert manager.session(b).turn is not None, "Stop of one session must not end another's turn"
    model_server.release()
    await settled(manager, b, 1)
    assert manager.session(b).last_outcome.outcome is Outcome.COMPLETED
    assert cli_pid(manager, a) == cli_pid(manager, b) == pid and alive(pid), "Stop must abort, not kill"
    await manager.send(a, "are you back")
    await settled(manager, a, 2)
    assert "echo: are you back" in texts(manager, a, ItemKind.ASSISTANT)[-1]
    assert clis(copilot_cli, tmp_path) == [pid]


async def test_reconnect_of_one_session_keeps_the_others_turn(
    manager: SessionManager, model_server: ModelServer
) -> None:
    a, b = [await manager.create_session(AGENT, name) for name in ("a", "b")]
    pid = cli_pid(manager, a)
    await manager.send(a, "remember the word PELICAN")
    await settled(manager, a, 1)
    backend = manager.backend(a)
    assert backend is not None
    await wait_on_disk(getattr(backend, "log_path", None), "PELICAN")  # a session with no events cannot resume
    model_server.hold()  # b's reply stays mid-way until a's reconnect is done
    await manager.send(b, "something SLOW for b")
    await streaming(manager, [b])
    result = await manager.reconnect(a)
    assert result.resumed and cli_pid(manager, a) == pid, "the session comes back on the same CLI"
    assert manager.session(b).turn is not None
    model_server.release()
    await settled(manager, b, 1)
    assert manager.session(b).last_outcome.outcome is Outcome.COMPLETED
    await manager.send(a, "hello again")
    await settled(manager, a, 2)
    assert "echo: hello again" in texts(manager, a, ItemKind.ASSISTANT)[-1]


async def test_one_sessions_connect_timing_out_leaves_the_others_turn(
    manager: SessionManager, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await manager.create_session(AGENT, "a")
    pid = cli_pid(manager, a)
    backend = manager.backend(a)
    assert isinstance(backend, CopilotBackend) and pid is not None
    client = backend.connection.client  # the one CopilotClient every session of this agent uses

    async def create_that_never_answers(**_: object) -> None:
        await asyncio.Event().wait()

    # The one fault injected: the next create on the shared CLI never answers (and is given 2 s).
    monkeypatch.setattr(client, "create_session", create_that_never_answers)
    monkeypatch.setattr("polypilot_tui.agents.copilot.connection.START_TIMEOUT", 2.0)
    model_server.hold()  # a's reply stays mid-way for as long as b's create takes to time out
    await manager.send(a, "something SLOW for a")
    await streaming(manager, [a])
    with pytest.raises(BackendError, match="did not answer"):
        await manager.create_session(AGENT, "b")
    assert alive(pid) and cli_pid(manager, a) == pid, "the CLI still answers a ping: it is not killed"
    assert manager.session(a).turn is not None, "a's turn must not end with b's create"
    model_server.release()
    await settled(manager, a, 1)
    assert manager.session(a).last_outcome.outcome is Outcome.COMPLETED, "a's turn must not be disconnected"


async def test_sigkill_of_the_shared_cli_mid_turn_resumes_every_session(
    manager: SessionManager, model_server: ModelServer, copilot_cli: Path, tmp_path: Path
) -> None:
    sids = [await manager.create_session(AGENT, name) for name in ("a", "b")]
    agent_ids = [manager.session(s).agent_session_id for s in sids]
    for word, sid in zip(("PELICAN", "HERON"), sids, strict=True):
        await manager.send(sid, f"remember the word {word}")
    for sid in sids:
        await settled(manager, sid, 1)
    for word, sid in zip(("PELICAN", "HERON"), sids, strict=True):
        backend = manager.backend(sid)
        assert backend is not None
        await wait_on_disk(getattr(backend, "log_path", None), word)  # the CLI batches its log writes
    for sid in sids:
        await manager.send(sid, "now something SLOW")
    await streaming(manager, sids)
    pid = cli_pid(manager, sids[0])
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    for sid in sids:
        await until(lambda s=sid: manager.view(s).status.value == "disconnected", 5, "every session to notice")
        record = manager.session(sid).last_outcome
        assert record.outcome is Outcome.FAILED and "disconnected" in record.reason
        assert manager.session(sid).interrupted_prompt == "now something SLOW"  # one key resends it

    before = len(model_server.model_requests())
    for sid in sids:
        await manager.send(sid, "what was the word")
    for sid in sids:
        await settled(manager, sid, 3)
    new_pid = cli_pid(manager, sids[0])
    assert new_pid not in (None, pid) and cli_pid(manager, sids[1]) == new_pid, "both resume on one new CLI"
    assert clis(copilot_cli, tmp_path) == [new_pid]
    requests = model_server.model_requests()[before:]
    for word, sid, agent_id in zip(("PELICAN", "HERON"), sids, agent_ids, strict=True):
        session = manager.session(sid)
        assert session.agent_session_id == agent_id, "the next send must resume, not replace, the session"
        assert session.last_outcome.outcome is Outcome.COMPLETED
        assert any("Session reconnected: resumed" in t for t in texts(manager, sid, ItemKind.SYSTEM))
        request = next(r for r in requests if "what was the word" in r.text() and word in r.text())
        assert ({"PELICAN", "HERON"} - {word}).isdisjoint(request.text().split()), "histories must not mix"


async def test_a_stop_that_escalates_to_a_kill_tells_the_others(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    manager = make_manager(copilot_cli, model_server, tmp_path, stop_grace_seconds=1.0)
    try:
        a, b = [await manager.create_session(AGENT, name) for name in ("a", "b")]
        pid = cli_pid(manager, a)
        backend = manager.backend(a)
        assert backend is not None

        async def abort_that_never_returns() -> None:
            await asyncio.Event().wait()

        # The one fault injected: a's abort does not return, so its Stop kills the CLI after the grace.
        backend.abort = abort_that_never_returns  # type: ignore[method-assign]
        await manager.send(a, "something SLOW for a")
        await manager.send(b, "something SLOW for b")
        await streaming(manager, [a, b])
        await manager.stop(a)
        assert pid is not None
        await until(lambda: not alive(pid), 5, "the Stop to escalate to a kill of the shared CLI")
        assert manager.session(a).last_outcome.outcome is Outcome.ABORTED
        await until(lambda: manager.view(b).status.value == "disconnected", 5, "the other session to be told")
        record = manager.session(b).last_outcome
        assert record.outcome is Outcome.FAILED and "another session's turn" in record.reason
        assert manager.session(b).interrupted_prompt == "something SLOW for b"  # one key resends it
        for sid in (a, b):
            await manager.send(sid, f"still there {sid}")
        for sid in (a, b):
            await settled(manager, sid, 2)
            assert f"echo: still there {sid}" in texts(manager, sid, ItemKind.ASSISTANT)[-1]
        assert cli_pid(manager, a) == cli_pid(manager, b) != pid
    finally:
        await manager.shutdown()
    await until(lambda: not home_processes(tmp_path / "copilot-home"), 15, "every CLI to exit after shutdown")


async def test_a_model_switch_stays_with_its_session(manager: SessionManager, model_server: ModelServer) -> None:
    from polypilot_tui.engine.local import LocalEngine
    from tests.support.model_switch import models_asked

    engine = LocalEngine(manager)
    a, b = [await manager.create_session(AGENT, name) for name in ("a", "b")]
    await engine.call(verbs.SET_MODEL, verbs.SetModel(a, "gpt-5.4"))
    since = len(model_server.model_requests())
    await manager.send(a, "hello APPLE")
    await manager.send(b, "hello PEAR")
    await settled(manager, a, 1)
    await settled(manager, b, 1)
    assert models_asked(model_server, since, "APPLE")[:1] == ["gpt-5.4"]
    assert models_asked(model_server, since, "PEAR")[:1] == ["gpt-4.1"]


async def test_closing_every_session_leaves_no_cli(manager: SessionManager, copilot_cli: Path, tmp_path: Path) -> None:
    a, b = [await manager.create_session(AGENT, name) for name in ("a", "b")]
    [pid] = clis(copilot_cli, tmp_path)
    await manager.close(a)
    assert alive(pid), "the CLI serves b still"
    await manager.send(b, "just b now")
    await settled(manager, b, 1)
    assert "echo: just b now" in texts(manager, b, ItemKind.ASSISTANT)[-1]
    await manager.close(b)
    await until(lambda: not home_processes(tmp_path / "copilot-home"), 15, "the CLI to exit with its last session")
    c = await manager.create_session(AGENT, "c")  # a new session starts a new CLI
    assert clis(copilot_cli, tmp_path) == [cli_pid(manager, c)] and cli_pid(manager, c) != pid
