"""``polypilot agents``: every agent polypilot knows, and what each needs to run here."""

from __future__ import annotations

from polypilot_tui.agents.readiness import readiness
from polypilot_tui.commands.output import EXIT_OK, say
from polypilot_tui.config import AgentCatalog
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.engine.codec import encode


def print_agents(catalog: AgentCatalog, json_mode: bool = False) -> int:
    """A line per agent: name, kind, ``ready`` / ``not installed`` / ``needs sign-in`` /
    ``no key``, then where its command is or what it needs (the install or sign-in command)."""
    for problem in catalog.problems:
        say(f"skipped: {problem}", err=True)
    offers = [readiness(agent) for agent in catalog.agents.values()]
    if json_mode:
        say(dump_json([encode(offer) for offer in offers]))
        return EXIT_OK
    for offer in offers:
        what = offer.where if offer.ready else f"{offer.problem}"
        if offer.ready and offer.title and offer.title.lower() != offer.name.lower():
            what = f"{offer.where}  ({offer.title})"
        say(f"{offer.name:<14} {offer.kind:<8} {offer.availability.value:<14} {what}")
    return EXIT_OK
