"""Before a fan-out's attempt is merged: merge it, and discard the other attempts or keep them."""

from __future__ import annotations

from typing import Literal

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Static

from polypilot_tui.domain.text import one_line
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.screens.confirm import ConfirmScreen

PickChoice = Literal["discard", "keep"]


class PickConfirmScreen(ConfirmScreen):
    """Dismisses with "discard" (merge, then discard the others), "keep" (merge only) or False
    (nothing). Cancel has the focus: an Enter typed by habit merges nothing."""

    DEFAULT_CSS = """
    PickConfirmScreen #confirm-dialog {
        width: 80;  /* three buttons: the third, with its key, must not be cut */
    }
    """

    BINDINGS = [
        Binding("escape,n", "answer(False)", "Cancel", show=False),
        Binding("y", "choose('discard')", "Merge and discard the others", show=False),
        Binding("k", "choose('keep')", "Merge, keep the others", show=False),
        Binding("left,right", "app.focus_next", show=False),
    ]

    def __init__(self, name: str, base: str, others: int) -> None:
        into = f"into {base}" if base else "into its base"
        message = f"“{one_line(name, 60)}” is merged {into} (its uncommitted work committed first)."
        if others:
            message += (
                f" Discarding the {plural(others, 'other attempt')} removes {'its' if others == 1 else 'their'} "
                "worktree and branch; one with work that would be lost is kept, and named."
            )
        super().__init__(f"Merge this attempt {into}?", message, "Merge, discard others")
        self._others = others

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(self._title, id="confirm-title", markup=False)
            yield Static(self._message, id="confirm-message", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button(Content("Cancel [n]"), id="confirm-cancel", compact=True)
                yield Button(Content("Merge only [k]"), id="pick-keep", compact=True)
                if self._others:
                    yield Button(Content(f"{self._confirm} [y]"), id="confirm-ok", variant="warning", compact=True)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        choice = {"confirm-ok": "discard", "pick-keep": "keep"}.get(event.button.id or "")
        self.dismiss(choice or False)  # type: ignore[arg-type]

    def action_choose(self, choice: PickChoice) -> None:
        """Close the dialog with ``choice``."""
        self.dismiss(choice)  # type: ignore[arg-type]
