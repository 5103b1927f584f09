"""The prompt box: multi-line, bound to one session at a time, keeps what you type.

Enter sends. ctrl+j inserts a new line, and so does Enter right after a backslash (the
``\\`` is dropped); shift+enter and alt+enter do where the terminal reports them (most
xterm-style terminals send alt+enter as ESC CR, which Textual reads as a plain Enter, so the
placeholder advertises ctrl+j). A paste keeps every line. ↑ on the first line and ↓ on the
last browse earlier prompts (newest last).

Order is everything here. Keys reach this widget through its own message queue, and under
load many arrive before any is handled. So:

- switching sessions is a message to this widget (:meth:`PromptEditor.bind_to`), queued
  behind the keys typed before the switch: those stay in the old session's draft, the keys
  after it go to the new one, and a submission carries the session it was typed for;
- every editing key is handled here, in order, in :meth:`_on_key`. Textual would run the
  bound ones (backspace, arrows, ctrl+j) only after the event bubbled back through the app,
  behind characters typed after them: "abc⌫d" became "abcd".
"""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import DRAFT_CHARS, LimitExceeded, check_prompt

HISTORY_LIMIT = 500
"""Prompts kept for ↑/↓ recall."""

NEWLINE_KEYS = frozenset({"ctrl+j", "alt+enter", "shift+enter"})


class PromptEditor(TextArea):
    """A TextArea that sends on Enter, keeps a draft per session and remembers sent prompts."""

    DEFAULT_CSS = """
    PromptEditor {
        height: auto;
        min-height: 3;
        max-height: 12;
    }
    PromptEditor.-broadcast, PromptEditor.-broadcast:focus {
        border: tall $accent;
        border-title-color: $accent;
        border-title-style: bold;
    }
    """

    @dataclass
    class Submitted(Message):
        """Enter was pressed on a non-empty prompt typed for ``session_id``."""

        editor: PromptEditor
        session_id: str | None
        text: str

        @property
        def control(self) -> PromptEditor:
            return self.editor

    @dataclass
    class PageChat(Message):
        """PageUp / PageDown in the prompt: scroll the chat by ``pages`` (the draft stays put)."""

        pages: int

    @dataclass
    class BindTo(Message, bubble=False):
        """From here on, keys belong to ``session_id`` (queued behind the keys before it)."""

        session_id: str | None

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
            placeholder="Type a prompt, Enter to send",
        )
        self.session_id: str | None = None
        """The session keys typed here belong to."""
        self.drafts: dict[str, str] = {}
        """Unsent text of the other sessions."""
        self.sent_prompts: list[str] = []
        """Prompts sent from this box, oldest first (↑/↓ recall)."""
        self._recall_at: int | None = None
        self._recall_draft = ""

    # ---- binding to a session --------------------------------------------------------
    def bind_to(self, session_id: str | None) -> None:
        """Switch to ``session_id`` once the keys already queued here are handled."""
        self.post_message(self.BindTo(session_id))

    def on_prompt_editor_bind_to(self, message: PromptEditor.BindTo) -> None:
        message.stop()
        self._switch(message.session_id)

    def _switch(self, session_id: str | None) -> None:
        if session_id == self.session_id:
            return
        if self.session_id is not None:
            if self.text:
                self.drafts[self.session_id] = self.text
            else:
                self.drafts.pop(self.session_id, None)
        self.session_id = session_id
        self._recall_at = None
        self._set(self.drafts.pop(session_id, "") if session_id is not None else "")

    def all_drafts(self) -> dict[str, str]:
        """Every session's unsent text, the bound one included."""
        drafts = dict(self.drafts)
        if self.session_id is not None and self.text:
            drafts[self.session_id] = self.text
        return drafts

    def restore_draft(self, session_id: str, text: str) -> None:
        """Give a session back a draft (at start, or after an undo); never overwrites typing."""
        if session_id == self.session_id:
            if not self.text:
                self._set(text)
        else:
            self.drafts.setdefault(session_id, text)

    def give_back(self, session_id: str, text: str) -> None:
        """A prompt the engine refused goes back to the session it was typed for, after
        whatever was typed since (never lost, never overwriting)."""
        current = self.text if session_id == self.session_id else self.drafts.get(session_id, "")
        joined = f"{text}\n\n{current}" if current.strip() else text
        if session_id == self.session_id:
            self._set(joined)
        else:
            self.drafts[session_id] = joined

    # ---- keys ------------------------------------------------------------------------
    async def _on_paste(self, event: events.Paste) -> None:
        """A paste that would make the box hold more than limits.DRAFT_CHARS is refused and
        said (the box keeps what it had); any other goes in as TextArea pastes it."""
        if self.read_only:
            return
        selected = len(self.selected_text)
        if len(self.text) - selected + len(event.text) > DRAFT_CHARS:
            self._stop(event)  # not TextArea's paste
            self.notify(
                f"Not pasted: {len(event.text):,} characters would make the prompt longer than the "
                f"{DRAFT_CHARS:,} it holds. Put the text in a file and give the agent its path.",
                severity="error",
                timeout=15,
                markup=False,
            )

    async def _on_key(self, event: events.Key) -> None:
        if self.read_only:
            await super()._on_key(event)
            return
        key = event.key
        if key == "enter":
            self._stop(event)
            row, column = self.cursor_location
            if column > 0 and self.selection.is_empty and self.document.get_line(row)[:column].endswith("\\"):
                # "line\" + Enter: a new line, as in a shell (for terminals without alt+enter).
                self.replace("\n", (row, column - 1), (row, column))
                return
            self.submit()
            return
        if key in NEWLINE_KEYS:
            self._stop(event)
            self.action_newline()
            return
        if not event.is_printable:
            # A bound editing key (backspace, arrows, ctrl+w …): run it now, in order.
            for binding in self._bindings.key_to_bindings.get(key, []):
                if not self.check_action(binding.action, ()):
                    continue
                self._stop(event)
                await self.run_action(binding.action)
                return
        await super()._on_key(event)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ctrl+c with nothing selected here copies what the mouse selected in the chat."""
        return not (action == "copy" and self.selection.is_empty)

    @staticmethod
    def _stop(event: events.Key | events.Paste) -> None:
        event.stop()
        event.prevent_default()

    def action_newline(self) -> None:
        """Insert a line break at the cursor."""
        start, end = self.selection
        self.replace("\n", start, end)

    def submit(self) -> None:
        """Post what was typed (if anything) for the bound session and clear the box; a prompt
        larger than one may be is refused, said, and stays in the box."""
        text = self.text
        if not text.strip():
            return
        try:
            check_prompt(text.strip("\n").rstrip())  # as the engine measures it
        except LimitExceeded as exc:
            self.notify(f"Not sent: {exc}. Your text stays here.", severity="error", timeout=15, markup=False)
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

    def action_cursor_page_up(self) -> None:
        self.post_message(self.PageChat(-1))

    def action_cursor_page_down(self) -> None:
        self.post_message(self.PageChat(1))

    def _set(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)
