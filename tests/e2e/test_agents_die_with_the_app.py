"""Issue #11.9 on the real Copilot CLI: a SIGKILLed app leaves no CLI (or tool) behind.

The app here is a real process: ``polypilot run`` and the dashboard on a pseudo-terminal,
each with the Copilot CLI from npm against the scripted model server, hung mid-turn.
After a SIGKILL of the app, every process of the CLI's (its tools included, found by the
``COPILOT_HOME`` in their environment) must be gone within about a second: the CLI runs
on the leash (polypilot_tui/agents/leash.py), which watches the app *process*, wherever
the SDK started the CLI from.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polypilot_tui.agents.base import ALLOW_ONCE
from polypilot_tui.agents.leash import SCAN
from tests.reliability.conftest import Dashboard
from tests.support.copilot_e2e import copilot_agent, make_backend
from tests.support.copilot_harness import agents_toml, copilot_processes, home_processes, run_env
from tests.support.model_server import ModelServer
from tests.support.processes import alive
from tests.support.waiting import until_blocking

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ROOT = Path(__file__).parents[2]


def gone_after_sigkill(app: subprocess.Popen[bytes] | subprocess.Popen[str], home: Path) -> float:
    """SIGKILL the app; seconds until no process of this COPILOT_HOME is left (guard 30 s)."""
    began = time.monotonic()
    app.send_signal(signal.SIGKILL)
    app.wait(10)
    until_blocking(lambda: not home_processes(home), 30, "the CLI and its tools to die with the app")
    return time.monotonic() - began


@pytest.mark.parametrize("kill", range(2))
def test_the_cli_of_a_sigkilled_run_dies_within_a_second(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path, kill: int
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(agents_toml(copilot_cli, model_server, tmp_path))
    env = run_env(tmp_path / "state", agents)
    app = subprocess.Popen(
        [sys.executable, "-m", "polypilot_tui.cli", "run", "HANG forever"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        until_blocking(
            lambda: any("HANG" in r.last.text for r in model_server.model_requests()),
            90,
            "the CLI to send the prompt to the (hanging) model",
        )
        assert copilot_processes(copilot_cli, ancestor=app.pid)
        took = gone_after_sigkill(app, tmp_path / "copilot-home")
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
    assert took < 2.0, f"the Copilot CLI outlived the app by {took:.2f} s"


def test_the_cli_of_a_sigkilled_dashboard_dies_within_a_second(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(agents_toml(copilot_cli, model_server, tmp_path))
    state = tmp_path / "state"
    dashboard = Dashboard(run_env(state, agents))  # its first session is a Copilot one: the CLI starts
    try:
        dashboard.wait_for_lock(state, 90)
        until_blocking(
            lambda: copilot_processes(copilot_cli, ancestor=dashboard.proc.pid),
            90,
            "the dashboard's Copilot CLI to start",
        )
        took = gone_after_sigkill(dashboard.proc, tmp_path / "copilot-home")
    finally:
        dashboard.close()
    assert took < 2.0, f"the Copilot CLI outlived the dashboard by {took:.2f} s"


async def test_a_shell_tool_dies_with_a_sigkilled_cli(copilot_cli: Path, tmp_path: Path) -> None:
    """The QA finding: the CLI runs its shell tool in a session of its own, so ``kill -9`` of
    the CLI left ``sleep`` running (parent 1, its own group) while the UI said "interrupted"."""
    tool = ["sleep", "47.25"]  # an argv no other test's tool has
    with ModelServer(sleep_cmd=" ".join(tool)) as server:
        home = tmp_path / "copilot-home"
        backend, sink = make_backend(copilot_agent(copilot_cli, server, home, tmp_path / "work"), tmp_path / "s")
        try:
            await backend.connect(None)
            await backend.send("SLEEPTOOL please")
            request = await sink.wait("permission.requested")
            await backend.answer_permission(request.text("requestId"), ALLOW_ONCE)
            await sink.wait("tool.execution_start")
            sleeps = await asyncio.to_thread(
                until_blocking, lambda: tool_processes(home, tool), 30, "the shell tool to start"
            )
            cli = backend.pid
            assert cli is not None and all(os.getsid(p) != os.getsid(cli) for p in sleeps), (
                "the tool no longer leaves the CLI's session: this test no longer shows the escape"
            )
            # The leash's watcher looks at new processes every SCAN s; on a loaded machine (CI
            # with two workers and several CLIs) one look came later than two SCANs once.
            await asyncio.sleep(8 * SCAN)
            os.kill(cli, signal.SIGKILL)
            began = time.monotonic()
            await asyncio.to_thread(
                until_blocking, lambda: not any(alive(p) for p in sleeps), 30, "the tool to die with the CLI"
            )
            assert time.monotonic() - began < 2.0
        finally:
            await backend.close()
            for pid in tool_processes(home, tool):
                os.kill(pid, signal.SIGKILL)
    assert not home_processes(home), "something of the CLI's outlived it"


def tool_processes(home: Path, argv: list[str]) -> list[int]:
    """Live processes running ``argv`` with this test's COPILOT_HOME (the CLI's tools)."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for pid in home_processes(home):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes() == wanted:
                found.append(pid)
    return found
