"""A dashboard action that fails: the user reads why, whatever it was, and the log says
which it was — a refusal (:data:`REFUSALS`) is one warning line, anything else is a bug and
is logged in full (``infra.logs.log_failure``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import NamedTuple, TypeVar

from polypilot_tui.agents.base import BackendError
from polypilot_tui.engine.api import EngineError
from polypilot_tui.infra.logs import log_failure

T = TypeVar("T")

REFUSALS: tuple[type[Exception], ...] = (EngineError, BackendError, ValueError, OSError)
"""The engine said no (an engine in this process also with BackendError or ValueError, as the
service's answers do), or a file or folder is not there or not ours."""


class Failed(NamedTuple):
    """An action that did not happen, and what the user reads of why."""

    said: str


async def attempt(logger: logging.Logger, what: str, action: Awaitable[T]) -> T | Failed:
    """``action``'s result, or :class:`Failed` when it raised (logged as the module says)."""
    try:
        return await action
    except Exception as exc:  # noqa: BLE001 - an action's top level: shown to the user, never a crash
        log_failure(logger, what, exc, REFUSALS)
        return Failed(str(exc) or type(exc).__name__)
