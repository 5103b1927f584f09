"""A question before anything that cannot be taken back lightly (close, quit, merge): yes or
no, or one of a few choices and no."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static
from textual.widgets.button import ButtonVariant


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True only when the user picks the confirming button.

    The safe answer has the focus, so an Enter typed by habit does nothing harmful; Escape
    and ``n`` cancel, ``y`` confirms.
    """

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
        background: $background 60%;
    }
    ConfirmScreen #confirm-dialog {
        width: 64;
        max-width: 90%;
        height: auto;
        border: round $warning;
        background: $surface;
        padding: 0 1;
    }
    ConfirmScreen #confirm-title {
        text-style: bold;
        padding-bottom: 1;
    }
    ConfirmScreen #confirm-buttons {
        height: auto;
        align-horizontal: right;
        padding-top: 1;
    }
    ConfirmScreen Button {
        margin-left: 2;
    }
    """

    BINDINGS = [
        Binding("escape,n", "answer(False)", "Cancel", show=False),
        Binding("y", "answer(True)", "Confirm", show=False),
        Binding("left,right", "app.focus_next", show=False),
    ]

    def __init__(self, title: str, message: str, confirm: str, cancel: str = "Cancel") -> None:
        super().__init__()
        self._title = title
        self._message = message
        self._confirm = confirm
        self._cancel = cancel

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(self._title, id="confirm-title", markup=False)
            yield Static(self._message, id="confirm-message", markup=False)
            with Horizontal(id="confirm-buttons"):
                # Content, not a str: Textual reads a str label as markup, and "[n]" would vanish.
                yield Button(Content(f"{self._cancel} [n]"), id="confirm-cancel", compact=True)
                yield from self._answers()

    def _answers(self) -> ComposeResult:
        """The buttons after Cancel."""
        yield Button(Content(f"{self._confirm} [y]"), id="confirm-ok", variant="warning", compact=True)

    def on_mount(self) -> None:
        self.query_one("#confirm-cancel", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self._pressed_button(event.button.id or "")

    def _pressed_button(self, button: str) -> None:
        self.dismiss(button == "confirm-ok")

    def action_answer(self, yes: bool) -> None:
        """Close the dialog with ``yes``."""
        self.dismiss(yes)


class Choice(NamedTuple):
    """One answer of a :class:`ChoiceScreen`: its button (id, label with its key) and the value it closes with."""

    button: str
    label: str
    value: str
    variant: ButtonVariant = "default"


class ChoiceScreen(ConfirmScreen):
    """Dismisses with the value of the choice picked, or False (Cancel, Escape, ``n``). Cancel
    has the focus. A subclass binds each choice's key to ``choose('<value>')``."""

    def __init__(self, title: str, message: str, choices: Sequence[Choice]) -> None:
        super().__init__(title, message, confirm="")
        self._choices = tuple(choices)

    def _answers(self) -> ComposeResult:
        for choice in self._choices:
            yield Button(Content(choice.label), id=choice.button, variant=choice.variant, compact=True)

    def _pressed_button(self, button: str) -> None:
        values = {choice.button: choice.value for choice in self._choices}
        self.action_choose(values.get(button, ""))

    def action_choose(self, value: str) -> None:
        """Close the dialog with ``value`` (False for none)."""
        self.dismiss(value or False)  # type: ignore[arg-type]  # a choice, not a yes
