"""What the user does to a session: send, stop, reconnect, close (with undo), queue, copy.

A mixin of :class:`~polypilot_tui.ui.app.PolypilotApp`, kept apart so the app module stays
about the screen (layout, redraws, selection). Every engine call runs as a worker whose
failure becomes a toast, never a crash; every prompt goes to the session it was typed for.
Message handlers here use ``on_<widget>_<message>`` names: Textual's ``@on`` decorator is
only collected from classes that are message pumps themselves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable

from polypilot_tui.core.session import ItemKind, Session
from polypilot_tui.core.text import one_line
from polypilot_tui.ui.screens.confirm import ConfirmScreen
from polypilot_tui.ui.screens.details import SessionDetailsScreen
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.widgets.permission_prompt import PermissionPrompt
from polypilot_tui.ui.widgets.prompt_editor import PromptEditor
from polypilot_tui.ui.widgets.queue_panel import QueuePanel

if TYPE_CHECKING:
    from polypilot_tui.ui.app import PolypilotApp

    _Base = PolypilotApp
else:
    _Base = object

log = logging.getLogger(__name__)

UNDO_SECONDS = 30.0
"""How long a closed session can be brought back (agent-deck keeps 30 s too)."""


@dataclass
class ClosedSession:
    """A session closed moments ago, kept whole for an undo."""

    session: Session
    draft: str


class SessionActions(_Base):
    """Session actions and the messages of the chat pane's controls."""

    def _init_actions(self) -> None:
        self._recently_closed: list[ClosedSession] = []
        """Most recent last; each leaves after UNDO_SECONDS."""

    def _run(self, title: str, coro: Awaitable[Any]) -> None:
        """Run an engine call as a worker; a failure becomes a toast, never a crash."""
        async def guarded() -> None:
            try:
                await coro
            except Exception as exc:  # noqa: BLE001 - shown to the user, never a crash
                log.exception("%s failed", title)
                self.notify(f"{title} failed: {exc}", severity="error", markup=False)
        self.run_worker(guarded(), name=title, group="session-actions", exit_on_error=False)

    def _session_name(self, session_id: str) -> str:
        view = self._views.get(session_id)
        return view.name if view is not None else session_id

    # ---- prompts -------------------------------------------------------------------
    def on_prompt_editor_submitted(self, event: PromptEditor.Submitted) -> None:
        event.stop()
        sid = event.session_id
        if sid is None or sid not in self.manager.ids():
            # Nothing to send to (closed meanwhile): the text goes back, never lost.
            self.pane.editor.insert(event.text)
            self.notify("No session to send to: press ctrl+n to start one.", severity="warning")
            return
        log_ = self.pane.log_for(sid)
        if log_ is not None:
            log_.follow_end()  # whoever sends wants to see what comes back
        self._run("Send", self._send(sid, event.text))

    async def _send(self, session_id: str, text: str) -> None:
        result = await self.manager.send(session_id, text)
        if result == "queued" and session_id != self.selected:
            self.notify("Queued: it is sent when the current turn ends.", title=self._session_name(session_id),
                        timeout=4, markup=False)

    def on_queue_panel_edit(self, event: QueuePanel.Edit) -> None:
        event.stop()
        prompt = self.manager.unqueue(event.session_id, event.index, event.prompt)
        if prompt is None:
            self.notify("That prompt was already sent.", timeout=3)
            return
        editor = self.pane.editor
        if editor.session_id != event.session_id:
            return
        editor.load_text(prompt if not editor.text.strip() else f"{editor.text.rstrip()}\n\n{prompt}")
        editor.move_cursor(editor.document.end)
        editor.focus()

    def on_queue_panel_drop(self, event: QueuePanel.Drop) -> None:
        event.stop()
        prompt = self.manager.unqueue(event.session_id, event.index, event.prompt)
        if prompt is not None:
            self.notify(f"Dropped: {one_line(prompt, 60)}", timeout=3, markup=False)
        self.pane.editor.focus()

    def on_queue_panel_send_next(self, event: QueuePanel.SendNext) -> None:
        event.stop()
        self._run("Send", self.manager.send_queued(event.session_id))
        self.pane.editor.focus()

    def action_send_queued(self) -> None:
        """Send the selected session's held queue (its next prompt goes out now)."""
        if self.selected:
            self._run("Send", self.manager.send_queued(self.selected))

    # ---- permissions ---------------------------------------------------------------
    def on_permission_prompt_answered(self, event: PermissionPrompt.Answered) -> None:
        event.stop()
        if event.session_id is not None:
            self._run("Permission answer", self.manager.answer_permission(
                event.session_id, event.request_id, event.option_id))
        self.pane.editor.focus()

    def on_permission_prompt_leave(self, event: PermissionPrompt.Leave) -> None:
        self.pane.editor.focus()

    # ---- new sessions and attention ------------------------------------------------
    def _add_session(self, agent: str) -> str | None:
        try:
            sid = self.manager.add_session(agent)
        except Exception as exc:  # noqa: BLE001 - a bad agent entry must not crash the app
            self.notify(f"Could not create a session on {agent!r}: {exc}", severity="error", markup=False)
            return None
        self.select(sid)
        return sid

    def action_new_session(self) -> None:
        """Pick an agent and start a session on it."""
        agents = [(name, config.kind) for name, config in self.catalog.agents.items()]

        def picked(agent: str | None) -> None:
            if agent:
                self._add_session(agent)
            self.pane.editor.focus()

        self.push_screen(NewSessionScreen(agents, self.settings.default_agent), picked)

    def action_attention(self) -> None:
        """Answer the session on screen if it waits for permission, else go to the next one needing you."""
        view = self._views.get(self.selected or "")
        prompt = self.pane.permission
        if view is not None and view.pending_permission is not None and not prompt.has_focus_within:
            prompt.focus_first()
            return
        ids = list(self._views)
        start = ids.index(self.selected) + 1 if self.selected in ids else 0
        for sid in ids[start:] + ids[:start]:
            if sid != self.selected and self.attention.wants_user(self._views[sid]):
                self.select(sid)
                if self._views[sid].pending_permission is not None:
                    self.call_later(self._focus_permission)
                return
        self.notify("No other session needs your attention.", timeout=3)

    async def _focus_permission(self) -> None:
        """Focus the permission prompt once the selected session is drawn (not throttled)."""
        await self.flush()
        self.call_after_refresh(self.pane.permission.focus_first)

    # ---- turn control --------------------------------------------------------------
    def action_stop(self) -> None:
        """Stop the selected session's turn (abort, then kill if it does not stop)."""
        if self.selected:
            self._run("Stop", self.manager.stop(self.selected))

    def action_reconnect(self) -> None:
        """Reconnect the selected session's agent, keeping its history."""
        if self.selected:
            self._run("Reconnect", self.manager.reconnect(self.selected))

    def action_resend_interrupted(self) -> None:
        """Resend the prompt of a turn lost to a restart or a quit."""
        if self.selected:
            self._run("Resend", self.manager.resend_interrupted(self.selected))

    # ---- close and undo ------------------------------------------------------------
    def action_close_session(self) -> None:
        """Close the selected session (after a confirmation; undo for 30 s)."""
        sid = self.selected
        if sid is None:
            return
        view = self._views.get(sid)
        running = " Its running turn is stopped." if view is not None and view.status.busy else ""
        message = (f"“{one_line(self._session_name(sid), 60)}” leaves the list and its agent is stopped.{running} "
                   f"Its history is deleted unless you undo within {UNDO_SECONDS:.0f} s (ctrl+z).")

        def answered(yes: bool | None) -> None:
            if yes:
                self._run("Close", self._close(sid))
            self.pane.editor.focus()

        self.push_screen(ConfirmScreen("Close this session?", message, "Close session"), answered)

    async def _close(self, session_id: str) -> None:
        draft = self.pane.drafts().get(session_id, "")
        ids = self.manager.ids()
        if self.selected == session_id and len(ids) > 1:
            index = ids.index(session_id)
            self.select(ids[index + 1] if index + 1 < len(ids) else ids[index - 1])  # its neighbour
        session = await self.manager.close(session_id)
        if session is None:
            return
        closed = ClosedSession(session, draft)
        self._recently_closed.append(closed)
        self.set_timer(UNDO_SECONDS, lambda: self._expire(closed), name="undo close")
        self.notify(f"Closed “{one_line(session.name, 40)}”. ctrl+z brings it back for {UNDO_SECONDS:.0f} s.",
                    timeout=8, markup=False)

    def _expire(self, closed: ClosedSession) -> None:
        if closed in self._recently_closed:
            self._recently_closed.remove(closed)
            self.refresh_bindings()

    def action_undo_close(self) -> None:
        """Bring back the session closed last (within 30 s), history and draft included."""
        if not self._recently_closed:
            return
        closed = self._recently_closed.pop()
        self.manager.reopen(closed.session)
        if closed.draft:
            self.pane.restore_drafts({closed.session.id: closed.draft})
        self.select(closed.session.id)
        self.notify(f"“{one_line(closed.session.name, 40)}” is back.", timeout=4, markup=False)

    # ---- copy and details ----------------------------------------------------------
    def action_copy_reply(self) -> None:
        """Copy the selected session's last reply to the clipboard (OSC 52: works over SSH)."""
        sid = self.selected
        if sid is None:
            return
        streaming = self.manager.streaming_text(sid)
        text = streaming or next((item.text for item in reversed(self.manager.history(sid))
                                  if item.kind is ItemKind.ASSISTANT), "")
        if not text:
            self.notify("No reply to copy yet.", timeout=3)
            return
        self.copy_to_clipboard(text)
        self.notify(f"Copied the last reply ({len(text):,} characters).", timeout=3)

    def action_details(self) -> None:
        """Show the selected session's details: agent, folder, command, logs, stderr tail."""
        if self.selected:
            self.push_screen(SessionDetailsScreen(self.manager.details(self.selected)),
                             lambda _: self.pane.editor.focus())
