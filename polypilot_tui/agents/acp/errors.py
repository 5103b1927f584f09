"""An ACP agent's JSON-RPC errors, in words a user can act on."""

from __future__ import annotations

from collections.abc import Mapping

from acp import RequestError

from polypilot_tui.agents.base import BackendError


def request_error_text(exc: RequestError) -> str:
    """An agent's JSON-RPC error in words: its own message first, the protocol's label after.

    codex sends ``Internal error`` with ``data={"message": "stream disconnected …"}``: the
    data's message is what the user needs to read.
    """
    data = exc.data
    message = data.get("message") if isinstance(data, Mapping) else data if isinstance(data, str) else None
    label = str(exc) or "agent error"
    if isinstance(message, str) and message.strip():
        return f"{message.strip()} ({label})"
    return f"{label} ({data})" if data else label


class Refused(BackendError):
    """The agent answered a request with a JSON-RPC error (the connection is fine)."""
