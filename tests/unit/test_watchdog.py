"""The watchdog policy: the full tier-selection matrix and every decision rule."""

from __future__ import annotations

import itertools

import pytest

from polypilot_tui.domain.events import EventType
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.turn import ToolCall, Turn
from polypilot_tui.domain.watchdog import Action, WatchdogConfig, decide, fallback_delay, next_deadline, select_tier

CFG = WatchdogConfig()


def make_turn(
    *,
    active: bool = False,
    used: bool = False,
    resumed: bool = False,
    events: bool = False,
    reconnected: bool = False,
    case_a: int = 0,
    start: float = 0.0,
) -> Turn:
    turn = Turn(
        1,
        "p",
        start,
        start,
        start,
        resumed=resumed,
        events_since_resume=events,
        reconnected_send=reconnected,
        used_tools=used,
        case_a_resets=case_a,
    )
    if active:
        call = ToolCall("c1", "bash", start, 0)
        turn.tools["c1"] = call
        turn.active_tools["c1"] = call
        turn.used_tools = True
    return turn


def expected_tier(active: bool, used: bool, resumed: bool, events: bool, reconnected: bool, case_a: int) -> float:
    """PolyPilot's formula, written out independently of the implementation."""
    used = used or active
    quiesce = resumed and not events and not active and not used
    tool = active or (resumed and not quiesce)
    used_idle = not tool and used
    escalate = tool and case_a > 0
    reconnect = reconnected and not tool and not used_idle and not quiesce
    if quiesce:
        return 30
    if escalate:
        return 60
    if tool:
        return 600
    if used_idle:
        return 180
    if reconnect:
        return 35
    return 120


MATRIX = list(itertools.product([False, True], [False, True], [False, True], [False, True], [False, True], [0, 1]))


@pytest.mark.parametrize("active,used,resumed,events,reconnected,case_a", MATRIX)
def test_tier_selection_matrix(active, used, resumed, events, reconnected, case_a) -> None:
    turn = make_turn(active=active, used=used, resumed=resumed, events=events, reconnected=reconnected, case_a=case_a)
    assert select_tier(turn, CFG).seconds == expected_tier(active, used, resumed, events, reconnected, case_a)


@pytest.mark.parametrize(
    "state,seconds,name",
    [
        ({}, 120, "inactivity"),
        ({"used": True}, 180, "used-tools-idle"),  # between tool rounds (#148)
        ({"resumed": True}, 30, "resume-quiescence"),  # #211
        ({"resumed": True, "events": True}, 600, "tool"),
        ({"reconnected": True}, 35, "reconnect"),
        ({"active": True}, 600, "tool"),
        ({"active": True, "case_a": 1}, 60, "tool-escalation"),
    ],
)
def test_named_tiers(state, seconds, name) -> None:
    tier = select_tier(make_turn(**state), CFG)
    assert (tier.seconds, tier.name) == (seconds, name)


def test_used_tools_tier_bumped_while_agent_log_is_fresh() -> None:
    turn = make_turn(used=True, start=0.0)
    fresh = Probes(log_age=10.0)
    assert select_tier(turn, CFG, fresh, now=100.0).seconds == 600
    assert select_tier(turn, CFG, Probes(log_age=150.0), now=100.0).seconds == 180  # older than the turn


def test_deadline_is_exactly_the_tier() -> None:
    turn = make_turn(start=10.0)
    assert next_deadline(turn, CFG) == 130.0
    assert decide(turn, 129.9, CFG).action is Action.CONTINUE
    decision = decide(turn, 130.0, CFG)
    assert decision.action is Action.KILL and decision.rule == "C"
    assert decision.reason == "no activity for 120 s (waiting for the agent to take the prompt)"
    assert decision.detail == "tier inactivity 120 s, last event none"


def test_kill_reason_names_the_last_event_and_tool() -> None:
    turn = make_turn(active=True)
    turn.last_event_type = EventType.TOOL_START
    decision = decide(turn, 600.0, CFG)
    assert decision.action is Action.KILL
    assert decision.reason == "no activity for 10 min (running bash)"
    assert decision.detail == "tier tool 10 min, last event tool.execution_start"


def test_paused_while_waiting_for_the_user() -> None:
    from polypilot_tui.domain.turn import PermissionPrompt

    turn = make_turn()
    turn.pending_permissions["r1"] = PermissionPrompt("r1", "Run ls")
    assert next_deadline(turn, CFG) is None
    assert decide(turn, 10_000.0, CFG).action is Action.CONTINUE


def test_absolute_cap_even_with_events_flowing() -> None:
    turn = make_turn()
    turn.last_event_at = turn.watchdog_anchor = 3590.0
    decision = decide(turn, 3600.0, CFG)
    assert decision.action is Action.KILL and decision.rule == "cap"
    assert decide(turn, 3600.0, WatchdogConfig(max_turn=0)).action is Action.CONTINUE


