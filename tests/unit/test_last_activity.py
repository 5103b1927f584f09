"""'Last activity' is what the agent did, not the noise of it going away or sitting idle.

Reported by the tmux trial: right after a quit every session said "3s ago" in ``status``.
"""

from __future__ import annotations

from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.reducer import apply_event
from polypilot_tui.domain.session import Session


def wall() -> float:
    return 1_000.0


def test_an_agent_going_away_or_idle_chatter_is_no_activity() -> None:
    session = Session("s1", "one", "demo")
    apply_event(session, AgentEvent(EventType.SESSION_TITLE_CHANGED, {"title": "t"}), 10.0, wall)
    assert session.last_activity_at == 10.0  # a session-level event the user sees counts
    apply_event(session, AgentEvent(EventType.CONNECTION_LOST, {"reason": "closed"}), 50.0, wall)
    apply_event(session, AgentEvent("session.shutdown", {}), 60.0, wall)  # a kind we do not know, no turn
    assert session.last_activity_at == 10.0
    session.begin_turn("hello", 70.0)
    apply_event(session, AgentEvent("session.info", {}), 80.0, wall)  # during a turn anything counts
    assert session.last_activity_at == 80.0
