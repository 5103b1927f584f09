"""The real dashboard on real agents, for end-to-end tests driven by keys (Pilot).

The app is built exactly as ``polypilot`` builds it (SessionManager with the default
backend factory, persistence on a real state folder, the system clock); only the agents
catalog is the test's, pointing real agents at the scripted model server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from polypilot_tui.config import AgentCatalog, AgentConfig, Settings, demo_agent
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.ui.helpers import on_engine, screen_text, shaped, type_text, wait_for

#: Real agents start in seconds, slower beside other xdist workers on a 2-core box.
AGENT_WAIT = 90.0


def dashboard(state: Path, agents: dict[str, AgentConfig], default: str, **settings: Any) -> PolypilotApp:
    """The dashboard on ``agents`` (plus the demo agent), saving to ``state``."""
    options: dict[str, Any] = {"state_dir": state, "default_agent": default, "record": True, **settings}
    config = Settings.read(None, **options)
    catalog = AgentCatalog({"demo": demo_agent(), **agents})
    with shaped("local"):  # in process until the real-agent suites are run attached (issue 23)
        return on_engine(
            config,
            catalog,
            build_engine(config, catalog),
            theme_dirs=[BUNDLED_DIR],
            keymap_file=state / "no-keymap.toml",
            launch_folder=str(state.parent),  # the test's folder, not the checkout the tests run in
        )


async def send(pilot: Pilot[Any], text: str) -> None:
    """Type a prompt into the editor and press Enter."""
    await type_text(pilot, text)
    await pilot.press("enter")


async def see(pilot: Pilot[Any], *needles: str, timeout: float = AGENT_WAIT) -> str:
    """Wait until every needle is on the screen; returns the screen."""
    app = pilot.app

    def shown() -> bool:
        screen = screen_text(app)
        return all(needle in screen for needle in needles)

    try:
        await wait_for(pilot, shown, timeout=timeout, what=f"{needles!r} on screen")
    except AssertionError:
        raise AssertionError(f"{needles!r} not on screen within {timeout} s; the screen:\n{screen_text(app)}") from None
    return screen_text(app)


def status_line(app: PolypilotApp) -> str:
    """The chat pane's status line as drawn."""
    return str(app.pane.status.render())
