"""Engine bugs the chaos matrix found, pinned down in virtual time on a scripted backend.

1. After the watchdog gives up on a turn (stuck), the manager aborts the agent in the
background. A prompt the user sends meanwhile used to go out at once: the agent's late
``session.idle {aborted}`` (the abort's echo) then ended the NEW turn as aborted, and an
agent killed because it ignored the abort failed the new turn as "disconnected". Now the
send waits for that abort, and the stuck turn's tail never touches the next turn.

2. A turn restored after an app restart lost its "restored" mark as soon as a plain event
arrived (codex-acp sends one right after a resume), so when it was lost after all the user
was not offered the one-key resend of the prompt.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from polypilot_tui.agents.base import ConnectResult, NullBackend
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.engine.manager import SessionManager


class SlowAbortBackend(NullBackend):
    """Answers a send only when told to; its abort waits for ``release`` (or forever). The
    rest of the contract (diagnostics, models …) is the null backend's: the engine reads a
    stuck agent's diagnostics when it kills it."""

    kind = "replay"

    def __init__(self, sink, log: list[str], release: asyncio.Event | None) -> None:
        super().__init__(sink)
        self.log = log
        self.release = release

    async def connect(self, resume_id):
        self.log.append("connect")
        return ConnectResult(resume_id or "agent-1", "resumed" if resume_id else "new session", resumed=bool(resume_id))

    async def send(self, prompt):
        self.log.append(f"send {prompt}")
        if prompt == "second":
            for kind, data in (
                (EventType.TURN_START, {}),
                (EventType.MESSAGE, {"messageId": "m2", "content": "ok"}),
                (EventType.TURN_END, {}),
                (EventType.SESSION_IDLE, {}),
            ):
                self.sink(AgentEvent(kind, data))

    async def abort(self):
        self.log.append("abort")
        if self.release is None:
            await asyncio.Event().wait()  # ignores the abort: the manager has to kill it
        await self.release.wait()
        self.sink(AgentEvent(EventType.ABORT, {"reason": "user_initiated"}))
        self.sink(AgentEvent(EventType.SESSION_IDLE, {"aborted": True}))
        self.log.append("abort done")

    async def kill(self):
        self.log.append("kill")
        self.sink(AgentEvent(EventType.CONNECTION_LOST, {"reason": "killed"}))

    async def close(self):
        self.log.append("close")


def _manager(
    tmp_path: Path, log: list[str], release: asyncio.Event | None, made: list[SlowAbortBackend] | None = None
) -> tuple[SessionManager, FakeClock]:
    clock = FakeClock()
    settings = Settings.read(None, state_dir=tmp_path, stop_grace_seconds=0.2)
    catalog = AgentCatalog({"fake": AgentConfig(name="fake", kind="demo")})

    def factory(agent, sink, workdir) -> SlowAbortBackend:
        backend = SlowAbortBackend(sink, log, release)
        if made is not None:
            made.append(backend)
        return backend

    manager = SessionManager(settings, catalog, clock, id_factory=lambda: "s", backend_factory=factory)
    return manager, clock


async def _stuck_then_send(manager: SessionManager, clock: FakeClock) -> asyncio.Task[str]:
    sid = await manager.create_session("fake")
    await manager.send(sid, "first")
    await clock.advance(manager.cfg.inactivity)  # nothing ever comes back: stuck
    assert [t.outcome.value for t in manager.session(sid).turns] == ["stuck"]
    return asyncio.ensure_future(manager.send(sid, "second"))  # while the abort is in flight


async def test_the_abort_echo_of_a_stuck_turn_cannot_end_the_next_turn(tmp_path: Path) -> None:
    log: list[str] = []
    release = asyncio.Event()
    manager, clock = _manager(tmp_path, log, release)
    second = await _stuck_then_send(manager, clock)
    await clock.settle()
    assert "send second" not in log  # held back until the agent has stopped the stuck turn
    release.set()
    await second
    await clock.settle()
    session = manager.session("s")
    assert [t.outcome.value for t in session.turns] == ["stuck", "completed"]
    assert log.index("abort done") < log.index("send second")
    assert session.history[-1].text == "ok"


async def test_an_agent_killed_after_a_stuck_turn_does_not_fail_the_next_turn(tmp_path: Path) -> None:
    log: list[str] = []
    manager, clock = _manager(tmp_path, log, release=None)
    second = await _stuck_then_send(manager, clock)
    await clock.settle()
    assert "kill" not in log and not second.done()  # the abort hangs: its grace runs on the clock
    await clock.advance(0.2)
    await asyncio.wait_for(second, 5)  # the abort timed out, the agent was killed
    await clock.settle()
    session = manager.session("s")
    assert [t.outcome.value for t in session.turns] == ["stuck", "completed"]
    assert log.index("kill") < log.index("send second")
    assert log.count("connect") == 2  # the send reconnected
    assert any("reconnected" in item.text for item in session.history)


async def test_a_restored_turn_that_saw_events_is_still_offered_for_resending(tmp_path: Path) -> None:
    # codex-acp says "available_commands_update" right after a resume: a plain event that
    # makes the restored turn an ordinary one for the watchdog's tiers. When that turn is
    # then lost anyway, the user must still get the one-key resend of their prompt.
    from polypilot_tui.domain.session import Session

    log: list[str] = []
    made: list[SlowAbortBackend] = []
    manager, clock = _manager(tmp_path, log, asyncio.Event(), made)
    manager.adopt(Session("s", "restored", "fake", agent_session_id="agent-1"), mid_turn_prompt="build it")
    await clock.settle()
    [backend] = made
    backend.sink(AgentEvent("available_commands_update", {"availableCommands": []}))
    await clock.advance(manager.cfg.inactivity + 1)
    session = manager.session("s")
    assert [t.outcome.value for t in session.turns] == ["stuck"]
    assert session.interrupted_prompt == "build it"
    assert "interrupted by a restart of polypilot" in session.history[-1].text


async def test_an_agent_killed_because_its_abort_hung_is_said_with_the_grace_it_had(tmp_path: Path) -> None:
    log: list[str] = []
    manager, clock = _manager(tmp_path, log, release=asyncio.Event())  # the abort never returns
    sid = await manager.create_session("fake")
    await manager.send(sid, "first")
    stop = asyncio.ensure_future(manager.stop(sid))
    await clock.settle()
    await clock.advance(0.2)
    await asyncio.wait_for(stop, 5)
    assert "kill" in log
    assert manager.session(sid).lost == "agent killed: it did not stop within 0.2 s of being asked"
