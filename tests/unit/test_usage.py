"""Usage figures (domain/usage.py): what is summed, what is latest, and what is ignored.

The event shapes are the ones the real agents sent (see tests/e2e/test_usage_real_agents.py):
Copilot's ``assistant.usage`` per model call and ``session.usage_info`` per request, an ACP
turn end's usage per turn, and ACP ``usage_update`` with a cumulative cost.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.reducer import apply_event
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.usage import MAX_COST, MAX_TOKENS, Usage, fleet_usage, usage_from_plain

CALL = EventType.ASSISTANT_USAGE.value
CONTEXT = EventType.SESSION_USAGE_INFO.value


def fold(*events: tuple[str, dict[str, Any]]) -> Usage:
    usage = Usage()
    for kind, data in events:
        usage = usage.fold(kind, data)
    return usage


def test_nothing_reported_is_no_usage() -> None:
    assert Usage() == fold() and not Usage().reported
    assert Usage().context_share is None


def test_copilot_calls_are_summed_and_the_context_is_the_latest() -> None:
    usage = fold(
        (CONTEXT, {"currentTokens": 8669, "tokenLimit": 128000, "isInitial": True}),
        (CALL, {"model": "gpt-4.1", "inputTokens": 10321, "outputTokens": 4, "cacheReadTokens": 0, "cost": 1.0}),
        (CONTEXT, {"currentTokens": 8749, "tokenLimit": 128000}),
        (CALL, {"model": "gpt-4.1", "inputTokens": 10369, "outputTokens": 15, "cacheReadTokens": 300}),
    )
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (20690, 19, 300)
    assert (usage.context_used, usage.context_size) == (8749, 128000)
    assert usage.context_share == pytest.approx(8749 / 128000)
    assert usage.cost is None and usage.currency == ""  # Copilot's cost is a multiplier, not money
    assert usage.reported and usage.total_tokens == 20709


def test_acp_turn_usage_is_summed_and_its_cached_key_read() -> None:
    usage = fold(
        (CALL, {"totalTokens": 7768, "inputTokens": 7764, "outputTokens": 4, "cachedReadTokens": 100}),
        (CALL, {"totalTokens": 7862, "inputTokens": 7860, "outputTokens": 2}),
    )
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (15624, 6, 100)
    assert usage.context_used is None


def test_cumulative_cost_adds_only_its_growth() -> None:
    def report(amount: object, currency: object = "USD") -> tuple[str, dict[str, Any]]:
        return CONTEXT, {"currentTokens": 10, "tokenLimit": 100, "cost": {"amount": amount, "currency": currency}}

    usage = fold(report(0.02), report(0.05), report(0.05))
    assert usage.cost == pytest.approx(0.05) and usage.currency == "USD"
    usage = usage.fold(*report(0.01))  # a new agent session counts from zero again
    assert usage.cost == pytest.approx(0.06)
    usage = usage.fold(*report(3.0, "EUR"))  # other money is not added as if it were dollars
    assert usage.cost == pytest.approx(0.06) and usage.currency == "USD"
    assert fold(report(0, "usd")).cost == 0.0 and fold(report(0, "usd")).currency == "USD"


BAD_NUMBERS = [True, False, None, "12", "", [], {}, -1, -0.5, math.nan, math.inf, -math.inf, MAX_TOKENS + 1, 1e300]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
def test_a_bad_figure_is_ignored(bad: object) -> None:
    assert fold((CALL, {"inputTokens": bad, "outputTokens": bad, "cacheReadTokens": bad})) == Usage()
    assert fold((CONTEXT, {"currentTokens": bad, "tokenLimit": bad})) == Usage()
    assert fold((CONTEXT, {"cost": {"amount": bad, "currency": "USD"}})) == Usage()
    good = fold((CALL, {"inputTokens": 5, "outputTokens": bad}))
    assert (good.input_tokens, good.output_tokens, good.reported) == (5, 0, True)


@pytest.mark.parametrize("currency", [None, 3, "", "US", "DOLLARS", "U$D", "[b]USD"])
def test_a_cost_without_a_currency_code_is_ignored(currency: object) -> None:
    assert fold((CONTEXT, {"cost": {"amount": 1.5, "currency": currency}})) == Usage()


@pytest.mark.parametrize("data", [{}, {"cost": 5}, {"cost": "x"}, {"unknown": 1}])
def test_a_report_without_figures_changes_nothing(data: dict[str, Any]) -> None:
    assert fold((CONTEXT, data), (CALL, data)) == Usage()


def test_the_cli_log_usage_record_is_not_counted_again() -> None:
    assert fold(("session.usage_record", {"inputTokens": 10, "outputTokens": 2})) == Usage()


def test_a_tiny_context_window_caps_at_full() -> None:
    assert fold((CONTEXT, {"currentTokens": 500, "tokenLimit": 100})).context_share == 1.0
    assert fold((CONTEXT, {"currentTokens": 500, "tokenLimit": 0})).context_share is None


# ---- properties: whatever arrives, nothing raises, nothing leaves its bounds -----------------
JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**15), max_value=10**15)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
KEYS = st.sampled_from(["inputTokens", "outputTokens", "cacheReadTokens", "cachedReadTokens", "currentTokens"])
EVENT = st.tuples(
    st.sampled_from([CALL, CONTEXT, "session.usage_record"]),
    st.dictionaries(KEYS | st.sampled_from(["tokenLimit", "cost", "x"]), JSONISH, max_size=5),
)


def valid(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) and 0 <= value <= MAX_TOKENS else None


@given(st.lists(EVENT, max_size=12))
def test_any_events_fold_within_bounds_and_sum_the_valid_input(events: list[tuple[str, dict[str, Any]]]) -> None:
    usage = fold(*events)
    for count in (usage.input_tokens, usage.output_tokens, usage.cached_tokens):
        assert type(count) is int and 0 <= count <= MAX_TOKENS
    for figure in (usage.context_used, usage.context_size):
        assert figure is None or (type(figure) is int and 0 <= figure <= MAX_TOKENS)
    assert usage.cost is None or (math.isfinite(usage.cost) and 0 <= usage.cost <= MAX_COST)
    expected = sum(n for kind, data in events if kind == CALL and (n := valid(data.get("inputTokens"))) is not None)
    assert usage.input_tokens == min(expected, MAX_TOKENS)
    assert usage_from_plain(usage.to_json() | {"cost_mark": usage.cost_mark}) == usage  # what the registry keeps


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.floats(0, 100)), max_size=6))
def test_the_fleet_sums_its_sessions(figures: list[tuple[int, int, float]]) -> None:
    usages = [
        fold((CALL, {"inputTokens": i, "outputTokens": o}), (CONTEXT, {"cost": {"amount": c, "currency": "USD"}}))
        for i, o, c in figures
    ]
    fleet = fleet_usage([*usages, Usage()])
    assert fleet.input_tokens == sum(i for i, _, _ in figures)
    assert fleet.output_tokens == sum(o for _, o, _ in figures)
    assert fleet.reported == bool(figures) and fleet.context_used is None
    assert fleet.cost == (pytest.approx(sum(c for _, _, c in figures)) if figures else None)


def test_the_fleet_does_not_add_dollars_to_euros() -> None:
    dollars = fold((CONTEXT, {"cost": {"amount": 1.0, "currency": "USD"}}), (CALL, {"inputTokens": 10}))
    euros = fold((CONTEXT, {"cost": {"amount": 2.0, "currency": "EUR"}}), (CALL, {"inputTokens": 5}))
    fleet = fleet_usage([dollars, euros])
    assert fleet.cost is None and fleet.currency == "" and fleet.input_tokens == 15


@pytest.mark.parametrize(
    "saved", [None, "junk", [], {"input_tokens": -3, "cost": 2.0}, {"input_tokens": True, "currency": "USD"}]
)
def test_a_bad_saved_usage_reads_as_what_fits(saved: object) -> None:
    usage = usage_from_plain(saved)
    assert usage.input_tokens == 0 and usage.cost is None  # a cost without its currency is no cost


# ---- in a session: a change shows, and it is never activity (#230) ---------------------------
def test_usage_changes_the_view_but_is_never_progress() -> None:
    clock = FakeClock()
    session = Session("s1", "one", "copilot")
    turn = session.begin_turn("hi", clock.now())
    later = clock.now() + 50
    before = session.revision
    apply_event(session, AgentEvent(CALL, {"inputTokens": 10, "outputTokens": 2}), later, clock)
    apply_event(session, AgentEvent(CONTEXT, {"currentTokens": 10, "tokenLimit": 100}), later, clock)
    assert session.usage.input_tokens == 10 and session.usage.context_used == 10
    assert session.revision == before + 2  # the view carries it
    assert turn.last_event_at == 0.0 and session.last_activity_at is None  # no progress, no activity
    apply_event(session, AgentEvent(CONTEXT, {"currentTokens": 10, "tokenLimit": 100}), later, clock)
    assert session.revision == before + 2  # the same report again: nothing to redraw


def test_a_new_agent_session_counts_its_cost_from_zero() -> None:
    report = {"currentTokens": 10, "tokenLimit": 100}
    before = Usage().fold("session.usage_info", {**report, "cost": {"amount": 0.05, "currency": "USD"}})
    # the old counter reached 0.05; a new agent session's counter starts again and reaches 0.08
    kept = before.fold("session.usage_info", {**report, "cost": {"amount": 0.08, "currency": "USD"}})
    fresh = before.new_counter().fold("session.usage_info", {**report, "cost": {"amount": 0.08, "currency": "USD"}})
    assert kept.cost == pytest.approx(0.08)  # read as the same counter grown by 0.03
    assert fresh.cost == pytest.approx(0.13)  # 0.05 before + 0.08 of the new session
