"""Server-Sent Events as the engine writes them, read back by the tests (raw frames, comments too)."""

from __future__ import annotations

from typing import Any

from polypilot_tui.domain.safe_json import load_json

KEEPALIVE = ": keepalive"


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """Each complete event of ``text`` as (event, data); a comment line as (":", its text)."""
    events: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        if not block:
            continue
        kind, data = "message", None
        for line in block.split("\n"):
            if line.startswith(":"):
                events.append((":", line))
            elif line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: "):
                data = load_json(line[len("data: ") :], kind)
        if data is not None:
            events.append((kind, data))
    return events
