"""The team's bookkeeping (domain/team.py): every bound refuses naming itself and the numbers,
slots are reserved at a send and released at the turn's end, the queue is FIFO, the same
dispatch three times stops the orchestration as stalled, and the saved form reads back."""

from __future__ import annotations

import json

import pytest

from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.team import Link, Pending, Team, TeamBounds, Wait, fold_prompt, reached, team_from_json
from polypilot_tui.domain.usage import Usage


def team(clock: FakeClock | None = None, **bounds: object) -> Team:
    now = clock.now() if clock else 0.0
    return Team("orch", TeamBounds(**bounds), now)  # type: ignore[arg-type]


def add(t: Team, worker: str, parent: str = "orch", depth: int = 1, agent: str = "demo") -> Link:
    link = Link(worker, parent, depth, worker, agent)
    t.links[worker] = link
    return link


def test_default_bounds_are_the_issues() -> None:
    b = TeamBounds()
    assert (b.workers_at_once, b.total_workers, b.depth, b.turns, b.wall_seconds) == (2, 6, 1, 40, 3600.0)
    assert b.tokens is None and b.cost is None and b.problem() == ""


@pytest.mark.parametrize(
    ("bounds", "named"),
    [
        ({"workers_at_once": 0}, "workers at once"),
        ({"total_workers": -1}, "total workers"),
        ({"depth": 0}, "depth"),
        ({"turns": 10**9}, "turns"),
        ({"turns": True}, "turns"),
        ({"wall_seconds": float("nan")}, "wall seconds"),
        ({"wall_seconds": 0}, "wall seconds"),
        ({"tokens": 0}, "tokens"),
        ({"cost": -1.0}, "cost"),
    ],
)
def test_bounds_that_cannot_be_used_say_which(bounds: dict[str, object], named: str) -> None:
    assert TeamBounds(**bounds).problem().startswith(named)  # type: ignore[arg-type]


def test_total_workers_refuses_at_the_bound_with_the_numbers() -> None:
    t = team(total_workers=2)
    assert t.refuse_dispatch("orch", "demo", "one", 0, new=True) is None
    add(t, "w1")
    assert t.refuse_dispatch("orch", "demo", "two", 0, new=True) is None
    add(t, "w2")
    refusal = t.refuse_dispatch("orch", "demo", "three", 0, new=True)
    assert refusal is not None and refusal.words == "total workers: 2 of 2"
    assert t.refuse_dispatch("orch", "demo", "again to w1", 0, new=False) is None  # a send is no new worker


def test_depth_one_means_workers_cannot_orchestrate_and_two_lets_one_level() -> None:
    t = team()
    add(t, "w1")
    refusal = t.refuse_dispatch("w1", "demo", "sub", 0, new=True)
    assert refusal is not None and refusal.words == "depth: 2 of 1"
    deeper = team(depth=2)
    add(deeper, "w1")
    assert deeper.refuse_dispatch("w1", "demo", "sub", 0, new=True) is None
    add(deeper, "w2", parent="w1", depth=2)
    refusal = deeper.refuse_dispatch("w2", "demo", "subsub", 0, new=True)
    assert refusal is not None and refusal.words == "depth: 3 of 2"


def test_turns_across_the_tree_count_the_orchestrators_too() -> None:
    t = team(turns=3)
    add(t, "w1")
    t.sent("w1", 0)
    t.turn_ended("orch", "completed", "", 1, more_queued=False)
    t.turn_ended("w1", "completed", "", 2, more_queued=False)
    assert t.refuse_dispatch("orch", "demo", "x", 3, new=True) is None
    t.turn_ended("orch", "completed", "", 4, more_queued=False)
    refusal = t.refuse_dispatch("orch", "demo", "y", 5, new=False)
    assert refusal is not None and refusal.words == "turns: 3 of 3"


def test_wall_time_runs_on_the_clock() -> None:
    clock = FakeClock(start=100.0)
    t = team(clock, wall_seconds=60)
    assert t.spent_bound(159.0) is None
    refusal = t.spent_bound(160.0)
    assert refusal is not None and refusal.words == "wall time: 60 s of 60 s"


