"""Liveness facts a backend can give the watchdog cheaply (process alive, its log's age)."""

from __future__ import annotations

from polypilot_tui.domain.dataclass_on_use import dataclass


@dataclass(frozen=True)
class Probes:
    """Liveness facts a backend can supply cheaply; None means "unknown"."""

    agent_alive: bool | None = None
    """The agent process / connection is alive."""
    log_age: float | None = None
    """Seconds since the agent's own log (events.jsonl) was last written."""
    log_size: int | None = None
    """Size of that log in bytes."""
    log_last_type: str | None = None
    """Type of the last event in that log."""
