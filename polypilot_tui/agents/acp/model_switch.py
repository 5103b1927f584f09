"""The model of an ACP session: read from its ``configOptions``, switched with ``session/set_config_option``.

What the pinned agents answer (run against the scripted model server): opencode 1.18.33 and
codex-acp 0.16.0 both put a ``select`` option of category ``model`` (id ``model``) in the
answer to ``session/new``, ``session/load`` and ``session/resume``; neither sends the older,
unstable ``models`` field (``session/set_model``), which agent-client-protocol 0.12.1 does not
model either. So the select is the one way: the SDK's ``set_config_option`` switches it, and
its answer carries the options again (the new current value included).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import SessionConfigOptionSelect, SessionConfigSelectGroup, SessionConfigSelectOption
from pydantic import ValidationError

from polypilot_tui.agents.acp.errors import request_error_text
from polypilot_tui.agents.acp.link import AgentLink
from polypilot_tui.agents.base import BackendError
from polypilot_tui.domain.model_choice import ModelChoices, ModelOption
from polypilot_tui.domain.text import one_line

MODEL_CATEGORY = "model"
MAX_OPTIONS = 200
"""An agent's list is untrusted: the picker shows at most this many."""


def model_select(config_options: Sequence[Any] | None) -> SessionConfigOptionSelect | None:
    """The session's model select among its config options (category ``model``, else id ``model``)."""
    selects = [o for o in config_options or () if isinstance(o, SessionConfigOptionSelect)]
    for select in selects:
        if select.category == MODEL_CATEGORY:
            return select
    return next((s for s in selects if s.id == MODEL_CATEGORY), None)


def _flat(options: Sequence[SessionConfigSelectOption | SessionConfigSelectGroup]) -> list[SessionConfigSelectOption]:
    flat: list[SessionConfigSelectOption] = []
    for option in options:
        flat.extend(option.options if isinstance(option, SessionConfigSelectGroup) else (option,))
    return flat


class SessionModels:
    """The model select the agent last reported for the open session, and the switch."""

    def __init__(self, link: AgentLink) -> None:
        self._link = link
        self._select: SessionConfigOptionSelect | None = None

    def update(self, config_options: Sequence[Any] | None) -> None:
        """Take the options of a session answer (new, load, resume, set_config_option)."""
        self._select = model_select(config_options)

    def update_from_wire(self, raw: Any) -> bool:
        """Take a ``config_option_update`` as it arrived (JSON); True when the model changed."""
        if not isinstance(raw, list):
            return False
        selects = []
        for item in raw:
            if isinstance(item, dict) and item.get("type") == "select":
                try:
                    selects.append(SessionConfigOptionSelect.model_validate(item))
                except ValidationError:
                    continue  # an option we cannot read is not a model we can show
        before = self.current()
        select = model_select(selects)
        if select is not None:
            self._select = select
        return self.current() != before

    def current(self) -> str:
        """The model the agent runs now ("" when it offers no model select)."""
        return self._select.current_value if self._select is not None else ""

    def choices(self) -> ModelChoices:
        """What the picker lists."""
        select = self._select
        if select is None:
            return ModelChoices(note="this agent offers no model choice (no model option in its session answer)")
        options = tuple(
            ModelOption(one_line(o.value, 200), one_line(o.name, 120), one_line(o.description or "", 200))
            for o in _flat(select.options)[:MAX_OPTIONS]
        )
        return ModelChoices(select.current_value, options)

    async def switch(self, model_id: str) -> None:
        """``session/set_config_option`` on the model select; the agent's answer is taken as the truth."""
        select, conn, session_id = self._select, self._link.conn, self._link.session_id
        if select is None:
            raise BackendError("this agent offers no model choice")
        if conn is None or session_id is None or not self._link.ready:
            raise BackendError("the ACP agent is not connected (reconnect the session)")
        try:
            answer = await conn.set_config_option(config_id=select.id, session_id=session_id, value=model_id)
        except RequestError as exc:
            raise BackendError(f"the agent refused the model {model_id!r}: {request_error_text(exc)}") from None
        except ConnectionError:
            raise BackendError("the agent's connection was lost during the model switch") from None
        self.update(answer.config_options)
        if self.current() != model_id:
            raise BackendError(f"the agent kept the model {self.current()!r} instead of {model_id!r}")
