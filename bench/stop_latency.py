"""Stop latency on the real Copilot CLI: from the Stop key to a session that is stopped and ready.

One Copilot session (the pinned CLI from npm) talks to the scripted model server on
127.0.0.1. Each run sends ``HANG`` (the model sends headers, then nothing), waits until the
request reached the model, and calls ``manager.stop()`` as the Stop key does; the same is
then done during a streaming reply (``SLOW``) and during a running shell tool
(``SLEEPTOOL``). Measured:

- shown:  Stop → the sidebar says ``stopped`` (the engine ends the turn before it asks the agent);
- ready:  Stop → ``stop()`` returned: the CLI acknowledged the abort and sent its
  ``session.idle``, so the next prompt goes to an agent that is out of the old turn.

Both are compared with the Stop grace period (``settings.stop_grace_seconds``): past it the
agent is killed, so ``ready`` well below the grace means Stop never needed a kill. The CLI's
process id is checked to be the same after every run. Skips (with the reason) when npm and
the cached CLI are both missing.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._support import Row
from polypilot_tui.domain.records import Record, ViewChanged

RUNS = 7


#: (label, prompt, what must be under way before Stop is pressed)
CASES = (
    ("hung model call", "HANG", "model"),
    ("streaming reply", "SLOW", "text"),
    ("running tool (sleep 20)", "SLEEPTOOL", "tool"),
)


async def run(cli: Path, runs: int = RUNS) -> list[Row]:
    from polypilot_tui.domain.turn import Outcome
    from tests.support.copilot_harness import AGENT, cli_pid, make_manager
    from tests.support.model_server import ModelServer
    from tests.support.waiting import until

    results: list[tuple[str, list[float], list[float]]] = []
    with (
        tempfile.TemporaryDirectory(prefix="polypilot-bench-stop-") as tmp,
        ModelServer(max_seconds=600, slow_chunks=400, slow_interval=0.05) as server,
    ):
        manager = make_manager(cli, server, Path(tmp), permission_policy="allow")
        grace = manager.settings.stop_grace_seconds
        try:
            began = time.perf_counter()
            sid = await manager.create_session(AGENT)
            connect = time.perf_counter() - began
            session = manager.session(sid)
            pid = cli_pid(manager, sid)
            for label, prompt, under_way in CASES:
                shown: list[float] = []
                ready: list[float] = []
                for i in range(runs):
                    before = len(server.model_requests())
                    await manager.send(sid, f"{prompt} run {i}")
                    if under_way == "model":
                        await until(
                            lambda p=prompt, b=before: any(p in r.last.text for r in server.model_requests()[b:]),
                            30,
                            "the model call to start",
                        )
                    elif under_way == "text":
                        await until(lambda: bool(session.turn and session.turn.streamed_chars), 30, "text")
                    else:
                        await until(lambda: bool(session.turn and session.turn.active_tools), 30, "the tool")
                    await asyncio.sleep(0.2)  # well inside it now
                    seen: list[float] = []

                    def watch(change: Record, seen: list[float] = seen) -> None:
                        if change.session_id == sid and not seen and manager.view(sid).status.value == "stopped":
                            seen.append(time.perf_counter())

                    unsubscribe = manager.subscribe(watch, ViewChanged)
                    pressed = time.perf_counter()
                    await manager.stop(sid)
                    done = time.perf_counter()
                    unsubscribe()
                    if session.last_outcome is None or session.last_outcome.outcome is not Outcome.ABORTED:
                        raise RuntimeError(f"{label} run {i}: the turn ended {session.last_outcome}")
                    if cli_pid(manager, sid) != pid:
                        raise RuntimeError(f"{label} run {i}: Stop killed the CLI (no idle within {grace} s)")
                    shown.append((seen[0] if seen else done) - pressed)
                    ready.append(done - pressed)
                results.append((label, shown, ready))
        finally:
            await manager.shutdown()

    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1000:6.1f} ms, max {max(values) * 1000:6.1f} ms"

    print(f"Copilot CLI {cli.parent.name}/{cli.name}: connect {connect:.2f} s; {runs} Stops per case, one session")
    print(f"Stop grace period: {grace * 1000:.0f} ms (past it the agent is killed); no Stop killed the CLI")
    for label, shown, ready in results:
        print(f"{label}:")
        print(f"  Stop → status 'stopped':       {ms(shown)}")
        print(
            f"  Stop → CLI idle (stop() done): {ms(ready)}   ratio to the grace: "
            f"median {statistics.median(ready) / grace:.4f}x, max {max(ready) / grace:.4f}x"
        )
    grace_text = f"well under the {grace:g} s grace before a kill"
    return [
        (f"Stop on the real Copilot CLI ({label}): Stop → the CLI idle", " ".join(ms(ready).split()), grace_text)
        for label, _, ready in results
    ]


def find_cli() -> Path | None:
    """The pinned CLI, installed from npm if needed; None (with the reason printed) otherwise."""
    from polypilot_tui.agents.npm_cache import COPILOT_CLI, NpmUnavailable, ensure_installed

    if COPILOT_CLI.installed():
        return COPILOT_CLI.path
    if shutil.which("npm") is None:
        print(
            f"SKIPPED: npm is not on PATH and {COPILOT_CLI.package}@{COPILOT_CLI.version} is not cached "
            f"in {COPILOT_CLI.prefix}; this bench needs the real Copilot CLI"
        )
        return None
    try:
        return ensure_installed(COPILOT_CLI)
    except NpmUnavailable as exc:
        print(f"SKIPPED: installing the Copilot CLI failed: {exc}")
        return None


def main() -> list[Row]:
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # tests.support (model server) lives beside bench/
        sys.path.insert(0, root)
    cli = find_cli()
    return asyncio.run(run(cli)) if cli is not None else []


if __name__ == "__main__":
    main()
