"""Starting and stopping ACP agent processes: argv, environment, and a kill that reaches
the agent's children too."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import signal
from pathlib import Path
from typing import Mapping

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.npm_cache import CODEX_ACP, OPENCODE, resolve_command
from polypilot_tui.config import AgentConfig

#: How long to wait after SIGTERM before SIGKILL.
TERM_GRACE = 2.0
#: Passed to the agent as they are; everything else must come from its config.
_ENV_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
              "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
              "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
_ENV_PREFIXES = ("LC_", "XDG_")


def agent_command(agent: AgentConfig) -> list[str]:
    """The argv of an ACP agent: its configured command, else a pinned npm install by name."""
    if agent.command:
        argv = shlex.split(agent.command) if not agent.args and " " in agent.command else [agent.command]
        argv += list(agent.args)
        if os.sep not in argv[0] and shutil.which(argv[0]) is None:
            for npm in (OPENCODE, CODEX_ACP):  # not on PATH: the test/npm cache may have it
                if Path(npm.binary).name == argv[0] and npm.installed():
                    argv[0] = str(npm.path)
        return argv
    name = agent.name.lower()
    if "opencode" in name and (found := resolve_command(None, OPENCODE)):
        return [found, "acp", *agent.args]
    if "codex" in name and (found := resolve_command(None, CODEX_ACP)):
        return [found, *agent.args]
    raise BackendError(f"agent {agent.name!r} has no command (set `command` in the agents file)")


def agent_environment(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The agent's whole environment, spelled out (the SDK passes only a handful of names)."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)}
    if agent.provider is not None and agent.provider.api_key_env:
        key = agent.provider.api_key(dict(source))
        if key:
            env[agent.provider.api_key_env] = key
    env.update(agent.env)
    return env


_SECRET_NAME = re.compile(r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)


def agent_secrets(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of the agent's environment that are credentials: its provider key, and every
    configured variable named like one (``*_KEY``, ``*_TOKEN`` …). Never written to our files."""
    env = agent_environment(agent, environ)
    names = {k for k in env if _SECRET_NAME.search(k)}
    if agent.provider is not None and agent.provider.api_key_env:
        names.add(agent.provider.api_key_env)
    return tuple(v for k, v in env.items() if k in names and v)


async def terminate(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the agent and its children, then SIGKILL whatever is left."""
    children = await asyncio.to_thread(descendants, proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in [proc.pid, *children]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), timeout=TERM_GRACE)
            if sig == signal.SIGTERM and children:
                # Children that ignored SIGTERM must not outlive their agent.
                for pid in children:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            return
        except asyncio.TimeoutError:
            continue


def descendants(pid: int) -> list[int]:
    """Child processes of ``pid`` (Linux /proc; empty elsewhere). A tool's shell holding the
    agent's stdout open would otherwise keep the pipe, and the turn, alive."""
    parents: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        kids = [child for child, parent in parents.items() if parent == current]
        found.extend(kids)
        frontier.extend(kids)
    return found
