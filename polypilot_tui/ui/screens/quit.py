"""Quitting a dashboard attached to the engine: leave the sessions running, or stop them too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Static

from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.screens.confirm import ConfirmScreen

QuitChoice = Literal["leave", "stop"]


def turn_names(busy: Sequence[SessionView]) -> str:
    """The first few busy sessions' names, for a question about quitting."""
    return ", ".join(one_line(v.name, 30) for v in busy[:4]) + (" …" if len(busy) > 4 else "")


class QuitScreen(ConfirmScreen):
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
            f"{plural(len(busy), 'turn')} running ({turn_names(busy)}). "
            f"{'It goes' if len(busy) == 1 else 'They go'} on in the engine after you quit, and polypilot "
            f"shows {'it' if len(busy) == 1 else 'them'} again when you come back. Stopping the engine ends them now "
            "(each is offered for resending next time)."
        )
        super().__init__("Quit while turns run?", message, "Quit")

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(self._title, id="confirm-title", markup=False)
            yield Static(self._message, id="confirm-message", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button(Content("Cancel [n]"), id="confirm-cancel", compact=True)
                yield Button(Content("Stop the engine too [s]"), id="quit-stop", variant="error", compact=True)
                yield Button(Content("Quit [y]"), id="confirm-ok", variant="warning", compact=True)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        choice = {"confirm-ok": "leave", "quit-stop": "stop"}.get(event.button.id or "")
        self.dismiss(choice or False)  # type: ignore[arg-type]

    def action_choose(self, choice: QuitChoice) -> None:
        """Close the dialog with ``choice``."""
        self.dismiss(choice)  # type: ignore[arg-type]
