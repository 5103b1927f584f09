"""Fairness: API answers and another session's stream while 0, 1 and 2 sessions flood.

``polypilot serve`` (a process of its own, as the dashboard starts it) runs three sessions of
a real ACP agent process (tests/support/fake_acp_agent.py). A flooding session's agent writes
3000 reply chunks a second (``CHAOS flood``, the rate of issue 22), each flood followed by a
client reading its agent events (as ``polypilot follow`` does); a dashboard's mirror
(RemoteEngine) is attached; the third session streams 20 chunks a second, each stamped with
when its agent sent it. With 0, 1 and 2 sessions flooding: ``GET /v1/engine`` every 50 ms
(answer time, median and p99), the other session's stream delay (its agent writing a chunk →
the dashboard's mirror holding it: median and p99), the engine's CPU share and the chunks a
second it took from each flood. Target: API answers median ≤ 50 ms, the other stream's median
≤ 50 ms, while one or two sessions flood. Then the same with agents that write as fast as the
pipe takes (for information: on 2 cores the two agent processes then take the CPU the engine
would need, and the figures are the scheduler's as much as the engine's).

Before the fairness work (issue 22), on 2 shared cores at load 7: API answers 20 ms (median;
p99 176) with one flood at 3000/s, 391 ms (621) with two, the other stream 85 and 639 ms behind;
flat out 135 and 202 ms. After, in the same hour: 17 ms (34) and 32 ms (102), the other stream
23 and 68 ms; flat out 22 and 36 ms. (An agent's buffered lines were read in one step of the
loop, a quarter of a megabyte at a time; each follower was sent every delta as an event of its
own and each client a view per loop turn, the reply text re-joined for every one.)

    python -m bench engine_fairness        (or: python -m bench.engine_fairness --seconds 5)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._engine_service import (
    cpu_seconds,
    engine_process,
    follow,
    percentile,
    polypilot_serve,
    read_tokens,
    short_state_dir,
)
from bench._support import Row

ROOT = Path(__file__).resolve().parents[1]
FLOOD_RATE = 3000
FLAT_OUT = 1_000_000
"""Chunks a second a flat-out flooding agent may write: more than any engine takes (its pipe stays full)."""
OTHER_RATE = 20
TARGET_MS = 50.0


@dataclass
class Phase:
    floods: int
    rate: int
    answers_ms: list[float] = field(default_factory=list)
    delays_ms: list[float] = field(default_factory=list)
    cpu_share: float = 0.0
    flooded_chunks: int = 0


async def session(client: Any, agent: str) -> str:
    """A session of ``agent``, connected (one short turn done)."""
    from polypilot_tui.engine.verbs import NEW_SESSION, NewSession

    sid: str = await client.call(NEW_SESSION, NewSession(agent))
    await send(client, sid, "hello")
    await idle(client, sid)
    return sid


async def send(client: Any, sid: str, prompt: str) -> None:
    from polypilot_tui.engine.verbs import SEND, Send

    await client.call(SEND, Send(sid, prompt))


async def idle(client: Any, sid: str, timeout: float = 120.0) -> None:
    from polypilot_tui.engine.verbs import SESSION_VIEW, SessionRef

    deadline = time.monotonic() + timeout
    while (await client.call(SESSION_VIEW, SessionRef(sid))).status.busy:
        if time.monotonic() > deadline:
            raise RuntimeError(f"session {sid} still busy after {timeout:g} s")
        await asyncio.sleep(0.1)


async def run_phase(
    client: Any, mirror: Any, pid: int, floods: list[str], rate: int, other: str, seconds: float
) -> Phase:
    from polypilot_tui.domain.records import Record, ViewChanged
    from polypilot_tui.engine.verbs import (
        ENGINE_INFO,
        HISTORY_PAGE_OF,
        SESSION_VIEW,
        STOP,
        HistoryRange,
        NoArgs,
        SessionRef,
    )

    phase = Phase(len(floods), rate)
    seen = [0]

    def arrived(change: Record) -> None:
        if change.session_id == other:
            text = mirror.streaming_text(other)
            seen[0] = max(seen[0], read_tokens(text, seen[0], time.monotonic(), phase.delays_ms)[0])

    unsubscribe = mirror.subscribe(arrived, ViewChanged)
    try:
        for sid in floods:  # until they are stopped below
            await send(client, sid, f"CHAOS flood {rate} 3600")
        await asyncio.sleep(0.5)
        await send(client, other, f"CHAOS flood {OTHER_RATE} {seconds} stamp")
        cpu, started = cpu_seconds(pid), time.monotonic()
        while time.monotonic() - started < seconds:
            asked = time.perf_counter()
            await client.call(ENGINE_INFO, NoArgs())
            phase.answers_ms.append((time.perf_counter() - asked) * 1000)
            await asyncio.sleep(0.05)
        took = time.monotonic() - started
        phase.cpu_share = (cpu_seconds(pid) - cpu) / took
        await idle(client, other)
        for sid in floods:
            await client.call(STOP, SessionRef(sid))
            await idle(client, sid)
            last = (await client.call(SESSION_VIEW, SessionRef(sid))).history_len - 1
            reply = (await client.call(HISTORY_PAGE_OF, HistoryRange(sid, last, 1))).items[0].text
            phase.flooded_chunks += reply.count("flood ")
    finally:
        unsubscribe()
    return phase


async def measure(seconds: float) -> list[Phase]:
    from polypilot_tui.service.address import socket_path
    from polypilot_tui.service.client import EngineClient
    from polypilot_tui.service.remote import RemoteEngine
    from tests.reliability.conftest import fake_agents_file

    state = short_state_dir()
    agents = state.with_name(state.name + "-agents.toml")
    fake_agents_file(agents)
    try:
        async with engine_process(polypilot_serve(), state, env={"POLYPILOT_AGENTS_FILE": str(agents)}) as process:
            socket = socket_path(state)
            client = EngineClient(socket)
            mirror = RemoteEngine(lambda: asyncio.sleep(0, socket), reconnect=False)
            await mirror.start()
            followers: list[asyncio.Task[None]] = []
            try:
                floods = [await session(client, "fake") for _ in range(2)]
                other = await session(client, "fake")
                followers = [asyncio.create_task(follow(socket, sid)) for sid in floods]
                loads = ((0, FLOOD_RATE), (1, FLOOD_RATE), (2, FLOOD_RATE), (1, FLAT_OUT), (2, FLAT_OUT))
                return [
                    await run_phase(client, mirror, process.pid, floods[:n], rate, other, seconds) for n, rate in loads
                ]
            finally:
                for task in followers:
                    task.cancel()
                await mirror.detach(stop_engine=False)
                await client.aclose()
    finally:
        agents.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> list[Row]:
    if str(ROOT) not in sys.path:  # tests.support (the fake ACP agent) lives beside bench/
        sys.path.insert(0, str(ROOT))
    parser = argparse.ArgumentParser(prog="bench.engine_fairness", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured per phase")
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    phases = asyncio.run(measure(args.seconds))
    print(f"the other session streams {OTHER_RATE} chunks/s; {args.seconds:g} s each:")
    for p in phases:
        print(
            f"  {p.floods} flooding {'flat out' if p.rate == FLAT_OUT else f'{p.rate}/s':>9}: API answer median "
            f"{statistics.median(p.answers_ms):6.1f} ms, p99 {percentile(p.answers_ms, 0.99):6.1f} ms | other "
            f"stream median {statistics.median(p.delays_ms) if p.delays_ms else float('nan'):6.1f} ms, "
            f"p99 {percentile(p.delays_ms, 0.99):6.1f} ms ({len(p.delays_ms)} chunks) | engine CPU "
            f"{p.cpu_share:.0%} | took {p.flooded_chunks / max(p.floods, 1) / args.seconds:.0f} chunks/s a flood"
        )
    print(f"target (at {FLOOD_RATE}/s): API answer median ≤ {TARGET_MS:g} ms, the other stream's ≤ {TARGET_MS:g} ms")

    def figures(phases: list[Phase], values: Callable[[Phase], list[float]]) -> str:
        return "; ".join(
            f"{p.floods} flooding {statistics.median(values(p)):.0f}/{percentile(values(p), 0.99):.0f} ms"
            for p in phases
            if values(p)
        )

    paced = [p for p in phases if p.rate == FLOOD_RATE]
    flat = [p for p in phases if p.rate == FLAT_OUT]
    return [
        (
            f"engine fairness: API answer (median/p99), 0-2 sessions flooding {FLOOD_RATE} deltas/s",
            figures(paced, lambda p: p.answers_ms),
            "median ≤ 50 ms",
        ),
        (
            "engine fairness: another session's stream delay (median/p99), same load",
            figures(paced, lambda p: p.delays_ms),
            "median ≤ 50 ms",
        ),
        (
            "engine fairness, agents flooding flat out: API answer; the other stream (median/p99)",
            f"{figures(flat, lambda p: p.answers_ms)}; {figures(flat, lambda p: p.delays_ms)}",
            "",
        ),
    ]


if __name__ == "__main__":
    main(sys.argv[1:])
