"""Engine -> attached dashboard under load: 20 sessions x 100 deltas/s for 10 s.

Two runs of the same load, with the headless dashboard (``App.run_test``) in this process:

- in-process: the dashboard drives a LocalEngine on its own loop (as the tests' dashboard does);
- attached: the engine is a process of its own (``bench/_engine_service.py``: LocalEngine with
  persistence, ``build_app``, uvicorn on the state folder's Unix socket, as ``polypilot serve``)
  and the dashboard holds a RemoteEngine mirror fed by the engine's stream.

Every delta carries the time it was emitted, so the latency is measured where the dashboard
holds the text: in its engine's ``streaming_text`` when a view change says it moved (or in
the reply's history row at the end of the turn). Reported: latency p50/p99 and the latency
the service adds (attached p99 - in-process p99; target <= 20 ms), text lost (the full
replies the dashboard holds vs what the agents emitted; target 0), and loop lag p99 of the
dashboard and of the engine (a 10 ms timer's lateness while the streams run; target <= 50 ms
on both sides), and the CPU (user + system) both processes used while the load streamed
against the one process of the in-process shape (target <= 1.5x; the in-process CPU is the
floor). The two shapes run alternately, :data:`ROUNDS` times each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._engine_service import (
    STREAM_PROMPT,
    TOKEN_LEN,
    LagMeter,
    Streamer,
    cpu_seconds,
    engine_process,
    percentile,
    read_tokens,
    short_state_dir,
    streaming_serve,
)
from bench._support import AGENT, Row, bench_manager, bench_settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.records import ItemAdded, ItemReplaced, Record, ViewChanged
from polypilot_tui.engine import verbs

SESSIONS = 20
RATE = 100  # deltas per second per session
SECONDS = 10.0


@dataclass
class Run:
    latencies_ms: list[float] = field(default_factory=list)
    dashboard_lag_ms: list[float] = field(default_factory=list)
    engine_lag_ms: list[float] = field(default_factory=list)
    out_of_order: int = 0
    view_changes: int = 0
    """View changes the dashboard's engine published (attached: view events on the stream)."""
    sessions_complete: int = 0
    replies: int = 0
    """Replies awaited (sessions streaming, over every run pooled)."""
    chars_received: int = 0
    chars_emitted: int = 0
    elapsed: float = 0.0
    redraws: int = 0
    dashboard_cpu: float = 0.0
    """CPU seconds of this process (dashboard, and the engine when in-process) while streaming."""
    engine_cpu: float | None = None
    """CPU seconds of the engine's process while streaming (attached only)."""


class Holder:
    """Where the dashboard holds the text: reads every token's latency as it arrives."""

    def __init__(self, engine: Any, run: Run) -> None:
        self.engine, self.run = engine, run
        self.seen: dict[str, int] = {}

    def on_change(self, change: Record) -> None:
        sid = change.session_id
        if sid not in self.seen:
            return
        if isinstance(change, ViewChanged):
            self.run.view_changes += 1
            text = self.engine.streaming_text(sid)
        elif isinstance(change, (ItemAdded, ItemReplaced)) and change.item.kind is ItemKind.ASSISTANT:
            text = change.item.text
        else:
            return
        whole, in_order = read_tokens(text, self.seen[sid], time.monotonic(), self.run.latencies_ms)
        self.seen[sid] = max(self.seen[sid], whole)
        self.run.out_of_order += not in_order


def dashboard(settings: Any, catalog: Any, engine: Any, state: Path) -> Any:
    from polypilot_tui.ui.launch import dashboard_on
    from polypilot_tui.ui.theming import BUNDLED_DIR

    return dashboard_on(settings, catalog, engine, theme_dirs=[BUNDLED_DIR], keymap_file=state / "no-keymap.toml")


def reply(engine: Any, sid: str) -> str:
    return "".join(i.text for i in engine.history(sid) if i.kind is ItemKind.ASSISTANT)


