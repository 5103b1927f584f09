"""Memory: resident set size of 50 sessions x 2,000 messages held by the manager.

Measured in a fresh process (``python -m bench.memory --here``), as the other process rows
are, so the figure does not depend on which benches ran before it in ``make bench``'s: the RSS
growth over a baseline taken at that process's start, plus its absolute RSS (target: under
250 MB), and the ratio of the per-message cost to the raw text size.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._support import AGENT, Row, bench_manager, bench_settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent

SESSIONS = 50
MESSAGES = 2_000
TEXT = "A reply of moderate length, with `code` and some **markdown**, as agents write. " * 3


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize() / 1e6


async def run() -> list[Row]:
    gc.collect()
    base = rss_mb()
    with tempfile.TemporaryDirectory() as tmp:
        manager, _ = bench_manager(bench_settings(Path(tmp)), FakeClock())
        ids = [await manager.create_session(AGENT) for _ in range(SESSIONS)]
        for sid in ids:
            for i in range(MESSAGES // 2):  # a user prompt and an assistant reply per turn
                await manager.send(sid, f"prompt {i}")
                manager.apply(sid, AgentEvent("assistant.message", {"messageId": f"m{i}", "content": TEXT}))
                manager.apply(sid, AgentEvent("session.idle", {}))
        gc.collect()
        total = rss_mb()
        messages = sum(len(manager.history(sid)) for sid in ids)
        raw = sum(len(item.text) for sid in ids for item in manager.history(sid)) / 1e6
        await manager.shutdown()
    growth = total - base
    print(f"sessions x messages:       {SESSIONS} x {MESSAGES} = {messages:,} history rows")
    print(f"RSS:                       {total:.0f} MB total (target < 250 MB), {growth:.0f} MB for the sessions")
    print(f"raw text held:             {raw:.1f} MB")
    print(f"ratio RSS growth / text:   {growth / raw:.2f}x")
    figure = f"{total:.0f} MB ({growth:.0f} MB for {raw:.1f} MB of text)"
    return [(f"engine memory, {SESSIONS} sessions x {MESSAGES} messages", figure, "< 250 MB")]


def main(argv: list[str] | None = None) -> list[Row]:
    """The rows, measured in a fresh process (``--here``: in this one, the rows printed as JSON
    on the last line for the process that started it)."""
    parser = argparse.ArgumentParser(prog="python -m bench.memory")
    parser.add_argument("--here", action="store_true", help="measure in this process")
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    if args.here:
        rows = asyncio.run(run())
        print(json.dumps(rows))
        return rows
    done = subprocess.run(
        [sys.executable, "-m", "bench.memory", "--here"],
        cwd=Path(__file__).parent.parent,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    *details, last = done.stdout.splitlines()
    print("\n".join(details))
    return [(path, figure, target) for path, figure, target in json.loads(last)]


if __name__ == "__main__":
    main(sys.argv[1:])
