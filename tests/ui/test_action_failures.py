"""An action's failure in the dashboard: shown to the user whatever it was (a dialog or a toast
is the action's top level, it must go on); a refusal is a warning line in the log, anything
else a bug logged in full where it happened — the dashboard in process, the engine's service
attached (which answers it as "the engine failed") — which fails the test unless declared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.ui.screens.model_picker import ModelPickerScreen
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from tests.ui.helpers import demo_app, engine_of, notifications, wait_for


def failing(exc: Exception) -> Any:
    async def call(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return call


def shown(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def open_model_list(app: Any, pilot: Any) -> ModelPickerScreen:
    await wait_for(pilot, lambda: app.selected is not None)
    await pilot.press("f8")
    await wait_for(pilot, lambda: isinstance(app.screen, ModelPickerScreen), what="the picker")
    screen = app.screen
    assert isinstance(screen, ModelPickerScreen)
    await wait_for(pilot, lambda: "could not be listed" in shown(screen, "#model-status"), what="the failure")
    return screen


async def test_a_refused_model_list_is_shown_in_the_dialog_and_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        monkeypatch.setattr(engine_of(app), "models", failing(EngineError("the engine is gone")))
        screen = await open_model_list(app, pilot)
        assert "the engine is gone" in shown(screen, "#model-error")


@pytest.mark.expect_errors(r"(the model list|POST /v1/sessions/s1/models) failed\nKeyError: 'a bug'")
async def test_a_bug_behind_the_model_list_is_shown_in_the_dialog_and_logged_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        monkeypatch.setattr(engine_of(app), "models", failing(KeyError("a bug")))
        screen = await open_model_list(app, pilot)
        assert "a bug" in shown(screen, "#model-error") and app.screen is screen  # the dialog stays


@pytest.mark.expect_errors(r"(Reconnect|POST /v1/sessions/s1/reconnect) failed\nRuntimeError: a bug in reconnect")
async def test_a_bug_behind_a_key_is_a_toast_and_logged_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected is not None)
        monkeypatch.setattr(engine_of(app), "reconnect", failing(RuntimeError("a bug in reconnect")))
        await pilot.press("ctrl+r")
        await wait_for(
            pilot,
            lambda: any("Reconnect failed" in n and "a bug in reconnect" in n for n in notifications(app)),
        )


@pytest.mark.expect_errors(
    r"(the new session's check|POST /v1/sessions/check) failed\nRuntimeError: a bug in the check"
)
async def test_a_bug_in_the_new_session_check_is_shown_in_the_dialog_and_logged_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        monkeypatch.setattr(engine_of(app), "check_new_session", failing(RuntimeError("a bug in the check")))
        await wait_for(pilot, lambda: app.selected is not None)
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the dialog")
        screen = app.screen
        assert isinstance(screen, NewSessionScreen)
        await pilot.click("#new-session-create")
        await wait_for(pilot, lambda: "a bug in the check" in shown(screen, "#new-session-error"))
        assert app.screen is screen and not screen.checking  # still open, and ready to try again
        request = screen.request()
        assert isinstance(request, verbs.NewSession)


@pytest.mark.expect_errors(r"(a new session on 'demo'|POST /v1/sessions) failed\nRuntimeError: a bug in new_session")
async def test_a_bug_in_starting_a_session_is_a_toast_and_logged_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected is not None)
        monkeypatch.setattr(engine_of(app), "new_session", failing(RuntimeError("a bug in new_session")))
        assert await app.dashboard.add_session(verbs.NewSession("demo")) is None
        await wait_for(pilot, lambda: any("a bug in new_session" in n for n in notifications(app)))
