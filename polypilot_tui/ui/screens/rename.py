"""A one-line dialog to rename a session."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from polypilot_tui.domain.limits import NAME_CHARS


class RenameScreen(ModalScreen[str | None]):
    """Dismisses with the new name on Enter, or None on Escape."""

    DEFAULT_CSS = """
    RenameScreen {
        align: center middle;
        background: $background 60%;
    }
    RenameScreen #rename-dialog {
        width: 64;
        max-width: 90%;
        height: auto;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    RenameScreen #rename-hint {
        color: $text-muted;
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", show=False)]

    def __init__(self, name: str) -> None:
        super().__init__()
        self._current = name

    def compose(self) -> ComposeResult:
        with Vertical(id="rename-dialog"):
            yield Static("Rename session", markup=False)
            yield Input(self._current, id="rename-input", max_length=NAME_CHARS)
            yield Static("Enter renames · Esc cancels", id="rename-hint", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
