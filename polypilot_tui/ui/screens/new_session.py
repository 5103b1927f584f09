"""Pick the agent for a new session."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class NewSessionScreen(ModalScreen[str | None]):
    """A modal list of agents; Enter picks one, Escape cancels."""

    CSS_PATH = "new_session.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, agents: list[tuple[str, str]], default: str | None = None) -> None:
        super().__init__()
        self._agents = agents
        self._default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="new-session-dialog"):
            yield Static("New session — pick an agent", id="new-session-title", markup=False)
            yield OptionList(*[Option(Content(f"{name}  ({kind})"), id=name) for name, kind in self._agents],
                             id="agent-list")
            yield Static("Enter to start · Esc to cancel", id="new-session-hint", markup=False)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = [name for name, _ in self._agents]
        options.highlighted = names.index(self._default) if self._default in names else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
