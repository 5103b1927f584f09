"""Prompts waiting for the current turn: visible, editable, droppable, never lost silently."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Static

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import QUEUE_PREVIEWS, size_words
from polypilot_tui.domain.prompt_queue import QueueEntry
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import plural


class QueuedPrompt(Horizontal):
    """One queued prompt with its edit and drop buttons."""

    def __init__(self, index: int, prompt: QueueEntry) -> None:
        super().__init__(classes="queued-prompt")
        self.index = index
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        lines = self.prompt.lines
        more = f"  (+{lines - 1} line{'s' if lines > 2 else ''})" if lines > 1 else ""
        text = self.prompt.preview or f"a prompt of {size_words(self.prompt.size)}"
        yield Static(f"{self.index + 1}. {text}{more}", classes="queued-text", markup=False)
        yield Button("edit", classes="queued-edit", compact=True)
        yield Button("✕", classes="queued-drop", compact=True, tooltip="Drop this prompt")


class QueuePanel(Vertical):
    """Shown while the session on screen has queued prompts."""

    DEFAULT_CSS = """
    QueuePanel {
        height: auto;
        max-height: 8;
        padding: 0 1;
        background: $boost;
        border-left: thick $status-busy;
    }
    QueuePanel .queue-header, QueuePanel .queue-rows, QueuePanel .queued-prompt {
        height: auto;
    }
    QueuePanel .queue-title {
        width: 1fr;
        color: $text-muted;
    }
    QueuePanel .queued-text {
        width: 1fr;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    QueuePanel .queued-prompt Button, QueuePanel .queue-send, QueuePanel .queue-clear {
        margin-left: 1;
        width: auto;
        min-width: 3;
    }
    """

    @dataclass
    class Edit(Message):
        """Take a queued prompt back into the editor."""

        session_id: str
        index: int
        key: str
        """The key of the prompt shown (the queue may have moved on since it was drawn)."""

    @dataclass
    class Drop(Message):
        """Drop a queued prompt."""

        session_id: str
        index: int
        key: str

    @dataclass
    class Clear(Message):
        """Drop every queued prompt of the session."""

        session_id: str

    @dataclass
    class SendNext(Message):
        """Release a held queue: send its next prompt now."""

        session_id: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.display = False
        self._shown: tuple[str | None, tuple[QueueEntry, ...], bool] = (None, (), False)
        self._title = Static("", classes="queue-title", markup=False)
        self._header = Horizontal(self._title, classes="queue-header")
        self._rows = Vertical(classes="queue-rows")
        self._send = Button("Send in order", classes="queue-send", compact=True, variant="primary")
        self._clear = Button("Clear", classes="queue-clear", compact=True, tooltip="Drop every queued prompt")

    def compose(self) -> ComposeResult:
        yield self._header  # its buttons come with the first queue: hidden, they still cost the first frame
        yield self._rows

    async def show(self, view: SessionView | None) -> None:
        """Mirror ``view``'s queue (rebuilt only when the queue itself changed)."""
        shown = (view.id, view.queue, view.queue_held) if view is not None else (None, (), False)
        if shown == self._shown:
            return
        self._shown = shown
        self.display = bool(view and view.queue)
        if view is None or not view.queue:
            await self._rows.remove_children()
            return
        count = plural(len(view.queue), "queued prompt")
        if view.queue_held:
            self._title.update(f"{count}, held until you send them (Send in order), edit or drop them.")
        elif view.status.busy:
            self._title.update(f"{count}: sent in order when this turn ends.")
        else:
            self._title.update(f"{count}: sent in order.")
        if not self._send.is_attached:
            await self._header.mount_all((self._send, self._clear))
        self._send.display = view.queue_held and not view.status.busy
        await self._rows.remove_children()
        rows = view.queue[:QUEUE_PREVIEWS]  # a queue of a hundred is not a hundred rows on every change
        await self._rows.mount_all(QueuedPrompt(i, prompt) for i, prompt in enumerate(rows))
        if len(view.queue) > len(rows):
            rest = view.queue[len(rows) :]
            size = size_words(sum(q.size for q in rest))
            more = f"… and {len(rest)} more ({size}): they come up here as the ones above go"
            await self._rows.mount(Static(more, classes="queued-more", markup=False))

    @property
    def session_id(self) -> str | None:
        """The session whose queue is shown."""
        return self._shown[0]

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        session_id = self.session_id
        if session_id is None:
            return
        if event.button is self._send:
            self.post_message(self.SendNext(session_id))
            return
        if event.button is self._clear:
            self.post_message(self.Clear(session_id))
            return
        row = event.button.parent
        if isinstance(row, QueuedPrompt):
            if event.button.has_class("queued-edit"):
                self.post_message(self.Edit(session_id, row.index, row.prompt.key))
            else:
                self.post_message(self.Drop(session_id, row.index, row.prompt.key))
