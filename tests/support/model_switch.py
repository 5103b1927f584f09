"""Shared by the real-agent model-switch tests: which request carried a prompt, and its model."""

from __future__ import annotations

from typing import Any

from polypilot_tui.engine.api import Engine
from tests.support.model_script import offered_tools
from tests.support.model_server import ModelServer
from tests.support.waiting import until


def models_asked(server: ModelServer, since: int, word: str) -> list[str]:
    """The ``model`` of every agent-loop request (tools offered: not a title request) after
    the first ``since`` requests whose conversation mentions ``word``."""
    found: list[str] = []
    for request in server.model_requests()[since:]:
        body: Any = request.body if isinstance(request.body, dict) else {}
        if offered_tools(body) and word in request.text():
            found.append(str(body.get("model")))
    return found


async def turn_done(engine: Engine, sid: str, turns: int, timeout: float = 60.0) -> None:
    """Wait until the session has finished ``turns`` turns and is at rest."""
    await until(
        lambda: engine.view(sid).turns >= turns and not engine.view(sid).status.busy,
        timeout,
        lambda: f"turn {turns} to end (status {engine.view(sid).status.value})",
    )
