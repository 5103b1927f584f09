"""A prompt the user sent."""

from __future__ import annotations

from textual.widgets import Static

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.ui.formatting import safe_text


class UserMessage(Static):
    """The user's prompt, shown verbatim (no markup)."""

    def __init__(self, item: ChatItem) -> None:
        super().__init__(safe_text(item.text), markup=False, classes="chat-item")

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item."""
        self.update(safe_text(item.text))
