"""Recovery guardrails: attempt cap, in-progress guard, global breaker (core/recovery.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from polypilot_tui.domain.recovery import RecoveryGate, may_resend


def test_defaults_match_polypilot() -> None:
    gate = RecoveryGate()
    assert (gate.max_attempts, gate.breaker_limit, gate.breaker_window) == (2, 5, 300.0)
    assert gate.attempts("s") == 0 and not gate.in_progress("s")
    assert gate.refusal("s", now=0.0) is None


def test_at_most_two_attempts_per_session() -> None:
    gate = RecoveryGate()
    assert gate.begin("s", now=0.0) == 1
    gate.finish("s")
    assert gate.refusal("s", now=1.0) is None
    assert gate.begin("s", now=1.0) == 2
    gate.finish("s")
    reason = gate.refusal("s", now=2.0)
    assert reason is not None and "2 recovery attempts already failed" in reason
    assert gate.attempts("s") == 2


def test_in_progress_guard() -> None:
    gate = RecoveryGate()
    gate.begin("s", now=0.0)
    assert gate.in_progress("s")
    assert gate.refusal("s", now=0.0) == "a recovery is already in progress"
    assert gate.refusal("other", now=0.0) is None  # per session
    gate.finish("s")
    assert not gate.in_progress("s")
    assert gate.refusal("s", now=0.0) is None


def test_finish_is_idempotent_and_safe_for_unknown_sessions() -> None:
    gate = RecoveryGate()
    gate.finish("never-started")
    gate.begin("s", now=0.0)
    gate.finish("s")
    gate.finish("s")
    assert not gate.in_progress("s") and gate.attempts("s") == 1


def test_in_progress_is_reported_before_the_attempt_cap() -> None:
    gate = RecoveryGate(max_attempts=1)
    gate.begin("s", now=0.0)
    assert gate.refusal("s", now=0.0) == "a recovery is already in progress"
    gate.finish("s")
    assert "1 recovery attempts already failed" in (gate.refusal("s", now=0.0) or "")


def test_reset_gives_a_clean_slate() -> None:
    gate = RecoveryGate()
    for t in (0.0, 1.0):
        gate.begin("s", now=t)
        gate.finish("s")
    assert gate.refusal("s", now=2.0) is not None
    gate.reset("s")  # a turn completed or the user aborted
    assert gate.attempts("s") == 0
    assert gate.refusal("s", now=2.0) is None
    assert gate.begin("s", now=2.0) == 1


def test_reset_does_not_cancel_an_in_progress_recovery() -> None:
    gate = RecoveryGate()
    gate.begin("s", now=0.0)
    gate.reset("s")
    assert gate.in_progress("s")
    assert gate.refusal("s", now=0.0) == "a recovery is already in progress"
    gate.reset("unknown")  # no error


def test_attempts_are_per_session() -> None:
    gate = RecoveryGate()
    gate.begin("a", now=0.0)
    gate.finish("a")
    gate.begin("a", now=1.0)
    gate.finish("a")
    assert gate.refusal("a", now=2.0) is not None
    assert gate.refusal("b", now=2.0) is None
    assert gate.attempts("b") == 0


def test_circuit_breaker_opens_across_sessions() -> None:
    gate = RecoveryGate()
    for i in range(4):
        gate.begin(f"s{i}", now=float(i))
        gate.finish(f"s{i}")
    assert not gate.breaker_open(now=4.0)
    assert gate.refusal("new", now=4.0) is None
    gate.begin("s4", now=4.0)
    gate.finish("s4")
    assert gate.breaker_open(now=4.0)
    reason = gate.refusal("new", now=5.0)
    assert reason is not None and "circuit breaker open" in reason and "5 recoveries" in reason
    assert "300 s" in reason


def test_circuit_breaker_window_slides_with_explicit_now() -> None:
    gate = RecoveryGate()
    for i, t in enumerate((0.0, 10.0, 20.0, 30.0, 40.0)):
        gate.begin(f"s{i}", now=t)
        gate.finish(f"s{i}")
    assert gate.breaker_open(now=299.9)  # all five within 300 s
    assert not gate.breaker_open(now=300.0)  # the one at t=0 is exactly 300 s old: expired
    assert gate.refusal("new", now=300.0) is None
    gate.begin("s5", now=300.0)  # back to 5 in the window (10..40, 300)
    assert gate.breaker_open(now=300.0)
    assert not gate.breaker_open(now=310.0)


def test_breaker_counts_begins_not_outcomes() -> None:
    gate = RecoveryGate(breaker_limit=2, breaker_window=60.0)
    gate.begin("a", now=0.0)
    gate.finish("a")
    gate.reset("a")  # success resets the session, not the breaker
    gate.begin("a", now=1.0)
    assert gate.breaker_open(now=1.0)
    assert gate.refusal("b", now=2.0) is not None
    assert gate.refusal("b", now=61.0) is None


def test_breaker_is_checked_after_session_rules() -> None:
    gate = RecoveryGate(breaker_limit=1)
    gate.begin("s", now=0.0)
    assert gate.refusal("s", now=0.0) == "a recovery is already in progress"
    assert "circuit breaker" in (gate.refusal("t", now=0.0) or "")


def test_custom_limits_in_message() -> None:
    gate = RecoveryGate(max_attempts=3, breaker_limit=10, breaker_window=120.0)
    for t in range(3):
        gate.begin("s", now=float(t))
        gate.finish("s")
    assert gate.refusal("s", now=3.0) == "3 recovery attempts already failed"


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 1000)), max_size=30))
def test_property_breaker_matches_reference(begins: list[tuple[str, float]]) -> None:
    """Breaker state equals "≥5 begins in the last 300 s" for non-decreasing times."""
    gate = RecoveryGate()
    times: list[float] = []
    now = 0.0
    for session, dt in begins:
        now += dt
        gate.begin(session, now=now)
        gate.finish(session)
        times.append(now)
        recent = [t for t in times if now - t < 300.0]
        assert gate.breaker_open(now) is (len(recent) >= 5)


def test_may_resend_only_without_successful_tools() -> None:
    # PolyPilot #298: resending after a tool succeeded would run its side effects twice.
    assert may_resend(0)
    assert not may_resend(1)
    assert not may_resend(7)
