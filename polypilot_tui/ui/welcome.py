"""What a demo session says before its first message: that it is the demo, and which real
agents this machine has, with the key that starts one.

On a first start the dashboard opens on the built-in demo agent (it works everywhere, offline);
it must not pass for a real agent, and a new user must learn what is installed."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from polypilot_tui.config import AgentCatalog
from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.widgets.chat_log import EMPTY_TEXT

log = logging.getLogger(__name__)

DEMO_SAYS = (
    "This is the built-in demo agent: scripted replies, no model, nothing is run on your machine "
    "(try !help; prompts starting with ! play the failures polypilot is built to survive)."
)
MAX_NAMED = 6
"""Agents named in the line; the rest are counted (ctrl+n lists them all)."""


class AgentsFound:
    """The agents the engine can start where it runs, asked at start (None until it answers)."""

    def __init__(self) -> None:
        self.offers: tuple[AgentOffer, ...] | None = None

    async def look(self, engine: Engine) -> None:
        """Ask the engine (readiness looks on its disk, off its loop)."""
        offers = await attempt(log, "the list of agents", engine.call(verbs.AGENTS, verbs.NoArgs()))
        self.offers = () if isinstance(offers, Failed) else offers  # the welcome then says where to look instead

    def empty_text(self, view: SessionView, catalog: AgentCatalog) -> str:
        """What the session's chat says before its first message: a demo's welcome, else the usual."""
        config = catalog.agents.get(view.agent)
        return demo_welcome(self.offers) if config is not None and config.kind == "demo" else EMPTY_TEXT


def demo_welcome(offers: Sequence[AgentOffer] | None) -> str:
    """The demo's empty chat: what it is, then the real agents found ready (or that none are,
    or that they are still being looked for), and how to start a session on one."""
    if offers is None:
        return f"{DEMO_SAYS}\n\nLooking for the agents installed here…"
    real = [offer for offer in offers if offer.kind != "demo"]
    ready = [offer for offer in real if offer.availability is Availability.READY]
    signing = [offer for offer in real if offer.availability is Availability.NEEDS_SIGN_IN]
    lines = [DEMO_SAYS, ""]
    if ready:
        lines.append(f"Agents ready on this machine: {_named(ready)}.")
        lines.append("Press ctrl+n to start a session with one of them.")
    else:
        lines.append("No agent is ready on this machine yet.")
    if signing:
        lines.append(f"Installed, but no sign-in found: {_named(signing)} (ctrl+n says how).")
    if not ready:
        lines.append("ctrl+n lists the agents polypilot knows and what each needs (so does `polypilot agents`).")
    return "\n".join(lines)


def _named(offers: Sequence[AgentOffer]) -> str:
    names = [
        f"{offer.name} ({offer.title})" if offer.title and offer.title.lower() != offer.name.lower() else offer.name
        for offer in offers[:MAX_NAMED]
    ]
    more = len(offers) - MAX_NAMED
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")