async def drive(app: Any, run: Run, engine_pid: int | None = None) -> list[str]:
    """Start the streams on the dashboard's engine, wait for every reply; the session ids. The
    CPU of this process (and of ``engine_pid``'s) is counted from the first prompt to the last
    reply, the same window on both sides."""
    engine = app.engine
    ids = [await engine.call(verbs.NEW_SESSION, verbs.NewSession(AGENT)) for _ in range(SESSIONS)]
    holder = Holder(engine, run)
    holder.seen = dict.fromkeys(ids, 0)
    unsubscribe = engine.subscribe(holder.on_change, ViewChanged, ItemAdded, ItemReplaced)
    meter = LagMeter()
    full = int(RATE * SECONDS) * TOKEN_LEN
    redraws = app.dashboard.redraws
    started, cpu = time.perf_counter(), time.process_time()
    engine_cpu = cpu_seconds(engine_pid) if engine_pid is not None else 0.0
    meter.start()
    try:
        for sid in ids:
            await engine.call(verbs.SEND, verbs.Send(sid, STREAM_PROMPT))
        while any(len(reply(engine, sid)) < full for sid in ids):
            await asyncio.sleep(0.05)
            if time.perf_counter() - started > SECONDS * 3:
                break
    finally:
        meter.stop()
        unsubscribe()
    run.elapsed = time.perf_counter() - started
    run.dashboard_cpu = time.process_time() - cpu
    if engine_pid is not None:
        run.engine_cpu = cpu_seconds(engine_pid) - engine_cpu
    run.redraws = app.dashboard.redraws - redraws
    run.dashboard_lag_ms = meter.lags_ms
    return ids


def tally(run: Run, engine: Any, ids: list[str], emitted: list[str]) -> None:
    """Text lost: each session's reply as the dashboard holds it vs what the agents emitted."""
    sent = set(emitted)
    run.replies += len(ids)
    run.chars_emitted = sum(len(t) for t in emitted)
    for sid in ids:
        text = reply(engine, sid)
        run.chars_received += len(text) if text in sent else 0
        run.sessions_complete += text in sent


async def in_process() -> Run:
    from polypilot_tui.engine.local import LocalEngine
    from polypilot_tui.engine.persistence import attach_persistence

    run = Run()
    with tempfile.TemporaryDirectory(prefix="ppb-") as tmp:
        settings = bench_settings(Path(tmp))
        clock = SystemClock()
        streamers: list[Streamer] = []

        def backend(sink: Any) -> Streamer:
            streamers.append(Streamer(sink, RATE, SECONDS))
            return streamers[-1]

        manager, catalog = bench_manager(settings, clock, backend)
        app = dashboard(settings, catalog, LocalEngine(manager, attach_persistence), Path(tmp))
        async with app.run_test(size=(160, 48)) as pilot:
            ids = await drive(app, run)
            await pilot.pause()
            tally(run, app.engine, ids, ["".join(s.emitted) for s in streamers if s.emitted])
    run.engine_lag_ms = run.dashboard_lag_ms  # one loop
    return run


async def attached() -> Run:
    import httpx

    from polypilot_tui.config import AgentCatalog, AgentConfig
    from polypilot_tui.domain.safe_json import load_json
    from polypilot_tui.service.address import socket_path
    from polypilot_tui.service.remote import RemoteEngine

    run = Run()
    state = short_state_dir()
    async with engine_process(streaming_serve(RATE, SECONDS), state) as process:
        path = socket_path(state)

        async def connect() -> Path:
            return path

        settings = bench_settings(state)
        catalog = AgentCatalog({AGENT: AgentConfig(name=AGENT, kind="demo")})
        app = dashboard(settings, catalog, RemoteEngine(connect, reconnect=False), state)
        async with app.run_test(size=(160, 48)) as pilot:
            ids = await drive(app, run, process.pid)
            await pilot.pause()
            transport = httpx.AsyncHTTPTransport(uds=str(path))
            async with httpx.AsyncClient(transport=transport, base_url="http://engine") as http:
                stats = load_json((await http.get("/v1/bench/stats")).content, "the bench's stats")
            tally(run, app.engine, ids, stats["emitted"])
            run.engine_lag_ms = stats["lags_ms"]
    return run


def show(name: str, run: Run) -> None:
    lat = run.latencies_ms
    print(
        f"{name:<12} latency p50 {statistics.median(lat):6.2f} ms, p99 {percentile(lat, 0.99):6.2f} ms "
        f"({len(lat):,} deltas timed, {run.out_of_order} out of order) | "
        f"loop lag p99: dashboard {percentile(run.dashboard_lag_ms, 0.99):5.1f} ms, "
        f"engine {percentile(run.engine_lag_ms, 0.99):5.1f} ms"
    )
    engine_cpu = "" if run.engine_cpu is None else f", engine process {run.engine_cpu / run.elapsed:.0%}"
    print(f"{'':<12} CPU of one core: this process {run.dashboard_cpu / run.elapsed:.0%}{engine_cpu}")
    print(
        f"{'':<12} text: {run.sessions_complete}/{run.replies} replies whole, "
        f"{run.chars_emitted - run.chars_received:,} of {run.chars_emitted:,} chars lost | "
        f"{run.elapsed:.1f} s, {run.view_changes / run.elapsed:,.0f} view changes/s, "
        f"{run.redraws / run.elapsed:.1f} redraws/s"
    )


