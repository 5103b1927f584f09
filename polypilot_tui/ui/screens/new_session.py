"""Pick the agent for a new session."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


@dataclass(frozen=True)
class AgentChoice:
    """One agent offered: its name, its kind, and why it cannot start here (or None)."""

    name: str
    kind: str
    cannot_start: str | None = None


class NewSessionScreen(ModalScreen[str | None]):
    """A modal list of agents; Enter picks one, Escape cancels. An agent that cannot start
    here (its command not installed, its key not set) is listed, greyed out, with the reason."""

    CSS_PATH = "new_session.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, agents: list[AgentChoice], default: str | None = None) -> None:
        super().__init__()
        self._agents = agents
        self._default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="new-session-dialog"):
            yield Static("New session — pick an agent", id="new-session-title", markup=False)
            yield OptionList(*[self._option(agent) for agent in self._agents], id="agent-list")
            hint = "Enter to start · Esc to cancel"
            if any(agent.cannot_start for agent in self._agents):
                hint += " · `polypilot agents` says what each needs"
            yield Static(hint, id="new-session-hint", markup=False)

    @staticmethod
    def _option(agent: AgentChoice) -> Option:
        label = Content(f"{agent.name}  ({agent.kind})")
        if agent.cannot_start:
            label = Content.assemble(label, "\n", (f"  ✗ {agent.cannot_start}", "$text-error"))
        return Option(label, id=agent.name, disabled=agent.cannot_start is not None)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        startable = [agent.name for agent in self._agents if not agent.cannot_start]
        if startable:
            pick = self._default if self._default in startable else startable[0]
            options.highlighted = [agent.name for agent in self._agents].index(pick)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
