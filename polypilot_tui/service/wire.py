"""The engine service's wire: paths, and what travels as JSON besides the change records.

Requests and answers are JSON over HTTP on a Unix socket in the state folder; the live
stream is Server-Sent Events, one JSON object per event (see docs/engine-api.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.codec import decode, encode

API = "/v1"
SOCKET_NAME = "engine.sock"
SOCKET_PATH_MAX = 107
"""Bytes a Unix socket path may have on Linux (sun_path holds 108 with the NUL)."""


def socket_path(state_dir: Path | str) -> Path:
    """Where the engine of a state folder listens."""
    return Path(state_dir) / SOCKET_NAME


def session_state(view: SessionView, history: Sequence[ChatItem] | None, streaming: str) -> dict[str, Any]:
    """One session: its view, the reply streaming now and, unless None, its history (a client
    that attaches to hundreds of sessions fetches a history when it shows it)."""
    state = {"view": encode(view), "streaming": streaming}
    if history is not None:
        state["history"] = encode(tuple(history), tuple[ChatItem, ...])
    return state


def view_from_json(obj: Any) -> SessionView:
    """A view as :func:`session_state` or a view event sent it; ValueError on any other shape."""
    return decode(SessionView, obj, "view")


def items_from_json(obj: Any) -> list[ChatItem]:
    """History rows; ValueError on any other shape."""
    return list(decode(tuple[ChatItem, ...], obj, "history"))
