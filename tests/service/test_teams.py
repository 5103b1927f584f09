"""Teams on real parts (issue 24): a real LocalEngine on the demo agent in virtual time, its
workers real sessions watched by the real watchdog, and its API served on a Unix socket.

The capability a relay would be handed is read where the engine hands it: the tool servers it
gives the session's agent (``TeamDesk.tool_servers``), once the engine is served on a socket.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from msgspec import structs

from polypilot_tui.agents.base import ALLOW_ONCE
from polypilot_tui.agents.sandbox import sandbox_problem
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.limits import PROMPT_BYTES, QUEUE_PROMPTS
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from polypilot_tui.domain.team import TeamBounds
from polypilot_tui.domain.tool_servers import CAPABILITY_ENV, RELAY_MODULE
from polypilot_tui.domain.turn import EndCause
from polypilot_tui.engine import teams, verbs
from polypilot_tui.engine.api import EngineError, UnknownCapability, Verb
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.service.client import EngineClient
from tests.support.engine import Harness, demo_harness
from tests.support.engine_service import ServedEngine
from tests.support.git_repo import GitRepo
from tests.support.waiting import advance_until, until

pytestmark = pytest.mark.timeout(60)
needs_bwrap = pytest.mark.skipif(
    sandbox_problem(Sandbox(SandboxMode.WORKSPACE)) is not None, reason="no sandbox here (bubblewrap)"
)


class Team:
    """An orchestrator session of a served engine, and its capability."""

    def __init__(self, harness: Harness, served: ServedEngine, orchestrator: str, capability: str) -> None:
        self.h = harness
        self.engine = harness.engine
        self.served = served
        self.orchestrator = orchestrator
        self.capability = capability

    async def call(self, verb: Verb[Any, Any], request: Any) -> Any:
        return await self.engine.call(verb, request)

    async def start(self, prompt: str, agent: str = "demo", capability: str = "") -> verbs.WorkerState:
        request = verbs.StartWorker(capability or self.capability, agent, prompt)
        return await self.engine.call(verbs.TEAM_START, request)

    async def wait(self, *workers: str, until: verbs.WaitUntil = "done", timeout: float = 3000.0) -> Any:
        """The wait's answer, moving virtual time until it comes."""
        request = verbs.WaitWorkers(self.capability, tuple(workers), until, timeout)
        task = asyncio.ensure_future(self.engine.call(verbs.TEAM_WAIT, request))
        await advance_until(self.h.clock, task.done, within=timeout + 1, what="the wait's answer")
        return task.result()

    def note(self) -> str:
        return self.engine.view(self.orchestrator).team_note


def capability_of(engine: LocalEngine, session_id: str) -> str:
    """The capability in the relay the engine hands ``session_id``'s agent ("" for none)."""
    servers = engine.teams.tool_servers(session_id)
    if not servers:
        return ""
    (server,) = servers
    assert server.args[:4] == ("-P", "-m", RELAY_MODULE, "--socket")
    return dict(server.env)[CAPABILITY_ENV]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Harness, ServedEngine]]:
    settings = Settings.read(None, state_dir=tmp_path, record=False)
    harness = demo_harness(settings)
    served = ServedEngine(harness.engine)
    await served.open()
    try:
        yield harness, served
    finally:
        await served.close()
        await harness.engine.close()


async def orchestrate(served: tuple[Harness, ServedEngine], folder: Path | None = None, **bounds: Any) -> Team:
    """A demo session made an orchestrator (in ``folder`` when given)."""
    harness, server = served
    if folder is None:
        orchestrator = await harness.new()
    else:
        orchestrator = await harness.engine.new_session(verbs.NewSession("demo", folder=str(folder)))
    state = await harness.engine.call(verbs.ORCHESTRATE, verbs.Orchestrate(orchestrator, TeamBounds(**bounds)))
    assert state.orchestrator == orchestrator and harness.engine.view(orchestrator).orchestrator
    return Team(harness, server, orchestrator, capability_of(harness.engine, orchestrator))


def committed_repo(tmp_path: Path) -> GitRepo:
    """A repository with one commit, for workers in worktrees of it."""
    repo = GitRepo(tmp_path / "project")
    repo.write("README.md", "base\n")
    repo.commit()
    return repo


