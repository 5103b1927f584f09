"""Shared pieces of the benchmarks: an agent that says nothing unless told, and a manager on it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from polypilot_tui.agents.base import EventSink, NullBackend
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import Clock
from polypilot_tui.engine.manager import SessionManager

AGENT = "bench"

Row = tuple[str, str, str]
"""One line of `make bench`'s table: what was measured, the figures of this run, the target ("" for none)."""


def ms_ratio(ours_ms: float, base_ms: float) -> str:
    """A measured figure of the table: ``"120 ms vs 100 ms: 1.20x"``."""
    return f"{ours_ms:.0f} ms vs {base_ms:.0f} ms: {ours_ms / base_ms:.2f}x"


QuietBackend = NullBackend
"""Accepts everything and emits nothing; a benchmark feeds events through ``sink``."""


def bench_settings(state_dir: Path, **overrides: Any) -> Settings:
    """Settings that ignore the developer's environment and record nothing."""
    return Settings.read(
        None,
        state_dir=state_dir,
        record=False,
        default_agent=AGENT,  # type: ignore[call-arg]
        **overrides,
    )


def bench_manager(
    settings: Settings, clock: Clock, backend: Callable[[EventSink], Any] = QuietBackend
) -> tuple[SessionManager, AgentCatalog]:
    """A manager whose only agent is ``backend``."""
    catalog = AgentCatalog({AGENT: AgentConfig(name=AGENT, kind="demo")})
    manager = SessionManager(settings, catalog, clock, backend_factory=lambda agent, sink, workdir: backend(sink))
    return manager, catalog


def proc_kib(pid: int, path: str, field: str) -> int:
    """A ``field`` in KiB from ``/proc/<pid>/<path>`` (``status`` VmRSS:, ``smaps_rollup`` Pss:),
    0 once the process has gone."""
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0
