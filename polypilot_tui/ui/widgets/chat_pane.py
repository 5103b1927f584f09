"""The right-hand pane: the selected session's chat, its prompts and its status line."""

from __future__ import annotations

from collections.abc import Sequence

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ContentSwitcher

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.widgets.chat_header import ChatHeader
from polypilot_tui.ui.widgets.chat_log import EMPTY_TEXT, ChatLog
from polypilot_tui.ui.widgets.interrupted_notice import InterruptedNotice
from polypilot_tui.ui.widgets.permission_banner import PermissionBanner
from polypilot_tui.ui.widgets.permission_prompt import PermissionPrompt
from polypilot_tui.ui.widgets.prompt_editor import PromptEditor
from polypilot_tui.ui.widgets.queue_panel import QueuePanel
from polypilot_tui.ui.widgets.status_line import StatusLine


def log_id(session_id: str) -> str:
    """DOM id of a session's chat log."""
    return f"log-{session_id}"


class ChatPane(Vertical):
    """Shows one session at a time; each session keeps its own mounted log and draft."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.header = ChatHeader(id="chat-header")
        self.banner = PermissionBanner(id="permission-banner")
        self.notice = InterruptedNotice(id="interrupted-notice")
        self.logs = ContentSwitcher(id="chat-logs")
        self.permission = PermissionPrompt(id="permission-prompt")
        self.queue = QueuePanel(id="queue-panel")
        self.status = StatusLine(id="status-line")
        self.editor = PromptEditor(id="prompt")
        self.session_id: str | None = None
        """The session on screen (the editor may already be bound to the next one)."""
        self._editor_target: str | None = None
        """The session the editor was last told to bind to."""
        self._logs: dict[str, ChatLog] = {}
        self._shown: SessionView | None = None
        self.broadcast_to = 0
        """How many marked sessions a prompt sent now goes to (0: the session on screen)."""

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.banner
        yield self.notice
        yield self.logs
        yield self.permission
        yield self.status
        yield self.queue
        yield self.editor

    def log_for(self, session_id: str) -> ChatLog | None:
        """The mounted log of a session, if it was ever shown."""
        return self._logs.get(session_id)

    async def show(
        self,
        view: SessionView | None,
        history: Sequence[ChatItem],
        streaming: str,
        now: float,
        empty_text: str = EMPTY_TEXT,
        host: str = "",
    ) -> None:
        """Bring everything in the pane up to date for ``view`` (``empty_text``: what its log
        says while it has no rows; ``host``: the machine it runs on, when not this one)."""
        self._shown = view
        if view is None:
            await self._switch(None)
            self.header.show(None)
            await self.banner.show(False)
            await self.notice.show("")
            await self.permission.show(None)
            await self.queue.show(None)
            self.status.show(None, now)
            return
        self._label_editor()  # before the history is drawn: the first frame shows the prompt at once
        log = await self._mounted_log(view.id, empty_text)
        if log is None:  # the pane is being taken down (the app quits): nothing is left to show
            return
        log.set_empty_text(empty_text)
        await self._switch(view.id)
        self.header.show(view, host)
        await self.banner.show(view.permission_warning)
        await self.notice.show(view.interrupted_prompt)
        await log.sync(history, streaming)
        await self.permission.show(view.pending_permission, view.id)
        await self.queue.show(view)
        self.status.show(view, now)

    def show_broadcast(self, count: int) -> None:
        """Say where the prompt goes: to ``count`` marked sessions, or (0) the one on screen."""
        if count != self.broadcast_to:
            self.broadcast_to = count
            self._label_editor()

    def _label_editor(self) -> None:
        editor, view, count = self.editor, self._shown, self.broadcast_to
        editor.set_class(bool(count), "-broadcast")
        sessions = f"{count} marked session{'' if count == 1 else 's'}"
        editor.border_title = f"to {sessions}" if count else None
        if count:
            editor.placeholder = f"Message the {sessions} · Enter sends to each · Esc clears the marks"
        elif view is None:
            editor.placeholder = "Type a prompt, Enter to send"
        elif view.status.busy:
            editor.placeholder = f"Queue a prompt for {view.name} (sent when this turn ends)"
        else:
            editor.placeholder = f"Message {view.name} · Enter sends · ctrl+j new line · ↑ history"

    def on_prompt_editor_page_chat(self, event: PromptEditor.PageChat) -> None:
        """PageUp / PageDown while typing scroll the chat on screen."""
        event.stop()
        log = self.log_for(self.session_id) if self.session_id else None
        if log is not None:
            (log.scroll_page_up if event.pages < 0 else log.scroll_page_down)()

    def on_key(self, event: events.Key) -> None:
        """Typing while the chat has the focus (after scrolling it) goes to the prompt, never nowhere."""
        focused = self.screen.focused
        if (
            event.is_printable
            and event.character
            and focused is not None
            and focused is not self.editor
            and self.logs in focused.ancestors_with_self
        ):
            event.stop()
            event.prevent_default()
            self.screen.set_focus(self.editor)  # now: the keys after this one follow it there
            self.editor.insert(event.character)

    def scroll_back(self, session_id: str, lines: int) -> None:
        """Put a session's chat back where the user had scrolled it (after it is laid out)."""
        log = self.log_for(session_id)
        if log is not None:
            log.call_after_refresh(log.restore_scroll_back, lines)

    def tick(self, view: SessionView | None, now: float) -> None:
        """Refresh the time-dependent words only."""
        self.status.show(view, now)

    def bind(self, session_id: str | None) -> None:
        """Point the prompt editor at a session, in order with the keys typed before (see
        :class:`PromptEditor`): keys typed from here on are that session's draft."""
        if session_id != self._editor_target:
            self._editor_target = session_id
            self.editor.bind_to(session_id)

    def drafts(self) -> dict[str, str]:
        """Every session's unsent text, the bound one included."""
        return self.editor.all_drafts()

    def restore_drafts(self, drafts: dict[str, str]) -> None:
        """Drafts saved at the last quit, or a closed session's after an undo."""
        for session_id, text in drafts.items():
            self.editor.restore_draft(session_id, text)

    async def forget(self, session_id: str) -> None:
        """A session was closed: drop its log (its draft is kept for an undo)."""
        if self.session_id == session_id:
            # Before the removal: a log mounted later under the same id (its host back) is then a
            # change of ``current`` the switcher shows, not the same value it ignores. The editor
            # is left alone: it may already be bound to the session selected next.
            self.session_id = None
            self.logs.current = None
        log = self._logs.pop(session_id, None)
        if log is not None:
            await log.remove()

    async def _mounted_log(self, session_id: str, empty_text: str) -> ChatLog | None:
        """The session's log, mounted first if need be; None if it cannot be (the pane is pruned)."""
        log = self._logs.get(session_id)
        if log is None or log.parent is None:  # never shown, or its mount never ran (cancelled)
            log = self._logs[session_id] = ChatLog(id=log_id(session_id), empty_text=empty_text)
            await self.logs.add_content(log)
        if log.parent is not self.logs:  # a switcher being removed mounts nothing, silently
            self._logs.pop(session_id, None)
            return None
        return log

    async def _switch(self, session_id: str | None) -> None:
        """Put a session's log on screen; only ever one :meth:`_mounted_log` gave (or none)."""
        if session_id is not None and session_id not in self._logs:
            raise LookupError(f"the chat pane has no log mounted for {session_id!r}")
        if session_id == self.session_id:
            return
        self.bind(session_id)  # normally done already, at the keystroke that selected it
        self.session_id = session_id
        self.logs.current = log_id(session_id) if session_id else None
