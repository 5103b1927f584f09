"""A question with choices (quit, merge a fan-out's attempt): each button and key closes it with
its own answer, and only once."""

from __future__ import annotations

import pytest
from textual.app import App

from polypilot_tui.ui.screens.pick_confirm import PickConfirmScreen
from polypilot_tui.ui.screens.quit import QuitScreen
from tests.ui.helpers import wait_for


class Asking(App[None]):
    """Pushes one question and keeps every answer it closed with."""

    def __init__(self, question: QuitScreen | PickConfirmScreen) -> None:
        super().__init__()
        self.question = question
        self.answers: list[object] = []

    def on_mount(self) -> None:
        self.push_screen(self.question, self.answers.append)


@pytest.mark.parametrize(
    ("make", "button", "answer"),
    [
        (lambda: QuitScreen([]), "#confirm-ok", "leave"),
        (lambda: QuitScreen([]), "#quit-stop", "stop"),
        (lambda: QuitScreen([]), "#confirm-cancel", False),
        (lambda: PickConfirmScreen("attempt", "main", 2), "#confirm-ok", "discard"),
        (lambda: PickConfirmScreen("attempt", "main", 2), "#pick-keep", "keep"),
        (lambda: PickConfirmScreen("attempt", "main", 2), "#confirm-cancel", False),
    ],
)
async def test_a_button_closes_with_its_answer(make: object, button: str, answer: object) -> None:
    app = Asking(make())  # type: ignore[operator]
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.screen is app.question, what="the question")
        await pilot.click(button)
        await wait_for(pilot, lambda: app.screen is not app.question, what="the question closed")
    assert app.answers == [answer]


@pytest.mark.parametrize(
    ("make", "key", "answer"),
    [
        (lambda: QuitScreen([]), "q", "leave"),
        (lambda: QuitScreen([]), "s", "stop"),
        (lambda: PickConfirmScreen("attempt", "main", 1), "k", "keep"),
        (lambda: PickConfirmScreen("attempt", "main", 1), "escape", False),
    ],
)
async def test_a_key_closes_with_its_answer(make: object, key: str, answer: object) -> None:
    app = Asking(make())  # type: ignore[operator]
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.screen is app.question, what="the question")
        await pilot.press(key)
        await wait_for(pilot, lambda: app.screen is not app.question, what="the question closed")
    assert app.answers == [answer]


async def test_no_other_attempt_offers_no_discard() -> None:
    app = Asking(PickConfirmScreen("attempt", "main", 0))
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.screen is app.question, what="the question")
        assert not app.question.query("#confirm-ok") and app.question.query("#pick-keep")