def test_tokens_and_cost_count_only_what_the_tree_spent_since_it_began() -> None:
    t = team(tokens=1000, cost=2.0)
    t.baseline = t.orchestrator_usage = Usage(input_tokens=5000, cost=10.0, currency="USD", reported=True)
    assert t.spent_bound(0) is None  # what the orchestrator used before is not the team's
    link = add(t, "w1")
    link.usage = Usage(input_tokens=600, output_tokens=300, reported=True)
    t.orchestrator_usage = Usage(input_tokens=5050, cost=10.5, currency="USD", reported=True)
    assert t.tokens() == 950 and t.spent_bound(0) is None
    link.usage = Usage(input_tokens=700, output_tokens=300, reported=True)
    refusal = t.spent_bound(0)
    assert refusal is not None and refusal.words == "tokens: 1,050 of 1,000"
    t.bounds = TeamBounds(cost=1.5)
    link.usage = Usage(cost=1.0, currency="USD", reported=True)
    refusal = t.spent_bound(0)
    assert refusal is not None and refusal.words == "cost: 1.50 of 1.50"


def test_unbounded_tokens_never_refuse() -> None:
    t = team()
    add(t, "w1").usage = Usage(input_tokens=10**11, cost=10**6, currency="USD", reported=True)
    assert t.spent_bound(0) is None


def test_slots_are_reserved_at_a_send_and_released_at_the_turns_end_and_the_queue_is_fifo() -> None:
    t = team(workers_at_once=2)
    for w in ("w1", "w2", "w3", "w4"):
        add(t, w)
    t.sent("w1", 0)
    t.sent("w2", 0)
    assert not t.has_slot() and t.at_once_note() == "workers at once: 2 of 2 — start queued"
    t.queue += [Pending("w3", "three"), Pending("w4", "four")]
    assert t.next_pending() is None  # no slot yet
    t.turn_ended("w2", "completed", "", 5, more_queued=False)
    assert t.links["w2"].state == "done" and t.links["w2"].ended_at == 5
    assert t.next_pending() == Pending("w3", "three")
    t.sent("w3", 6)
    assert t.next_pending() is None
    t.turn_ended("w1", "stuck", "no progress for 120 s", 7, more_queued=False)
    assert (t.links["w1"].state, t.links["w1"].reason) == ("failed", "no progress for 120 s")
    assert t.next_pending() == Pending("w4", "four")


def test_a_worker_with_another_prompt_queued_keeps_working_and_its_slot() -> None:
    t = team()
    add(t, "w1")
    t.sent("w1", 0)
    t.turn_ended("w1", "completed", "", 1, more_queued=True)
    w1 = t.links["w1"]
    assert (w1.state, w1.holds_slot, w1.turns) == ("starting", True, 1)
    t.turn_ended("w1", "aborted", "stopped by you", 2, more_queued=True)  # a stop holds the queue
    assert (w1.state, w1.holds_slot) == ("stopped", False)


def test_blocked_follows_the_permission_and_never_revives_an_ended_worker() -> None:
    t = team()
    add(t, "w1")
    assert not t.blocked("w1", on_permission=True, busy=True)  # queued: not started
    t.sent("w1", 0)
    seen = []
    for on_permission in (False, True, False):
        assert t.blocked("w1", on_permission=on_permission, busy=True)
        seen.append(t.links["w1"].state)
    assert seen == ["working", "blocked", "working"]
    t.turn_ended("w1", "completed", "", 1, more_queued=False)
    assert not t.blocked("w1", on_permission=True, busy=True)
    assert t.links["w1"].state == "done"


@pytest.mark.parametrize(
    "prompts",
    [
        ["Fix the tests", "fix  the TESTS", "  FIX THE\ttests\n"],
        ["a", "a", "a"],
    ],
)
def test_the_same_dispatch_three_times_stops_the_orchestration_as_stalled(prompts: list[str]) -> None:
    t = team(total_workers=10)
    for i, prompt in enumerate(prompts[:2]):
        assert t.refuse_dispatch("orch", "demo", prompt, 0, new=True) is None
        add(t, f"w{i}")
    waiting = add(t, "w9")  # queued: its start waits for a slot
    t.queue.append(Pending("w9", "waiting"))
    refusal = t.refuse_dispatch("orch", "demo", prompts[2], 0, new=True)
    assert refusal is not None and refusal.words == "stopped: the same dispatch 3 times"
    assert t.stopped == t.note == refusal.words
    assert t.queue == []
    assert (waiting.state, waiting.reason) == ("stopped", refusal.words)
    later = t.refuse_dispatch("orch", "demo", "something else", 0, new=True)
    assert later is not None and later.words == "stopped: the same dispatch 3 times"


