"""Watchdog latency: how late after its tier deadline a stuck turn is caught, on the real clock.

20 sessions each send a prompt that gets one event and then silence. The tier is shortened
to 2 s so the run is quick; lateness does not depend on the tier length because the manager
arms one timer per turn at its exact deadline. PolyPilot polls every 15 s, so its lateness
is uniform in [0, 15) s: mean 7.5 s. The ratio compares our mean with that reference.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench._support import AGENT, QuietBackend, Row, bench_manager, bench_settings
from polypilot_tui.config import WatchdogSettings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.records import Record, TurnEnded

SESSIONS = 20
TIER = 2.0
POLLING_REFERENCE_MEAN = 7.5


class _Silent(QuietBackend):
    """Starts the turn, then never says anything again."""

    async def send(self, prompt: str) -> None:
        asyncio.get_running_loop().call_soon(self.sink, AgentEvent("assistant.turn_start", {}))


async def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        clock = SystemClock()
        manager, _ = bench_manager(
            bench_settings(Path(tmp), watchdog=WatchdogSettings(inactivity=TIER)), clock, _Silent
        )
        ids = [await manager.create_session(AGENT) for _ in range(SESSIONS)]
        caught: dict[str, float] = {}

        def on_change(change: Record) -> None:
            sid = change.session_id
            session = manager.session(sid)
            if session.turns and sid not in caught:
                caught[sid] = clock.now()

        manager.subscribe(on_change, TurnEnded)
        for sid in ids:
            await manager.send(sid, "hang")
        deadlines = {}
        await asyncio.sleep(0.05)
        for sid in ids:
            turn = manager.session(sid).turn
            assert turn is not None
            deadlines[sid] = turn.last_event_at + TIER
        started = time.perf_counter()
        while len(caught) < SESSIONS and time.perf_counter() - started < TIER + 10:
            await asyncio.sleep(0.05)
        late = [caught[sid] - deadlines[sid] for sid in ids if sid in caught]
        await manager.shutdown()
    late_ms = sorted(x * 1000 for x in late)
    mean = statistics.mean(late)
    print(f"stuck turns caught:        {len(late)}/{SESSIONS} (tier {TIER:.0f} s)")
    print(
        f"lateness after deadline:   mean {statistics.mean(late_ms):.1f} ms, "
        f"max {late_ms[-1]:.1f} ms (target < 1000 ms)"
    )
    print(f"PolyPilot 15 s polling:    mean {POLLING_REFERENCE_MEAN * 1000:.0f} ms, max 15000 ms (reference)")
    print(f"ratio to polling (mean):   {mean / POLLING_REFERENCE_MEAN:.5f}x")
    figure = f"mean {statistics.mean(late_ms):.1f} ms, max {late_ms[-1]:.1f} ms ({len(late)}/{SESSIONS} caught)"
    return [("watchdog: a stuck turn ended after its deadline", figure, "< 1000 ms")]


def main() -> list[Row]:
    return asyncio.run(run())


if __name__ == "__main__":
    main()
