"""What a demo session says before its first message: that it is the demo, and which real
agents this machine has, with the key that starts one.

On a first start the dashboard opens on the built-in demo agent (it works everywhere, offline);
it must not pass for a real agent, and a new user must learn what is installed."""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Sequence
from typing import Any

from polypilot_tui.config import AgentCatalog
from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.clock import Clock
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
ASK_AGAIN = 30.0
"""Seconds before a host whose engine did not say its agents is asked again."""
MAX_NAMED = 6
"""Agents named in the line; the rest are counted (ctrl+n lists them all)."""


class AgentsFound:
    """The agents each machine's engine can start, asked when first needed (Local's at start;
    a host's when one of its sessions is first shown; None until it answers). A host that did
    not answer is asked again :data:`ASK_AGAIN` seconds later, not at every redraw."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._found: dict[str, tuple[AgentOffer, ...]] = {}
        self._asking: set[str] = set()
        self._retry_at: dict[str, float] = {}

    @property
    def offers(self) -> tuple[AgentOffer, ...] | None:
        """Local's agents (None until its engine answered)."""
        return self._found.get(LOCAL)

    def due(self, host: str) -> bool:
        """``host``'s engine is to be asked now: it has not answered, is not being asked, and
        did not fail to answer within the last :data:`ASK_AGAIN` seconds."""
        if host in self._found or host in self._asking:
            return False
        return self._retry_at.get(host, float("-inf")) <= self._clock.now()

    def look(self, engine: Engine, host: str = LOCAL) -> Coroutine[Any, Any, bool]:
        """Ask ``host``'s engine (readiness looks on its disk, off its loop): ``host`` counts as
        asked from this call on (a second redraw before the answer asks nothing); the
        coroutine is True when it answered."""
        self._asking.add(host)
        return self._ask(engine, host)

    async def _ask(self, engine: Engine, host: str) -> bool:
        try:
            offers = await attempt(log, "the list of agents", engine.call(verbs.AGENTS, verbs.NoArgs()))
        finally:
            self._asking.discard(host)
        if not isinstance(offers, Failed):
            self._found[host] = offers
            self._retry_at.pop(host, None)
            return True
        if host == LOCAL:
            self._found[host] = ()  # the welcome then says where to look instead
            return True
        self._retry_at[host] = self._clock.now() + ASK_AGAIN
        return False

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