# ---- workers end with the engine's own turn end ------------------------------------------------
async def test_two_workers_are_started_waited_for_and_read_whole(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served)
    one = await team.start("hello worker one")
    two = await team.start("!tools")
    assert one.state in ("starting", "working") and team.engine.view(one.worker).parent == team.orchestrator
    ended = await team.wait()
    assert [(w.worker, w.state, w.outcome) for w in ended] == [
        (one.worker, "done", "completed"),
        (two.worker, "done", "completed"),
    ]
    reply = await team.call(verbs.TEAM_READ, verbs.WorkerRef(team.capability, one.worker))
    assert reply.text.startswith("You said: **hello worker one**") and reply.outcome == "completed"
    whole = await team.call(verbs.TEAM_READ, verbs.WorkerRef(team.capability, two.worker))
    assert "The project has a `README.md`" in whole.text and "Ask me to *write*" in whole.text  # every row of it
    state = await team.call(verbs.TEAM_STATE, verbs.SessionRef(team.orchestrator))
    assert state.turns == 2 and state.running == 0 and state.pending_waits == 0


async def test_a_hanging_worker_ends_at_its_watchdog_tier_and_the_wait_returns_that_end(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served)
    hung = await team.start("!hang")
    began = team.h.clock.now()
    (ended,) = await team.wait(hung.worker)
    record = team.h.manager.session(hung.worker).turns[-1]
    assert (ended.state, ended.outcome, ended.reason) == ("failed", "stuck", record.reason)
    assert record.cause is EndCause.WATCHDOG
    assert team.h.clock.now() - began >= team.h.manager.cfg.inactivity  # its tier, in virtual seconds


async def test_a_worker_blocked_on_a_permission_is_blocked_to_the_wait_and_answered_by_the_human(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served)
    worker = await team.start("!permission")
    (blocked,) = await team.wait(until="blocked")
    assert blocked.state == "blocked"
    view = team.engine.view(worker.worker)
    assert view.pending_permission is not None
    assert blocked.waiting_on == view.pending_permission.title != ""  # what it waits for, said
    (still,) = await team.call(verbs.TEAM_WORKERS, verbs.TeamCall(team.capability))
    assert still.state == "blocked"  # nothing answered it for the human
    answer = verbs.AnswerPermission(worker.worker, view.pending_permission.request_id, ALLOW_ONCE)
    await team.call(verbs.ANSWER_PERMISSION, answer)
    (done,) = await team.wait(worker.worker)
    assert (done.state, done.outcome, done.waiting_on) == ("done", "completed", "")
    assert done.seconds is not None and done.started_at is not None and done.ended_at is not None
    assert done.seconds == round(done.ended_at - done.started_at, 1)
    reply = await team.call(verbs.TEAM_READ, verbs.WorkerRef(team.capability, worker.worker))
    assert "notes.txt" in reply.text


async def test_a_wait_that_times_out_returns_the_states_as_they_are(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served)
    worker = await team.start("!tool-hang")
    began = team.h.clock.now()
    (state,) = await team.wait(worker.worker, timeout=30.0)
    assert state.state == "working" and team.h.clock.now() - began == pytest.approx(30.0)


# ---- the budget --------------------------------------------------------------------------------
async def test_workers_beyond_those_at_once_queue_in_order_and_start_as_others_end(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served, workers_at_once=1)
    first = await team.start("hello number one")
    second = await team.start("hello number two")
    third = await team.start("hello number three")
    assert (first.state, second.state, third.state) == ("working", "queued", "queued")
    assert team.note() == "workers at once: 1 of 1 — start queued"
    assert team.h.manager.session(second.worker).turn is None  # nothing sent to it yet
    ended = await team.wait()
    assert [w.state for w in ended] == ["done"] * 3
    starts = [w.started_at for w in ended]
    ends = [w.ended_at for w in ended]
    assert starts[1] >= ends[0] and starts[2] >= ends[1]  # one at a time, first in first out
    assert team.note() == ""


async def test_a_runaway_orchestrator_is_stopped_at_the_bound_of_total_workers(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served, total_workers=3, workers_at_once=3)
    started = [await team.start(f"hello task {i}") for i in range(3)]
    for i in range(3, 6):
        with pytest.raises(EngineError, match=r"^refused: total workers: 3 of 3$"):
            await team.start(f"hello task {i}")
    assert team.note() == "total workers: 3 of 3"
    assert len(team.engine.ids()) == 4  # the orchestrator and its three
    assert {w.worker for w in started} == {link.worker for link in (await team.wait())}


