"""Start-up cost of restoring sessions: time to the first frame, 200 saved sessions vs none.

Both starts run in this one process, alternating, several times; the medians and their
ratio are printed. The dashboard runs headless (``App.run_test``) with persistence attached
in ``on_mount`` exactly as the app integration does, and the clock stops at the first frame
Textual renders. Without a working UI it falls back to ``restore_sessions`` + ``views()``
and says so.

    python -m bench.startup [--sessions 200] [--items 50] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench._support import Row, ms_ratio
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.engine.restore import restore_sessions
from polypilot_tui.storage.registry import SessionRecord
from polypilot_tui.storage.store import Store


def seed(state: Path, sessions: int, items: int) -> None:
    """A state dir as a long-running user leaves it: idle sessions with some history each."""
    store = Store(state)
    now = time.time()
    records = [
        SessionRecord(
            id=f"s{i:04d}",
            name=f"session {i}",
            agent="demo",
            cwd=f"/work/repo{i % 7}",
            agent_session_id=f"demo-{i:012d}",
            created_at=now - 86400,
            status="idle",
            last_activity_at=now - 60 * i,
        )
        for i in range(sessions)
    ]
    store.registry.save(records, now)
    kinds = (ItemKind.USER, ItemKind.ASSISTANT, ItemKind.TOOL, ItemKind.ASSISTANT)
    rows = [
        (
            r.id,
            j,
            ChatItem(
                kinds[j % 4],
                f"message {j} of {r.id} " + "lorem ipsum " * 20,
                now - 3600 + j,
                tool_call_id=f"c{j}" if kinds[j % 4] is ItemKind.TOOL else None,
                tool_name="bash" if kinds[j % 4] is ItemKind.TOOL else "",
                tool_status="completed" if kinds[j % 4] is ItemKind.TOOL else "",
            ),
        )
        for r in records
        for j in range(items)
    ]
    store.history.write(rows)
    store.close()


def settings_for(state: Path) -> Settings:
    return Settings.read(None, state_dir=state, record=False)


async def first_frame_ui(state: Path) -> tuple[float, float, int]:
    """Seconds from nothing to the dashboard's first frame, and to the first frame that lists
    every session in the sidebar; and how many sessions it lists."""
    from polypilot_tui.ui import app as ui_app
    from polypilot_tui.ui.app import PolypilotApp
    from polypilot_tui.ui.widgets.session_list import ROW_HEIGHT

    loop = asyncio.get_running_loop()
    first, listed = loop.create_future(), loop.create_future()
    css_dir = Path(ui_app.__file__).parent

    class Measured(PolypilotApp):
        # Textual resolves CSS paths next to the subclass's module: point them back at the app's.
        CSS_PATH = [str(css_dir / path) for path in PolypilotApp.CSS_PATH]  # type: ignore[union-attr]

        def _display(self, screen: Any, renderable: Any) -> None:
            if renderable is not None:
                now = time.perf_counter()
                if not first.done():
                    first.set_result(now)
                # Listed = the sidebar's one list widget holds a row for every session and is
                # laid out to scroll through all of them (it draws only the rows on screen).
                rows = self.sidebar.session_list
                wanted = len(self.engine.ids())
                if (
                    not listed.done()
                    and wanted
                    and len(rows.session_ids) >= wanted
                    and rows.virtual_size.height >= wanted * ROW_HEIGHT
                ):
                    listed.set_result(now)
            super()._display(screen, renderable)

    start = time.perf_counter()
    settings = settings_for(state)
    catalog = load_agents(None)
    clock = SystemClock()
    app = Measured(
        settings,
        catalog,
        LocalEngine(SessionManager(settings, catalog, clock), attach_persistence),
        clock,
        keymap_file=state / "no-keymap.toml",
    )
    async with app.run_test(size=(160, 48)) as pilot:
        shown = await asyncio.wait_for(first, 120)
        all_rows = await asyncio.wait_for(listed, 120)
        count = len(app.sidebar.session_list.session_ids)
        await pilot.pause()
    # Leaving run_test unmounts the app, which detaches the engine: persistence closes there.
    return shown - start, all_rows - start, count


async def first_views(state: Path) -> tuple[float, float, int]:
    """Fallback: restore + one views() snapshot (what the sidebar needs for its first frame)."""
    start = time.perf_counter()
    settings = settings_for(state)
    manager = SessionManager(settings, load_agents(None), SystemClock())
    store = Store(state)
    restore_sessions(manager, store)
    views = manager.views()
    took = time.perf_counter() - start
    store.close()
    return took, took, len(views)


def ui_works() -> str:
    """ "" when the headless dashboard can be used, else why not."""
    try:
        import polypilot_tui.ui.app  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure means: measure without the UI
        return f"polypilot_tui.ui.app does not import ({exc})"
    return ""


Probe = Callable[[Path], Awaitable[tuple[float, float, int]]]


async def fresh(probe: Probe, state: Path) -> tuple[float, float, int]:
    """One start from a collected heap. Otherwise the garbage of the starts before it is
    collected inside this one: a full collection of earlier dashboards landed before the first
    frame of every other 200-session start (+150-250 ms), which a user's start never pays."""
    gc.collect()
    return await probe(state)


