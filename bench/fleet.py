"""A fleet of N hosts x M sessions, each host a real sshd on 127.0.0.1 with an engine of its own.

Measured on the engine side (the FleetEngine a dashboard draws from; the grouped sidebar is
measured with the dashboard's own benchmarks):

1. listed: from ``FleetEngine.start()`` to every host live with all N x M sessions in
   ``views()`` (each host over a fresh ssh forward, the engines there already running) vs one
   RemoteEngine attaching to a local engine holding the same N x M sessions. Alternating runs,
   medians (target <= 1.5x).
2. loop lag while every session streams (the demo agent's ``!slow``): p99 of a 5 ms ticker's
   lateness on the fleet's loop (target <= 50 ms).
3. one host's sshd killed mid-stream: the time until it is marked stale (target <= 5 s), and
   the longest gap between two records of any other host meanwhile (target <= 1 s).

    python -m bench.fleet [--hosts 10] [--sessions 20] [--repeat 3] [--speed 5]
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._support import Row, ms_ratio

PHASE = 240.0
"""Seconds a phase may take before the run is given up (a hang is an error, not a wait)."""
SPEED_HELP = "the demo agent's speed (its !slow turn: 60 deltas, 0.5 s apart / speed)"


class Host:
    """An sshd, and polypilot "installed" behind it with a state folder of its own."""

    def __init__(self, index: int, speed: float) -> None:
        from tests.support.engine_service import engine_env, short_state_dir
        from tests.support.sshd import Sshd

        self.name = f"h{index}"
        self.sshd = Sshd()
        self.sshd.start()
        self.state = short_state_dir()
        env = engine_env(self.state, {"POLYPILOT_DEMO_SPEED": str(speed)})
        env = {k: v for k, v in env.items() if k.startswith("POLYPILOT_") and v}
        self.command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "polypilot_tui"])

    def entry(self) -> Any:
        from polypilot_tui.domain.hosts import HostEntry
        from tests.support.sshd import ALIAS

        return HostEntry.checked(self.name, ALIAS, self.command, ("-F", str(self.sshd.client_config)))

    def close(self) -> None:
        from tests.support.engine_service import kill_engine_of

        kill_engine_of(self.state)
        shutil.rmtree(self.state, ignore_errors=True)
        self.sshd.close()


def fleet(hosts: list[Host], local_state: Path, speed: float) -> Any:
    """The fleet a dashboard draws from: the local engine (a process, as ``polypilot`` starts
    it, on ``local_state``) and every host."""
    from polypilot_tui.domain.clock import SystemClock
    from polypilot_tui.service.fleet import FleetEngine, SshMember

    return FleetEngine(remote_on(local_state), [SshMember(h.entry(), SystemClock()) for h in hosts])


def remote_on(state: Path) -> Any:
    """A RemoteEngine on the engine of ``state`` (started detached when none runs)."""
    from polypilot_tui.config import Settings
    from polypilot_tui.service.remote import RemoteEngine
    from polypilot_tui.service.spawn import ensure_engine

    settings = Settings.read(None, state_dir=state, record=False)

    async def connect() -> Path:
        path, _ = await ensure_engine(settings)
        return path

    return RemoteEngine(connect, reconnect=False)


async def until(check: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.005)
    return time.perf_counter() - start


async def fleet_listed(hosts: list[Host], scratch: Path, speed: float, total: int) -> tuple[float, float]:
    """Seconds until the fleet's first list (Local's sessions, every host named: what the first
    frame shows), and until every host's sessions are listed too (their ssh connects)."""
    engine = fleet(hosts, scratch, speed)
    start = time.perf_counter()
    await engine.start()
    first = time.perf_counter() - start
    assert len(engine.hosts()) == len(hosts) + 1
    try:
        await until(lambda: all(h.live for h in engine.hosts()) and len(engine.views()) >= total, 120, "fleet listed")
        return first, time.perf_counter() - start
    finally:
        await engine.detach(stop_engine=False)


async def single_listed(state: Path, total: int) -> float:
    """Seconds until one RemoteEngine lists the ``total`` sessions of the local engine of ``state``."""
    start = time.perf_counter()
    engine = remote_on(state)
    await engine.start()
    try:
        await until(lambda: len(engine.views()) >= total, 120, "single listed")
        return time.perf_counter() - start
    finally:
        await engine.detach(stop_engine=False)


