"""The engine's few catch-alls, each a boundary that must go on: what the agent did wrong is
a warning line, a bug of ours is logged in full (and fails the test it happens in unless the
test expects it, tests/conftest.py). Virtual time, a scripted backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.base import BackendError, ConnectResult, Diagnostics, NullBackend
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.records import Record, SessionAdded
from polypilot_tui.engine import turns
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.stream import RecordStream
from polypilot_tui.storage.notices import Notice, NoticeBoard


class Faulty(NullBackend):
    """A backend whose calls fail as told: ``faults[name]`` is raised by that call."""

    def __init__(self, sink: Any, faults: dict[str, BaseException]) -> None:
        super().__init__(sink)
        self.faults = faults
        self.closed = self.killed = False

    def _maybe(self, name: str) -> None:
        if name in self.faults:
            raise self.faults[name]

    async def connect(self, resume_id: str | None) -> ConnectResult:
        self._maybe("connect")
        return await super().connect(resume_id)

    async def send(self, prompt: str) -> None:
        self._maybe("send")

    async def abort(self) -> None:
        self._maybe("abort")

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        self._maybe("answer")

    async def kill(self) -> None:
        self.killed = True

    async def close(self) -> None:
        self.closed = True
        self._maybe("close")

    def probe(self) -> Probes | None:
        self._maybe("probe")
        return None

    def diagnostics(self) -> Diagnostics:
        self._maybe("diagnostics")
        return Diagnostics(stderr_tail=("the agent's last words",))


def engine(
    tmp_path: Path, policy: str = "ask", **faults: BaseException
) -> tuple[SessionManager, FakeClock, list[Faulty]]:
    clock = FakeClock()
    settings = Settings.read(None, state_dir=tmp_path, stop_grace_seconds=0.2, permission_policy=policy)
    made: list[Faulty] = []

    def factory(agent: str, sink: Any, workdir: Path) -> Faulty:
        if "factory" in faults:
            raise faults["factory"]
        made.append(Faulty(sink, dict(faults)))
        return made[-1]

    catalog = AgentCatalog({"fake": AgentConfig(name="fake", kind="demo")})
    return SessionManager(settings, catalog, clock, backend_factory=factory, id_factory=lambda: "s"), clock, made


# ---- the record stream and the notice board: a listener's bug ----------------------------
@pytest.mark.expect_errors(r"change listener failed on SessionAdded\nRuntimeError: a listener's bug")
def test_a_listener_that_raises_is_logged_and_every_other_listener_still_hears() -> None:
    stream = RecordStream()
    heard: list[Record] = []

    def broken(change: Record) -> None:
        raise RuntimeError("a listener's bug")

    stream.subscribe(heard.append)
    stream.subscribe(broken)
    stream.subscribe(heard.append)
    stream.publish(SessionAdded("s1"))  # the publisher (the engine) never hears of it
    assert heard == [SessionAdded("s1"), SessionAdded("s1")]


@pytest.mark.expect_errors(r"notice listener failed\nRuntimeError: a listener's bug", "the disk is full")
def test_a_notice_listener_that_raises_is_logged_and_the_others_are_told() -> None:
    board = NoticeBoard()
    told: list[Notice] = []

    def broken(notice: Notice) -> None:
        raise RuntimeError("a listener's bug")

    board.listen(broken)
    board.listen(told.append)
    board.tell("disk", "the disk is full")  # an error notice: logged at ERROR by design
    assert [n.message for n in told] == ["the disk is full"]


# ---- connect ---------------------------------------------------------------------------------
async def test_an_agent_that_cannot_start_is_told_in_the_session_and_is_only_a_warning(tmp_path: Path) -> None:
    manager, _, _ = engine(tmp_path, connect=BackendError("the agent has no key"))
    with pytest.raises(BackendError, match="no key"):
        await manager.create_session("fake")
    session = manager.session("s")
    assert not session.connecting and "no key" in session.lost
    assert any(i.kind is ItemKind.ERROR and "no key" in i.text for i in manager.history("s"))


@pytest.mark.expect_errors(r"connect of s failed\nRuntimeError: a backend's bug")
async def test_a_bug_in_a_backends_connect_is_logged_in_full_and_told_like_a_failed_start(tmp_path: Path) -> None:
    manager, _, made = engine(tmp_path, connect=RuntimeError("a backend's bug"))
    with pytest.raises(BackendError, match="a backend's bug"):
        await manager.create_session("fake")
    session = manager.session("s")
    assert not session.connecting and "a backend's bug" in session.lost  # never "connecting" for good
    assert made[0].closed  # what it may have started is released


@pytest.mark.expect_errors(r"diagnostics of s failed\nRuntimeError: diagnostics bug")
async def test_a_bug_in_diagnostics_never_stops_a_failed_start_from_being_told(tmp_path: Path) -> None:
    manager, _, _ = engine(tmp_path, connect=BackendError("no key"), diagnostics=RuntimeError("diagnostics bug"))
    with pytest.raises(BackendError, match="no key"):
        await manager.create_session("fake")
    assert not manager.session("s").connecting
    assert any(i.kind is ItemKind.ERROR and "no key" in i.text for i in manager.history("s"))


@pytest.mark.parametrize(
    "failure",
    [
        # The session's agent was removed from agents.toml meanwhile (AgentCatalog.get says so).
        KeyError("no agent named 'fake'; configured: demo"),
        pytest.param(
            RuntimeError("a bug before the connect"),
            marks=pytest.mark.expect_errors(r"connect of s for a turn failed\nRuntimeError: a bug before the connect"),
        ),
    ],
)
async def test_whatever_stands_before_the_connect_ends_the_turn_saying_so(tmp_path: Path, failure: Exception) -> None:
    manager, _, _ = engine(tmp_path, factory=failure)
    sid = manager.add_session("fake", connect=False)
    await manager.send(sid, "hello")
    [turn] = manager.session(sid).turns
    assert turn.outcome.value == "failed"  # never "Sending…" for good
    assert failure.args[0] in turn.reason and not manager.session(sid).connecting


# ---- turns: a send or an abort that fails ------------------------------------------------------
@pytest.mark.parametrize(
    "failure",
    [
        BackendError("the agent is gone"),  # an agent's failure: a warning, and the turn ends
        pytest.param(RuntimeError("a send bug"), marks=pytest.mark.expect_errors(r"send to s failed\nRuntimeError")),
    ],
)
async def test_a_send_that_fails_ends_the_turn_whatever_it_was(tmp_path: Path, failure: Exception) -> None:
    manager, _, _ = engine(tmp_path, send=failure)
    await manager.create_session("fake")
    await manager.send("s", "hello")
    [turn] = manager.session("s").turns
    assert turn.outcome.value == "failed" and str(failure) in turn.reason


@pytest.mark.parametrize(
    "failure",
    [
        TimeoutError(),  # a wedged agent
        pytest.param(RuntimeError("an abort bug"), marks=pytest.mark.expect_errors(r"abort of s .*\nRuntimeError")),
    ],
)
async def test_an_abort_that_fails_on_stop_kills_the_agent_whatever_it_was(tmp_path: Path, failure: Exception) -> None:
    manager, _, made = engine(tmp_path, abort=failure)
    await manager.create_session("fake")
    await manager.send("s", "hello")
    await manager.stop("s")
    assert made[0].killed and [t.outcome.value for t in manager.session("s").turns] == ["aborted"]


@pytest.mark.parametrize(
    "failure",
    [
        TimeoutError(),  # an agent that ignores the abort
        pytest.param(
            RuntimeError("an abort bug"), marks=pytest.mark.expect_errors(r"after a stuck turn .*\nRuntimeError")
        ),
    ],
)
async def test_an_abort_after_a_stuck_turn_that_fails_kills_the_agent_whatever_it_was(
    tmp_path: Path, failure: Exception
) -> None:
    manager, clock, made = engine(tmp_path, abort=failure)
    await manager.create_session("fake")
    await manager.send("s", "hello")
    await clock.advance(manager.cfg.inactivity + 1)  # stuck: the watchdog aborts in the background
    await clock.settle()
    assert [t.outcome.value for t in manager.session("s").turns] == ["stuck"] and made[0].killed


# ---- a background task: the answer a permission policy gives ------------------------------------
PERMISSION = AgentEvent(
    EventType.PERMISSION_REQUESTED,
    {
        "requestId": "r1",
        "toolCallId": "t1",
        "title": "rm -rf build",
        "options": [{"optionId": "reject_once", "kind": "reject_once", "name": "No"}],
    },
)


@pytest.mark.parametrize(
    "failure",
    [
        BackendError("the agent no longer waits for it"),  # an agent's failure: a warning
        pytest.param(
            RuntimeError("an answer bug"),
            marks=pytest.mark.expect_errors(r"background task of s failed\nRuntimeError: an answer bug"),
        ),
    ],
)
async def test_a_background_task_that_fails_is_logged_by_what_it_was_and_the_engine_goes_on(
    tmp_path: Path, failure: Exception
) -> None:
    manager, clock, made = engine(tmp_path, policy="deny", answer=failure)
    await manager.create_session("fake")
    await manager.send("s", "hello")
    made[0].sink(PERMISSION)  # the policy answers it in the background
    await clock.settle()
    made[0].sink(AgentEvent(EventType.SESSION_IDLE, {}))
    assert [t.outcome.value for t in manager.session("s").turns] == ["completed"]


# ---- clean-ups: a close that fails ----------------------------------------------------------
async def test_a_close_failing_as_agents_do_is_a_warning_and_the_session_closes(tmp_path: Path) -> None:
    manager, _, made = engine(tmp_path, close=OSError("broken pipe"))
    await manager.create_session("fake")
    assert await manager.close("s") is not None
    assert made[0].closed and "s" not in manager.ids()


@pytest.mark.expect_errors(r"backend call \(ignored\) failed\nRuntimeError: a close bug")
async def test_a_bug_in_a_close_is_logged_in_full_and_the_session_closes(tmp_path: Path) -> None:
    manager, _, made = engine(tmp_path, close=RuntimeError("a close bug"))
    await manager.create_session("fake")
    assert await manager.close("s") is not None
    assert made[0].closed and "s" not in manager.ids()


# ---- the watchdog: a probe that fails ---------------------------------------------------------
@pytest.mark.expect_errors(r"probe failed\nRuntimeError: a probe bug")
async def test_a_bug_in_a_probe_is_logged_and_the_watchdog_still_ends_the_turn(tmp_path: Path) -> None:
    manager, clock, _ = engine(tmp_path, probe=RuntimeError("a probe bug"))
    await manager.create_session("fake")
    await manager.send("s", "hello")  # the null agent never answers
    await clock.advance(manager.cfg.inactivity + 1)
    assert [t.outcome.value for t in manager.session("s").turns] == ["stuck"]


# ---- the sink: an agent event the engine fails on ---------------------------------------------
@pytest.mark.expect_errors(r"session s: the engine failed on a assistant.message event\nRuntimeError: a fold bug")
async def test_an_event_the_engine_fails_on_is_logged_and_the_agents_stream_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager, _, made = engine(tmp_path)
    await manager.create_session("fake")
    await manager.send("s", "hello")
    fold = turns.apply_event

    def failing_on_messages(session: Any, event: AgentEvent, *args: Any, **kwargs: Any) -> Any:
        if event.type == EventType.MESSAGE:
            raise RuntimeError("a fold bug")
        return fold(session, event, *args, **kwargs)

    monkeypatch.setattr(turns, "apply_event", failing_on_messages)
    sink = made[0].sink
    sink(AgentEvent(EventType.MESSAGE, {"messageId": "m1", "content": "lost to the bug"}))  # never raises
    sink(AgentEvent(EventType.SESSION_IDLE, {}))  # the next event is taken as ever
    assert [t.outcome.value for t in manager.session("s").turns] == ["completed"]
