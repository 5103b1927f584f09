"""Start an agent's process before the program that drives it has loaded (``polypilot run``).

A headless run's fixed cost is the agent's boot plus ours; started first, the agent boots
while the engine imports, and (the Copilot CLI) the SDK imports and connects meanwhile. The
session the run then opens joins what was started here, exactly as a second session joins
a running CLI (agents/copilot/server.py). Only what that needs is imported here.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from polypilot_tui.config import AgentConfig


async def _nothing() -> None:
    """Nothing was started, so nothing is given up."""


def head_start(agent: AgentConfig) -> Callable[[], Awaitable[None]]:
    """Start ``agent``'s process now, on the running loop, for the session that will ask for it
    next; returns what gives it up (a process no session joined is stopped there). What
    cannot start is left to the session's own start, which says why."""
    if agent.kind != "copilot":  # an ACP agent's process is its session's own (its folder, its env)
        return _nothing
    from polypilot_tui.agents.base import BackendError
    from polypilot_tui.agents.copilot.server import HeadStart, cli_environment, spec_of
    from polypilot_tui.agents.locate import find_command

    cli = find_command(agent)
    if not cli:
        return _nothing
    try:
        env, provider = cli_environment(agent, os.environ)
        held = HeadStart(spec_of(agent, cli, env, logged_in=provider is None))
    except (BackendError, OSError):
        return _nothing
    from polypilot_tui.infra.redact import REDACTOR

    REDACTOR.learn_agents([agent])  # what the CLI prints of its key is redacted in our logs
    return held.release
