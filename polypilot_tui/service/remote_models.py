"""The model calls of :class:`~polypilot_tui.service.remote.RemoteEngine` ("Switch model…").

Both are requests to the engine service (``POST /v1/sessions/{id}/models`` and ``…/model``):
listing may start the session's agent, so it is a command, not a read from the mirror. The
new model reaches the mirror the usual way, as the view change the switch causes.
"""

from __future__ import annotations

from typing import Any

from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.engine.codec import decode


class RemoteModels:
    """Mixed into RemoteEngine, whose ``_act`` sends a session command and returns its result."""

    async def _act(self, sid: str, action: str, **body: Any) -> Any:
        raise NotImplementedError  # RemoteEngine's

    async def models(self, session_id: str) -> ModelChoices:
        """The models the session's agent offers, as the engine listed them."""
        return decode(ModelChoices, await self._act(session_id, "models"))

    async def set_model(self, session_id: str, model_id: str) -> None:
        """Switch the session's model from its next turn on (refused while a turn runs)."""
        await self._act(session_id, "model", model=model_id)
