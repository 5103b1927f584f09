"""Starting and stopping ACP agent processes: argv, environment, a leash that ends them
with the app, and a kill that reaches the agent's children too."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.leash import leashed
from polypilot_tui.agents.locate import argv_of, find_command, missing_command, not_runnable
from polypilot_tui.agents.sandbox import SandboxPlan, launch_argv
from polypilot_tui.config import AgentConfig
from polypilot_tui.infra.process_tree import descendants

#: How long to wait after SIGTERM before SIGKILL.
TERM_GRACE = 2.0
#: Stdout lines up to this size are read in one piece; longer ones in pieces into one buffer
#: (the reader holds up to twice this: a bigger one held a 20 MB line a third time).
STDOUT_LIMIT = 1024 * 1024
#: Passed to the agent as they are; everything else must come from its config.
_ENV_NAMES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
_ENV_PREFIXES = ("LC_", "XDG_")


def agent_command(agent: AgentConfig) -> list[str]:
    """The argv of an ACP agent: its command found where :func:`locate` looks, and its args."""
    argv = argv_of(agent)
    if not argv:
        raise BackendError(f"agent {agent.name!r} has no command (set `command` in the agents file)")
    found = find_command(agent)
    if found is None:
        raise BackendError(f"cannot start ACP agent {argv[0]!r}: {missing_command(agent)}")
    return [found, *argv[1:]]


def agent_environment(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The agent's whole environment, spelled out (the SDK passes only a handful of names)."""
    source = os.environ if environ is None else environ
    names = {name for name in agent.pass_env if not name.endswith("*")}
    prefixes = (*_ENV_PREFIXES, *(name[:-1] for name in agent.pass_env if name.endswith("*")))
    env = {k: v for k, v in source.items() if k in _ENV_NAMES or k in names or k.startswith(prefixes)}
    if agent.provider is not None and agent.provider.api_key_env:
        key = agent.provider.api_key(dict(source))
        if key:
            env[agent.provider.api_key_env] = key
    env.update(agent.env)
    return env


async def start_agent(
    argv: list[str], env: Mapping[str, str], cwd: Path, stderr_fd: int, sandbox: SandboxPlan | None = None
) -> asyncio.subprocess.Process:
    """Start the agent on a leash (its own process group, dies with the app), in its
    ``sandbox`` when it has one (the leash outside, bwrap inside: agents/sandbox.py); a
    sandbox that cannot start is a BackendError and nothing is started."""
    found = shutil.which(argv[0], path=env.get("PATH")) if os.sep not in argv[0] else argv[0]
    if found is None or not os.access(found, os.X_OK):
        raise FileNotFoundError(not_runnable(argv[0], env.get("PATH"), env) or f"{argv[0]} is not found")
    command = launch_argv(sandbox, [found, *argv[1:]], cwd, env)
    return await asyncio.create_subprocess_exec(
        *leashed(command),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr_fd,
        env=dict(env),
        cwd=str(cwd),
        limit=STDOUT_LIMIT,
        start_new_session=True,  # the leash's launcher then takes its fast path
    )


async def stop_agent(proc: asyncio.subprocess.Process, grace: float) -> None:
    """Close the agent's stdin and give it ``grace`` seconds to exit, then terminate its tree."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    if proc.returncode is None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
    if proc.returncode is None:
        await terminate(proc)


async def terminate(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the agent and its children, then SIGKILL whatever is left (its whole group)."""
    children = await asyncio.to_thread(descendants, proc.pid)
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in [proc.pid, *children]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            try:
                await asyncio.wait_for(proc.wait(), timeout=TERM_GRACE)
                return
            except TimeoutError:
                continue
    finally:
        # Children that ignored SIGTERM, or left the parent chain, must not outlive their
        # agent: the leash made the agent the leader of a group that holds them all.
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
