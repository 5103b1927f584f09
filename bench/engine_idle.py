"""An idle engine uses no CPU: ``polypilot serve`` with a few idle sessions, nobody asking.

The engine (a process of its own, 5 saved idle sessions) is watched for ~10 s with no client,
~10 s with one attached client (a RemoteEngine holding the live stream, as an idle dashboard
does), and ~10 s after that client left. From /proc: CPU time (every thread's ``schedstat``,
nanoseconds) and wakeups (context switches, voluntary and not, of every thread), per minute.
Target: ~0 — an idle engine should wake for nothing. The ratio is CPU time / wall time.

What wakes it (2026-11-23, found by turning each off in a throwaway copy of the engine):
uvicorn's ``Server.main_loop`` ticks every 0.1 s (600/min, from the start, client or not);
sse-starlette's shutdown watcher polls every 0.5 s (120/min) from the first stream on, and
keeps going after the client left; ``LocalEngine.watch_folders`` checks the session folders
every heartbeat (5 s: 12/min) while a client is attached; the stream's ping every 15 s (4/min).
With the first two off the engine woke 0 times a minute alone and 12 with a client.

    python -m bench.engine_idle [--seconds 10] [--sessions 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench._engine_service import engine_process, polypilot_serve, short_state_dir
from bench._support import Row
from bench.startup import seed

SETTLE = 2.0
"""Seconds left to the engine after it answers (restore, pruning worktrees) before watching."""


@dataclass(frozen=True)
class Usage:
    cpu_ns: int
    switches: dict[str, int]
    """Context switches so far, by thread (``tid name``)."""


def usage(pid: int) -> Usage:
    cpu, switches = 0, {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu += int((task / "schedstat").read_text().split()[0])
            name = (task / "comm").read_text().strip()
            status = (task / "status").read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        count = sum(int(line.split()[1]) for line in status if line.endswith(tuple("0123456789")) and "ctxt" in line)
        switches[f"{task.name} {name}"] = count
    return Usage(cpu, switches)


@dataclass(frozen=True)
class Idle:
    cpu_per_min: float
    wakeups_per_min: float
    by_thread: dict[str, float]


async def watch(pid: int, seconds: float) -> Idle:
    before = usage(pid)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    after = usage(pid)
    per_min = 60 / (time.monotonic() - started)
    by_thread = {t: (n - before.switches.get(t, 0)) * per_min for t, n in after.switches.items()}
    return Idle((after.cpu_ns - before.cpu_ns) / 1e9 * per_min, sum(by_thread.values()), by_thread)


def show(name: str, idle: Idle) -> None:
    busy = ", ".join(f"{t} {n:.0f}" for t, n in sorted(idle.by_thread.items(), key=lambda x: -x[1]) if n)
    print(
        f"  {name:<20} CPU {idle.cpu_per_min * 1000:7.1f} ms/min | wakeups {idle.wakeups_per_min:6.0f}/min"
        f" ({busy or 'none'})"
    )


async def run(seconds: float, sessions: int) -> list[Row]:
    from polypilot_tui.service.address import socket_path
    from polypilot_tui.service.remote import RemoteEngine

    state = short_state_dir()
    async with engine_process(polypilot_serve(), state, lambda s: seed(s, sessions, 20)) as process:
        await asyncio.sleep(SETTLE)
        alone = await watch(process.pid, seconds)

        async def connect() -> Path:
            return socket_path(state)

        client = RemoteEngine(connect, reconnect=False)
        await client.start()
        try:
            if len(client.ids()) != sessions:
                raise RuntimeError(f"the engine holds {len(client.ids())} sessions, not {sessions}")
            await asyncio.sleep(1.0)  # the attach itself is not idle time
            attached = await watch(process.pid, seconds)
        finally:
            await client.detach(stop_engine=False)
        await asyncio.sleep(1.0)
        left = await watch(process.pid, seconds)
    print(f"engine process ({sessions} idle sessions), {seconds:.0f} s each, per minute of idling:")
    show("no client", alone)
    show("one attached client", attached)
    show("after it detached", left)
    print(
        "ratio CPU time / wall time (share of one core): "
        + ", ".join(
            f"{name} {idle.cpu_per_min / 60:.2%}"
            for name, idle in (("no client", alone), ("attached", attached), ("after", left))
        )
        + " (target ~0)"
    )
    figure = ", ".join(
        f"{name} {idle.cpu_per_min / 60:.2%}" for name, idle in (("alone", alone), ("attached", attached))
    )
    return [(f"engine idle with {sessions} sessions: CPU share of one core", figure, "~0")]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="bench.engine_idle", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sessions", type=int, default=5)
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    return asyncio.run(run(args.seconds, args.sessions))


if __name__ == "__main__":
    main(sys.argv[1:])
