"""Whether an agent can start on this machine, without starting it.

One answer for every place that asks: ``polypilot agents`` prints it, the new-session dialog
marks agents that cannot start (and those that may need a sign-in), and a restored session
whose agent cannot start says why instead of looking idle until the first prompt fails.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from polypilot_tui.agents.locate import argv_of, expand, find_command, missing_command, not_runnable
from polypilot_tui.config import PROVIDER_URL_VARIABLE, AgentConfig, SignInEvidence
from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.sandbox import SandboxMode
from polypilot_tui.domain.urls import url_problem

log = logging.getLogger(__name__)

#: A sign-in file larger than this is not read for its marker (it is not a config file).
MAX_EVIDENCE_BYTES = 4_000_000


def readiness(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> AgentOffer:
    """Can ``agent`` start here: its command found (on the agent's PATH, else ours, else the
    usual install folders and the npm cache), the provider key variable it names set, and
    some sign of a sign-in when it lists any."""
    env = dict(os.environ if environ is None else environ) | agent.env
    # The sandbox its sessions get unless the user picks another: the new-session dialog shows it.
    base: dict[str, Any] = {
        "name": agent.name,
        "kind": agent.kind,
        "title": agent.title,
        "sandbox": SandboxMode(agent.sandbox),
    }
    if agent.kind == "demo":
        return AgentOffer(**base, availability=Availability.READY, where="built in")
    found = find_command(agent, env)
    if found is None:
        argv = argv_of(agent)
        if argv and (unrunnable := not_runnable(argv[0], env.get("PATH"), env)):
            return AgentOffer(**base, availability=Availability.NOT_EXECUTABLE, where=unrunnable, problem=unrunnable)
        command = argv[0] if argv else f"(none: set `command` for {agent.name})"
        return AgentOffer(
            **base,
            availability=Availability.NOT_INSTALLED,
            where=f"{command} is not found",
            problem=missing_command(agent, env),
            hint=agent.install,
        )
    if bad_url := _bad_provider_url(agent, env):
        return AgentOffer(**base, availability=Availability.MISCONFIGURED, where=found, problem=bad_url)
    missing_key = agent.missing_key(env)
    if missing_key:
        return AgentOffer(**base, availability=Availability.NO_KEY, where=found, problem=missing_key)
    # A provider of one's own (its key checked above) is the sign-in: no GitHub login is used.
    if agent.signed_in and agent.provider is None and not any(_present(sign, env) for sign in agent.signed_in):
        how = agent.sign_in or "sign in with the agent's own command"
        return AgentOffer(
            **base,
            availability=Availability.NEEDS_SIGN_IN,
            where=found,
            problem=f"no sign-in found: {how}",
            hint=agent.sign_in,
        )
    return AgentOffer(**base, availability=Availability.READY, where=found)


def _bad_provider_url(agent: AgentConfig, env: Mapping[str, str]) -> str | None:
    """Why the model server address a Copilot agent gets from the CLI's own variable cannot
    work, or None (a provider of the agents file is checked when the file is read)."""
    url = env.get(PROVIDER_URL_VARIABLE, "").strip() if agent.kind == "copilot" and agent.provider is None else ""
    problem = url_problem(url) if url else None
    return f"{PROVIDER_URL_VARIABLE}: {problem}" if problem else None


def _present(sign: SignInEvidence, env: Mapping[str, str]) -> bool:
    if sign.env is not None and env.get(sign.env, "").strip():
        return True
    if sign.file is None:
        return False
    path = Path(expand(sign.file, env))
    try:
        if not path.is_file():
            return False
        if sign.contains is None:
            return True
        if path.stat().st_size > MAX_EVIDENCE_BYTES:
            return False
        return sign.contains in path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        log.debug("sign-in file %s unreadable: %s", path, exc)
        return False
