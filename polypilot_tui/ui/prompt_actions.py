"""What the user does with prompts: send one (a refused one comes back to the box, said),
and take queued ones back, drop them, clear them or send them on."""

from __future__ import annotations

import logging

from polypilot_tui.domain.text import one_line
from polypilot_tui.engine import verbs
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.session_dialogs import SessionDialogs
from polypilot_tui.ui.widgets.prompt_editor import PromptEditor
from polypilot_tui.ui.widgets.queue_panel import QueuePanel

log = logging.getLogger(__name__)


class PromptActions(SessionDialogs):
    """Enter in the prompt box, and the queue panel's buttons."""

    def _session_name(self, session_id: str) -> str:
        view = self._views.get(session_id)
        return view.name if view is not None else session_id

    def on_prompt_editor_submitted(self, event: PromptEditor.Submitted) -> None:
        event.stop()
        sid = event.session_id
        if sid is None or sid not in self.engine.ids():
            # Nothing to send to (closed meanwhile): the text goes back, never lost.
            self.pane.editor.insert(event.text)
            self.notify("No session to send to: press ctrl+n to start one.", severity="warning")
            return
        if (log_ := self.pane.log_for(sid)) is not None:
            log_.follow_end()  # whoever sends wants to see what comes back
        self._run("Send", self._send(sid, event.text))

    async def _send(self, session_id: str, text: str) -> None:
        result = await attempt(log, "Send", self.engine.call(verbs.SEND, verbs.Send(session_id, text)))
        if isinstance(result, Failed):  # refused or failed: said, and the text is not lost
            self.pane.editor.give_back(session_id, text)
            self._ui_state_changed()
            self.notify(
                f"Send failed: {result.said}. Your text is back in the prompt.",
                title=self._session_name(session_id),
                severity="error",
                timeout=15,
                markup=False,
            )
            return
        if result == "queued" and session_id != self.selected:
            self.notify(
                "Queued: it is sent when the current turn ends.",
                title=self._session_name(session_id),
                timeout=4,
                markup=False,
            )

    def on_queue_panel_edit(self, event: QueuePanel.Edit) -> None:
        event.stop()
        self._run("Edit", self._edit_queued(event))

    async def _edit_queued(self, event: QueuePanel.Edit) -> None:
        prompt = await self.engine.call(verbs.UNQUEUE, verbs.Unqueue(event.session_id, event.index, event.key))
        if prompt is None:
            self.notify("That prompt was already sent.", timeout=3)
            return
        editor = self.pane.editor
        if editor.session_id != event.session_id:  # another session is on screen: its draft keeps it
            editor.give_back(event.session_id, prompt)
            self._ui_state_changed()
            return
        editor.load_text(prompt if not editor.text.strip() else f"{editor.text.rstrip()}\n\n{prompt}")
        editor.move_cursor(editor.document.end)
        editor.focus()

    def on_queue_panel_drop(self, event: QueuePanel.Drop) -> None:
        event.stop()
        self._run("Drop", self._drop_queued(event))
        self.pane.editor.focus()

    async def _drop_queued(self, event: QueuePanel.Drop) -> None:
        prompt = await self.engine.call(verbs.UNQUEUE, verbs.Unqueue(event.session_id, event.index, event.key))
        if prompt is not None:
            self.notify(f"Dropped: {one_line(prompt, 60)}", timeout=3, markup=False)

    def on_queue_panel_send_next(self, event: QueuePanel.SendNext) -> None:
        event.stop()
        self._run("Send", self.engine.call(verbs.SEND_QUEUED, verbs.SessionRef(event.session_id)))
        self.pane.editor.focus()

    def on_queue_panel_clear(self, event: QueuePanel.Clear) -> None:
        event.stop()
        self._run("Clear queue", self._clear_queue(event.session_id))
        self.pane.editor.focus()

    async def _clear_queue(self, session_id: str) -> None:
        dropped = await self.engine.call(verbs.CLEAR_QUEUE, verbs.SessionRef(session_id))
        if dropped:
            self.notify(f"Dropped {plural(dropped, 'queued prompt')}.", timeout=3, markup=False)

    def action_send_queued(self) -> None:
        """Send the selected session's held queue (its next prompt goes out now)."""
        if self.selected:
            self._run("Send", self.engine.call(verbs.SEND_QUEUED, verbs.SessionRef(self.selected)))
