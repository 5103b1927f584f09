"""Whether an agent can start on this machine, without starting it.

One answer for every place that asks: ``polypilot agents`` prints it, the new-session picker
marks agents that cannot start, and a restored session whose agent cannot start says why
instead of looking idle until the first prompt fails.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from polypilot_tui.agents.npm_cache import CODEX_ACP, COPILOT_CLI, OPENCODE, resolve_command
from polypilot_tui.config import AgentConfig

Mark = Literal["ready", "missing", "no key"]


@dataclass(frozen=True)
class Readiness:
    """``mark`` in a word, ``where`` the command (or what is not found), ``problem`` why not."""

    mark: Mark
    where: str
    problem: str | None = None

    @property
    def ready(self) -> bool:
        return self.mark == "ready"


def readiness(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> Readiness:
    """Can ``agent`` start here: its command found (on the agent's PATH, else ours, else the
    npm cache) and the provider key variable it names set."""
    found, where = _command(agent)
    if not found:
        return Readiness("missing", where, f"its command {where}")
    missing_key = agent.missing_key(environ)
    if missing_key:
        return Readiness("no key", where, missing_key)
    return Readiness("ready", where)


def _command(agent: AgentConfig) -> tuple[bool, str]:
    """Whether the agent's command is found, and where it is (or what is not found)."""
    if agent.kind == "demo":
        return True, "built in"
    path = agent.env.get("PATH")
    if agent.kind == "copilot":
        command = resolve_command(agent.command, COPILOT_CLI)
        if command is None:
            return False, "copilot is not found"
        found = shutil.which(command, path=path)
        return found is not None, found or f"{command} is not found"
    fallback = OPENCODE if "opencode" in (agent.command or "") else CODEX_ACP
    command = agent.command or resolve_command(None, fallback)
    found = shutil.which(command, path=path) if command else None
    return found is not None, found or f"{command or fallback.binary} is not found"
