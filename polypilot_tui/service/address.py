"""Where an engine service listens: its Unix socket in the state folder, and the API's prefix.

Requests and answers are JSON over HTTP on that socket (their JSON form:
:mod:`polypilot_tui.engine.codec`); the live stream is Server-Sent Events, one JSON object per
event (see docs/engine-api.md).
"""

from __future__ import annotations

from pathlib import Path

API = "/v1"
SOCKET_NAME = "engine.sock"
SOCKET_PATH_MAX = 107
"""Bytes a Unix socket path may have on Linux (sun_path holds 108 with the NUL)."""


def socket_path(state_dir: Path | str) -> Path:
    """Where the engine of a state folder listens."""
    return Path(state_dir) / SOCKET_NAME