def test_other_agent_or_other_work_is_no_stall() -> None:
    t = team(total_workers=10)
    for agent, prompt in [("demo", "x"), ("demo", "x"), ("copilot", "x"), ("demo", "x y"), ("opencode", "x")]:
        assert t.refuse_dispatch("orch", agent, prompt, 0, new=True) is None
        add(t, f"w{len(t.links)}")


def test_fold_prompt_folds_whitespace_and_case_only() -> None:
    assert fold_prompt("  Hello\n\tWORLD ") == "hello world"
    assert fold_prompt("hello, world") != fold_prompt("hello world")


@pytest.mark.parametrize(
    ("states", "until", "over"),
    [
        (["done", "working"], "done", False),
        (["done", "failed", "stopped"], "done", True),
        (["blocked", "working"], "done", False),
        (["blocked", "working"], "blocked", True),
        (["working", "queued"], "blocked", False),
        (["done", "working"], "any", True),
        (["working", "starting"], "any", False),
        ([], "done", True),
    ],
)
def test_a_wait_is_over_as_its_until_says(states: list[str], until: str, over: bool) -> None:
    links = [Link(f"w{i}", "orch", 1, "", "demo", s) for i, s in enumerate(states)]  # type: ignore[arg-type]
    assert reached(links, until) is over


def test_the_saved_form_reads_back_with_times_as_seconds_run() -> None:
    clock = FakeClock(start=1000.0)
    t = team(clock, workers_at_once=1, tokens=500)
    add(t, "w1").usage = Usage(input_tokens=3, reported=True)
    t.sent("w1", 1000.0)
    add(t, "w2")
    t.queue.append(Pending("w2", "later"))
    t.waits["k"] = Wait("k", "orch", ("w1", "w2"), "done")
    t.turn_ended("orch", "completed", "", 1010.0, more_queued=False)
    t.dispatches["demo\nx"] = 2
    text = json.dumps(t.to_json(1030.0))
    back = team_from_json(json.loads(text), now=5.0)  # a new clock after a restart
    assert back.started_at == 5.0 - 30.0 and back.elapsed(5.0) == 30.0
    assert back.bounds == t.bounds and back.queue == t.queue and back.waits == t.waits
    assert back.turns == 1 and back.dispatches == {"demo\nx": 2}
    w1 = back.links["w1"]
    assert (w1.state, w1.holds_slot, w1.started_at, w1.ended_at) == ("starting", True, 5.0 - 30.0, None)


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ({"orchestrator": 3}, "orchestrator"),
        ({"bounds": {"turns": 0}}, "bounds"),
        ({"bounds": {"nope": 1, "turns": "x"}}, "bounds"),
        ({"links": [{"state": "dancing"}]}, "links"),
        ({"elapsed": -4}, "elapsed"),
        ({"waits": [{"key": "k", "waiter": "o", "workers": [1], "until": "done"}]}, "waits"),
    ],
)
def test_a_damaged_saved_team_is_refused_naming_the_field(damage: dict[str, object], named: str) -> None:
    data = team().to_json(0) | damage
    with pytest.raises(ValueError, match=named):
        team_from_json(data, 0)


def test_a_worker_stopped_by_a_bound_says_the_bound_not_the_abort() -> None:
    t = team()
    link = add(t, "w1")
    t.sent("w1", 0)
    link.stopping = "wall time: 3600 s of 3600 s"
    t.turn_ended("w1", "aborted", "stopped by user", 1, more_queued=False)
    assert (link.state, link.reason, link.stopping) == ("stopped", "wall time: 3600 s of 3600 s", "")
    t.sent("w1", 2)
    t.turn_ended("w1", "aborted", "stopped by user", 3, more_queued=False)  # a stop of its own, later
    assert link.reason == "stopped by user"


def test_workers_being_made_count_toward_the_total() -> None:
    t = team(total_workers=2)
    add(t, "w1")
    t.reserved = 1
    refusal = t.refuse_dispatch("orch", "demo", "third", 0, new=True)
    assert refusal is not None and refusal.words == "total workers: 2 of 2"


def test_a_turn_not_sent_fails_the_worker_frees_its_slot_and_counts_no_turn() -> None:
    t = team()
    link = add(t, "w1")
    t.sent("w1", 0)
    t.not_sent("w1", "not sent: the folder is gone", 1)
    assert (link.state, link.reason, link.holds_slot, t.turns, link.turns) == (
        "failed",
        "not sent: the folder is gone",
        False,
        0,
        0,
    )