async def test_starts_called_at_once_are_held_to_the_bound_of_total_workers(
    served: tuple[Harness, ServedEngine], tmp_path: Path
) -> None:
    team = await orchestrate(served, committed_repo(tmp_path).root, total_workers=3, workers_at_once=9)

    async def start(i: int) -> verbs.WorkerState:  # each worktree is made by git: the calls interleave
        request = verbs.StartWorker(team.capability, "demo", f"hello parallel {i}", worktree=True)
        return await team.call(verbs.TEAM_START, request)

    answers = await asyncio.gather(*(start(i) for i in range(6)), return_exceptions=True)
    started = [a for a in answers if isinstance(a, verbs.WorkerState)]
    refused = [str(a) for a in answers if isinstance(a, EngineError)]
    assert len(started) == 3 and refused == ["refused: total workers: 3 of 3"] * 3, answers
    assert len(team.engine.ids()) == 4
    assert sorted(team.engine.view(w.worker).branch for w in started) == [
        f"polypilot/demo-{n}-of-demo-1" for n in (1, 2, 3)
    ]
    await team.wait()


async def test_depth_one_workers_get_no_relay_and_depth_two_lets_one_level_more(
    served: tuple[Harness, ServedEngine],
) -> None:
    shallow = await orchestrate(served)
    worker = await shallow.start("hello there you")
    assert capability_of(shallow.engine, worker.worker) == ""
    deep = await orchestrate(served, depth=2)
    lead = await deep.start("hello lead worker")
    lead_capability = capability_of(deep.engine, lead.worker)
    assert lead_capability not in ("", deep.capability)
    sub = await deep.start("hello sub worker", capability=lead_capability)
    assert deep.engine.view(sub.worker).parent == lead.worker and capability_of(deep.engine, sub.worker) == ""
    (listed,) = await deep.call(verbs.TEAM_WORKERS, verbs.TeamCall(lead_capability))
    assert listed.worker == sub.worker


async def test_turns_across_the_tree_refuse_at_the_bound_and_stop_running_workers(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served, turns=2)
    hung = await team.start("!tool-hang")
    quick = await team.start("hello quick one")
    await team.wait(quick.worker)
    await team.h.manager.send(team.orchestrator, "hello orchestrator")  # its own turns count too
    (stopped,) = await team.wait(hung.worker)
    assert (stopped.state, stopped.outcome, stopped.reason) == ("stopped", "aborted", "turns: 2 of 2")
    assert team.note() == "turns: 2 of 2"
    with pytest.raises(EngineError, match=r"^refused: turns: 2 of 2$"):
        await team.call(verbs.TEAM_SEND, verbs.WorkerPrompt(team.capability, quick.worker, "hello again"))


async def test_wall_time_stops_running_workers_when_crossed_and_refuses_after(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served, wall_seconds=100)
    worker = await team.start("!tool-hang")
    (stopped,) = await team.wait(worker.worker)
    assert (stopped.state, stopped.reason) == ("stopped", "wall time: 100 s of 100 s")
    assert team.note() == "wall time: 100 s of 100 s"
    assert 100 <= team.h.clock.now() < 110
    with pytest.raises(EngineError, match=r"^refused: wall time: 100 s of 100 s$"):
        await team.start("hello once more")


@pytest.mark.parametrize(
    ("bounds", "event", "words"),
    [
        (
            {"tokens": 1000},
            AgentEvent("assistant.usage", {"inputTokens": 700, "outputTokens": 400}),
            "tokens: 1,100 of 1,000",
        ),
        (
            {"cost": 2.0},
            AgentEvent("session.usage_info", {"cost": {"amount": 2.5, "currency": "USD"}}),
            "cost: 2.50 of 2.00",
        ),
    ],
    ids=["tokens", "cost"],
)
async def test_usage_reported_by_the_tree_stops_it_at_the_bound(
    served: tuple[Harness, ServedEngine], bounds: dict[str, Any], event: AgentEvent, words: str
) -> None:
    team = await orchestrate(served, **bounds)
    worker = await team.start("!tool-hang")
    other = await team.start("!tool-hang")
    await advance_until(team.h.clock, lambda: team.engine.view(worker.worker).status.value == "working")
    team.h.manager.apply(worker.worker, event)  # as its backend delivers what the agent reported
    ended = await team.wait()
    assert [(w.state, w.reason) for w in ended] == [("stopped", words)] * 2 and other.worker == ended[1].worker
    assert team.note() == words
    with pytest.raises(EngineError, match=f"^refused: {words}$"):
        await team.start("hello after the budget")


