"""UI under load: the headless dashboard while 20 sessions each stream 100 deltas/s for 20 s.

Reports event-loop lag (p50/p99 of how late a 10 ms timer fires; target p99 <= 50 ms),
redraws per second (the app coalesces bursts), and whether every streamed character was
delivered into the sessions' history. The ratio is redraws / engine changes: the fraction
of per-event redraws the coalescing actually performs.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench._support import AGENT, QuietBackend, Row, bench_manager, bench_settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.records import Record, ViewChanged

SESSIONS = 20
RATE = 100  # deltas per second per session
SECONDS = 20.0
WORD = "lorem ipsum "


class Streamer(QuietBackend):
    """An agent that streams deltas at a fixed rate when it gets a prompt."""

    def __init__(self, sink) -> None:
        super().__init__(sink)
        self.sent = 0

    async def send(self, prompt: str) -> None:
        asyncio.get_running_loop().create_task(self._stream())

    async def _stream(self) -> None:
        self.sink(AgentEvent("assistant.turn_start", {}))
        started = time.perf_counter()
        total = int(RATE * SECONDS)
        for i in range(total):
            # Paced against the wall clock so a slow loop cannot quietly lower the load.
            delay = started + (i + 1) / RATE - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            self.sink(AgentEvent("assistant.message_delta", {"messageId": "m", "deltaContent": WORD}))
            self.sent += 1
        self.sink(AgentEvent("assistant.turn_end", {}))
        self.sink(AgentEvent("session.idle", {}))


async def run() -> list[Row]:
    from polypilot_tui.engine.local import LocalEngine
    from polypilot_tui.ui.launch import dashboard_on

    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(Path(tmp))
        clock = SystemClock()
        backends: list[Streamer] = []

        def streamer(sink) -> Streamer:
            backends.append(Streamer(sink))
            return backends[-1]

        manager, catalog = bench_manager(settings, clock, streamer)
        changes = 0

        def count(_change: Record) -> None:
            nonlocal changes
            changes += 1

        manager.subscribe(count, ViewChanged)
        app = dashboard_on(settings, catalog, LocalEngine(manager), keymap_file=Path(tmp) / "none.toml")
        lags: list[float] = []
        async with app.run_test(size=(160, 48)) as pilot:
            ids = [await manager.create_session(AGENT) for _ in range(SESSIONS)]
            await pilot.pause()
            redraws_before = app.dashboard.redraws
            changes = 0
            for sid in ids:
                await manager.send(sid, "stream")
            started = time.perf_counter()
            while any(manager.session(sid).turn is not None for sid in ids):
                tick = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - tick - 0.01)
                if time.perf_counter() - started > SECONDS * 3:
                    break
            elapsed = time.perf_counter() - started
            await pilot.pause()
            redraws = app.dashboard.redraws - redraws_before
            expected = int(RATE * SECONDS) * len(WORD)
            delivered = [sum(len(i.text) for i in manager.history(sid) if i.kind.value == "assistant") for sid in ids]
    lag_ms = sorted(x * 1000 for x in lags)
    p50 = statistics.median(lag_ms)
    p99 = lag_ms[int(len(lag_ms) * 0.99) - 1]
    events = sum(b.sent for b in backends)
    print(
        f"load:                      {SESSIONS} sessions x {RATE} deltas/s for {SECONDS:.0f} s "
        f"({events:,} deltas in {elapsed:.1f} s)"
    )
    print(f"event loop lag:            p50 {p50:.1f} ms, p99 {p99:.1f} ms (target p99 <= 50 ms)")
    print(f"redraws:                   {redraws:,} ({redraws / elapsed:.1f}/s) for {changes:,} engine changes")
    print(
        f"text delivered:            {sum(d == expected for d in delivered)}/{SESSIONS} sessions complete "
        f"({sum(delivered):,} of {expected * SESSIONS:,} chars)"
    )
    print(f"ratio redraws / changes:   {redraws / max(1, changes):.4f}")
    complete = sum(d == expected for d in delivered)
    figure = f"loop lag p99 {p99:.1f} ms; {complete}/{SESSIONS} replies whole"
    return [(f"dashboard with {SESSIONS} sessions x {RATE} deltas/s", figure, "p99 ≤ 50 ms, all whole")]


def main() -> list[Row]:
    return asyncio.run(run())


if __name__ == "__main__":
    main()
