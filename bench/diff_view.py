"""The diff view on a 20,000-line diff from a real git repository.

Reports git's and the parser's time, the time the diff takes to come from an engine served
on its socket (the engine reads it, sends it in pages, the dashboard parses it) against the
same read and parse in one process, the time from pushing the screen to its first frame
(target <= 200 ms), and scrolling it page by page to the end in unified then split mode:
the frame time of each page and the event-loop lag while it scrolls (how late a 5 ms
timer fires; target p99 <= 16 ms). Headless, so the terminal's own drawing is not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench._support import AGENT, Row, bench_settings, ms_ratio
from polypilot_tui.config import AgentCatalog, AgentConfig
from polypilot_tui.domain.changeset import Changeset
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.diff_pages import read_changeset
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.serve import serve
from polypilot_tui.ui.screens.diff_view import DiffViewScreen
from polypilot_tui.ui.widgets.diff_lines import DiffLines
from polypilot_tui.workspace.changes import changeset
from polypilot_tui.workspace.diff_parse import parse_diff
from tests.support.diff_app import DiffHostApp
from tests.support.git_repo import GitRepo

FILES = 10
LINES_PER_FILE = 1000
"""Every line of every file changes: 10 files x 1,000 lines = 10,000 removed + 10,000 added."""
TICK = 0.005
KEY_REPEAT = 0.033


def make_repo(root: Path) -> tuple[GitRepo, str]:
    """Every line of every file changed, uncommitted, against the base commit."""
    repo = GitRepo(root)
    for f in range(FILES):
        repo.write(
            f"src/module_{f}.py", "".join(f"value_{i} = compute({i}, 'old')  # {f}\n" for i in range(LINES_PER_FILE))
        )
    base = repo.commit()
    for f in range(FILES):
        repo.write(
            f"src/module_{f}.py",
            "".join(f"value_{i} = compute({i}, 'new', cache=True)  # {f}\n" for i in range(LINES_PER_FILE)),
        )
    return repo, base


def make_changeset(repo: GitRepo, base: str) -> tuple[Changeset, float, float]:
    started = time.perf_counter()
    text = repo.diff_text(base)
    git_s = time.perf_counter() - started
    started = time.perf_counter()
    changes = parse_diff(text, base)
    return changes, git_s, time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * q) - 1)]


async def next_frame(widget: DiffLines) -> None:
    done = asyncio.get_running_loop().create_future()
    widget.call_after_refresh(lambda: done.done() or done.set_result(None))
    await done


async def scroll_through(lines: DiffLines) -> tuple[list[float], list[float]]:
    """Page down to the end; frame times per page and the loop lag meanwhile (ms)."""
    lags: list[float] = []
    running = True

    async def probe() -> None:
        while running:
            tick = time.perf_counter()
            await asyncio.sleep(TICK)
            lags.append((time.perf_counter() - tick - TICK) * 1000)

    prober = asyncio.create_task(probe())
    frames: list[float] = []
    lines.action_edge(False)
    await next_frame(lines)
    while lines.cursor < len(lines.rows) - 1:
        started = time.perf_counter()
        lines.action_page(1)
        await next_frame(lines)
        frames.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(KEY_REPEAT)  # held pagedown: a terminal repeats a key about 30 times a second
    running = False
    await prober
    return frames, lags


async def through_the_engine(repo: Path) -> tuple[float, float]:
    """Median ms to read and parse the diff of a session in ``repo``: from an engine served on
    its Unix socket (pages), and in this process (the workspace layer, as the engine reads it)."""
    state = Path(tempfile.mkdtemp(prefix="pp-bench-", dir="/tmp"))  # a socket path fits in 107 bytes
    catalog = AgentCatalog({AGENT: AgentConfig(name=AGENT, kind="demo")})
    settings = bench_settings(state)
    ready = asyncio.Event()
    task = asyncio.create_task(serve(settings, catalog, ready))
    client = EngineClient(socket_path(state))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        sid = await client.call(verbs.NEW_SESSION, verbs.NewSession(AGENT, folder=str(repo)))
        view = await client.call(verbs.SESSION_VIEW, verbs.SessionRef(sid))
        assert view.workspace is not None
        served, here = [], []
        for _ in range(3):
            started = time.perf_counter()
            changes, _cut = await read_changeset(client, sid)
            served.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await changeset(view.workspace)
            here.append((time.perf_counter() - started) * 1000)
        assert len(changes.files) == FILES
        return statistics.median(served), statistics.median(here)
    finally:
        with contextlib.suppress(EngineError):
            await client.call(verbs.ENGINE_STOP, verbs.NoArgs())
        await client.aclose()
        await asyncio.wait_for(task, 30)
        shutil.rmtree(state, ignore_errors=True)


async def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        repo, base = make_repo(Path(tmp) / "repo")
        changes, git_s, parse_s = make_changeset(repo, base)
        served_ms, here_ms = await through_the_engine(repo.root)
    total = sum(len(h.lines) for f in changes.files for h in f.hunks)
    print(f"diff:                      {len(changes.files)} files, {total:,} diff lines ({changes.stats.short()})")
    print(f"git diff:                  {git_s * 1000:.0f} ms")
    print(f"parse_diff:                {parse_s * 1000:.0f} ms")
    print(f"read + parse from engine:  {served_ms:.0f} ms over its socket, {here_ms:.0f} ms in one process")
    app = DiffHostApp(changes)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.pop_screen()
        await pilot.pause()
        openings: list[float] = []
        for _ in range(3):
            screen = DiffViewScreen(changes, session="bench", branch="polypilot/bench")
            started = time.perf_counter()
            await app.push_screen(screen)
            lines = screen.query_one(DiffLines)
            await next_frame(lines)
            openings.append((time.perf_counter() - started) * 1000)
            if len(openings) < 3:
                app.pop_screen()
                await pilot.pause()
        print(
            f"first frame:               median {statistics.median(openings):.0f} ms, first {openings[0]:.0f} ms "
            "(target <= 200 ms)"
        )
        rows: list[Row] = [
            (
                f"diff of {total:,} lines from the engine's socket (pages) vs in one process",
                ms_ratio(served_ms, here_ms),
                "≤ 1.5x",
            ),
            (f"diff view of {total:,} lines: first frame", f"{statistics.median(openings):.0f} ms", "≤ 200 ms"),
        ]
        for mode in ("unified", "split"):
            lines.split = mode == "split"
            await pilot.pause()
            frames, lags = await scroll_through(lines)
            print(
                f"scroll {mode:<8} {len(frames):>4} pages: frame p50 {statistics.median(frames):.1f} ms, "
                f"p99 {pct(frames, 0.99):.1f} ms; loop lag p50 {statistics.median(lags):.1f} ms, "
                f"p99 {pct(lags, 0.99):.1f} ms (target p99 <= 16 ms)"
            )
            rows.append((f"diff view, {mode} scroll: event loop lag p99", f"{pct(lags, 0.99):.1f} ms", "≤ 16 ms"))
    return rows


def main() -> list[Row]:
    return asyncio.run(run())


if __name__ == "__main__":
    main()
