"""Starting the dashboard: the agents catalog, the engine, persistence, then the app."""

from __future__ import annotations

import os

from polypilot_tui.config import DEMO_AGENT, AgentCatalog, AgentsFileError, Settings, demo_agent, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui.app import PolypilotApp


def build_catalog(settings: Settings) -> tuple[AgentCatalog, list[str]]:
    """The agents to offer, and notes for the user (a broken agents file falls back to demo)."""
    try:
        catalog = load_agents(settings.agents_file)
    except AgentsFileError as exc:
        return AgentCatalog({DEMO_AGENT: demo_agent()}), [f"{exc} — continuing with the demo agent only."]
    return catalog, [f"Agents file entry skipped: {problem}" for problem in catalog.problems]


def run_app(settings: Settings) -> int:
    """Run the dashboard until the user quits; returns the exit code (logging: cli.py)."""
    catalog, notes = build_catalog(settings)
    clock = SystemClock()
    manager = SessionManager(settings, catalog, clock)
    from polypilot_tui.engine.persistence import attach_persistence
    app = PolypilotApp(settings, catalog, manager, clock, notes=notes, attach=attach_persistence)
    # Textual sizes the screen with shutil.get_terminal_size(), which prefers COLUMNS/LINES
    # over the terminal itself: an exported COLUMNS=80 pinned the dashboard to 80 columns
    # in a wider terminal, resize or not.
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
    result = app.run()
    return result if isinstance(result, int) else (app.return_code or 0)
