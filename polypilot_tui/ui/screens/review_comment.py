"""The comment composer: a few lines of text about a line or a hunk of a diff."""

from __future__ import annotations

from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static, TextArea

from polypilot_tui.ui.widgets.diff_highlight import clean

QUOTE_LINES = 3


class ReviewCommentScreen(ModalScreen[str | None]):
    """Dismisses with the comment's text, or None when cancelled or left empty."""

    DEFAULT_CSS = """
    ReviewCommentScreen {
        align: center middle;
        background: $background 60%;
    }
    ReviewCommentScreen #comment-dialog {
        width: 80;
        max-width: 95%;
        height: auto;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    ReviewCommentScreen #comment-title {
        text-style: bold;
    }
    ReviewCommentScreen #comment-quote {
        color: $text-muted;
        padding-bottom: 1;
    }
    ReviewCommentScreen #comment-text {
        height: 8;
    }
    ReviewCommentScreen #comment-buttons {
        height: auto;
        align-horizontal: right;
        padding-top: 1;
    }
    ReviewCommentScreen Button {
        margin-left: 2;
    }
    """

    BINDINGS = [
        # Priority: the text area would otherwise take these keys for itself.
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("escape", "cancel", "Cancel", priority=True),
    ]

    def __init__(self, where: str, text: str = "", quote: Sequence[str] = ()) -> None:
        super().__init__()
        self._where = where
        self._text = text
        self._quote = tuple(quote)

    def compose(self) -> ComposeResult:
        with Vertical(id="comment-dialog"):
            verb = "Edit the comment on" if self._text else "Comment on"
            yield Static(f"{verb} {clean(self._where)}", id="comment-title", markup=False)
            shown = [f"> {clean(line)}" for line in self._quote[:QUOTE_LINES]]
            if len(self._quote) > QUOTE_LINES:
                shown.append(f"> … ({len(self._quote) - QUOTE_LINES} more lines)")
            yield Static("\n".join(shown), id="comment-quote", markup=False)
            yield TextArea(self._text, id="comment-text", soft_wrap=True)
            with Horizontal(id="comment-buttons"):
                # Content, not a str: a str label is read as markup.
                yield Button(Content("Cancel [esc]"), id="comment-cancel", compact=True)
                yield Button(Content("Save [ctrl+s]"), id="comment-save", variant="primary", compact=True)

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "comment-save":
            self.action_save()
        else:
            self.action_cancel()

    def action_save(self) -> None:
        """Keep the comment (an empty one is no comment)."""
        text = self.query_one(TextArea).text.strip()
        self.dismiss(text or None)

    def action_cancel(self) -> None:
        """Close without keeping anything."""
        self.dismiss(None)
