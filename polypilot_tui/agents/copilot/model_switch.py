"""The model of a Copilot session: ``session.model.getCurrent``, the client's model list, ``set_model``.

What the pinned CLI (1.0.102) does offline with a BYOK provider, run against the scripted
model server: ``client.list_models()`` fails ("Not authenticated"), the session's own
``session.model.list`` is empty (a BYOK registry has no catalog), ``getCurrent`` names the
configured model, and ``session.set_model(id)`` takes any id: the next request to the
provider names it (and the CLI reports ``session.model_change``). So with a provider the
list is honest about being short: the current and configured models, and any id may be typed.
Signed in to GitHub, the list is the CLI's catalog.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.copilot.sdk_errors import sdk_failures
from polypilot_tui.domain.model_choice import ModelChoices, ModelOption
from polypilot_tui.domain.text import one_line

log = logging.getLogger(__name__)

RPC_TIMEOUT = 30.0
MAX_OPTIONS = 200

BYOK_NOTE = "the provider's models are not listed by the Copilot CLI: type any model id the provider serves"


async def session_models(client: Any, session: Any, configured: str | None, byok: bool) -> ModelChoices:
    """The session's current model and the models the CLI lists (or, with BYOK, what is known)."""
    if client is None or session is None:
        raise BackendError("the Copilot session is not connected")
    try:
        current = str((await asyncio.wait_for(session.rpc.model.get_current(), RPC_TIMEOUT)).model_id or "")
    except sdk_failures() as exc:
        raise BackendError(f"the Copilot CLI did not say its model: {exc}") from exc
    options: list[ModelOption] = []
    note = ""
    if not byok:  # with a provider models.list always fails ("Not authenticated"): not asked
        try:
            listed = await asyncio.wait_for(client.list_models(), RPC_TIMEOUT)
            options = [ModelOption(one_line(m.id, 200), one_line(m.name or "", 120)) for m in listed[:MAX_OPTIONS]]
        except sdk_failures() as exc:  # not signed in either: the list is then ours
            log.info("copilot: no model list (%s)", exc)
    if not options:
        note = BYOK_NOTE if byok else "the Copilot CLI lists no models for this session"
    known = {o.id for o in options}
    for extra in (current, configured or ""):
        if extra and extra not in known:
            options.append(ModelOption(extra, "", "configured" if extra == configured else ""))
            known.add(extra)
    return ModelChoices(current, tuple(options), note, free_form=byok)


async def switch_model(session: Any, model_id: str) -> None:
    """``session.set_model``: the CLI uses ``model_id`` from the next message on."""
    if session is None:
        raise BackendError("the Copilot session is not connected")
    try:
        await asyncio.wait_for(session.set_model(model_id), RPC_TIMEOUT)
    except sdk_failures() as exc:
        reason = str(exc).rsplit("message: ", 1)[-1]  # drop the JSON-RPC preamble
        raise BackendError(f"the Copilot CLI refused the model {model_id!r}: {reason}") from exc
