"""After a connect: the model the user chose for the session is set again on the new agent session.

Agents do not all keep a switched model across a restart (a resumed Copilot session is
opened with the configured model again; the demo agent starts at its default), so the engine
keeps the choice (``Session.model_choice``, saved in the registry) and re-applies it on every
connect. One way for every agent: ask what runs, switch when it differs.
"""

from __future__ import annotations

import logging

from polypilot_tui.agents.base import AgentBackend
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line
from polypilot_tui.engine.context import AGENT_FAILURES

log = logging.getLogger(__name__)


async def restore_model_choice(session: Session, backend: AgentBackend, wall: float) -> None:
    """Switch the just-connected agent to ``session.model_choice`` if it runs another model.

    A refusal does not fail the connect: the session works on with the agent's model, and the
    chat says so (the choice is kept, so the next reconnect tries again).
    """
    choice = session.model_choice
    if not choice:
        return
    try:
        current = (await backend.models()).current
        if current != choice:
            await backend.set_model(choice)
    except AGENT_FAILURES as exc:  # the agent said no (or is gone): told, the connect stands
        log.warning("session %s: model %s not set again: %s", session.id, choice, exc)
        session.error(
            f"⚠ The model {one_line(choice, 80)} chosen for this session could not be set again after "
            f"connecting ({one_line(str(exc), 200)}); the agent runs its own model.",
            wall,
        )
        return
    session.model = choice