async def test_what_cannot_start_is_refused_before_it_counts(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served, total_workers=1)
    with pytest.raises(EngineError, match="nobody"):
        await team.start("hello there", agent="nobody")
    with pytest.raises(EngineError, match="needs a prompt"):
        await team.start("  \n ")
    with pytest.raises(EngineError, match="until must be"):
        await team.call(verbs.TEAM_WAIT, verbs.WaitWorkers(team.capability, until="later"))  # type: ignore[arg-type]
    assert len(team.engine.ids()) == 1
    assert (await team.start("hello, the one worker")).state == "working"  # nothing was spent


async def test_the_same_dispatch_three_times_stops_the_orchestration_as_stalled(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served, total_workers=10)
    running = await team.start("!tool-hang")
    first = await team.start("Fix   the flaky TEST")
    await team.wait(first.worker)
    await team.call(verbs.TEAM_SEND, verbs.WorkerPrompt(team.capability, first.worker, "fix the flaky test"))
    await team.wait(first.worker)
    with pytest.raises(EngineError, match=r"^refused: stopped: the same dispatch 3 times$"):
        await team.start("  FIX THE FLAKY TEST\n")
    (stopped,) = await team.wait(running.worker)
    assert stopped.state == "stopped"
    assert team.note() == "stopped: the same dispatch 3 times"
    state = await team.call(verbs.TEAM_STATE, verbs.SessionRef(team.orchestrator))
    assert state.stopped == "stopped: the same dispatch 3 times"
    with pytest.raises(EngineError, match="the same dispatch 3 times"):
        await team.start("something else entirely")
    # The human lifts the stop by orchestrating again: new bounds, the stall forgotten.
    await team.call(verbs.ORCHESTRATE, verbs.Orchestrate(team.orchestrator, TeamBounds(total_workers=10)))
    assert team.note() == "" and (await team.start("something else entirely")).state == "working"


async def test_stop_workers_stops_every_worker_of_the_tree_and_drops_the_queue(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served, workers_at_once=2)
    workers = [await team.start(f"!tool-hang {i}") for i in range(3)]
    assert [w.state for w in workers] == ["working", "working", "queued"]
    assert await team.call(verbs.STOP_WORKERS, verbs.SessionRef(team.orchestrator)) == 3
    ended = await team.wait()
    assert [w.state for w in ended] == ["stopped"] * 3
    assert team.h.manager.session(workers[2].worker).turns == []  # the queued one never ran


# ---- capabilities ------------------------------------------------------------------------------
async def test_a_workers_capability_cannot_act_for_its_orchestrator(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served, depth=2)
    lead = await team.start("hello lead worker")
    sibling = await team.start("!tool-hang")
    lead_capability = capability_of(team.engine, lead.worker)
    assert await team.call(verbs.TEAM_WORKERS, verbs.TeamCall(lead_capability)) == ()
    for verb, request in (
        (verbs.TEAM_STOP, verbs.WorkerRef(lead_capability, sibling.worker)),
        (verbs.TEAM_READ, verbs.WorkerRef(lead_capability, sibling.worker)),
        (verbs.TEAM_SEND, verbs.WorkerPrompt(lead_capability, sibling.worker, "hello sibling")),
        (verbs.TEAM_WAIT, verbs.WaitWorkers(lead_capability, (sibling.worker,))),
    ):
        with pytest.raises(EngineError, match=f"no worker '{sibling.worker}' of yours"):
            await team.call(verb, request)
    with pytest.raises(EngineError, match="no worker"):
        await team.call(verbs.TEAM_STOP, verbs.WorkerRef(lead_capability, team.orchestrator))
    assert team.engine.view(sibling.worker).status.busy  # untouched


async def test_an_engine_not_served_makes_no_team_whose_tools_reach_nothing(tmp_path: Path) -> None:
    """In the dashboard's own process (--in-process) or `run` no relay can reach the engine:
    making an orchestrator there is refused saying why, and nothing is made."""
    settings = Settings.read(None, state_dir=tmp_path, record=False)
    harness = demo_harness(settings)
    try:
        lead = await harness.new()
        with pytest.raises(EngineError, match="needs the engine service"):
            await harness.engine.call(verbs.ORCHESTRATE, verbs.Orchestrate(lead))
        view = harness.engine.view(lead)
        assert not view.orchestrator and view.team_note == "" and harness.engine.teams.tool_servers(lead) == ()
    finally:
        await harness.engine.close()


