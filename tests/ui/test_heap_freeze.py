"""The real launch freezes the heap once, after its first frame (ui/app.py
``freeze_heap_after_first_frame``, asked by ui/launch.py); a test's app never does (its process
would keep every earlier test's garbage). Counted, not timed: the timings are bench/'s."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

from textual.drivers.headless_driver import HeadlessDriver

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui import app as ui_app
from polypilot_tui.ui import launch
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.support.waiting import until
from tests.ui.helpers import demo_app, wait_for


class FramesCounted(PolypilotApp):
    """The dashboard, counting the frames it draws and how many were drawn when it froze."""

    # Textual resolves CSS paths next to the subclass's module: point them back at the app's.
    CSS_PATH = [str(Path(ui_app.__file__).parent / path) for path in PolypilotApp.CSS_PATH]  # type: ignore[union-attr]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frames = 0
        self.frames_at_freeze: list[int] = []

    def _display(self, screen: Any, renderable: Any) -> None:
        if renderable is not None:
            self.frames += 1
        super()._display(screen, renderable)

    def _heap_frozen(self) -> None:
        self.frames_at_freeze.append(self.frames)
        super()._heap_frozen()


async def test_the_launch_freezes_the_heap_once_after_its_first_frame(tmp_path: Path) -> None:
    assert gc.get_freeze_count() == 0  # no earlier test left it frozen
    settings = Settings.read(None, state_dir=tmp_path, record=False)
    catalog = load_agents(None)
    engine = LocalEngine(SessionManager(settings, catalog, SystemClock()))
    app = FramesCounted(
        settings, catalog, engine, engine.clock, theme_dirs=[BUNDLED_DIR], keymap_file=tmp_path / "no-keymap.toml"
    )
    app.driver_class = HeadlessDriver  # the launch's own path, without a terminal

    async def quit_later() -> int:
        await until(lambda: app.heap_freezes, 20, "the freeze")
        for _ in range(2):  # frames after it (made here: a start that settles draws none by itself)
            drawn = app.frames
            app.screen.refresh()
            await until(lambda drawn=drawn: app.frames > drawn, 20, "a frame after the freeze")
        frozen = gc.get_freeze_count()
        app.exit()
        return frozen

    try:
        code, frozen = await asyncio.gather(launch._run(lambda: app), quit_later())  # noqa: SLF001
        assert code == 0
        assert app.heap_freezes == 1 and len(app.frames_at_freeze) == 1  # once, later frames or not
        assert app.frames_at_freeze[0] >= 1  # after the first frame was drawn
        assert frozen > 0
    finally:
        gc.unfreeze()


async def test_a_test_app_never_freezes_the_heap(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1", what="the first session")
        await pilot.pause()
        assert app.heap_freezes == 0 and gc.get_freeze_count() == 0
