"""What a demo session says before its first message: that it is the demo, and which real
agents this machine has, with the key that starts one.

On a first start the dashboard opens on the built-in demo agent (it works everywhere, offline);
it must not pass for a real agent, and a new user must learn what is installed."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from polypilot_tui.config import AgentCatalog
from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.hosts import LOCAL
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
    """The agents each machine's engine can start, asked when first needed (Local's at start;
    a host's when one of its sessions is first shown; None until it answers)."""

    def __init__(self) -> None:
        self._found: dict[str, tuple[AgentOffer, ...]] = {}
        self._asked: set[str] = set()

    @property
    def offers(self) -> tuple[AgentOffer, ...] | None:
        """Local's agents (None until its engine answered)."""
        return self._found.get(LOCAL)

    def asked(self, host: str) -> bool:
        """``host``'s engine was asked (or is being asked)."""
        return host in self._asked

    async def look(self, engine: Engine, host: str = LOCAL) -> None:
        """Ask ``host``'s engine (readiness looks on its disk, off its loop)."""
        self._asked.add(host)
        offers = await attempt(log, "the list of agents", engine.call(verbs.AGENTS, verbs.NoArgs()))
        if not isinstance(offers, Failed):
            self._found[host] = offers
        elif host == LOCAL:
            self._found[host] = ()  # the welcome then says where to look instead
        else:
            self._asked.discard(host)  # a host that did not answer is asked again when next shown

    def empty_text(self, view: SessionView, catalog: AgentCatalog, host: str = LOCAL) -> str:
        """What the session's chat says before its first message: a demo's welcome, else the
        usual. ``catalog`` is Local's; a host's session is judged by that host's own agents."""
        if host == LOCAL:
            config = catalog.agents.get(view.agent)
            return demo_welcome(self.offers) if config is not None and config.kind == "demo" else EMPTY_TEXT
        offers = self._found.get(host)
        if offers is None or not any(o.name == view.agent and o.kind == "demo" for o in offers):
            return EMPTY_TEXT
        return demo_welcome(offers, host)


def demo_welcome(offers: Sequence[AgentOffer] | None, host: str = LOCAL) -> str:
    """The demo's empty chat: what it is, then the real agents found ready on its machine
    (``host``; or that none are, or that they are still being looked for), and how to start a
    session on one."""
    where = f"on {host}" if host else "on this machine"
    if offers is None:
        return f"{DEMO_SAYS}\n\nLooking for the agents installed {'there' if host else 'here'}…"
    real = [offer for offer in offers if offer.kind != "demo"]
    ready = [offer for offer in real if offer.availability is Availability.READY]
    signing = [offer for offer in real if offer.availability is Availability.NEEDS_SIGN_IN]
    lines = [DEMO_SAYS, ""]
    if ready:
        lines.append(f"Agents ready {where}: {_named(ready)}.")
        lines.append("Press ctrl+n to start a session with one of them.")
    else:
        lines.append(f"No agent is ready {where} yet.")
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
