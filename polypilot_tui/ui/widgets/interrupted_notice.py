"""Offers to resend a prompt whose turn was lost (an app restart, a dead agent, a reconnect)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Static

from polypilot_tui.domain.text import one_line


class InterruptedNotice(Horizontal):
    """The interrupted prompt and a Resend button (ctrl+y does the same)."""

    DEFAULT_CSS = """
    InterruptedNotice {
        height: auto;
        padding: 0 1;
        background: $warning 15%;
        border-left: thick $warning;
    }
    InterruptedNotice .notice-text {
        width: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text = Static("", classes="notice-text", markup=False)
        self.display = False

    def compose(self) -> ComposeResult:
        yield self._text

    async def show(self, prompt: str) -> None:
        """Visible while there is an interrupted prompt to resend (its button is mounted with
        the first one, as the permission banner's)."""
        if prompt and not self.query(Button):
            await self.mount(
                Button("Resend (ctrl+y)", id="resend-interrupted", action="screen.resend_interrupted", compact=True)
            )
        self.display = bool(prompt)
        if prompt:
            self._text.update(f"⚠ Interrupted: “{one_line(prompt, 80)}”")
