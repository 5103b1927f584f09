"""An assistant reply rendered as Markdown; also the live view of a streaming reply.

One widget per reply, drawn with Rich's Markdown renderable: mounting it costs about as
much as a Static, where Textual's Markdown widget mounts a widget per block (tens of ms
each), too slow for opening a session with a long history.
"""

from __future__ import annotations

from rich.markdown import Markdown as RichMarkdown
from textual.widget import Widget

from polypilot_tui.core.session import ChatItem
from polypilot_tui.ui.formatting import safe_text

INTERRUPTED_NOTE = "\n\n*(interrupted — the reply was cut short; what arrived is kept)*"


class AssistantMessage(Widget):
    """Markdown of untrusted agent text: control sequences stripped, never Rich markup, no links."""

    DEFAULT_CSS = """
    AssistantMessage {
        height: auto;
    }
    """

    def __init__(self, text: str = "", *, interrupted: bool = False) -> None:
        super().__init__(classes="chat-item")
        self.text = safe_text(text)
        """The (sanitised) text on screen, without the interrupted note."""
        self.interrupted = interrupted
        self.set_class(interrupted, "-interrupted")
        self._cache: tuple[tuple[str, bool, bool], RichMarkdown] | None = None

    @classmethod
    def from_item(cls, item: ChatItem) -> AssistantMessage:
        """A finished reply from history."""
        return cls(item.text, interrupted=item.interrupted)

    def render(self) -> RichMarkdown:
        dark = self.app.current_theme.dark
        key = (self.text, self.interrupted, dark)
        if self._cache is None or self._cache[0] != key:
            source = self.text + (INTERRUPTED_NOTE if self.interrupted else "")
            code_theme = "monokai" if dark else "friendly"
            markdown = RichMarkdown(source, code_theme=code_theme, hyperlinks=False,
                                    inline_code_lexer="text", inline_code_theme=code_theme)
            self._cache = (key, markdown)
        return self._cache[1]

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item (e.g. it became interrupted)."""
        text, interrupted = safe_text(item.text), item.interrupted
        if (text, interrupted) != (self.text, self.interrupted):
            self.text, self.interrupted = text, interrupted
            self.set_class(interrupted, "-interrupted")
            self.refresh(layout=True)

    def stream(self, raw: str) -> None:
        """Show the reply so far."""
        text = safe_text(raw)
        if text != self.text:
            self.text = text
            self.refresh(layout=True)
