"""Property tests over random event orders.

Whatever order events arrive in — duplicated, out of order, for unknown tools, with usage
floods and long silences, one at a time or several in one pass of the event loop (whose
stream deltas make one view change) — no turn stays processing past its tier plus 1 s, and no text
that was streamed is ever lost (it is in history or still in the turn's buffer).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polypilot_tui.agents.base import NullBackend
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.watchdog import select_tier
from polypilot_tui.engine.manager import SessionManager

TOOL_IDS = ["a", "b", "c"]
_words = itertools.count()


ScriptedBackend = NullBackend  # the agent is the test: events are pushed straight into the sink


def event_strategy() -> st.SearchStrategy[tuple[str, dict]]:
    tool = st.sampled_from(TOOL_IDS)
    return st.one_of(
        st.just((EventType.TURN_START, {})),
        st.just((EventType.TURN_END, {})),
        st.just((EventType.SESSION_IDLE, {})),
        st.just((EventType.SESSION_USAGE_INFO, {"currentTokens": 5})),
        st.just((EventType.ASSISTANT_USAGE, {"outputTokens": 5})),
        st.just(("session.some_future_event", {"x": 1})),
        st.just((EventType.MESSAGE_DELTA, {"messageId": "m", "deltaContent": None})),  # filled in below
        st.just((EventType.MESSAGE, {"messageId": None, "content": None, "toolRequests": []})),
        tool.map(lambda t: (EventType.TOOL_START, {"toolCallId": t, "toolName": "bash"})),
        tool.map(lambda t: (EventType.TOOL_COMPLETE, {"toolCallId": t, "success": True, "result": {"content": "ok"}})),
        tool.map(
            lambda t: (
                EventType.TOOL_COMPLETE,
                {"toolCallId": t, "success": False, "error": {"message": "Permission denied"}},
            )
        ),
        st.just((EventType.SESSION_ERROR, {"message": "boom"})),
    )


steps = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=400.0), event_strategy(), st.booleans(), st.booleans()),
    min_size=1,
    max_size=40,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_no_turn_outlives_its_tier_and_no_text_is_lost(script) -> None:
    asyncio.run(_check(script))


async def _check(script) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        settings_ = Settings.read(None, state_dir=Path(tmp))
        catalog = AgentCatalog({"fake": AgentConfig(name="fake", kind="demo")})
        backends: list[ScriptedBackend] = []

        def factory(agent, sink, workdir):
            backends.append(ScriptedBackend(sink))
            return backends[-1]

        manager = SessionManager(settings_, catalog, clock, backend_factory=factory, id_factory=lambda: "s")
        sid = await manager.create_session("fake")
        streamed: list[str] = []
        cfg = manager.cfg
        for gap, (kind, data), send_first, same_burst in script:
            session = manager.session(sid)
            if not same_burst:  # else: in the same loop iteration as the event before
                await clock.settle()
                if send_first and session.turn is None:
                    await manager.send(sid, f"prompt {next(_words)}")
                await _advance_checking(manager, clock, sid, gap, cfg)
            data = dict(data)
            if kind == EventType.MESSAGE_DELTA:
                word = f"w{next(_words)} "
                data["deltaContent"] = word
                if manager.session(sid).turn is not None:
                    streamed.append(word)
            elif kind == EventType.MESSAGE:
                word = f"m{next(_words)}"
                data.update(messageId=word, content=word)
                if manager.session(sid).turn is not None:
                    streamed.append(word)
            if manager.backend(sid) is not None:
                manager.backend(sid).sink(AgentEvent(kind, data))
        await clock.settle()
        await _advance_checking(manager, clock, sid, 4000.0, cfg)
        assert manager.session(sid).turn is None, "a turn outlived every tier"
        kept = "".join(
            item.text for item in manager.history(sid) if item.kind in (ItemKind.ASSISTANT, ItemKind.REASONING)
        )
        for word in streamed:
            assert word.strip() in kept, f"streamed text {word!r} was lost"
        await manager.shutdown()


async def _advance_checking(manager: SessionManager, clock: FakeClock, sid: str, seconds: float, cfg) -> None:
    """Advance to ``now + seconds``, stopping wherever the invariant could first break.

    Each stop is the earlier of the next timer and the moment the live turn would be more
    than 1 s past one of its deadlines; a late or missing timer therefore fails the check.
    """
    end = clock.now() + seconds
    while True:
        _assert_within_deadlines(manager, clock, sid, cfg)
        if clock.now() >= end:
            return
        limit = _latest_allowed(manager.session(sid).turn, cfg)
        next_timer = clock.next_deadline()
        step_to = min(x for x in (end, next_timer, limit) if x is not None)
        if step_to <= clock.now():
            step_to = min(end, clock.now() + 0.5)
        await clock.advance_to(step_to)


def _latest_allowed(turn, cfg) -> float | None:
    if turn is None or turn.pending_permissions:
        return None
    bounds = [turn.watchdog_anchor + select_tier(turn, cfg).seconds + 1.0, turn.started_at + cfg.max_turn + 1.0]
    if turn.turn_end_at is not None and not turn.active_tools:
        fallback = cfg.turn_end_fallback + (cfg.turn_end_tool_extra if turn.used_tools else 0)
        bounds.append(max(turn.turn_end_at, turn.fallback_anchor) + fallback + 1.0)
    if turn.final_message_at is not None and not turn.active_tools:
        bounds.append(turn.last_event_at + cfg.post_completion_idle + 1.0)
    return min(bounds)


def _assert_within_deadlines(manager: SessionManager, clock: FakeClock, sid: str, cfg) -> None:
    turn = manager.session(sid).turn
    limit = _latest_allowed(turn, cfg)
    assert limit is None or clock.now() <= limit + 1e-9, (
        f"turn still processing at t={clock.now():.1f}, past its deadline {limit:.1f} "
        f"(tier {select_tier(turn, cfg)}, last event {turn.last_event_type})"
    )