def test_turn_end_fallback_4s_or_34s_with_tools() -> None:
    plain = make_turn()
    plain.turn_end_at = plain.fallback_anchor = 50.0
    assert fallback_delay(plain, CFG) == 4 and next_deadline(plain, CFG) == 54.0
    assert decide(plain, 54.0, CFG).action is Action.COMPLETE
    tools = make_turn(used=True)
    tools.turn_end_at = tools.fallback_anchor = 50.0
    assert next_deadline(tools, CFG) == 84.0  # #332: never suppressed, just longer
    assert decide(tools, 83.9, CFG).action is Action.CONTINUE
    decision = decide(tools, 84.0, CFG)
    assert decision.action is Action.COMPLETE and decision.rule == "fallback"


def test_fallback_skipped_while_a_tool_runs() -> None:
    turn = make_turn(active=True)
    turn.turn_end_at = 1.0
    assert decide(turn, 40.0, CFG).action is Action.CONTINUE


def test_fallback_defers_when_agent_log_ends_in_tool_start() -> None:
    turn = make_turn()
    turn.turn_end_at = turn.fallback_anchor = 0.0
    probes = Probes(agent_alive=True, log_last_type=EventType.TOOL_START)
    assert decide(turn, 5.0, CFG, probes).action is Action.RESET


def test_post_completion_idle_completes_as_success() -> None:
    turn = make_turn(used=True)
    turn.final_message_at = turn.last_event_at = turn.watchdog_anchor = 100.0
    assert next_deadline(turn, CFG) == 130.0
    decision = decide(turn, 130.0, CFG)
    assert decision.action is Action.COMPLETE and decision.rule == "post-completion"


def test_usage_tier_case_b_completes_without_probes() -> None:
    turn = make_turn(used=True)
    decision = decide(turn, 180.0, CFG)
    assert decision.action is Action.COMPLETE and decision.rule == "B"


def test_case_b_waits_for_a_tool_only_the_log_knows() -> None:
    turn = make_turn(used=True)
    probes = Probes(agent_alive=True, log_age=500.0, log_last_type=EventType.TOOL_START)
    assert decide(turn, 180.0, CFG, probes).action is Action.RESET


def test_case_b_defers_while_log_grows_then_gives_up() -> None:
    turn = make_turn(used=True)
    probes = Probes(agent_alive=True, log_age=5.0, log_size=100, log_last_type=EventType.MESSAGE)
    # Fresh log written this turn: the tier is bumped to 600 first.
    assert decide(turn, 180.0, CFG, probes).action is Action.CONTINUE
    decision = decide(turn, 600.0, CFG, probes)
    assert decision.action is Action.RESET and decision.rule == "B"
    turn.case_b_stale_checks = 2
    assert decide(turn, 600.0, CFG, probes).action is Action.COMPLETE


def test_case_a_believes_a_live_tool_and_escalates_a_stale_one() -> None:
    turn = make_turn(active=True)
    alive = Probes(agent_alive=True, log_age=10.0)
    decision = decide(turn, 600.0, CFG, alive)
    assert decision.action is Action.RESET and decision.rule == "A-alive"
    stale = Probes(agent_alive=True, log_age=500.0)
    first = decide(turn, 600.0, CFG, stale)
    assert first.action is Action.RESET and first.rule == "A"
    turn.note_reset(600.0, "A", stale)
    assert select_tier(turn, CFG).seconds == 60
    assert decide(turn, 659.0, CFG, stale).action is Action.CONTINUE
    assert decide(turn, 660.0, CFG, stale).action is Action.KILL
    dead = Probes(agent_alive=False, log_age=1.0)
    assert decide(make_turn(active=True), 600.0, CFG, dead).action is Action.KILL


def test_case_d_aborts_a_dead_send_once() -> None:
    turn = make_turn()
    turn.log_size_at_send = 500
    probes = Probes(agent_alive=True, log_age=200.0, log_size=500)
    decision = decide(turn, 120.0, CFG, probes)
    assert decision.action is Action.ABORT_ONCE and decision.rule == "D"
    turn.dead_send_abort_tried = True
    assert decide(turn, 120.0, CFG, probes).action is Action.KILL
    grown = make_turn()
    grown.log_size_at_send = 500
    assert decide(grown, 120.0, CFG, Probes(agent_alive=True, log_size=900)).action is Action.KILL


def test_every_decision_but_continue_has_a_reason() -> None:
    turns = [make_turn(**kw) for kw in ({}, {"used": True}, {"active": True}, {"resumed": True})]
    for turn, now in itertools.product(turns, [30.0, 120.0, 180.0, 600.0, 3600.0]):
        decision = decide(turn, now, CFG)
        assert decision.action is Action.CONTINUE or decision.reason