ROUNDS = 2
"""Runs of each shape, alternating (in-process, attached, in-process, …): the machine is shared."""


def merged(runs: list[Run]) -> Run:
    """The runs of one shape as one: their samples pooled, their counts and times added."""
    out = Run()
    for run in runs:
        out.latencies_ms += run.latencies_ms
        out.dashboard_lag_ms += run.dashboard_lag_ms
        out.engine_lag_ms += run.engine_lag_ms
        out.out_of_order += run.out_of_order
        out.view_changes += run.view_changes
        out.sessions_complete += run.sessions_complete
        out.replies += run.replies
        out.chars_received += run.chars_received
        out.chars_emitted += run.chars_emitted
        out.elapsed += run.elapsed
        out.redraws += run.redraws
        out.dashboard_cpu += run.dashboard_cpu
        if run.engine_cpu is not None:
            out.engine_cpu = (out.engine_cpu or 0.0) + run.engine_cpu
    return out


def cpu(run: Run) -> float:
    """CPU seconds of every process of the shape (user + system) while the load streamed."""
    return run.dashboard_cpu + (run.engine_cpu or 0.0)


async def run_both(rounds: int = ROUNDS) -> list[Row]:
    locals_: list[Run] = []
    remotes: list[Run] = []
    for _ in range(rounds):
        locals_.append(await in_process())
        remotes.append(await attached())
    local, remote = merged(locals_), merged(remotes)
    print(
        f"load: {SESSIONS} sessions x {RATE} deltas/s for {SECONDS:.0f} s, headless dashboard in this process; "
        f"{rounds} alternating runs of each shape, pooled"
    )
    show("in-process", local)
    show("attached", remote)
    added = percentile(remote.latencies_ms, 0.99) - percentile(local.latencies_ms, 0.99)
    print(f"added latency p99:          {added:.2f} ms (target <= 20 ms)")
    lost = remote.chars_emitted - remote.chars_received
    print(f"text lost attached:         {lost:,} chars (target 0)")
    ratio = percentile(remote.dashboard_lag_ms, 0.99) / max(0.1, percentile(local.dashboard_lag_ms, 0.99))
    print(f"ratio dashboard loop lag p99 attached / in-process: {ratio:.2f}x")
    # The floor: the in-process shape does the same work (agents, engine, dashboard) on one loop,
    # with no socket; what the attached shape costs above it is the wire (encode, send, decode).
    per_run = [f"{cpu(r):.2f}/{cpu(loc):.2f}" for r, loc in zip(remotes, locals_, strict=True)]
    cpu_ratio = statistics.median(cpu(r) / cpu(loc) for r, loc in zip(remotes, locals_, strict=True))
    print(
        f"CPU attached (engine + dashboard) / in-process, per round: {', '.join(per_run)} s; "
        f"median {cpu_ratio:.2f}x (target <= 1.5x; floor: the in-process CPU, {cpu(local) / rounds:.2f} s a run)"
    )
    figure = f"+{added:.2f} ms p99 latency, {lost:,} chars lost"
    cpu_figure = (
        f"{cpu(remote) / rounds:.2f} s (engine {(remote.engine_cpu or 0.0) / rounds:.2f} + dashboard "
        f"{remote.dashboard_cpu / rounds:.2f}) vs {cpu(local) / rounds:.2f} s in-process: {cpu_ratio:.2f}x"
    )
    return [
        (f"stream {SESSIONS} sessions x {RATE} deltas/s attached vs in-process", figure, "≤ +20 ms, 0 lost"),
        (f"CPU under {SESSIONS} x {RATE} deltas/s: engine + attached dashboard vs in-process", cpu_figure, "≤ 1.5x"),
    ]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="bench.engine_stream", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="runs of each shape, alternating")
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    return asyncio.run(run_both(args.rounds))


if __name__ == "__main__":
    main(sys.argv[1:])