async def test_an_unknown_capability_is_refused_saying_only_that(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served)
    worker = await team.start("hello there you")
    client = EngineClient(await team.served.open())
    try:
        for capability in ("", "nope", team.capability[:-1], team.capability + "x"):
            for verb, request in (
                (verbs.TEAM_WORKERS, verbs.TeamCall(capability)),
                (verbs.TEAM_START, verbs.StartWorker(capability, "demo", "hello")),
                (verbs.TEAM_STOP, verbs.WorkerRef(capability, worker.worker)),
            ):
                for asker in (team.engine, client):
                    with pytest.raises(UnknownCapability) as caught:
                        await asker.call(verb, request)
                    assert str(caught.value) == "unknown capability"
        listed = await client.call(verbs.TEAM_WORKERS, verbs.TeamCall(team.capability))  # the real one, over the socket
        assert [w.worker for w in listed] == [worker.worker]
    finally:
        await client.aclose()


async def test_the_capability_is_a_secret_the_redactor_removes(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served)
    assert len(team.capability) >= 40
    assert team.capability not in REDACTOR.text(f"POLYPILOT_TEAM_CAPABILITY is {team.capability} here")


async def test_bad_bounds_are_refused_naming_the_bound(served: tuple[Harness, ServedEngine]) -> None:
    harness, _ = served
    sid = await harness.new()
    with pytest.raises(EngineError, match="workers at once must be"):
        await harness.engine.call(verbs.ORCHESTRATE, verbs.Orchestrate(sid, TeamBounds(workers_at_once=0)))
    assert not harness.engine.view(sid).orchestrator


# ---- durable: a restart keeps the links, the budget and the pending wait -----------------------------
def persistent_engine(state: Path, clock: FakeClock) -> LocalEngine:
    settings = Settings.read(None, state_dir=state, record=False)
    return build_engine(settings, load_agents(None), clock, persist=True)


async def test_a_restart_keeps_the_team_and_delivers_the_pending_wait_as_a_prompt(tmp_path: Path) -> None:
    clock = FakeClock()
    first = persistent_engine(tmp_path, clock)
    await first.start()
    served = ServedEngine(first)
    await served.open()
    orchestrator = await first.new_session(verbs.NewSession("demo"))
    await first.call(verbs.ORCHESTRATE, verbs.Orchestrate(orchestrator, TeamBounds(workers_at_once=1, turns=30)))
    capability = capability_of(first, orchestrator)
    quick = await first.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "hello quick worker"))
    hung = await first.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "!tool-hang"))
    queued = await first.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "hello queued worker"))
    await advance_until(clock, lambda: first.view(hung.worker).status.busy, what="the second worker working")
    wait = asyncio.ensure_future(first.call(verbs.TEAM_WAIT, verbs.WaitWorkers(capability)))
    await clock.settle()
    assert not wait.done()
    await first.close()  # the engine stops with the wait pending
    with pytest.raises(EngineError, match="the engine is stopping: this wait is kept"):
        await wait
    await served.close()
    saved = (tmp_path / "teams.jsonl").read_text()
    assert capability not in saved and len(saved.splitlines()) == 1
    assert (tmp_path / "teams.jsonl").stat().st_mode & 0o777 == 0o600

    second = persistent_engine(tmp_path, FakeClock())
    await second.start()
    try:
        view = second.view(hung.worker)
        assert view.parent == orchestrator and second.view(orchestrator).orchestrator
        state = await second.call(verbs.TEAM_STATE, verbs.SessionRef(orchestrator))
        assert state.bounds == TeamBounds(workers_at_once=1, turns=30)
        by_id = {w.worker: w for w in state.workers}
        assert by_id[quick.worker].state == "done" and by_id[hung.worker].state == "stopped"
        with pytest.raises(UnknownCapability):  # the relay that held it died with the engine
            await second.call(verbs.TEAM_WORKERS, verbs.TeamCall(capability))
        clock2 = second.clock
        assert isinstance(clock2, FakeClock)
        # The queued worker starts now (its slot is free), ends, and only then is the wait delivered.
        await advance_until(
            clock2, lambda: any("restarted while you waited" in i.text for i in second.history(orchestrator))
        )
        told = next(i.text for i in second.history(orchestrator) if "restarted while you waited" in i.text)
        lines = told.splitlines()
        assert len(lines) == 4, told  # the first line of each reply, no more
        assert lines[1].startswith(f"- demo 1 of demo-1 ({quick.worker}): done") and lines[1].endswith(
            "— You said: **hello quick worker**"
        )
        assert (
            lines[2] == f"- demo 2 of demo-1 ({hung.worker}): stopped (interrupted: polypilot stopped during this turn)"
        )
        assert lines[3].startswith(f"- demo 3 of demo-1 ({queued.worker}): done")
        state = await second.call(verbs.TEAM_STATE, verbs.SessionRef(orchestrator))
        assert state.pending_waits == 0 and state.turns >= 2
    finally:
        await second.close()


