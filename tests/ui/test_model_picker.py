"""The "Switch model…" dialog (F8, ctrl+p) on the demo agent's three fake models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.command import CommandList
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from polypilot_tui.engine import verbs
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.screens.model_picker import ModelPickerScreen
from tests.ui.helpers import demo_app, wait_for


async def open_picker(pilot: Pilot[Any], app: PolypilotApp) -> ModelPickerScreen:
    await wait_for(pilot, lambda: app.selected is not None)
    await pilot.press("f8")  # with the prompt editor focused: F6 and F7 are the editor's
    await wait_for(pilot, lambda: isinstance(app.screen, ModelPickerScreen), what="the picker")
    screen = app.screen
    assert isinstance(screen, ModelPickerScreen)
    options = screen.query_one("#model-list", OptionList)
    await wait_for(pilot, lambda: options.option_count == 3, what="the models listed")
    return screen


def lines(screen: ModelPickerScreen) -> list[str]:
    options = screen.query_one("#model-list", OptionList)
    return [str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)]


async def test_f8_lists_the_models_with_the_current_one_marked_and_enter_switches(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_picker(pilot, app)
        assert lines(screen) == ["● demo-model · Demo", "○ demo-fast · Demo Fast", "○ demo-deep · Demo Deep"]
        assert screen.query_one("#model-list", OptionList).highlighted == 0
        assert "Now: demo-model" in str(screen.query_one("#model-status", Static).render())
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModelPickerScreen), what="the picker closed")
        assert app.engine.view("s1").model == "demo-fast"
        screen = await open_picker(pilot, app)
        assert lines(screen)[1].startswith("● demo-fast")
        assert screen.query_one("#model-list", OptionList).highlighted == 1


async def test_escape_cancels_and_a_refusal_is_shown_in_the_dialog(tmp_path: Path) -> None:
    app = demo_app(tmp_path, speed=1.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_picker(pilot, app)
        await pilot.press("down", "escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModelPickerScreen))
        assert app.engine.view("s1").model == "demo-model"
        await app.engine.call(verbs.SEND, verbs.Send("s1", "!slow"))
        await wait_for(pilot, lambda: app.engine.view("s1").status.busy, what="the turn")
        screen = await open_picker(pilot, app)
        await pilot.press("down", "enter")
        error = screen.query_one("#model-error", Static)
        await wait_for(pilot, lambda: error.display, what="the error")
        assert "a turn is running" in str(error.render())
        assert app.screen is screen and app.engine.view("s1").model == "demo-model"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModelPickerScreen))


async def test_the_command_palette_offers_it(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected is not None)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "F8" in commands["Switch model…"].help
        await pilot.press("ctrl+p")
        await pilot.press(*"switch model")
        found = lambda: app.screen.query(CommandList) and app.screen.query_one(CommandList).option_count > 0  # noqa: E731
        await wait_for(pilot, found, what="the command found")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPickerScreen), what="the picker")
