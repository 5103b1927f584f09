"""Shared pieces of the engine-service benchmarks (bench/engine_*.py).

- :func:`engine_process`: an engine as a process of its own in a short /tmp state folder
  (its Unix socket path must fit in 107 bytes), stopped and removed at the end whatever happens.
- A load source: ``python -m bench._engine_service --state DIR`` serves, exactly as
  ``polypilot serve`` does (LocalEngine with persistence, ``build_app``, uvicorn on the state
  folder's Unix socket), an engine whose one agent streams timestamped deltas when prompted,
  and adds ``GET /bench/stats`` (its loop lag while streaming, the text it emitted).
- :class:`Streamer`, :class:`LagMeter` and :func:`read_tokens`, used on both sides.

Every delta is one fixed-width token ``<seq@emitted>``: ``emitted`` is ``time.monotonic()``
when the agent emitted it (one clock for every process on Linux), so whoever holds the text
can tell how late it arrived, and whether any of it was lost or reordered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench._support import QuietBackend

STREAM_PROMPT = "stream"
TOKEN = "<{seq:06d}@{at:014.6f}>"
TOKEN_LEN = len(TOKEN.format(seq=0, at=0.0))
START_WAIT = 30.0


# ---- the load source --------------------------------------------------------------------------
class Streamer(QuietBackend):
    """An agent that streams ``rate`` timestamped deltas a second for ``seconds`` when prompted."""

    active = 0
    """Streams in flight in this process (the lag meters count only while some are)."""

    def __init__(self, sink: Any, rate: float, seconds: float) -> None:
        super().__init__(sink)
        self.rate, self.seconds = rate, seconds
        self.emitted: list[str] = []

    async def send(self, prompt: str) -> None:
        if prompt == STREAM_PROMPT:
            asyncio.get_running_loop().create_task(self._stream())

    async def _stream(self) -> None:
        from polypilot_tui.domain.events import AgentEvent

        Streamer.active += 1
        try:
            self.sink(AgentEvent("assistant.turn_start", {}))
            started = time.perf_counter()
            for seq in range(int(self.rate * self.seconds)):
                # Paced against the wall clock so a slow loop cannot quietly lower the load.
                delay = started + (seq + 1) / self.rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                token = TOKEN.format(seq=seq, at=time.monotonic())
                self.emitted.append(token)
                self.sink(AgentEvent("assistant.message_delta", {"messageId": "m", "deltaContent": token}))
            self.sink(AgentEvent("assistant.turn_end", {}))
            self.sink(AgentEvent("session.idle", {}))
        finally:
            Streamer.active -= 1


class LagMeter:
    """How late a 10 ms timer wakes on this loop, recorded while ``counting()`` says so."""

    def __init__(self, counting: Callable[[], bool] = lambda: True, period: float = 0.01) -> None:
        self.counting, self.period = counting, period
        self.lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            tick = time.perf_counter()
            await asyncio.sleep(self.period)
            if self.counting():
                self.lags_ms.append((time.perf_counter() - tick - self.period) * 1000)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def read_tokens(text: str, start: int, now: float, latencies: list[float]) -> tuple[int, bool]:
    """Tokens of ``text`` from token number ``start``: append their latency (ms, against
    ``now``) and return how many whole tokens ``text`` holds, and whether they are all in order."""
    whole = len(text) // TOKEN_LEN
    in_order = True
    for seq in range(start, whole):
        token = text[seq * TOKEN_LEN : (seq + 1) * TOKEN_LEN]
        if not token.startswith(f"<{seq:06d}@"):
            in_order = False
            continue
        latencies.append((now - float(token[8:-1])) * 1000)
    return whole, in_order


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) ``pid`` used so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- an engine process, started and always stopped ----------------------------------------------
def engine_env(state: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This state folder, nothing recorded, and none of the developer's POLYPILOT_* settings
    (but ``extra``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env.update({"POLYPILOT_STATE_DIR": str(state), "POLYPILOT_RECORD": "false", **(extra or {})})
    return env


def short_state_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="ppb-", dir="/tmp"))


@asynccontextmanager
async def engine_process(
    argv: list[str],
    state: Path,
    prepare: Callable[[Path], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """Run ``argv`` (an engine serving ``state``, after ``prepare(state)``, with ``env`` added to
    its environment) until it answers; at the end stop it (SIGTERM, then SIGKILL) and remove
    ``state``."""
    from polypilot_tui.engine.verbs import ENGINE_INFO, NoArgs
    from polypilot_tui.service.address import socket_path
    from polypilot_tui.service.client import EngineClient, EngineUnreachable

    with tempfile.TemporaryFile() as err:
        try:
            if prepare is not None:
                prepare(state)
            process = subprocess.Popen(
                argv, env=engine_env(state, env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
            )
        except BaseException:
            shutil.rmtree(state, ignore_errors=True)
            raise
        try:
            deadline = time.monotonic() + START_WAIT
            while True:
                client = EngineClient(socket_path(state), timeout=10.0)
                try:
                    await client.call(ENGINE_INFO, NoArgs())
                    break
                except EngineUnreachable:
                    if process.poll() is not None or time.monotonic() > deadline:
                        err.seek(0)
                        said = err.read().decode(errors="replace").strip().splitlines()[-3:]
                        raise RuntimeError(f"the engine did not come up: {' | '.join(said) or 'no word'}") from None
                    await asyncio.sleep(0.05)
                finally:
                    await client.aclose()
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(process.wait, 20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
            shutil.rmtree(state, ignore_errors=True)


def polypilot_serve() -> list[str]:
    """``polypilot serve`` as the dashboard starts it."""
    return [sys.executable, "-m", "polypilot_tui", "serve"]


def streaming_serve(rate: float, seconds: float) -> list[str]:
    """This module's load source (see the module's docstring)."""
    return [sys.executable, "-m", "bench._engine_service", "--rate", str(rate), "--seconds", str(seconds)]


# ---- the load source's process ------------------------------------------------------------------
async def serve_streaming(state: Path, rate: float, seconds: float) -> None:
    """As ``polypilot_tui.service.serve.serve``, with a :class:`Streamer` agent and a stats route."""
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from bench._support import bench_manager, bench_settings
    from polypilot_tui.domain.clock import SystemClock
    from polypilot_tui.engine.local import LocalEngine
    from polypilot_tui.engine.persistence import attach_persistence
    from polypilot_tui.service.address import API, socket_path
    from polypilot_tui.service.serve import bind_socket
    from polypilot_tui.service.server import build_app

    settings = bench_settings(state)
    streamers: list[Streamer] = []

    def backend(sink: Any) -> Streamer:
        streamers.append(Streamer(sink, rate, seconds))
        return streamers[-1]

    manager, _catalog = bench_manager(settings, SystemClock(), backend)
    engine = LocalEngine(manager, attach_persistence, must_persist=True)
    await engine.start()
    path = socket_path(state)
    sock = bind_socket(path)
    lag = LagMeter(lambda: Streamer.active > 0)
    lag.start()
    server: uvicorn.Server | None = None

    def stop() -> None:
        if server is not None:
            server.should_exit = True

    async def stats(request: Request) -> Response:
        return JSONResponse({"lags_ms": lag.lags_ms, "emitted": ["".join(s.emitted) for s in streamers if s.emitted]})

    app = build_app(engine, stop)
    app.add_route(f"{API}/bench/stats", stats, methods=["GET"])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    try:
        await server.serve(sockets=[sock])
    finally:
        lag.stop()
        await engine.close(quitting=True)
        path.unlink(missing_ok=True)
        sock.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench._engine_service")
    parser.add_argument("--rate", type=float, required=True, help="deltas per second per session")
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    state = Path(os.environ["POLYPILOT_STATE_DIR"])
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_streaming(state, args.rate, args.seconds))


if __name__ == "__main__":
    main(sys.argv[1:])


async def follow(socket: Path, sid: str) -> None:
    """A client reading a session's agent events, as ``polypilot follow`` does (and dropping them)."""
    from polypilot_tui.service.client import EngineClient

    client = EngineClient(socket)
    try:
        async with client.stream(session=sid, events="1") as events:
            async for _ in events:
                pass
    finally:
        await client.aclose()
