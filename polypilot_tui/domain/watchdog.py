"""The watchdog: PolyPilot's timeout tiers and cases as pure functions of (turn, now, probes).

Nothing here sleeps or polls. :func:`next_deadline` says when the next decision is due; the
manager sets one timer for it, and when it fires calls :func:`decide`, which answers with
an action and a human reason. A stuck turn is therefore caught at its deadline, not up to
one polling period (PolyPilot: 15 s) later.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import EventType

if TYPE_CHECKING:  # annotations only: the settings import this module for its defaults, before a run's spawn
    from polypilot_tui.domain.probes import Probes
    from polypilot_tui.domain.turn import Turn


@dataclass(frozen=True)
class WatchdogConfig:
    """Every threshold, in seconds (PolyPilot's values by default)."""

    inactivity: float = 120.0
    """No events, no tools: the default tier."""
    tool: float = 600.0
    """A tool is running, or the turn was resumed mid-flight."""
    tool_escalation: float = 60.0
    """Tool tier after the first liveness reset."""
    used_tools_idle: float = 180.0
    """Tools were used this turn and none is running now."""
    resume_quiescence: float = 30.0
    """Restored mid-turn and no event since (seeded from restore time, never file time)."""
    reconnect: float = 35.0
    """The send went out on a freshly reconnected agent."""
    max_turn: float = 3600.0
    """Absolute cap per turn from its start; 0 disables it."""
    turn_end_fallback: float = 4.0
    """Complete this long after assistant.turn_end when session.idle never comes."""
    turn_end_tool_extra: float = 30.0
    """Added to the fallback when tools were used this turn."""
    post_completion_idle: float = 30.0
    """Complete this long after the final reply when nothing else happens (gh-aw)."""
    dead_send: float = 30.0
    """The agent's log has not grown this long after a send: abort once."""
    tool_alive_log_age: float = 60.0
    used_tools_log_fresh: float = 300.0
    case_b_max_resets: int = 40
    case_b_freshness: float = 300.0
    case_b_max_stale_checks: int = 2


@dataclass(frozen=True)
class Tier:
    """A timeout tier: how long a turn may go without a real event."""

    name: str
    seconds: float


class Action(StrEnum):
    """What the watchdog asks the manager to do."""

    CONTINUE = "continue"
    """Nothing is due."""
    RESET = "reset"
    """Evidence of life without an event: restart the tier window."""
    COMPLETE = "complete"
    """End the turn as completed (the terminal event was lost)."""
    ABORT_ONCE = "abort"
    """Send one abort to unwedge the agent and restart the window (dead send, case D)."""
    KILL = "kill"
    """End the turn as stuck (case C, or the absolute cap)."""


@dataclass(frozen=True)
class Decision:
    """An action, the rule that chose it, and a reason a person can read.

    ``reason`` is what the user sees (no tier names, no event types); ``detail`` is the
    technical why (tier, last event type) for logs, recordings and ``polypilot replay``.
    """

    action: Action
    reason: str
    rule: str = ""
    """"A-alive", "A", "B", "C", "D", "fallback", "post-completion", "cap" or "" for CONTINUE."""
    tier: Tier | None = None
    detail: str = ""


@cache
def continuing() -> Decision:
    """Nothing is due: one decision, made at the first (an instance made at import would make
    its class for every start, the dashboard's included: domain/dataclass_on_use.py)."""
    return Decision(Action.CONTINUE, "")


#: Deadlines are sums of floats; a timer set for ``anchor + tier`` must see the tier as
#: elapsed when it fires, whatever the rounding.
EPSILON = 1e-6


def seconds_text(seconds: float) -> str:
    """'121 s' / '10 min' style durations for reasons."""
    if seconds >= 600 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds)} s"


def waiting_for(turn: Turn) -> str:
    """What a running turn waits for, in words ("waiting for the model", "running bash")."""
    if turn.pending_permissions:
        return "waiting for your permission"
    if turn.active_tools:
        names = ", ".join(dict.fromkeys(t.name for t in turn.active_tools.values()))
        return f"running {names}"
    if turn.resumed and not turn.events_since_resume:
        return "waiting for the agent to pick the turn up again after the restart"
    if not turn.last_event_type:
        return "waiting for the agent to take the prompt"
    if turn.used_tools:
        return "waiting for the model after its tools"
    return "waiting for the model"


