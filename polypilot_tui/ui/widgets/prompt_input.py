"""The prompt box: Enter sends, up/down browse earlier prompts."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

HISTORY_LIMIT = 500


class PromptInput(Input):
    """An Input with shell-like prompt history (newest last)."""

    BINDINGS = [
        Binding("up", "history_back", "Previous prompt", show=False),
        Binding("down", "history_forward", "Next prompt", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="Type a prompt, Enter to send", id=id)
        self.history: list[str] = []
        self._position: int | None = None
        self._draft = ""

    def remember(self, prompt: str) -> None:
        """Add a sent prompt to the history and leave browsing mode."""
        if prompt and (not self.history or self.history[-1] != prompt):
            self.history.append(prompt)
            del self.history[:-HISTORY_LIMIT]
        self._position = None

    def action_history_back(self) -> None:
        if not self.history:
            return
        if self._position is None:
            self._draft = self.value
            self._position = len(self.history)
        self._position = max(0, self._position - 1)
        self._set(self.history[self._position])

    def action_history_forward(self) -> None:
        if self._position is None:
            return
        self._position += 1
        if self._position >= len(self.history):
            self._position = None
            self._set(self._draft)
        else:
            self._set(self.history[self._position])

    def _set(self, value: str) -> None:
        self.value = value
        self.cursor_position = len(value)
