"""A system or error line in the chat (watchdog, recovery, reconnect notes)."""

from __future__ import annotations

from textual.widgets import Static

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.ui.formatting import safe_text


class NoticeMessage(Static):
    """System notes are quiet; errors stand out. The text is never parsed as markup."""

    def __init__(self, item: ChatItem) -> None:
        kind = "-error" if item.kind is ItemKind.ERROR else "-system"
        super().__init__(safe_text(item.text), markup=False, classes=f"chat-item {kind}")

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item."""
        self.update(safe_text(item.text))