async def two_teams_saved(state: Path, bounds: TeamBounds | None = None) -> list[str]:
    """Two orchestrators' teams saved in ``state`` by a served engine, since stopped; their ids."""
    first = persistent_engine(state, FakeClock())
    await first.start()
    served = ServedEngine(first)
    await served.open()
    leaders = [await first.new_session(verbs.NewSession("demo")) for _ in range(2)]
    for sid in leaders:
        await first.call(verbs.ORCHESTRATE, verbs.Orchestrate(sid, bounds or TeamBounds()))
    await first.manager.idle()
    await first.close()
    await served.close()
    return leaders


@pytest.mark.expect_errors(r"teams.jsonl was unusable \(a damaged team\)")
async def test_a_damaged_team_line_loses_that_team_alone_and_says_which(tmp_path: Path) -> None:
    leaders = await two_teams_saved(tmp_path, TeamBounds(turns=7))
    path = tmp_path / "teams.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    path.write_text(lines[0].replace('"turns": 7', '"turns": -7', 1) + "\n" + lines[1] + "\n")

    second = persistent_engine(tmp_path, FakeClock())
    told: list[str] = []
    second.on_notice(lambda notice: told.append(notice.message))
    await second.start()
    try:
        assert not second.view(leaders[0]).orchestrator and second.view(leaders[1]).orchestrator
        assert any(f"Team 1 of {path}" in m and f"led by {leaders[0]}" in m and "turns" in m for m in told), told
        assert list(tmp_path.glob("teams.jsonl.corrupt-*"))  # what was damaged is kept aside
    finally:
        await second.close()


@pytest.mark.expect_errors(r"teams.jsonl was unusable", r"The saved teams could not be read")
async def test_a_teams_file_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("{}\n")
    (tmp_path / "teams.jsonl").symlink_to(elsewhere)
    engine = persistent_engine(tmp_path, FakeClock())
    told: list[str] = []
    engine.on_notice(lambda notice: told.append(notice.message))
    await engine.start()
    try:
        assert any("saved teams could not be read" in m and "link" in m for m in told), told
        assert elsewhere.read_text() == "{}\n"
    finally:
        await engine.close()


async def test_the_served_engine_answers_team_verbs_over_its_socket(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served)
    client = EngineClient(await team.served.open())
    try:
        worker = await client.call(verbs.TEAM_START, verbs.StartWorker(team.capability, "demo", "hello over there"))
        wait = asyncio.ensure_future(client.call(verbs.TEAM_WAIT, verbs.WaitWorkers(team.capability)))

        async def waiting() -> bool:
            state = await team.call(verbs.TEAM_STATE, verbs.SessionRef(team.orchestrator))
            return state.pending_waits == 1

        await until(waiting, 10, "the wait")
        await advance_until(team.h.clock, lambda: team.engine.view(worker.worker).turns == 1)
        (done,) = await asyncio.wait_for(wait, 10)
        assert done.state == "done"
        shown = await client.call(verbs.TEAM_STATE, verbs.SessionRef(team.orchestrator))
        assert shown.workers == (done,)
    finally:
        await client.aclose()


async def test_a_pending_wait_whose_workers_ended_with_the_engine_is_delivered_at_the_next_start(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    first = persistent_engine(tmp_path, clock)
    await first.start()
    served = ServedEngine(first)
    await served.open()
    orchestrator = await first.new_session(verbs.NewSession("demo"))
    await first.call(verbs.ORCHESTRATE, verbs.Orchestrate(orchestrator))
    capability = capability_of(first, orchestrator)
    hung = await first.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "!tool-hang"))
    wait = asyncio.ensure_future(first.call(verbs.TEAM_WAIT, verbs.WaitWorkers(capability, (hung.worker,))))
    await advance_until(clock, lambda: first.view(hung.worker).status.busy, what="the worker working")
    await first.close()
    with pytest.raises(EngineError, match="the engine is stopping: this wait is kept"):
        await wait
    await served.close()

    clock = FakeClock()
    second = persistent_engine(tmp_path, clock)
    await second.start()
    try:
        await clock.settle()
        rows = [item.text for item in second.history(orchestrator)]
        told = [text for text in rows if "restarted while you waited" in text]  # at once: no time moved
        assert len(told) == 1 and f"({hung.worker}): stopped (interrupted" in told[0]
        state = await second.call(verbs.TEAM_STATE, verbs.SessionRef(orchestrator))
        assert state.pending_waits == 0 and state.workers[0].state == "stopped"
    finally:
        await second.close()