def gives_up_at(turn: Turn, cfg: WatchdogConfig, probes: Probes | None = None) -> float | None:
    """When the watchdog ends this turn as stuck if nothing happens (None while paused).

    A running tool may earn extensions while the agent shows signs of life (cases A/B), so
    for tools this is the earliest moment, not a promise.
    """
    if turn.pending_permissions:
        return None
    moment = turn.watchdog_anchor + select_tier(turn, cfg, probes, turn.watchdog_anchor).seconds
    if cfg.max_turn > 0:
        moment = min(moment, turn.started_at + turn.waited_for_user + cfg.max_turn)
    return moment


def select_tier(turn: Turn, cfg: WatchdogConfig, probes: Probes | None = None, now: float = 0.0) -> Tier:
    """PolyPilot's tier selection (RunProcessingWatchdogAsync), as a pure function."""
    active = bool(turn.active_tools)
    quiesce = turn.resumed and not turn.events_since_resume and not active and not turn.used_tools
    tool = active or (turn.resumed and not quiesce)
    used_tools = not tool and turn.used_tools
    escalate = tool and turn.case_a_resets > 0
    reconnect = turn.reconnected_send and not tool and not used_tools and not quiesce
    if quiesce:
        return Tier("resume-quiescence", cfg.resume_quiescence)
    if escalate:
        return Tier("tool-escalation", cfg.tool_escalation)
    if tool:
        return Tier("tool", cfg.tool)
    if used_tools:
        # The agent's log is still being written this turn: a tool is probably running
        # that only the log knows about (#619).
        if probes and probes.log_age is not None:
            written_this_turn = probes.log_age < now - turn.started_at
            if written_this_turn and probes.log_age < cfg.used_tools_log_fresh:
                return Tier("tool", cfg.tool)
        return Tier("used-tools-idle", cfg.used_tools_idle)
    if reconnect:
        return Tier("reconnect", cfg.reconnect)
    return Tier("inactivity", cfg.inactivity)


def fallback_delay(turn: Turn, cfg: WatchdogConfig) -> float:
    """TurnEnd→Idle fallback delay: 4 s, plus 30 s when tools were used this turn (#332)."""
    return cfg.turn_end_fallback + (cfg.turn_end_tool_extra if turn.used_tools else 0.0)


def next_deadline(turn: Turn, cfg: WatchdogConfig, probes: Probes | None = None) -> float | None:
    """The earliest moment a decision may be due, or None while the watchdog is paused."""
    if turn.pending_permissions:
        return None  # waiting for the user is not being stuck
    candidates = [turn.watchdog_anchor + select_tier(turn, cfg, probes, turn.watchdog_anchor).seconds]
    if cfg.max_turn > 0:
        candidates.append(turn.started_at + turn.waited_for_user + cfg.max_turn)
    if turn.turn_end_at is not None and not turn.active_tools:
        candidates.append(max(turn.turn_end_at, turn.fallback_anchor) + fallback_delay(turn, cfg))
    if turn.final_message_at is not None and not turn.active_tools:
        candidates.append(turn.last_event_at + cfg.post_completion_idle)
    return min(candidates)


def decide(turn: Turn, now: float, cfg: WatchdogConfig, probes: Probes | None = None) -> Decision:
    """What to do with ``turn`` at ``now``; every decision but CONTINUE carries a reason."""
    if turn.pending_permissions:
        return continuing()
    last = turn.last_event_type or "none"
    busy_for = now - turn.started_at - turn.waited_for_user
    if cfg.max_turn > 0 and busy_for + EPSILON >= cfg.max_turn:
        return Decision(
            Action.KILL,
            f"the turn ran for {seconds_text(busy_for)}, past the limit of {seconds_text(cfg.max_turn)} per turn",
            "cap",
            detail=f"cap {seconds_text(cfg.max_turn)}, last event {last}",
        )
    if turn.turn_end_at is not None and not turn.active_tools:
        delay = fallback_delay(turn, cfg)
        if now + EPSILON >= max(turn.turn_end_at, turn.fallback_anchor) + delay:
            if probes and probes.log_last_type == EventType.TOOL_START and probes.agent_alive:
                return Decision(
                    Action.RESET,
                    "a tool is still running (the agent's log says so); waiting for it",
                    "fallback",
                    detail="agent log ends in tool.execution_start",
                )
            return Decision(
                Action.COMPLETE,
                f"the agent finished its reply but never reported idle ({seconds_text(now - turn.turn_end_at)})",
                "fallback",
                detail=f"no session.idle {seconds_text(now - turn.turn_end_at)} after assistant.turn_end",
            )
    if (
        turn.final_message_at is not None
        and not turn.active_tools
        and now + EPSILON >= turn.last_event_at + cfg.post_completion_idle
    ):
        quiet = seconds_text(now - turn.last_event_at)
        return Decision(
            Action.COMPLETE,
            f"the reply was complete and nothing followed for {quiet}",
            "post-completion",
            detail=f"final assistant.message, no tool pending, no events for {quiet}",
        )
    tier = select_tier(turn, cfg, probes, now)
    if now + EPSILON < turn.watchdog_anchor + tier.seconds:
        return continuing()
    silent = now - turn.last_event_at
    return _timed_out(turn, now, cfg, probes, tier, silent, last)


