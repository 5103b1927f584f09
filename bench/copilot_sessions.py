"""Memory of many Copilot sessions: the CLI processes behind 1 and behind 10 sessions.

Sessions of one agent configuration share one Copilot CLI (agents/copilot/server.py). Each
case starts a fresh engine on the pinned CLI (npm cache) and the scripted model server on
127.0.0.1, opens N sessions, runs one short turn in each, lets them go idle, and sums the
resident set (VmRSS, and PSS, which splits pages processes share) of every process with the
case's own ``COPILOT_HOME`` in its environment: the CLI and anything it started. The target
is 10 sessions ≤ 1.5x the RSS of one. For comparison the old design (one CLI per session) is
measured too: ten agent entries that differ in one env var cannot share a CLI.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from bench._support import Row, proc_kib

SESSIONS = 10
TARGET = 1.5
SETTLE = 2.0
"""Seconds idle after the last turn before measuring (the CLI finishes its log writes)."""


def tree_memory(home: Path) -> tuple[int, float, float]:
    """(processes, RSS MiB, PSS MiB) of every live process with ``COPILOT_HOME=home``."""
    from tests.support.copilot_harness import home_processes

    pids = home_processes(home)
    rss = sum(proc_kib(p, "status", "VmRSS:") for p in pids) / 1024
    pss = sum(proc_kib(p, "smaps_rollup", "Pss:") for p in pids) / 1024
    return len(pids), rss, pss


async def measure(cli: Path, sessions: int, *, one_cli_each: bool = False) -> tuple[int, float, float, float]:
    """(CLI processes, RSS MiB, PSS MiB, seconds to open and run) for ``sessions`` idle sessions."""
    from msgspec import structs

    from polypilot_tui.config import AgentCatalog, Settings
    from polypilot_tui.domain.clock import SystemClock
    from polypilot_tui.engine.manager import SessionManager
    from tests.support.copilot_harness import AGENT, catalog_entry, copilot_processes
    from tests.support.model_server import ModelServer
    from tests.support.waiting import until

    with (
        tempfile.TemporaryDirectory(prefix="polypilot-bench-sessions-") as tmp,
        ModelServer(max_seconds=600) as server,
    ):
        root = Path(tmp)
        entry = catalog_entry(cli, server, root)
        # Entries that differ in one env var make different CLIs: the one-CLI-per-session design.
        names = [f"{AGENT}{i}" if one_cli_each else AGENT for i in range(sessions)]
        catalog = AgentCatalog(
            {name: structs.replace(entry, name=name, env={**entry.env, "BENCH_SLOT": name}) for name in names}
        )
        settings = Settings.read(None, state_dir=root / "state", record=False, permission_policy="allow")
        manager = SessionManager(settings, catalog, SystemClock())
        try:
            began = time.perf_counter()
            sids = [await manager.create_session(name, f"s{i}") for i, name in enumerate(names)]
            for i, sid in enumerate(sids):
                await manager.send(sid, f"hello {i}")
            for sid in sids:
                session = manager.session(sid)
                await until(lambda s=session: s.turn is None and len(s.turns) >= 1, 120, f"the turn of {sid}")
            took = time.perf_counter() - began
            await asyncio.sleep(SETTLE)
            clis = len(copilot_processes(cli, home=root / "copilot-home"))
            _, rss, pss = tree_memory(root / "copilot-home")
        finally:
            await manager.shutdown()
    return clis, rss, pss, took


async def run(cli: Path) -> list[Row]:
    one = await measure(cli, 1)
    many = await measure(cli, SESSIONS)
    each = await measure(cli, SESSIONS, one_cli_each=True)
    ratio = many[1] / one[1]
    print(f"Copilot CLI {cli.parent.name}: idle sessions after one short turn each, RSS (PSS) of the CLI processes")
    for label, (clis, rss, pss, took) in (
        ("1 session", one),
        (f"{SESSIONS} sessions, shared CLI", many),
        (f"{SESSIONS} sessions, one CLI each", each),
    ):
        print(f"  {label:<30} {clis:2d} CLI(s)  RSS {rss:7.0f} MiB  PSS {pss:7.0f} MiB  (open + turn {took:5.1f} s)")
    print(
        f"ratio {SESSIONS} sessions / 1, RSS: {ratio:.2f}x (target ≤ {TARGET}x); one CLI each: {each[1] / one[1]:.2f}x"
    )
    measured = f"{many[1]:.0f} MiB vs {one[1]:.0f} MiB: {ratio:.2f}x"
    return [(f"Copilot: {SESSIONS} sessions vs 1, RSS of the CLI processes", measured, f"≤ {TARGET}x")]


def main() -> list[Row]:
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # tests.support (model server, /proc helpers) lives beside bench/
        sys.path.insert(0, root)
    from bench.stop_latency import find_cli

    cli = find_cli()
    if cli is None:
        return []
    return asyncio.run(run(cli))


if __name__ == "__main__":
    main()