async def test_the_teams_file_holds_no_secret_of_a_queued_prompt(tmp_path: Path) -> None:
    secret = "tok-" + "k3y" * 12
    REDACTOR.learn([secret])
    clock = FakeClock()
    engine = persistent_engine(tmp_path, clock)
    await engine.start()
    served = ServedEngine(engine)
    await served.open()
    try:
        lead = await engine.new_session(verbs.NewSession("demo"))
        await engine.call(verbs.ORCHESTRATE, verbs.Orchestrate(lead, TeamBounds(workers_at_once=1)))
        capability = capability_of(engine, lead)
        await engine.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "!tool-hang"))
        queued = await engine.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", f"hello use {secret} now"))
        assert queued.state == "queued"
        path = tmp_path / "teams.jsonl"
        await until(lambda: path.exists() and "hello use" in path.read_text(), 10, "the queue saved")
        assert secret not in path.read_text() and "hello use [redacted] now" in path.read_text()
    finally:
        await served.close()
        await engine.close()


async def test_a_worker_in_a_worktree_gets_one_of_the_orchestrators_repository(
    served: tuple[Harness, ServedEngine], tmp_path: Path
) -> None:
    repo = committed_repo(tmp_path)
    team = await orchestrate(served, repo.root)
    request = verbs.StartWorker(team.capability, "demo", "hello in a worktree", worktree=True)
    isolated = await team.call(verbs.TEAM_START, request)
    beside = await team.start("hello in the folder")
    isolated_view, beside_view = team.engine.view(isolated.worker), team.engine.view(beside.worker)
    assert isolated_view.worktree and isolated_view.workspace is not None
    assert Path(isolated_view.workspace.repo) == repo.root.resolve() and isolated_view.cwd != str(repo.root)
    assert not beside_view.worktree and Path(beside_view.cwd).resolve() == repo.root.resolve()
    await team.wait()


async def test_a_closed_worker_ends_stopped_and_a_worker_cannot_lead_a_team(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served)
    worker = await team.start("!tool-hang")
    with pytest.raises(EngineError, match=r"is a worker of demo-1's team: it cannot lead one"):
        await team.call(verbs.ORCHESTRATE, verbs.Orchestrate(worker.worker))
    wait = asyncio.ensure_future(team.call(verbs.TEAM_WAIT, verbs.WaitWorkers(team.capability)))
    await team.h.clock.settle()
    assert await team.call(verbs.CLOSE, verbs.SessionRef(worker.worker)) is True
    await advance_until(team.h.clock, wait.done, what="the wait's answer")
    (ended,) = wait.result()
    assert (ended.state, ended.outcome) == ("stopped", "aborted")  # a close stops its turn first
    state = await team.call(verbs.TEAM_STATE, verbs.SessionRef(team.orchestrator))
    assert state.running == 0 and state.workers == (ended,)
    with pytest.raises(EngineError, match="was closed"):
        await team.call(verbs.TEAM_READ, verbs.WorkerRef(team.capability, worker.worker))


async def test_prompts_are_bounded_where_they_come_in_and_the_team_queue_too(
    served: tuple[Harness, ServedEngine],
) -> None:
    team = await orchestrate(served, workers_at_once=1)
    with pytest.raises(EngineError, match=r"one prompt may hold at most 1,048,576 bytes"):
        await team.start("x" * (PROMPT_BYTES + 1))
    assert len(team.engine.ids()) == 1  # nothing made for it
    await team.start("!tool-hang")
    waiting = await team.start("hello, waiting for a slot")
    for i in range(QUEUE_PROMPTS - 1):
        await team.call(verbs.TEAM_SEND, verbs.WorkerPrompt(team.capability, waiting.worker, f"hello more {i}"))
    with pytest.raises(EngineError, match=rf"the team's queue holds {QUEUE_PROMPTS} prompts"):
        await team.call(verbs.TEAM_SEND, verbs.WorkerPrompt(team.capability, waiting.worker, "hello one too many"))
    state = await team.call(verbs.TEAM_STATE, verbs.SessionRef(team.orchestrator))
    assert state.queued == QUEUE_PROMPTS


