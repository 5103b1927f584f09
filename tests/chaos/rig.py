"""A SessionManager under chaos, with the matrix's checks attached.

Every wait goes through :meth:`Rig.until`, which checks on the way that no turn is still
processing past its watchdog deadline (the idea of tests/unit/test_engine_properties.py):
in virtual time it stops exactly where the invariant could first break; in real time it
polls every 50 ms with a little slack for scheduling. A tap on the manager's events keeps
every piece of text the agent streamed into a live turn, so a scenario can assert that
none of it went missing from history. A turn whose agent is still connecting is not checked:
its prompt is not out yet, and the backend's connect timeout bounds that phase.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from polypilot_tui.agents.base import AgentBackend, EventSink
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import Clock, FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.records import EventReceived
from polypilot_tui.domain.turn import Turn
from polypilot_tui.domain.watchdog import WatchdogConfig, fallback_delay, select_tier
from polypilot_tui.engine.manager import SessionManager
from tests.support.waiting import advance_until, until

BackendWrapper = Callable[[AgentBackend, str], AgentBackend]
"""(new backend, session id) -> the backend the manager gets (identity, or a faulty proxy)."""


def latest_allowed(turn: Turn | None, cfg: WatchdogConfig) -> float | None:
    """The latest moment ``turn`` may still be processing, or None (idle, or waiting on the user).

    Liveness probes can lengthen a window only through a watchdog reset, which moves the
    anchor; the one exception is the used-tools tier, which a fresh agent log turns into
    the tool tier (#619), so that case is allowed the tool tier.
    """
    if turn is None or turn.pending_permissions:
        return None
    tier = select_tier(turn, cfg)
    bounds = [turn.watchdog_anchor + max(tier.seconds, _probe_tier(turn, cfg)) + 1.0]
    if cfg.max_turn > 0:
        bounds.append(turn.started_at + turn.waited_for_user + cfg.max_turn + 1.0)
    if turn.turn_end_at is not None and not turn.active_tools:
        bounds.append(max(turn.turn_end_at, turn.fallback_anchor) + fallback_delay(turn, cfg) + 1.0)
    if turn.final_message_at is not None and not turn.active_tools:
        bounds.append(turn.last_event_at + cfg.post_completion_idle + 1.0)
    return min(bounds)


def _probe_tier(turn: Turn, cfg: WatchdogConfig) -> float:
    """A fresh agent log turns the used-tools tier into the tool tier (#619)."""
    used_tools_only = turn.used_tools and not turn.active_tools and not turn.resumed
    return cfg.tool if used_tools_only else 0.0


class Rig:
    """One manager on one backend, watched."""

    def __init__(self, manager: SessionManager, clock: Clock, *, slack: float) -> None:
        self.manager = manager
        self.clock = clock
        self.virtual = isinstance(clock, FakeClock)
        self.slack = slack
        self.backends: dict[str, list[AgentBackend]] = defaultdict(list)
        self.streamed: dict[str, list[str]] = defaultdict(list)
        self.violations: list[str] = []
        self._delta_ids: set[tuple[str, str]] = set()
        manager.subscribe(lambda change: self._tap(change.session_id, change.event), EventReceived)

    # ---- factory plumbing ---------------------------------------------------------
    def track(
        self, wrap: BackendWrapper | None, make: Callable[[str, EventSink, Path], AgentBackend]
    ) -> Callable[[str, EventSink, Path], AgentBackend]:
        """A backend factory that remembers every backend per session and applies ``wrap``."""

        def factory(agent: str, sink: EventSink, workdir: Path) -> AgentBackend:
            backend = make(agent, sink, workdir)
            if wrap is not None:
                backend = wrap(backend, workdir.name)
            self.backends[workdir.name].append(backend)
            return backend

        return factory

    # ---- checks -------------------------------------------------------------------
    def _tap(self, sid: str, event: AgentEvent) -> None:
        session = self.manager.session(sid)
        if session.turn is None:
            return  # ignored by the engine as well: a late event for a closed turn
        mid = event.text("messageId")
        if event.type == EventType.MESSAGE_DELTA:
            self._delta_ids.add((sid, mid))
            piece = event.text("deltaContent", "content")
        elif event.type == EventType.MESSAGE and (sid, mid) not in self._delta_ids:
            piece = event.text("content")
        else:
            return
        if piece.strip():
            self.streamed[sid].append(piece.strip())

    def lost_text(self, sid: str) -> list[str]:
        """Streamed pieces that are in no assistant history row."""
        kept = "".join(item.text for item in self.manager.history(sid) if item.kind is ItemKind.ASSISTANT)
        return [piece for piece in self.streamed[sid] if piece not in kept]

    def check(self) -> None:
        now = self.clock.now()
        cfg = self.manager.cfg
        for sid in self.manager.ids():
            session = self.manager.session(sid)
            if session.connecting:
                continue  # the prompt is not out yet: the connect is bounded by its own timeout
            turn = session.turn
            limit = latest_allowed(turn, cfg)
            if limit is not None and now > limit + self.slack + 1e-9:
                assert turn is not None
                message = (
                    f"{sid}: turn still processing at t={now:.2f}, past its deadline {limit:.2f} "
                    f"(tier {select_tier(turn, cfg)}, last event {turn.last_event_type or 'none'})"
                )
                if message.split(" at t=")[0] not in {v.split(" at t=")[0] for v in self.violations}:
                    self.violations.append(message)

    def _earliest_limit(self) -> float | None:
        limits = [
            latest_allowed(self.manager.session(sid).turn, self.manager.cfg)
            for sid in self.manager.ids()
            if not self.manager.session(sid).connecting
        ]
        found = [x for x in limits if x is not None]
        return min(found) if found else None

    # ---- time ---------------------------------------------------------------------
    def now(self) -> float:
        return self.clock.now()

    async def until(self, predicate: Callable[[], bool], within: float, what: str) -> None:
        """Wait (virtual or real seconds) for ``predicate``, checking deadlines all the way."""
        if isinstance(self.clock, FakeClock):
            await advance_until(self.clock, predicate, within=within, what=what, stops=self._stops, each=self.check)
            return

        def checked() -> bool:
            self.check()
            return predicate()

        await until(checked, within, what, every=0.05)

    def _stops(self) -> list[float]:
        """Where virtual time stops besides timers: the earliest deadline of a turn (and, once
        it is missed, half a second on, so that the miss is seen and time keeps moving)."""
        limit = self._earliest_limit()
        if limit is None:
            return []
        return [limit if limit > self.clock.now() else self.clock.now() + 0.5]

    # ---- state --------------------------------------------------------------------
    def at_rest(self, sid: str) -> bool:
        session = self.manager.session(sid)
        return session.turn is None and not session.recovering

    def outcomes(self, sid: str, since: int = 0) -> list[str]:
        return [t.outcome.value for t in self.manager.session(sid).turns[since:]]

    def reasons(self, sid: str, since: int = 0) -> list[str]:
        return [t.reason for t in self.manager.session(sid).turns[since:]]

    def backend(self, sid: str) -> AgentBackend:
        return self.backends[sid][-1]


def scaled(cfg: WatchdogConfig, **seconds: float) -> WatchdogConfig:
    """``cfg`` with some thresholds replaced (the ones Settings does not expose)."""
    return dataclasses.replace(cfg, **seconds)
