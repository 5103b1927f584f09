"""The CLI started before the SDK import is started exactly as the SDK would start it.

spawn.py copies what ``CopilotClient._start_cli_server`` does (argv flags, environment,
cwd, pipes) so the CLI can boot while the SDK imports. These tests run the pinned SDK's own
spawn step with ``Popen`` recorded and compare: an SDK upgrade that changes its flags fails
here, not as a subtly different CLI in production.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.copilot import spawn

SPAWN, PROCESS, CLI_PROCESS = "_start_cli_server", "_process", "_cli_process"
"""The pinned SDK's private names this module relies on (spawn.adopt sets the same)."""


class Recorded:
    """Stands in for ``subprocess.Popen``: remembers its call, starts nothing."""

    calls: list[tuple[list[str], dict[str, Any]]] = []

    def __init__(self, args: list[str], **kwargs: Any) -> None:
        Recorded.calls.append((list(args), kwargs))
        self.pid = 0

    def poll(self) -> int | None:
        return None


def sdk_client(argv: list[str], env: dict[str, str], cwd: str, logged_in: bool) -> Any:
    from copilot import CopilotClient, RuntimeConnection

    return CopilotClient(
        connection=RuntimeConnection.for_stdio(path=argv[0], args=tuple(argv[1:])),
        env=env,
        working_directory=cwd,
        use_logged_in_user=logged_in,
    )


@pytest.mark.parametrize("logged_in", [True, False])
def test_the_early_spawn_matches_the_sdks_own(logged_in: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = tmp_path / "copilot"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    argv = [str(cli), "--some-agent-arg"]
    env = {"PATH": "/usr/bin", "COPILOT_HOME": str(tmp_path / "home"), "COPILOT_OFFLINE": "true"}
    monkeypatch.setattr(subprocess, "Popen", Recorded)  # the SDK's call
    monkeypatch.setattr(spawn, "CliProcess", Recorded)  # ours: a Popen, with its own wait
    Recorded.calls = []
    asyncio.run(getattr(sdk_client(argv, env, str(tmp_path), logged_in), SPAWN)())
    spawn.spawn_cli(argv, env, str(tmp_path), use_logged_in_user=logged_in)
    (sdk_args, sdk_kwargs), (our_args, our_kwargs) = Recorded.calls
    sdk_kwargs.pop("creationflags", None)  # 0 off Windows
    # Ours leads a session of its own: the leash's launcher (its argv) takes its fast path then.
    assert our_kwargs.pop("start_new_session") is True and "start_new_session" not in sdk_kwargs
    assert our_args == sdk_args
    assert our_kwargs == sdk_kwargs
    assert ("--no-auto-login" in our_args) is not logged_in


def test_an_adopted_process_is_the_clients_and_no_other_is_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the SDK started a second CLI")

    proc = subprocess.Popen(["sleep", "30"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        client = sdk_client(["/bin/true"], {}, str(tmp_path), False)
        spawn.adopt(client, proc)
        monkeypatch.setattr(subprocess, "Popen", refuse)
        asyncio.run(getattr(client, SPAWN)())
        assert getattr(client, CLI_PROCESS) is proc and getattr(client, PROCESS) is proc
    finally:
        proc.kill()
        proc.wait()


def late_by(process: type[subprocess.Popen[bytes]]) -> float:
    """Seconds a timed wait for a CLI's exit ends after the exit, with another thread waiting
    for it untimed (runtime.watch_process does, for the CLI's whole life): the SDK's stop."""
    proc = process(["sleep", "0.07"])
    watched: list[float] = []
    watcher = threading.Thread(target=lambda: (proc.wait(), watched.append(time.monotonic())))
    watcher.start()
    try:
        assert proc.wait(timeout=30) == 0
        ended = time.monotonic()
    finally:
        watcher.join(30)
    return ended - watched[0]


def test_a_timed_wait_ends_when_the_cli_does() -> None:
    """Popen's timed wait polls, its sleeps doubling to 50 ms, and cannot poll while the
    watcher's untimed wait holds its lock: the SDK's stop saw every CLI's exit ~30 ms late."""
    ours = statistics.median(late_by(spawn.CliProcess) for _ in range(3))
    popen = statistics.median(late_by(subprocess.Popen) for _ in range(3))
    assert ours < 0.01, (ours, popen)
    assert popen > ours, (ours, popen)  # what the bound is against: the plain wait is late


def test_a_timed_wait_on_a_cli_that_goes_on_times_out() -> None:
    proc = spawn.CliProcess(["sleep", "30"])
    try:
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
        assert 0.04 <= time.monotonic() - started < 5
        assert proc.returncode is None
    finally:
        proc.kill()
        assert proc.wait(timeout=30) == -9
