"""An attached dashboard reads the times in the engine's views against the engine's clock:
over SSH that is another machine's monotonic clock, which this one's says nothing about."""

from __future__ import annotations

import time
from pathlib import Path

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.ui.launch import dashboard_on
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.support.engine_service import ServedEngine
from tests.ui.helpers import screen_text, type_text, wait_for

DAY = 86_400.0


class ElsewhereClock(SystemClock):
    """The monotonic clock of a machine up a day less than this one."""

    def now(self) -> float:
        return time.monotonic() - DAY


async def test_an_attached_dashboard_reads_times_on_the_engines_clock(tmp_path: Path) -> None:
    settings = Settings.read(None, state_dir=tmp_path, demo_speed=20, record=False)
    catalog = load_agents(None)
    engine = build_engine(settings, catalog, ElsewhereClock(), persist=False)
    served = ServedEngine(engine)

    async def detach() -> None:
        await engine.close()
        await served.close()

    app = dashboard_on(
        settings,
        catalog,
        RemoteEngine(served.open, on_detach=detach),  # its clock as ``polypilot --ssh`` has it
        theme_dirs=[BUNDLED_DIR],
        keymap_file=tmp_path / "no-keymap.toml",
        launch_folder=str(tmp_path),
    )
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.selected is not None, what="the first session")
        sid = app.selected
        assert sid is not None
        await type_text(pilot, "hello")
        await pilot.press("enter")
        view = app.engine.view
        await wait_for(pilot, lambda: view(sid).turns == 1 and not view(sid).status.busy, what="the turn's end")
        await app.dashboard.heartbeat()  # the labels redrawn at this moment
        shown = screen_text(app)
        assert "Idle · 1 turn" in shown
        assert "last activity" not in shown and "d ago" not in shown, shown  # not "a day ago": just now
        assert abs(app.clock.now() - engine.clock.now()) < 5
