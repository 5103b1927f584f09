"""Issue #11.3, .6, .7, .8 and .9: what agent processes do to the app, and what is left of them.

- a chatty agent's stderr log stays within its cap (it grew to 2.8 GB in one turn);
- ``polypilot run`` strips terminal control sequences (OSC 52 clipboard writes, titles,
  OSC 8, clear screen reached the terminal raw) and shows invalid UTF-8 with replacement
  characters (the update was dropped whole, with a traceback);
- Stop during a hung ``initialize`` cancels the connect (it ran on for 90 s, then a second
  agent was started for the stopped turn);
- agents die with the app: after a SIGKILL of the app its agent processes (and their
  children) are gone within about a second (7 of 16 outlived it by more); a completed
  ``polypilot run`` leaves no ``sessions/<id>/`` folder behind.

Every agent here is a real process (the fake ACP agent, run directly or through ``sh``).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polypilot_tui.agents import create_backend
from polypilot_tui.agents.acp.backend import STDERR_LOG, AcpBackend
from polypilot_tui.agents.base import AgentBackend, EventSink
from polypilot_tui.agents.stderr_log import MAX_LOG_BYTES, TAIL_BYTES
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.engine.manager import SessionManager
from tests.reliability.conftest import (
    FAKE_AGENT,
    POLYPILOT,
    ROOT,
    Dashboard,
    alive,
    clean_env,
    descendants,
    fake_agents_file,
    polypilot,
)
from tests.support.waiting import until, until_blocking


def fake_agent(tmp_path: Path, **env: str) -> AgentConfig:
    return AgentConfig(
        name="fake",
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_AGENT)],
        env={"FAKE_ACP_STATE": str(tmp_path / "agent-state"), **env},
        cwd=tmp_path,
    )


# ---- 3: a chatty agent's stderr --------------------------------------------------------------
async def test_a_chatty_agent_cannot_fill_the_disk_with_its_stderr(tmp_path: Path) -> None:
    events: list[str] = []
    settings = Settings.read(None, state_dir=tmp_path / "state", stop_grace_seconds=2.0)
    backend = AcpBackend(fake_agent(tmp_path), lambda e: events.append(e.type), SystemClock(), settings, tmp_path / "w")
    try:
        await asyncio.wait_for(backend.connect(None), 30)
        await backend.send("CHATTY 60")  # 60 MB of log lines during one turn
        await until(lambda: "session.idle" in events, 60, lambda: f"the turn's end (events: {events})")
    finally:
        await backend.close()
    log = tmp_path / "w" / STDERR_LOG
    # The reader writes the tail once the agent has closed stderr.
    await until(lambda: b"the log reached its cap" in log.read_bytes()[-TAIL_BYTES - 1000 :], 30, "the cap marker")
    size = log.stat().st_size
    assert size <= MAX_LOG_BYTES + 2 * TAIL_BYTES, f"{size:,} bytes of stderr kept"
    tail = log.read_bytes()[-TAIL_BYTES:]
    assert tail.endswith(b"chatty agent log line \n")  # the last lines are the ones kept


def test_a_second_agent_process_rotates_a_full_stderr_log(tmp_path: Path) -> None:
    from polypilot_tui.agents.stderr_log import AgentStderr

    path = tmp_path / STDERR_LOG
    path.write_bytes(b"old\n" * (MAX_LOG_BYTES // 4 + 1))
    stderr = AgentStderr(path)
    stderr.close()
    assert stderr.done.wait(10)
    assert (tmp_path / f"{STDERR_LOG}.1").stat().st_size > MAX_LOG_BYTES and path.stat().st_size == 0


# ---- 6, 7: what run prints -------------------------------------------------------------------
def test_run_strips_terminal_control_sequences(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "state", POLYPILOT_AGENTS_FILE=str(fake_agents_file(tmp_path / "a.toml")))
    done = polypilot(env, "run", "--agent", "fake", "ESCAPES please")
    assert done.returncode == 0, done.stderr[-2000:]
    for word in ("clip", "title", "link", "clear", "done"):
        assert word in done.stdout
    for raw in ("\x1b", "\x07", "\x9b", "]52;", "]0;"):
        assert raw not in done.stdout and raw not in done.stderr, repr(raw)


def test_run_shows_invalid_utf8_replaced_never_dropped_and_never_a_traceback(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "state", POLYPILOT_AGENTS_FILE=str(fake_agents_file(tmp_path / "a.toml")))
    done = polypilot(env, "run", "--agent", "fake", "BADUTF8 please")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bytes \ufffd\ufffd\ufffd( kept" in done.stdout and "Hello from the fake agent." in done.stdout
    assert "Traceback" not in done.stderr and done.stderr.strip() == ""


async def test_the_dashboard_engine_shows_an_update_with_invalid_utf8(tmp_path: Path) -> None:
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    manager = SessionManager(settings, AgentCatalog({"fake": fake_agent(tmp_path)}), SystemClock())
    try:
        sid = await asyncio.wait_for(manager.create_session("fake"), 30)
        await manager.send(sid, "BADUTF8 please")
        await until(lambda: manager.session(sid).turns, 30, "the turn's end")
        reply = manager.history(sid)[-1].text
        assert "bytes \ufffd\ufffd\ufffd( kept" in reply and "fake agent." in reply
    finally:
        await manager.shutdown()


# ---- 8: Stop during a hung initialize --------------------------------------------------------
async def test_stop_during_a_hung_initialize_cancels_the_connect_and_starts_no_second_agent(tmp_path: Path) -> None:
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False, stop_grace_seconds=1.0)
    catalog = AgentCatalog({"fake": fake_agent(tmp_path, FAKE_ACP_HANG_INIT="1")})
    started: list[AgentBackend] = []

    def factory(agent: str, sink: EventSink, workdir: Path) -> AgentBackend:
        started.append(create_backend(catalog.get(agent), sink, SystemClock(), settings, workdir))
        return started[-1]

    manager = SessionManager(settings, catalog, SystemClock(), backend_factory=factory)
    try:
        sid = manager.add_session("fake")  # connects in the background: initialize never answers
        send = asyncio.create_task(manager.send(sid, "hello"))
        await asyncio.sleep(1.5)
        assert manager.session(sid).connecting and manager.session(sid).turn is not None and len(started) == 1
        pid = started[0].pid  # type: ignore[attr-defined]
        assert pid is not None and alive(pid)
        await manager.stop(sid)
        assert manager.session(sid).turns[-1].outcome.value == "aborted"
        await asyncio.wait_for(send, 10)
        # A hang guard: the connect would have run 90 s, then again.
        await until(lambda: not manager.session(sid).connecting and not alive(pid), 10, "the connect to end with Stop")
        assert manager.view(sid).status is not SessionStatus.CONNECTING
        await asyncio.sleep(2.0)
        assert len(started) == 1, "a second agent was started for the stopped turn"
    finally:
        await manager.shutdown()


# ---- 9: agents die with the app --------------------------------------------------------------
AGENT_WITH_A_CHILD = "sleep 300 & exec {agent}"
"""The agent runs a child of its own (a tool, say) that would never end by itself."""


def kill_and_time(app: subprocess.Popen[str], pids: list[int]) -> float:
    """SIGKILL the app; seconds until every one of ``pids`` is gone (hang guard 30 s)."""
    began = time.monotonic()
    app.send_signal(signal.SIGKILL)
    app.wait(10)
    until_blocking(lambda: not any(alive(p) for p in pids), 30, f"agent processes {pids} to die with the app")
    return time.monotonic() - began


@pytest.mark.parametrize("kill", range(4))
def test_agents_of_a_sigkilled_run_die_within_a_second(tmp_path: Path, kill: int) -> None:
    agents = fake_agents_file(tmp_path / "a.toml", shell=AGENT_WITH_A_CHILD)
    env = clean_env(tmp_path / "state", POLYPILOT_AGENTS_FILE=str(agents))
    app = subprocess.Popen(
        [*POLYPILOT, "run", "--json", "--agent", "fake", "CHAOS hang"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert app.stdout is not None
        line = app.stdout.readline()  # the first event: the agent is up and in its turn
        assert line and json.loads(line).get("type"), (line, app.stderr.read() if app.stderr else "")
        pids = descendants(app.pid)
        assert len(pids) >= 2, pids  # the agent and its child (the leash's watcher is nobody's child)
        took = kill_and_time(app, pids)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
    assert took < 2.0, f"agent processes outlived the app by {took:.2f} s"  # ~0.5 s: TERM, grace, KILL


def test_agents_of_a_sigkilled_dashboard_die_within_a_second(tmp_path: Path) -> None:
    agents = fake_agents_file(tmp_path / "a.toml", shell=AGENT_WITH_A_CHILD)
    state = tmp_path / "state"
    dashboard = Dashboard(clean_env(state, POLYPILOT_AGENTS_FILE=str(agents), POLYPILOT_DEFAULT_AGENT="fake"))
    try:
        dashboard.wait_for_lock(state)
        pids = until_blocking(
            lambda: (p := descendants(dashboard.proc.pid)) and len(p) >= 2 and p,
            60,
            "the dashboard's first session to start its agent",
        )
        took = kill_and_time(dashboard.proc, pids)  # type: ignore[arg-type]
    finally:
        dashboard.close()
    assert took < 2.0, f"agent processes outlived the dashboard by {took:.2f} s"


def test_a_completed_run_leaves_no_session_folder_and_a_failed_one_says_where_its_logs_are(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = clean_env(state, POLYPILOT_AGENTS_FILE=str(fake_agents_file(tmp_path / "a.toml")))
    for agent, prompt in (("demo", "hello"), ("fake", "hello")):
        done = polypilot(env, "run", "--agent", agent, prompt)
        assert done.returncode == 0, done.stderr[-2000:]
    assert not list((state / "sessions").iterdir()) if (state / "sessions").exists() else True
    failed = polypilot(env, "run", "--agent", "fake", "FAIL please")
    assert failed.returncode == 1
    kept = list((state / "sessions").iterdir())
    assert len(kept) == 1 and str(kept[0]) in failed.stderr and (kept[0] / STDERR_LOG).exists()
