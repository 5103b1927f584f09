"""Attaching to an engine holding 200 saved sessions: time to the dashboard's first frame.

An engine (``polypilot serve``, a process of its own) restores 200 saved sessions x 50 history
rows; the headless dashboard (``App.run_test``) attaches to it with a RemoteEngine, as
``polypilot`` does when an engine runs already. The clock runs from building the dashboard to
its first frame, and to the first frame whose session list holds every session. Each dashboard
freezes its heap after its first frame, as a launched one does (ui/app.py). Against:
an empty local start (the dashboard with its engine in this process and no saved session,
a fresh folder each time), and for reference the same 200 sessions restored in this process.
Alternating runs, medians; the ratio attached / empty local start (target <= 1.5x).

    python -m bench.engine_attach [--sessions 200] [--items 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._engine_service import engine_process, polypilot_serve, short_state_dir
from bench._support import Row, ms_ratio
from bench.startup import seed, settings_for
from polypilot_tui.domain.safe_json import load_json

MakeEngine = Callable[[Path], Any]
"""A state folder -> the engine for the dashboard."""


def local_engine(state: Path) -> Any:
    from polypilot_tui.config import load_agents
    from polypilot_tui.engine.builder import build_engine

    return build_engine(settings_for(state), load_agents(None))


def remote_engine(state: Path) -> Any:
    from polypilot_tui.service.address import socket_path
    from polypilot_tui.service.remote import RemoteEngine

    async def connect() -> Path:
        return socket_path(state)

    return RemoteEngine(connect, reconnect=False)


async def first_frame(state: Path, make: MakeEngine) -> tuple[float, float, int]:
    """Seconds from building the dashboard to its first frame, and to the first frame whose
    session list holds every session; and how many it lists."""
    from polypilot_tui.config import load_agents
    from polypilot_tui.ui import app as ui_app
    from polypilot_tui.ui.app import PolypilotApp
    from polypilot_tui.ui.theming import BUNDLED_DIR
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
    engine = make(state)
    app = Measured(
        settings_for(state),
        load_agents(None),
        engine,
        engine.clock,
        theme_dirs=[BUNDLED_DIR],
        keymap_file=state / "no-keymap.toml",
    )
    app.freeze_heap_after_first_frame()  # as the launch does (ui/launch.py): the figures are a user's
    async with app.run_test(size=(160, 48)) as pilot:
        shown = await asyncio.wait_for(first, 60)
        all_rows = await asyncio.wait_for(listed, 60)
        count = len(app.sidebar.session_list.session_ids)
        await pilot.pause()
    return shown - start, all_rows - start, count


async def measure(attached: Path, local_full: Path, scratch: Path, repeat: int) -> dict[str, list[float]]:
    """Alternate the three starts (same process, warm caches, a collected heap before each)."""
    runs: dict[str, list[float]] = {}
    shown: dict[str, int] = {}

    async def one(name: str, state: Path, make: MakeEngine) -> None:
        gc.collect()
        try:
            a, b, shown[name] = await first_frame(state, make)
        finally:
            gc.unfreeze()  # each start freezes its own heap, as a fresh process would; the last app is collected
        runs.setdefault(f"{name} first", []).append(a)
        runs.setdefault(f"{name} listed", []).append(b)

    for i in range(repeat + 1):  # the first round warms up: imports, CSS, SQLite, the engine's JSON
        empty = scratch / f"empty{i}"
        empty.mkdir()
        await one("empty local", empty, local_engine)
        await one("local 200", local_full, local_engine)
        await one("attached 200", attached, remote_engine)
        if i == 0:
            runs.clear()
    runs["shown"] = [float(shown["attached 200"])]
    return runs


async def snapshot_floor(state: Path) -> tuple[int, float]:
    """The attach's own floor: the first snapshot's size in bytes, and the CPU seconds (median of
    5) this process takes to decode it into a mirror (its JSON read, its views built)."""
    import ssl

    import httpx

    from polypilot_tui.service.address import socket_path

    no_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # plain HTTP on the socket, as the engine's client
    transport = httpx.AsyncHTTPTransport(uds=str(socket_path(state)), verify=no_tls)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://engine") as http,
        http.stream("GET", "/v1/stream") as response,
    ):
        raw = b""
        async for chunk in response.aiter_bytes():
            raw += chunk
            if b"\n\n" in raw:
                break
    event = raw.split(b"\n\n", 1)[0].decode()
    data = event.split("\ndata: ", 1)[1]
    times = []
    for _ in range(5):
        started = time.process_time()
        remote_engine(state).apply_event("snapshot", load_json(data, "the snapshot"))
        times.append(time.process_time() - started)
    return len(event.encode()), statistics.median(times)


async def run(sessions: int, items: int, repeat: int) -> list[Row]:
    state = short_state_dir()
    with tempfile.TemporaryDirectory(prefix="ppb-") as tmp:
        local_full = Path(tmp) / "full"

        started = 0.0

        def prepare(state: Path) -> None:
            nonlocal started
            seed(state, sessions, items)
            shutil.copytree(state, local_full)
            started = time.perf_counter()

        async with engine_process(polypilot_serve(), state, prepare):
            up = time.perf_counter() - started
            runs = await measure(state, local_full, Path(tmp), repeat)
            size, decode = await snapshot_floor(state)
    med = {k: statistics.median(v) for k, v in runs.items()}
    label = f"{sessions} sessions x {items} rows"
    print(f"first frame, median of {repeat} alternating runs (headless dashboard in this process)")
    print(f"  engine process up and answering with {label}: {up * 1000:.0f} ms (not in the figures below)")
    for name in ("empty local", "local 200", "attached 200"):
        print(
            f"  {name:<13} first frame {med[f'{name} first'] * 1000:7.1f} ms | "
            f"every session listed {med[f'{name} listed'] * 1000:7.1f} ms"
        )
    base = med["empty local first"]
    print(
        f"ratio attached ({label}) / empty local start: first frame {med['attached 200 first'] / base:.2f}x, "
        f"session list {med['attached 200 listed'] / base:.2f}x (target <= 1.5x); "
        f"attached / local with the same sessions {med['attached 200 listed'] / med['local 200 listed']:.2f}x"
    )
    print(
        f"floor of the wire: the first snapshot is {size / 1024:.0f} KiB (views only, no history), "
        f"decoded into the mirror in {decode * 1000:.1f} ms of CPU"
    )
    if runs["shown"][0] < sessions:
        raise RuntimeError(f"the attached dashboard listed {runs['shown'][0]:.0f} of {sessions} sessions")
    figure = (
        f"{ms_ratio(med['attached 200 listed'] * 1000, base * 1000)} (floor: the {size / 1024:.0f} KiB snapshot "
        f"decoded in {decode * 1000:.1f} ms)"
    )
    return [(f"attach to an engine with {label}: every session listed vs an empty local start", figure, "≤ 1.5x")]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="bench.engine_attach", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--items", type=int, default=50, help="history rows per saved session")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    return asyncio.run(run(args.sessions, args.items, args.repeat))


if __name__ == "__main__":
    main(sys.argv[1:])
