"""Restart on the real Copilot CLI: SIGKILL the app mid-turn, start it again, check nothing is lost.

The app is tests/support/copilot_restart_driver.py (SessionManager + persistence + the real
CLI); the scripted model server lives here, in the test process, so it outlives the app.
Also: a recording the recorder made of a real Copilot turn replays (``polypilot replay``)
to the statuses the live session showed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.agents.base import ALLOW_ONCE
from polypilot_tui.commands.replay import run_trace
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.engine.persistence import attach_persistence
from tests.e2e.test_restart_demo import Driver, as_rows, written_through
from tests.support.copilot_harness import (
    AGENT,
    StatusLog,
    agents_toml,
    alive,
    home_processes,
    make_manager,
    run_env,
)
from tests.support.model_server import ModelServer
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ROOT = Path(__file__).parents[2]
DRIVER_MODULE = "tests.support.copilot_restart_driver"


class CopilotDriver(Driver):
    """The demo test's line-reading driver, started as our module with our environment."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        import queue
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-m", DRIVER_MODULE, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr or []), daemon=True).start()


async def test_sigkill_app_mid_turn_then_restore(copilot_cli: Path, model_server: ModelServer, tmp_path: Path) -> None:
    state = tmp_path / "state"
    agents = tmp_path / "agents.toml"
    agents.write_text(agents_toml(copilot_cli, model_server, tmp_path))
    env = run_env(state, agents)

    first = CopilotDriver(env, "fresh", str(state))
    try:
        ready = first.expect("ready", 90)
    finally:
        first.kill()  # mid-turn: SLOW streams for ~12 s
    assert first.proc.returncode == -signal.SIGKILL
    sid = ready["session_id"]
    old_cli = ready["cli_pid"]

    rows, draft = written_through(state, sid)
    assert rows == as_rows(ready["history"])  # both prompts and the first answer, written through
    assert [k for k, _, _ in rows] == ["user", "assistant", "user"]
    assert draft.startswith(ready["draft"]) and len(draft.split()) >= 6  # the reply streamed so far
    registry = json.loads((state / "sessions.json").read_text())
    [saved] = registry["sessions"]
    assert saved["turn_in_flight"] and saved["last_prompt"] == "now tell me something SLOW"
    assert saved["agent_session_id"] == ready["agent_session_id"]

    # The CLI loses its parent's pipes and must not linger as an orphan that keeps the turn going.
    await until(lambda: not alive(old_cli), 15, "the killed app's CLI to exit")

    second = CopilotDriver(env, "restore", str(state))
    try:
        restored = second.expect("restored", 30)
        assert restored["session_id"] == sid and restored["mid_turn"]
        assert restored["agent_session_id"] == saved["agent_session_id"]
        history = as_rows(restored["history"])
        assert history[: len(rows)] == rows  # everything written through is back
        assert history[len(rows)] == ("assistant", draft, True)  # the partial reply, marked interrupted

        outcome = second.expect("outcome", 45)
        assert outcome["seconds"] <= 35, outcome  # resumed or reported interrupted within the tier
        assert outcome["agent_session_id"] == saved["agent_session_id"], "restored by resuming, not replacing"
        if outcome["outcome"] != "completed":  # reported interrupted, with a one-key resend
            assert outcome["interrupted_prompt"] == "now tell me something SLOW", outcome
            assert any(
                h["kind"] == "error" and "interrupted by a restart of polypilot" in h["text"]
                for h in outcome["history"]
            ), outcome["history"]
        assert as_rows(outcome["history"])[: len(rows) + 1] == history[: len(rows) + 1]

        before = len(model_server.model_requests())
        asked = second.expect("asked", 60)
        assert asked["outcome"] == "completed" and asked["status"] == "idle", asked
        assert asked["history"][-1]["text"] == "echo: what was the word"
        closed = second.expect("closed", 30)
        assert second.proc.wait(30) == 0
    finally:
        second.kill()
    request = next(r for r in model_server.model_requests()[before:] if "what was the word" in r.last.text)
    assert "PELICAN" in request.text(), "the CLI's own history of the session was lost"

    # The restored run's recording starts with the restore line and the resume's hints.
    trace = Path(closed["recording"]).read_text().splitlines()
    restore = json.loads(trace[0])["restore"]
    assert restore["mid_turn"] and restore["prompt"] == "now tell me something SLOW"
    assert restore["lost_turn"] is (outcome["reason"] == "the agent lost this turn in the restart")
    replayed = await run_trace(trace)  # the restore and the next prompt end the same way in replay
    assert [t["turn_end"] for t in replayed.timeline if "turn_end" in t] == [outcome["outcome"], "completed"]
    assert not home_processes(tmp_path / "copilot-home"), "a CLI (or its child) outlived the app"


