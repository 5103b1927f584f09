"""Before a fan-out's attempt is merged: merge it, and discard the other attempts or keep them."""

from __future__ import annotations

from typing import Literal

from textual.binding import Binding

from polypilot_tui.domain.text import one_line
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.screens.confirm import Choice, ChoiceScreen

PickChoice = Literal["discard", "keep"]


class PickConfirmScreen(ChoiceScreen):
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
        choices = [Choice("pick-keep", "Merge only [k]", "keep")]
        if others:
            choices.append(Choice("confirm-ok", "Merge, discard others [y]", "discard", "warning"))
        super().__init__(f"Merge this attempt {into}?", message, choices)
