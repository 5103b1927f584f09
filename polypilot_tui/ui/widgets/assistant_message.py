"""An assistant reply rendered as Markdown; also the live view of a streaming reply."""

from __future__ import annotations

from textual.widgets import Markdown

from polypilot_tui.core.session import ChatItem
from polypilot_tui.ui.formatting import safe_text

INTERRUPTED_NOTE = "\n\n*(interrupted — the reply was cut short; what arrived is kept)*"


class AssistantMessage(Markdown):
    """Markdown of untrusted agent text: control sequences stripped, links not auto-opened."""

    def __init__(self, text: str = "", *, interrupted: bool = False) -> None:
        self.text = safe_text(text)
        """The (sanitised) text on screen, without the interrupted note."""
        self.interrupted = interrupted
        super().__init__(self._source(), open_links=False, classes="chat-item")
        self.set_class(interrupted, "-interrupted")

    @classmethod
    def from_item(cls, item: ChatItem) -> AssistantMessage:
        """A finished reply from history."""
        return cls(item.text, interrupted=item.interrupted)

    def _source(self) -> str:
        return self.text + (INTERRUPTED_NOTE if self.interrupted else "")

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item (e.g. it became interrupted)."""
        text, interrupted = safe_text(item.text), item.interrupted
        if (text, interrupted) == (self.text, self.interrupted):
            return
        self.text, self.interrupted = text, interrupted
        self.set_class(interrupted, "-interrupted")
        self.update(self._source())

    async def stream(self, raw: str) -> None:
        """Show the reply so far; appends when it only grew (cheap), else re-renders."""
        text = safe_text(raw)
        if text == self.text:
            return
        if text.startswith(self.text) and not self.interrupted:
            suffix, self.text = text[len(self.text):], text
            await self.append(suffix)
        else:
            self.text = text
            await self.update(self._source())