async def measure(probe: Probe, empty: Path, full: Path, repeat: int) -> dict[str, Any]:
    """Alternate empty and full starts (same process, same warm caches); medians."""
    await probe(empty)  # warm-up: imports, CSS parsing, SQLite
    runs: dict[str, list[float]] = {"empty": [], "empty_listed": [], "full": [], "full_listed": []}
    shown = 0
    for _ in range(repeat):
        a, b, _ = await fresh(probe, empty)
        runs["empty"].append(a)
        runs["empty_listed"].append(b)
        a, b, shown = await fresh(probe, full)
        runs["full"].append(a)
        runs["full_listed"].append(b)
    result: dict[str, Any] = {k: statistics.median(v) for k, v in runs.items()}
    result["shown"] = shown
    return result


TARGET = 1.2


def ratio_row(path: str, full: float, empty: float, target: str = f"≤ {TARGET}x") -> Row:
    """One row of ``make bench``'s table: (path, measured, target)."""
    return path, ms_ratio(full * 1000, empty * 1000), target


def main(argv: list[str] | None = None) -> list[Row]:
    """Print the figures; return the table rows ``make bench`` collects (raises when the
    dashboard did not list every session)."""
    parser = argparse.ArgumentParser(prog="bench.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--items", type=int, default=50, help="history rows per saved session")
    parser.add_argument("--repeat", type=int, default=9, help="alternating runs (the UI ratios move ±0.2 at 3)")
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    why_not = ui_works()
    probe: Probe = first_views if why_not else first_frame_ui
    with tempfile.TemporaryDirectory(prefix="polypilot-bench-") as tmp:
        empty, one, full = Path(tmp) / "empty", Path(tmp) / "one", Path(tmp) / "full"
        seed(full, args.sessions, args.items)
        seed(one, 1, args.items)
        Store(empty).close()
        r = asyncio.run(measure(probe, empty, full, args.repeat))
        # The same chat on screen, one session listed vs all of them: what the sessions cost.
        per_session = asyncio.run(measure(probe, one, full, args.repeat)) if not why_not else None
        restore = asyncio.run(measure(first_views, empty, full, args.repeat))
    label = f"{args.sessions} saved sessions x {args.items} rows"
    print(f"startup, median of {args.repeat} alternating runs in one process")
    print(
        f"  restore_sessions + manager.views():   empty {restore['empty'] * 1000:7.1f} ms | "
        f"{label} {restore['full'] * 1000:7.1f} ms | ratio {restore['full'] / restore['empty']:.1f}x"
    )
    rows = [ratio_row(f"restore {label} vs none (engine only, no UI)", restore["full"], restore["empty"], "—")]
    if why_not:
        print(f"  (no dashboard measured: {why_not})")
    else:
        print(
            f"  dashboard, first frame:               empty {r['empty'] * 1000:7.1f} ms | "
            f"{label} {r['full'] * 1000:7.1f} ms | ratio {r['full'] / r['empty']:.2f}x"
        )
        print(
            f"  dashboard, every session listed:      empty {r['empty_listed'] * 1000:7.1f} ms | "
            f"{label} {r['full_listed'] * 1000:7.1f} ms | ratio {r['full_listed'] / r['empty_listed']:.2f}x"
        )
        rows.insert(0, ratio_row(f"first frame with {label} vs an empty start", r["full"], r["empty"]))
        rows.insert(
            1, ratio_row(f"every session listed, {label} vs an empty start", r["full_listed"], r["empty_listed"])
        )
        if per_session is not None:
            rows.insert(
                2,
                ratio_row(
                    f"first frame with {label} vs with 1 saved session (the same chat shown)",
                    per_session["full"],
                    per_session["empty"],
                    "—",
                ),
            )
        if r["shown"] < args.sessions:
            raise RuntimeError(f"the dashboard listed {r['shown']} of {args.sessions} sessions")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
