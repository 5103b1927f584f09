"""Opening a session in the chat pane: 2,000 and 20,000 messages vs 20, measured in one run.

Two ways a big session is opened: one that grew while the dashboard ran (its rows held in
the engine; filled directly: user prompts, markdown replies, tool rows, notes), and one saved
before a restart (restored from SQLite, whose rows are read when it is first opened). Time is
from selecting the session to the frame that shows it, median of several openings of fresh
sessions, the sizes alternating. ``main()`` returns the table rows ``make bench`` collects.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench._support import AGENT, Row, bench_manager, bench_settings, ms_ratio
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.session import Session
from polypilot_tui.storage.registry import SessionRecord
from polypilot_tui.storage.store import Store

REPEAT = 5
SIZES = (20, 2_000, 20_000)
TARGET = 1.2


def rows_of(count: int) -> list[tuple[ItemKind, str, dict[str, str]]]:
    """``count`` rows as a long session has them: prompt, markdown reply, tool row, note."""
    rows: list[tuple[ItemKind, str, dict[str, str]]] = []
    for i in range(count // 4):
        rows.append((ItemKind.USER, f"prompt {i}: please look at module {i}", {}))
        rows.append((ItemKind.ASSISTANT, f"Reply {i} with **bold**, `code` and a list:\n\n- one\n- two", {}))
        tool = {"tool_call_id": f"c{i}", "tool_name": "bash", "tool_status": "completed"}
        rows.append((ItemKind.TOOL, "line 1\nline 2\nline 3", {**tool, "tool_detail": f"pytest tests/test_{i}.py"}))
        rows.append((ItemKind.SYSTEM, f"note {i}", {}))
    return rows


def fill(session: Session, count: int) -> None:
    for kind, text, extra in rows_of(count):
        session.add_item(kind, text, 0.0, **extra)


def seed(state: Path) -> dict[int, list[str]]:
    """A state folder with REPEAT saved sessions of each size (and a small one shown first)."""
    store = Store(state)
    now = time.time()
    ids = {size: [f"s{size}-{n}" for n in range(REPEAT)] for size in SIZES}
    every = ["home", *(sid for n in range(REPEAT) for size in SIZES for sid in [ids[size][n]])]
    records = [SessionRecord(id=sid, name=sid, agent=AGENT, created_at=now, status="idle") for sid in every]
    store.registry.save(records, now)
    for size in SIZES:
        items = [ChatItem(kind, text, now, **extra) for kind, text, extra in rows_of(size)]  # type: ignore[arg-type]
        store.history.write([(sid, i, item) for sid in ids[size] for i, item in enumerate(items)])
    store.history.write([("home", 0, ChatItem(ItemKind.USER, "hello", now))])
    store.close()
    return ids


async def measure(saved: bool) -> dict[int, list[float]]:
    """Milliseconds per opening, by size: live sessions (filled in memory) or saved ones."""
    from polypilot_tui.engine.local import LocalEngine
    from polypilot_tui.engine.persistence import attach_persistence
    from polypilot_tui.ui.launch import dashboard_on

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        ids = seed(state) if saved else {}
        settings = bench_settings(state)
        clock = FakeClock()
        manager, catalog = bench_manager(settings, clock)
        engine = LocalEngine(manager, attach_persistence if saved else None)
        app = dashboard_on(settings, catalog, engine, keymap_file=state / "none.toml")
        timings: dict[int, list[float]] = {size: [] for size in SIZES}
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            for n in range(REPEAT):
                for size in SIZES:
                    if saved:
                        sid = ids[size][n]
                    else:
                        sid = await manager.create_session(AGENT)
                        fill(manager.session(sid), size)
                        await app.dashboard.flush()
                        await pilot.pause()
                    # From a collected heap: the collection the set-up's thousands of new rows
                    # bring on is the fill's cost, not the opening's (it lands in either size).
                    gc.collect()
                    started = time.perf_counter()
                    app.select(sid)
                    await app.dashboard.flush()
                    await pilot.pause()  # the frame that shows it
                    timings[size].append((time.perf_counter() - started) * 1000)
                    log = app.pane.log_for(sid)
                    assert log is not None and log.mounted_rows >= min(size, 20), "the session was not shown"
    return timings


def report(what: str, timings: dict[int, list[float]]) -> list[Row]:
    small = statistics.median(timings[SIZES[0]])
    rows: list[Row] = []
    for size in SIZES[1:]:
        big = statistics.median(timings[size])
        print(f"open {what} {size:>6,}-message session: median {big:5.0f} ms, max {max(timings[size]):5.0f} ms")
        rows.append(
            (
                f"open {what} {size:,}-message session vs a {SIZES[0]}-message one",
                ms_ratio(big, small),
                f"≤ {TARGET}x",
            )
        )
    print(f"open {what} {SIZES[0]:>6,}-message session: median {small:5.0f} ms")
    return rows


def main() -> list[Row]:
    runs: list[tuple[str, Callable[[], Awaitable[dict[int, list[float]]]]]] = [
        ("a", lambda: measure(saved=False)),
        ("a saved (restored)", lambda: measure(saved=True)),
    ]
    rows: list[Row] = []
    for what, run in runs:
        rows += report(what, asyncio.run(run()))
    for row in rows:
        print(" | ".join(row))
    return rows


if __name__ == "__main__":
    main()
