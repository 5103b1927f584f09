"""The prompt box: multi-line, bound to one session at a time, keeps what you type.

Enter sends. ctrl+j, alt+enter and shift+enter (where the terminal reports it) insert a new
line, and so does Enter right after a backslash (the line's ``\\`` is dropped); a paste keeps
every line. ↑ on the first line and ↓ on the last browse earlier prompts (newest last).

The editor is *bound* to a session: the app rebinds it at the keystroke that changes the
selection, before anything is redrawn, and a submission carries the session it was typed
for. A prompt can therefore never land in another session than the one it was typed into,
however fast keys and redraws interleave.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

HISTORY_LIMIT = 500
"""Prompts kept for ↑/↓ recall."""


class PromptEditor(TextArea):
    """A TextArea that sends on Enter and remembers sent prompts."""

    DEFAULT_CSS = """
    PromptEditor {
        height: auto;
        min-height: 3;
        max-height: 12;
    }
    """

    BINDINGS = [
        Binding("ctrl+j,alt+enter,shift+enter", "newline", "New line", show=False),
    ]

    @dataclass
    class Submitted(Message):
        """Enter was pressed on a non-empty prompt typed for ``session_id``."""

        editor: PromptEditor
        session_id: str | None
        text: str

        @property
        def control(self) -> PromptEditor:
            return self.editor

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, tab_behavior="focus", show_line_numbers=False,
                         highlight_cursor_line=False, placeholder="Type a prompt, Enter to send")
        self.session_id: str | None = None
        """The session keys typed here belong to."""
        self.sent_prompts: list[str] = []
        """Prompts sent from this box, oldest first (↑/↓ recall)."""
        self._recall_at: int | None = None
        self._recall_draft = ""

    # ---- binding to a session --------------------------------------------------------
    def bind_session(self, session_id: str | None, draft: str) -> str:
        """Point the editor at ``session_id`` with its ``draft``; returns the text it held."""
        previous = self.text
        self.session_id = session_id
        self._recall_at = None
        self._set(draft)
        return previous

    # ---- keys ------------------------------------------------------------------------
    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter" and not self.read_only:
            event.stop()
            event.prevent_default()
            row, column = self.cursor_location
            line = self.document.get_line(row)
            if column > 0 and line[:column].endswith("\\") and self.selection.is_empty:
                # "line\" + Enter: a new line, as in a shell (for terminals without alt+enter).
                self.replace("\n", (row, column - 1), (row, column))
                return
            self.submit()
            return
        await super()._on_key(event)

    def action_newline(self) -> None:
        """Insert a line break at the cursor."""
        start, end = self.selection
        self.replace("\n", start, end)

    def submit(self) -> None:
        """Post what was typed (if anything) for the bound session and clear the box."""
        text = self.text
        if not text.strip():
            return
        self.remember(text)
        self._set("")
        self.post_message(self.Submitted(self, self.session_id, text))

    # ---- history ---------------------------------------------------------------------
    def remember(self, prompt: str) -> None:
        """Add a sent prompt to the history and leave browsing mode."""
        if prompt and (not self.sent_prompts or self.sent_prompts[-1] != prompt):
            self.sent_prompts.append(prompt)
            del self.sent_prompts[:-HISTORY_LIMIT]
        self._recall_at = None

    def action_cursor_up(self, select: bool = False) -> None:
        if select or self.cursor_location[0] > 0 or not self.sent_prompts:
            super().action_cursor_up(select)
            return
        if self._recall_at is None:
            self._recall_draft = self.text
            self._recall_at = len(self.sent_prompts)
        self._recall_at = max(0, self._recall_at - 1)
        self._set(self.sent_prompts[self._recall_at])

    def action_cursor_down(self, select: bool = False) -> None:
        if select or self._recall_at is None or self.cursor_location[0] < self.document.line_count - 1:
            super().action_cursor_down(select)
            return
        self._recall_at += 1
        if self._recall_at >= len(self.sent_prompts):
            self._recall_at = None
            self._set(self._recall_draft)
        else:
            self._set(self.sent_prompts[self._recall_at])

    def _set(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)
