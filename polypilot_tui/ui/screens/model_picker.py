"""The "Switch model…" dialog: the models the session's agent offers, the current one marked.

The dialog receives two callables (the app's, which go to the engine): ``load`` lists the
models, ``switch`` switches; it never reaches the engine itself. A failure of either is shown
in the dialog, which stays open; a switch that worked closes it with the model's id.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from polypilot_tui.domain.model_choice import ModelChoices, ModelOption
from polypilot_tui.ui.action_failures import Failed, attempt

log = logging.getLogger(__name__)

Load = Callable[[], Awaitable[ModelChoices]]
Switch = Callable[[str], Awaitable[None]]


CURRENT = "● "
OTHER = "○ "


class ModelPickerScreen(ModalScreen[str | None]):
    """Enter on a model switches to it (the dialog closes when the engine took it); Esc cancels."""

    DEFAULT_CSS = """
    ModelPickerScreen {
        align: center middle;
        background: $background 60%;
    }
    ModelPickerScreen #model-dialog {
        width: 72;
        max-width: 90%;
        height: auto;
        max-height: 80%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    ModelPickerScreen #model-list {
        height: auto;
        max-height: 16;
    }
    ModelPickerScreen .model-note {
        color: $text-muted;
    }
    ModelPickerScreen #model-error {
        color: $text-error;
        display: none;
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", show=False)]

    def __init__(self, session_name: str, load: Load, switch: Switch) -> None:
        super().__init__()
        self._session_name = session_name
        self._load = load
        self._switch = switch
        self._choices: ModelChoices | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="model-dialog"):
            yield Static(Content(f"Switch model · {self._session_name}"))
            yield Static("Asking the agent which models it offers…", id="model-status", classes="model-note")
            yield OptionList(id="model-list")
            yield Input(placeholder="or type a model id and press Enter", id="model-input", max_length=200)
            yield Static("", id="model-error", markup=False)
            yield Static("Enter switches (from the next turn) · Esc cancels", classes="model-note", markup=False)

    def on_mount(self) -> None:
        self.query_one("#model-list", OptionList).display = False
        self.query_one("#model-input", Input).display = False
        self.run_worker(self._list(), group="models", exclusive=True, exit_on_error=False)

    async def _list(self) -> None:
        choices = await attempt(log, "the model list", self._load())
        if isinstance(choices, Failed):  # shown in the dialog
            self.query_one("#model-status", Static).update(Content("The models could not be listed."))
            self._error(choices.said)
            return
        self.show(choices)

    def show(self, choices: ModelChoices) -> None:
        """Fill the list from ``choices`` (the current model first marked, then highlighted)."""
        self._choices = choices
        self._status(choices)
        options = self.query_one("#model-list", OptionList)
        options.clear_options()
        options.add_options([self._option(o, o.id == choices.current) for o in choices.options])
        options.display = bool(choices.options)
        free = self.query_one("#model-input", Input)
        free.display = choices.free_form
        if choices.options:
            ids = [o.id for o in choices.options]
            options.highlighted = ids.index(choices.current) if choices.current in ids else 0
            options.focus()
        elif choices.free_form:
            free.focus()

    def _status(self, choices: ModelChoices) -> None:
        current = f"Now: {choices.current}" if choices.current else "The agent does not say which model it runs."
        text = "\n".join(part for part in (current, choices.note) if part)
        self.query_one("#model-status", Static).update(Content(text))

    @staticmethod
    def _option(model: ModelOption, current: bool) -> Option:
        label = Content.assemble(CURRENT if current else OTHER, (model.id, "bold" if current else ""))
        if model.name and model.name != model.id:
            label = Content.assemble(label, (f" · {model.name}", "$text-muted"))
        if model.description:
            label = Content.assemble(label, "\n", (model.description, "$text-muted"))
        return Option(label, id=model.id)

    @on(OptionList.OptionSelected, "#model-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self._request(event.option.id)

    @on(Input.Submitted, "#model-input")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self._request(event.value.strip())

    def _request(self, model_id: str) -> None:
        if self._choices is not None and model_id == self._choices.current:
            self.dismiss(None)  # nothing to switch
            return
        self._error("")
        self.query_one("#model-status", Static).update(Content(f"Switching to {model_id}…"))
        self.run_worker(self._apply(model_id), group="switch", exclusive=True, exit_on_error=False)

    async def _apply(self, model_id: str) -> None:
        if isinstance(done := await attempt(log, f"the switch to {model_id}", self._switch(model_id)), Failed):
            if self._choices is not None:  # shown in the dialog, which stays open
                self._status(self._choices)  # the list stays as it was, the pick highlighted
            self._error(done.said)
            return
        self.dismiss(model_id)

    def _error(self, problem: str) -> None:
        error = self.query_one("#model-error", Static)
        error.update(f"✗ {problem}" if problem else "")
        error.display = bool(problem)

    def action_cancel(self) -> None:
        self.dismiss(None)
