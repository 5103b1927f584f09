"""Listing and switching a session's model (the engine side of "Switch model…").

A switch is refused while a turn runs: the agents differ in what they do with a mid-turn
switch (the Copilot CLI defers it to its next model call, an ACP agent may apply it to the
running prompt's next request or not at all), so the one rule that means the same on every
agent is "between turns". The choice is kept on the session (``model_choice``, saved with
the registry) and set again after every connect (:mod:`polypilot_tui.engine.model_restore`).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from polypilot_tui.agents.base import AgentBackend, BackendError
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.domain.text import one_line
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.manager import SessionManager

BUSY = "a turn is running: switch the model when it has ended (or Stop it first)"


class ModelDesk:
    """The models of the manager's sessions: list them, switch one."""

    def __init__(self, manager: SessionManager) -> None:
        self._manager = manager
        # One switch of a session at a time: a failed one's rollback must not undo another's.
        self._switching: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def models(self, session_id: str) -> ModelChoices:
        """What the session's agent offers (its agent is connected first, if it is not)."""
        return (await self._listed(session_id))[1]

    async def _listed(self, session_id: str) -> tuple[AgentBackend, ModelChoices]:
        try:
            backend = await self._manager.connect(session_id)
            return backend, await backend.models()
        except BackendError as exc:
            raise EngineError(f"the models could not be listed: {exc}") from None

    async def set_model(self, session_id: str, model_id: str) -> None:
        """Switch the session to ``model_id`` from its next turn on; refused while a turn runs."""
        async with self._switching[session_id]:
            await self._switch(session_id, model_id)

    async def _switch(self, session_id: str, model_id: str) -> None:
        manager = self._manager
        model_id = model_id.strip()
        if not model_id:
            raise EngineError("name a model")
        if manager.view(session_id).status.busy:
            raise EngineError(BUSY)
        backend, choices = await self._listed(session_id)
        if not (choices.free_form or choices.offers(model_id)):
            offered = ", ".join(o.id for o in choices.options[:12]) or "none"
            raise EngineError(f"the agent does not offer the model {one_line(model_id, 80)!r} (it offers: {offered})")
        session = manager.session(session_id)
        if manager.view(session_id).status.busy:  # a queued prompt may have started meanwhile
            raise EngineError(BUSY)
        previous = session.model_choice
        session.model_choice = model_id  # before the event below: it is saved with that change
        try:
            await backend.set_model(model_id)
        except BackendError as exc:
            session.model_choice = previous
            raise EngineError(str(exc)) from None
        if model_id != choices.current:
            session.system(f"Model switched to {model_id} (from the next turn).", manager.clock.wall())
        manager.apply(
            session_id,
            AgentEvent(EventType.SESSION_MODEL_CHANGE, {"newModel": model_id, "previousModel": choices.current}),
        )
