"""The agent's reasoning, folded away by default."""

from __future__ import annotations

from textual.widgets import Collapsible, Static

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.ui.formatting import safe_text


class ReasoningBlock(Collapsible):
    """A collapsible block with the reasoning text (plain, no markup)."""

    def __init__(self, item: ChatItem) -> None:
        self._body = Static(safe_text(item.text), markup=False, classes="reasoning-text")
        super().__init__(self._body, title="Reasoning", collapsed=True, classes="chat-item")

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item."""
        self._body.update(safe_text(item.text))