@pytest.mark.expect_errors(r"teams.jsonl was unusable \(a damaged team\)")
async def test_a_team_line_too_long_is_lost_alone_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    leaders = await two_teams_saved(tmp_path)
    path = tmp_path / "teams.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0].replace('"note": ""', '"note": "' + "x" * 9000 + '"') + "\n" + lines[1] + "\n")
    monkeypatch.setattr(teams, "MAX_TEAM_BYTES", 4096)

    second = persistent_engine(tmp_path, FakeClock())
    told: list[str] = []
    second.on_notice(lambda notice: told.append(notice.message))
    await second.start()
    try:
        assert not second.view(leaders[0]).orchestrator and second.view(leaders[1]).orchestrator
        assert any(f"led by {leaders[0]}" in m and "larger than 4,096 bytes" in m for m in told), told
    finally:
        await second.close()


async def test_a_team_line_just_within_the_bound_loses_no_team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line of exactly MAX_TEAM_BYTES and its newline is whole: it and the team after it are read."""
    leaders = await two_teams_saved(tmp_path)
    path = tmp_path / "teams.jsonl"
    lines = path.read_text().splitlines()
    padded = lines[0].replace('"note": ""', '"note": "' + "x" * (4096 - len(lines[0])) + '"')
    assert len(padded.encode()) == 4096
    path.write_text(padded + "\n" + lines[1] + "\n")
    monkeypatch.setattr(teams, "MAX_TEAM_BYTES", 4096)

    second = persistent_engine(tmp_path, FakeClock())
    told: list[str] = []
    second.on_notice(lambda notice: told.append(notice.message))
    await second.start()
    try:
        assert second.view(leaders[0]).orchestrator and second.view(leaders[1]).orchestrator, told
        assert not told, told
    finally:
        await second.close()


async def test_a_bound_spent_with_no_worker_running_is_shown_at_once(served: tuple[Harness, ServedEngine]) -> None:
    team = await orchestrate(served, turns=1)
    await team.h.manager.send(team.orchestrator, "hello orchestrator")
    await team.h.until_rest(team.orchestrator)
    assert team.note() == "turns: 1 of 1"
    with pytest.raises(EngineError, match=r"^refused: turns: 1 of 1$"):
        await team.start("hello worker")


# ---- sandboxes ------------------------------------------------------------------------------
def with_boxed_agent(harness: Harness) -> None:
    """``boxed``: the demo agent, sandboxed by its agents-file entry."""
    agents = harness.engine.manager.catalog.agents
    agents["boxed"] = structs.replace(agents["demo"], **{"name": "boxed", "sandbox": "workspace"})


@needs_bwrap
async def test_a_sandboxed_session_cannot_orchestrate_and_says_why(served: tuple[Harness, ServedEngine]) -> None:
    harness, _ = served
    with_boxed_agent(harness)
    boxed = await harness.engine.new_session(verbs.NewSession("boxed"))
    assert harness.engine.view(boxed).sandbox.on
    with pytest.raises(EngineError, match="runs sandboxed, and an orchestrator cannot: its team tools talk to"):
        await harness.engine.call(verbs.ORCHESTRATE, verbs.Orchestrate(boxed, TeamBounds()))
    assert not harness.engine.view(boxed).orchestrator and not capability_of(harness.engine, boxed)
    with pytest.raises(EngineError, match="leads no team"):
        await harness.engine.call(verbs.TEAM_STATE, verbs.SessionRef(boxed))


@needs_bwrap
async def test_a_worker_is_at_least_as_sandboxed_as_its_starter(served: tuple[Harness, ServedEngine]) -> None:
    """A worker of a starter without a sandbox gets its agent's own; of a sandboxed starter (a
    worker that starts workers in turn), the starter's, whatever its agent's own."""
    harness, _ = served
    with_boxed_agent(harness)
    team = await orchestrate(served, depth=2)
    plain = await team.start("hello")
    boxed = await team.start("hello", agent="boxed")
    assert not team.engine.view(plain.worker).sandbox.on and team.engine.view(boxed.worker).sandbox.on
    under = await team.start("hello", agent="demo", capability=capability_of(team.engine, boxed.worker))
    assert team.engine.view(under.worker).parent == boxed.worker
    assert team.engine.view(under.worker).sandbox == team.engine.view(boxed.worker).sandbox