def _timed_out(
    turn: Turn, now: float, cfg: WatchdogConfig, probes: Probes | None, tier: Tier, silent: float, last: str
) -> Decision:
    """Cases A, B, D, then C, tried in PolyPilot's order once the tier has elapsed."""
    active = bool(turn.active_tools)
    tool_names = ", ".join(sorted({t.name for t in turn.active_tools.values()})) or "?"
    technical = f"tier {tier.name} {seconds_text(tier.seconds)}, last event {last}"
    # Case A: a tool is running. Believe it while the agent and its log show signs of life.
    if active and probes is not None and probes.agent_alive is not None:
        if probes.agent_alive and probes.log_age is not None and probes.log_age < cfg.tool_alive_log_age:
            return Decision(
                Action.RESET,
                f"{tool_names} is still running (the agent is alive and wrote to its "
                f"log {seconds_text(probes.log_age)} ago)",
                "A-alive",
                tier,
                technical,
            )
        if probes.agent_alive and turn.case_a_resets < 1:
            return Decision(
                Action.RESET,
                f"{tool_names} has been quiet for {seconds_text(silent)}; "
                f"giving it {seconds_text(cfg.tool_escalation)} more",
                "A",
                tier,
                technical,
            )
    # Case B: tools were used, none is running: the terminal event was probably lost.
    if not active and turn.used_tools:
        if probes is not None:
            if probes.log_last_type == EventType.TOOL_START and probes.agent_alive:
                return Decision(Action.RESET, "a tool is still running (the agent's log says so)", "B", tier, technical)
            if _case_b_defers(turn, now, cfg, probes):
                return Decision(Action.RESET, "the agent is still writing to its log; waiting", "B", tier, technical)
        return Decision(
            Action.COMPLETE,
            f"its tools finished and nothing followed for {seconds_text(silent)} (the agent's end signal was lost)",
            "B",
            tier,
            technical,
        )
    # Case D: the send went out and the agent's log never grew: the send is dead (#393).
    if (
        not active
        and not turn.dead_send_abort_tried
        and turn.log_size_at_send
        and probes is not None
        and probes.log_size is not None
        and silent >= cfg.dead_send
        and probes.log_size <= turn.log_size_at_send
    ):
        return Decision(
            Action.ABORT_ONCE,
            f"the agent has not started on the prompt in {seconds_text(silent)}; interrupting it once to unwedge it",
            "D",
            tier,
            technical,
        )
    # Case C: stuck.
    return Decision(Action.KILL, f"no activity for {seconds_text(silent)} ({waiting_for(turn)})", "C", tier, technical)


def _case_b_defers(turn: Turn, now: float, cfg: WatchdogConfig, probes: Probes) -> bool:
    """Case B waits (at most 40 times) while the agent's log is fresh and growing."""
    if turn.case_b_resets >= cfg.case_b_max_resets or probes.log_age is None:
        return False
    if probes.log_last_type == EventType.SESSION_SHUTDOWN:
        return False
    written_this_turn = probes.log_age < now - turn.started_at
    if not written_this_turn or probes.log_age >= cfg.case_b_freshness:
        return False
    return turn.case_b_stale_checks < cfg.case_b_max_stale_checks
