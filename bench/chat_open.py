"""Opening a session in the chat pane: 2,000 messages vs 20, measured in one run (target < 200 ms).

The dashboard runs headless; each session's history is filled directly (user prompts,
markdown replies, tool rows, notes). Time is from selecting the session to the frame that
shows it, median of several openings alternating between a small and a big session.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench._support import AGENT, bench_manager, bench_settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.session import Session

REPEAT = 5


def fill(session: Session, count: int) -> None:
    for i in range(count // 4):
        session.add_item(ItemKind.USER, f"prompt {i}: please look at module {i}", 0.0)
        session.add_item(ItemKind.ASSISTANT, f"Reply {i} with **bold**, `code` and a list:\n\n- one\n- two", 0.0)
        session.add_item(
            ItemKind.TOOL,
            "line 1\nline 2\nline 3",
            0.0,
            tool_call_id=f"c{i}",
            tool_name="bash",
            tool_status="completed",
            tool_detail=f"pytest tests/test_{i}.py",
        )
        session.add_item(ItemKind.SYSTEM, f"note {i}", 0.0)


async def run() -> None:
    from polypilot_tui.engine.local import LocalEngine
    from polypilot_tui.ui.app import PolypilotApp

    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(Path(tmp))
        clock = FakeClock()
        manager, catalog = bench_manager(settings, clock)
        app = PolypilotApp(settings, catalog, LocalEngine(manager), clock, keymap_file=Path(tmp) / "none.toml")
        timings: dict[int, list[float]] = {20: [], 2000: []}
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            for _ in range(REPEAT):
                for size in (20, 2000):
                    sid = await manager.create_session(AGENT)
                    fill(manager.session(sid), size)
                    await app.flush()
                    await pilot.pause()
                    started = time.perf_counter()
                    app.select(sid)
                    await app.flush()
                    await pilot.pause()  # the frame that shows it
                    timings[size].append(time.perf_counter() - started)
    small = statistics.median(timings[20]) * 1000
    big = statistics.median(timings[2000]) * 1000
    print(f"open a 20-message session:     median {small:.0f} ms")
    print(
        f"open a 2,000-message session:  median {big:.0f} ms (target < 200 ms), max {max(timings[2000]) * 1000:.0f} ms"
    )
    print(f"ratio 2,000 / 20:              {big / small:.2f}x")


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
