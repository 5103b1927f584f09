"""The right-hand pane: the selected session's chat, its prompts and its status line."""

from __future__ import annotations

from typing import Sequence

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ContentSwitcher

from polypilot_tui.core.session import ChatItem
from polypilot_tui.core.view import SessionView
from polypilot_tui.ui.widgets.chat_header import ChatHeader
from polypilot_tui.ui.widgets.chat_log import ChatLog
from polypilot_tui.ui.widgets.interrupted_notice import InterruptedNotice
from polypilot_tui.ui.widgets.permission_banner import PermissionBanner
from polypilot_tui.ui.widgets.permission_prompt import PermissionPrompt
from polypilot_tui.ui.widgets.prompt_input import PromptInput
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
        self.status = StatusLine(id="status-line")
        self.input = PromptInput(id="prompt")
        self.session_id: str | None = None
        """The session on screen."""
        self._drafts: dict[str, str] = {}
        self._logs: dict[str, ChatLog] = {}

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.banner
        yield self.notice
        yield self.logs
        yield self.permission
        yield self.status
        yield self.input

    def log_for(self, session_id: str) -> ChatLog | None:
        """The mounted log of a session, if it was ever shown."""
        return self._logs.get(session_id)

    async def show(self, view: SessionView | None, history: Sequence[ChatItem], streaming: str,
                   now: float) -> None:
        """Bring everything in the pane up to date for ``view``."""
        if view is None:
            await self._switch(None)
            self.header.show(None)
            self.banner.show(False)
            self.notice.show("")
            await self.permission.show(None)
            self.status.show(None, now)
            return
        log = self.log_for(view.id)
        if log is None:
            log = self._logs[view.id] = ChatLog(id=log_id(view.id))
            await self.logs.add_content(log)
        await self._switch(view.id)
        self.header.show(view)
        self.banner.show(view.permission_warning)
        self.notice.show(view.interrupted_prompt)
        await log.sync(history, streaming)
        await self.permission.show(view.pending_permission)
        self.status.show(view, now)
        busy = view.status.busy
        self.input.placeholder = (f"Type to queue a prompt for {view.name} (sent when this turn ends)" if busy
                                  else f"Message {view.name} — Enter to send, ↑/↓ for earlier prompts")

    def tick(self, view: SessionView | None, now: float) -> None:
        """Refresh the time-dependent words only."""
        self.status.show(view, now)

    async def forget(self, session_id: str) -> None:
        """A session was closed: drop its log and draft."""
        self._drafts.pop(session_id, None)
        log = self._logs.pop(session_id, None)
        if log is not None:
            await log.remove()
        if self.session_id == session_id:
            self.session_id = None

    async def _switch(self, session_id: str | None) -> None:
        if session_id == self.session_id:
            return
        if self.session_id is not None:
            self._drafts[self.session_id] = self.input.value
        self.input.value = self._drafts.pop(session_id, "") if session_id else ""
        self.session_id = session_id
        self.logs.current = log_id(session_id) if session_id else None
