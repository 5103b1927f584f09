"""Start the Copilot CLI before the SDK is imported, and hand the process to the SDK.

Importing the SDK takes ~0.25 s (sdk_import.py; ~0.9 s as the SDK imports itself) and the
CLI takes longer to boot; the SDK only spawns the CLI once it is imported. So the
CLI is started here first, exactly as the SDK would start it (same argv, environment, cwd and
pipes; a test compares the two), and boots while the SDK loads. The SDK then adopts it:
:func:`adopt` makes the client's spawn step take this process instead of starting another,
so everything after it (the JSON-RPC handshake, stop, force stop) is the SDK's own code.
"""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from polypilot_tui.agents.leash import pidfd

LOG_LEVEL = "info"
"""The SDK's default ``log_level`` (``CopilotClient(log_level=…)``), which it passes to the CLI."""


def sdk_argv(argv: Sequence[str], *, use_logged_in_user: bool) -> list[str]:
    """``argv`` plus the flags the SDK appends for a stdio CLI (client.py ``_start_cli_server``)."""
    flags = ["--headless", "--no-auto-update", "--log-level", LOG_LEVEL]
    if not use_logged_in_user:
        flags.append("--no-auto-login")
    return [*argv, *flags, "--stdio"]


def sdk_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the SDK gives the CLI (mode ``copilot-cli``, no token, no telemetry)."""
    return {**env, "COPILOT_RUNTIME_PROCESS_FILE_LOGGING": "1"}


LONG_WAIT = 3600.0
"""Seconds past which a timed wait is Popen's own (a poll takes whole milliseconds, up to ~24 days)."""


class CliProcess(subprocess.Popen[bytes]):
    """The CLI's process, whose timed wait ends as the process does.

    ``Popen.wait(timeout)`` polls, sleeping twice as long each time up to 50 ms, and cannot
    even poll while another thread waits without a timeout (runtime.watch_process does, for
    the CLI's whole life). The SDK's stop closes the CLI's stdin and then waits so for its
    exit: every stop, and so every headless run's end, saw the exit ~43 ms late. Here a timed
    wait watches the process's pidfd, readable the moment it ends (Linux; elsewhere, and
    should the pidfd fail, Popen's own wait)."""

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None or self.returncode is not None or not 0 <= timeout <= LONG_WAIT:
            return super().wait(timeout)
        ended = _ends_within(self.pid, timeout)
        if ended is None:
            return super().wait(timeout)
        if not ended:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return super().wait()  # it has ended: reaped here, or at once by the thread waiting for it


def _ends_within(pid: int, timeout: float) -> bool | None:
    """Whether process ``pid`` (a child not reaped yet) ends within ``timeout`` seconds; None
    when its pidfd cannot tell."""
    fd = pidfd(pid)  # None: not Linux, an old kernel, or reaped meanwhile
    if fd is None:
        return None
    try:
        watch = select.poll()
        watch.register(fd, select.POLLIN)
        return bool(watch.poll(max(0, int(timeout * 1000))))
    finally:
        os.close(fd)


def spawn_cli(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, *, use_logged_in_user: bool
) -> subprocess.Popen[bytes]:
    """Start the CLI on stdio pipes, unbuffered, as ``CopilotClient.start()`` would."""
    return CliProcess(
        sdk_argv(argv, use_logged_in_user=use_logged_in_user),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=cwd,
        env=sdk_env(env),
        start_new_session=True,  # its leash's launcher (agents/leash.py) takes the fast path
    )


def adopt(client: Any, process: subprocess.Popen[bytes]) -> None:
    """Make ``client.start()`` connect to ``process`` instead of spawning a CLI of its own.

    The SDK has no public way to take a running process; its spawn step is replaced on this
    one client by one that records ``process`` where the spawn would have put its own.
    """

    async def take_process() -> None:
        setattr(client, "_process", process)  # noqa: B010 - the SDK's private names, by name
        setattr(client, "_cli_process", process)  # noqa: B010

    setattr(client, "_start_cli_server", take_process)  # noqa: B010