class LagMeter:
    """A ticker's lateness on this loop, every 5 ms."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            self.lags.append(max(0.0, time.perf_counter() - before - 0.005))

    def __enter__(self) -> LagMeter:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    def p99(self) -> float:
        return statistics.quantiles(self.lags, n=100)[98] if len(self.lags) > 2 else 0.0


async def stream_and_kill(hosts: list[Host], scratch: Path, speed: float, total: int) -> tuple[float, float, float]:
    """Loop lag p99 while all stream; the stale mark of a killed host; the others' longest gap."""
    from polypilot_tui.domain.hosts import HostState
    from polypilot_tui.domain.records import Record, ViewChanged
    from polypilot_tui.engine import verbs

    engine = fleet(hosts, scratch, speed)
    await engine.start()
    try:
        await until(lambda: all(h.live for h in engine.hosts()) and len(engine.views()) >= total, 120, "listed")
        arrivals: dict[str, list[float]] = {}

        def seen(change: Record) -> None:
            arrivals.setdefault(engine.host_of(change.session_id), []).append(time.perf_counter())

        engine.subscribe(seen, ViewChanged)
        ids = [v.id for v in engine.views() if engine.host_of(v.id)]
        with LagMeter() as lag:
            await asyncio.gather(*(engine.call(verbs.SEND, verbs.Send(sid, "!slow")) for sid in ids))
            await asyncio.sleep(60 * 0.5 / speed / 3)  # a third of the turns streamed
            victim = hosts[0]
            killed = time.perf_counter()
            victim.sshd.stop()
            marked = await until(lambda: engine.hosts()[1].state is not HostState.LIVE, 30, "the killed host marked")
            await asyncio.sleep(1.0)
            window = (killed - 0.5, time.perf_counter())
            gap = 0.0
            for name, times in arrivals.items():
                if name in ("", victim.name):
                    continue
                inside = [t for t in times if window[0] <= t <= window[1]]
                gap = max([gap, *(b - a for a, b in zip(inside, inside[1:], strict=False))])
            p99 = lag.p99()
        victim.sshd.restart()
        return p99, marked, gap
    finally:
        await engine.detach(stop_engine=False)


async def seed(hosts: list[Host], local_state: Path, scratch: Path, speed: float, sessions: int) -> None:
    """``sessions`` demo sessions on every host, and as many in all on the single local engine."""
    from polypilot_tui.config import Settings
    from polypilot_tui.engine import verbs
    from polypilot_tui.service.client import EngineClient
    from polypilot_tui.service.spawn import ensure_engine

    engine = fleet(hosts, scratch, speed)
    await engine.start()
    try:
        await until(lambda: all(h.live for h in engine.hosts()), 120, "hosts live for seeding")
        for h in hosts:
            for i in range(sessions):
                await engine.member(h.name).call(verbs.NEW_SESSION, verbs.NewSession("demo", f"{h.name}-{i}"))
    finally:
        await engine.detach(stop_engine=False)
    settings = Settings.read(None, state_dir=local_state, demo_speed=speed, record=False)
    path, _ = await ensure_engine(settings)
    client = EngineClient(path)
    try:
        for i in range(len(hosts) * sessions):
            await client.call(verbs.NEW_SESSION, verbs.NewSession("demo", f"local-{i}"))
    finally:
        await client.aclose()


async def run(n_hosts: int, sessions: int, repeat: int, speed: float) -> list[Row]:
    from tests.support.engine_service import kill_engine_of, short_state_dir

    hosts: list[Host] = []
    single, scratch = short_state_dir(), short_state_dir()
    total = n_hosts * sessions
    try:
        for i in range(n_hosts):
            hosts.append(Host(i, speed))
        await asyncio.wait_for(seed(hosts, single, scratch, speed, sessions), PHASE * 2)
        runs: dict[str, list[float]] = {"first": [], "fleet": [], "single": []}
        for i in range(repeat + 1):  # the first round warms up
            first, every = await asyncio.wait_for(fleet_listed(hosts, scratch, speed, total), PHASE)
            alone = await asyncio.wait_for(single_listed(single, total), PHASE)
            if i:
                runs["first"].append(first)
                runs["fleet"].append(every)
                runs["single"].append(alone)
        p99, marked, gap = await asyncio.wait_for(stream_and_kill(hosts, scratch, speed, total), PHASE)
    finally:
        for h in hosts:
            h.close()
        kill_engine_of(single)
        kill_engine_of(scratch)
        shutil.rmtree(single, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    first_ms, fleet_ms, single_ms = (statistics.median(runs[k]) * 1000 for k in ("first", "fleet", "single"))
    label = f"{n_hosts} hosts x {sessions} sessions"
    print(f"{label}: first list with every host named {first_ms:.0f} ms vs one engine of {total}: {single_ms:.0f} ms")
    print(f"  every host live and its sessions listed: {fleet_ms:.0f} ms (each an ssh connect and `engine start`)")
    print(f"loop lag p99 while all {total} stream: {p99 * 1000:.1f} ms")
    print(f"one sshd killed mid-stream: marked in {marked:.2f} s; the others' longest gap {gap:.2f} s")
    return [
        (
            f"fleet of {label}: first list, every host named, vs one engine of them",
            ms_ratio(first_ms, single_ms),
            "≤ 1.5x",
        ),
        (f"fleet of {label}: every host live, its sessions listed", f"{fleet_ms:.0f} ms", ""),
        (f"fleet of {label}: loop lag p99 while all stream", f"{p99 * 1000:.1f} ms", "≤ 50 ms"),
        (f"fleet of {label}: a killed host marked", f"{marked:.2f} s", "≤ 5 s"),
        (f"fleet of {label}: the others' longest gap meanwhile", f"{gap:.2f} s", "≤ 1 s"),
    ]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="bench.fleet", description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=20, help="sessions per host")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--speed", type=float, default=5.0, help=SPEED_HELP)
    args = parser.parse_args([] if argv is None else argv)
    return asyncio.run(run(args.hosts, args.sessions, args.repeat, args.speed))


if __name__ == "__main__":
    main(sys.argv[1:])
