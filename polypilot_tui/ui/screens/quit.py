"""Quitting a dashboard attached to the engine: leave the sessions running, or stop them too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from textual.binding import Binding

from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import plural, session_names
from polypilot_tui.ui.screens.confirm import Choice, ChoiceScreen

QuitChoice = Literal["leave", "stop"]


class QuitScreen(ChoiceScreen):
    """Dismisses with "leave" (quit, the engine keeps working), "stop" (the engine ends too) or
    False (stay). Cancel has the focus: an Enter typed by habit quits nothing."""

    BINDINGS = [
        Binding("escape,n", "answer(False)", "Cancel", show=False),
        Binding("y,q", "choose('leave')", "Quit", show=False),
        Binding("s", "choose('stop')", "Stop engine", show=False),
        Binding("left,right", "app.focus_next", show=False),
    ]

    def __init__(self, busy: Sequence[SessionView]) -> None:
        message = (
            f"{plural(len(busy), 'turn')} running ({session_names(busy)}). "
            f"{'It goes' if len(busy) == 1 else 'They go'} on in the engine after you quit, and polypilot "
            f"shows {'it' if len(busy) == 1 else 'them'} again when you come back. Stopping the engine ends them now "
            "(each is offered for resending next time)."
        )
        choices = (
            Choice("quit-stop", "Stop the engine too [s]", "stop", "error"),
            Choice("confirm-ok", "Quit [y]", "leave", "warning"),
        )
        super().__init__("Quit while turns run?", message, choices)