async def test_sigkill_app_at_a_permission_prompt_then_the_turn_resumes(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    agents = tmp_path / "agents.toml"
    agents.write_text(agents_toml(copilot_cli, model_server, tmp_path))
    env = run_env(state, agents)
    first = CopilotDriver(env, "fresh-permission", str(state))
    try:
        ready = first.expect("ready", 90)
    finally:
        first.kill()
    assert ready["status"] == "awaiting_permission"
    await until(lambda: not alive(ready["cli_pid"]), 15, "the killed app's CLI to exit")

    second = CopilotDriver(env, "restore-permission", str(state))
    try:
        asking = second.expect("asking", 45)
        assert asking["seconds"] <= 35 and asking["request_id"] == ready["request_id"]  # the same request
        assert asking["status"] == "awaiting_permission"
        outcome = second.expect("outcome", 60)
        second.expect("closed", 30)
        assert second.proc.wait(30) == 0
    finally:
        second.kill()
    assert outcome["outcome"] == "completed" and outcome["turns"] == 1, outcome  # resumed, not lost
    assert outcome["statuses"][-1] == "idle", outcome["statuses"]
    tools = [h for h in outcome["history"] if h["kind"] == "tool"]
    assert tools and tools[-1]["text"].splitlines()[0] == "resumed-ok", tools
    assert "done: resumed-ok" in outcome["history"][-1]["text"]
    assert not home_processes(tmp_path / "copilot-home")


async def test_recording_of_a_real_turn_replays_to_the_live_statuses(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    manager = make_manager(copilot_cli, model_server, tmp_path, record=True)
    persistence = attach_persistence(manager, manager.settings)
    statuses = StatusLog(manager)
    try:
        sid = await manager.create_session(AGENT)
        session = manager.session(sid)
        await manager.send(sid, "please TOOL now")
        await until(lambda: session.turn is not None and bool(session.turn.pending_permissions), 30, "permission")
        await manager.answer_permission(sid, next(iter(session.turn.pending_permissions)), ALLOW_ONCE)
        await until(lambda: session.turn is None, 45, "the tool turn to end")
        await manager.send(sid, "then something SLOW")
        await until(lambda: session.turn is not None and session.turn.streamed_chars > 0, 30, "streamed text")
        await manager.stop(sid)
        await manager.send(sid, "and a plain one")
        await until(lambda: session.turn is None and len(session.turns) == 3, 45, "the third turn to end")
        assert [t.outcome for t in session.turns] == [Outcome.COMPLETED, Outcome.ABORTED, Outcome.COMPLETED]
        recording = persistence.recorder.path(sid) if persistence.recorder else None
        assert recording is not None
    finally:
        await manager.shutdown()
        await persistence.close()
    live = statuses.since(sid)

    replay = subprocess.run(
        [sys.executable, "-m", "polypilot_tui.cli", "replay", "--json", str(recording)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert replay.returncode == 0, replay.stderr
    timeline = [json.loads(line) for line in replay.stdout.splitlines()]
    replayed = [t["status"] for t in timeline if "status" in t]
    replayed = [s for i, s in enumerate(replayed) if i == 0 or replayed[i - 1] != s]
    assert [t["turn_end"] for t in timeline if "turn_end" in t] == ["completed", "aborted", "completed"]
    # No noise to ignore: both start idle → connecting → idle (the replay connects its trace
    # backend the way create_session connects the CLI), then match status for status:
    # sending, thinking, working, awaiting_permission, working, thinking, idle, …, stopped, …
    assert replayed == live, (replayed, live)
    assert "awaiting_permission" in live and "stopped" in live


async def test_restored_turn_recording_keeps_the_resume_hints(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    first = make_manager(copilot_cli, model_server, tmp_path, record=True)
    persistence = attach_persistence(first, first.settings)
    sid = await first.create_session(AGENT)
    session = first.session(sid)
    await first.send(sid, "something SLOW")
    await until(lambda: session.turn is not None and session.turn.streamed_chars > 0, 30, "streamed text")
    await first.shutdown()  # the app quits mid-turn: the registry keeps the turn in flight
    await persistence.close()

    second = make_manager(copilot_cli, model_server, tmp_path, record=True)
    persistence = attach_persistence(second, second.settings)
    try:
        assert persistence.restored.mid_turn == [sid]
        restored = second.session(sid)
        await until(lambda: restored.turn is None, 40, "the restored turn to end")
        live = [t.outcome.value for t in restored.turns]
        recording = persistence.recorder.path(sid) if persistence.recorder else None
    finally:
        await second.shutdown()
        await persistence.close()
    assert live == ["failed"] and restored.last_outcome.reason.startswith("the agent lost this turn")
    assert recording is not None
    trace = recording.read_text().splitlines()
    replayed = await run_trace(trace)
    assert json.loads(trace[0])["restore"].get("lost_turn") is True
    assert [t["turn_end"] for t in replayed.timeline if "turn_end" in t] == live
