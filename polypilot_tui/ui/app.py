"""The dashboard app: its keys and what the user does to a session — send, stop, reconnect,
close (with undo), queue, copy, details, quit.

The screen machinery (layout, engine changes to redraws, selection) is
:class:`~polypilot_tui.ui.dashboard.Dashboard`. Every engine call runs as a worker whose
failure becomes a toast, never a crash; every prompt goes to the session it was typed for.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.prompt_actions import PromptActions
from polypilot_tui.ui.screens.confirm import ConfirmScreen
from polypilot_tui.ui.screens.details import SessionDetailsScreen
from polypilot_tui.ui.screens.quit import QuitScreen, turn_names
from polypilot_tui.ui.widgets.permission_prompt import PermissionPrompt

log = logging.getLogger(__name__)

UNDO_SECONDS = 30.0
"""How long a closed session can be brought back (agent-deck keeps 30 s too)."""


@dataclass
class ClosedSession:
    """A session closed moments ago (the engine keeps it, and its place in the list, for an undo)."""

    session_id: str
    name: str
    draft: str


class PolypilotApp(PromptActions):
    """Drive several agent sessions at once and see, honestly, what each one is doing."""

    BINDINGS = [
        Binding("ctrl+n", "new_session", "New", id="new_session", priority=True),
        Binding("ctrl+x", "stop", "Stop", id="stop", priority=True),
        Binding("ctrl+r", "reconnect", "Reconnect", id="reconnect", priority=True),
        Binding("ctrl+up", "previous_session", "Prev", id="previous_session", priority=True, show=False),
        Binding("ctrl+down", "next_session", "Next", id="next_session", priority=True),
        Binding("ctrl+g", "attention", "Attention", id="attention", priority=True),
        Binding("ctrl+y", "resend_interrupted", "Resend", id="resend_interrupted", priority=True),
        # Only while a closed session can come back; otherwise ctrl+z is the editor's undo.
        Binding("ctrl+z", "undo_close", "Undo close", id="undo_close", priority=True),
        Binding("ctrl+o", "review_changes", "Changes", id="review_changes", priority=True),
        Binding("f2", "details", "Details", id="details"),
        Binding("f3", "copy_reply", "Copy reply", id="copy_reply", show=False),
        Binding("f5", "finish_session", "Finish", id="finish_session", show=False),
        Binding("f4", "rename_session", "Rename", id="rename_session", show=False),
        Binding("f8", "switch_model", "Model", id="switch_model", show=False),  # F6/F7: the editor's
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recently_closed: list[ClosedSession] = []
        """Most recent last; each leaves after UNDO_SECONDS."""

    # ---- permissions ---------------------------------------------------------------
    def on_permission_prompt_answered(self, event: PermissionPrompt.Answered) -> None:
        event.stop()
        if event.session_id is not None:
            answer = verbs.AnswerPermission(event.session_id, event.request_id, event.option_id)
            self._run("Permission answer", self.engine.call(verbs.ANSWER_PERMISSION, answer))
        self.pane.editor.focus()

    def on_permission_prompt_leave(self, event: PermissionPrompt.Leave) -> None:
        self.pane.editor.focus()

    # ---- attention ---------------------------------------------------------------
    async def action_attention(self) -> None:
        """Answer the session on screen if it waits for permission, else go to the next one
        needing you: sessions blocked on a permission first, then the rest, in sidebar order.

        Awaited to the end (the permission drawn and focused) before the next key is read,
        so the "y" of a quick ctrl+g, y answers instead of landing in the prompt.
        """
        views = {view.id: view for view in self.engine.views()}  # now, not as last drawn
        view = views.get(self.selected or "")
        prompt = self.pane.permission
        if view is not None and view.pending_permission is not None and not prompt.has_focus_within:
            await self.flush()
            prompt.focus_first()
            return
        ids = list(views)
        start = ids.index(self.selected) + 1 if self.selected in ids else 0
        needy = [
            sid for sid in ids[start:] + ids[:start] if sid != self.selected and self.attention.wants_user(views[sid])
        ]
        if not needy:
            self.notify("No other session needs your attention.", timeout=3)
            return
        sid = min(needy, key=lambda s: views[s].pending_permission is None)  # stable: order kept
        self.select(sid)
        if views[sid].pending_permission is not None:
            await self.flush()
            self.pane.permission.focus_first()

    # ---- turn control --------------------------------------------------------------
    def action_stop(self) -> None:
        """Stop the selected session's turn (abort, then kill if it does not stop)."""
        if self.selected:
            self._run("Stop", self.engine.call(verbs.STOP, verbs.SessionRef(self.selected)))

    def action_reconnect(self) -> None:
        """Reconnect the selected session's agent, keeping its history."""
        if self.selected:
            self._run("Reconnect", self.engine.call(verbs.RECONNECT, verbs.SessionRef(self.selected)))

    def action_help_quit(self) -> None:
        """ctrl+c with nothing selected: it neither stops nor quits, so say which keys do."""
        keys = {binding.binding.action: key for key, binding in self.active_bindings.items()}
        view = self._views.get(self.selected or "")
        hints = [f"{keys['stop']} stops this turn"] if "stop" in keys and view is not None and view.status.busy else []
        hints += [f"{keys['quit']} quits"] if "quit" in keys else []
        self.notify(" · ".join(hints + ["ctrl+c copies selected text"]), timeout=4, markup=False)

    def action_resend_interrupted(self) -> None:
        """Resend the prompt of a turn lost to a restart, a quit, a dead agent or a reconnect."""
        if self.selected:
            self._run("Resend", self.engine.call(verbs.RESEND, verbs.SessionRef(self.selected)))

    # ---- close and undo ------------------------------------------------------------
    def action_close_session(self) -> None:
        """Close the selected session (after a confirmation; undo for 30 s)."""
        sid = self.selected
        if sid is None:
            return
        view = self._views.get(sid)
        running = " Its running turn is stopped." if view is not None and view.status.busy else ""
        message = (
            f"“{one_line(self._session_name(sid), 60)}” leaves the list and its agent is stopped.{running} "
            f"Its history is deleted unless you undo within {UNDO_SECONDS:.0f} s (ctrl+z)."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._run("Close", self._close(sid))
            self.pane.editor.focus()

        self.push_screen(ConfirmScreen("Close this session?", message, "Close session"), answered)

    async def _close(self, session_id: str) -> None:
        draft = self.pane.drafts().get(session_id, "")
        ids = self.engine.ids()
        if self.selected == session_id and len(ids) > 1:
            index = ids.index(session_id)
            self.select(ids[index + 1] if index + 1 < len(ids) else ids[index - 1])  # its neighbour
        name = self._session_name(session_id)
        if not await self.engine.call(verbs.CLOSE, verbs.SessionRef(session_id)):
            return
        closed = ClosedSession(session_id, name, draft)
        self._recently_closed.append(closed)
        self.set_timer(UNDO_SECONDS, lambda: self._expire(closed), name="undo close")
        self.notify(
            f"Closed “{one_line(name, 40)}”. ctrl+z brings it back for {UNDO_SECONDS:.0f} s.",
            timeout=8,
            markup=False,
        )

    def _expire(self, closed: ClosedSession) -> None:
        if closed in self._recently_closed:
            self._recently_closed.remove(closed)
            self.refresh_bindings()

    def action_undo_close(self) -> None:
        """Bring back the session closed last (within 30 s), history and draft included."""
        if not self._recently_closed:
            return
        closed = self._recently_closed.pop()
        self._run("Undo", self._reopen(closed))

    async def _reopen(self, closed: ClosedSession) -> None:
        await self.engine.call(verbs.REOPEN, verbs.Reopen(closed.session_id))
        if closed.draft:
            self.pane.restore_drafts({closed.session_id: closed.draft})
        self.select(closed.session_id)
        self.notify(f"“{one_line(closed.name, 40)}” is back.", timeout=4, markup=False)

    # ---- copy and details ----------------------------------------------------------
    def action_copy_reply(self) -> None:
        """Copy the selected session's last reply to the clipboard (OSC 52: works over SSH)."""
        sid = self.selected
        if sid is None:
            return
        streaming = self.engine.streaming_text(sid)
        text = streaming or next(
            (item.text for item in reversed(self.engine.history(sid)) if item.kind is ItemKind.ASSISTANT), ""
        )
        if not text:
            self.notify("No reply to copy yet.", timeout=3)
            return
        self.copy_to_clipboard(text)
        self.notify(f"Copied the last reply ({len(text):,} characters).", timeout=3)

    def action_details(self) -> None:
        """Show the selected session's details: agent, folder, command, logs, stderr tail."""
        if self.selected:
            self._run("Details", self._show_details(self.selected))

    async def _show_details(self, session_id: str) -> None:
        details = await self.engine.call(verbs.DETAILS, verbs.SessionRef(session_id))
        self.push_screen(SessionDetailsScreen(details), self._refocus_editor)

    # ---- sessions and quitting -----------------------------------------------------
    async def action_quit(self) -> None:
        """Quit; with turns in flight, ask first (they are offered for resending next time)."""
        busy = [v for v in self.engine.views() if v.status.busy]
        if self.engine.separate:
            self._quit_attached(busy)
            return
        if not busy:
            self.exit()
            return
        message = (
            f"{plural(len(busy), 'turn')} still running ({turn_names(busy)}). Quitting stops "
            f"{'it' if len(busy) == 1 else 'them'}; each is offered for resending (ctrl+y) next time."
        )
        queued = sum(len(v.queue) for v in self._views.values())
        if queued:
            message += f" {plural(queued, 'queued prompt')} {'is' if queued == 1 else 'are'} kept for next time."

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()
            else:
                self.pane.editor.focus()

        self.push_screen(ConfirmScreen("Quit with turns running?", message, "Quit"), answered)

    def _quit_attached(self, busy: list[SessionView]) -> None:
        """Quit a dashboard attached to the engine: its sessions go on unless the user stops it."""
        if not busy:
            self.exit()
            return

        def answered(choice: object) -> None:
            if choice in ("leave", "stop"):
                self.stop_engine_on_quit = choice == "stop"
                self.exit()
            else:
                self.pane.editor.focus()

        self.push_screen(QuitScreen(busy), answered)

    def action_stop_engine(self) -> None:
        """Quit and stop the engine: every session ends (turns in flight are offered for resending)."""
        self.stop_engine_on_quit = True
        self.exit()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        view = self._views.get(self.selected or "")
        if action == "stop":
            return True if view is not None and view.status.busy else None
        if action in ("reconnect", "details", "copy_reply", "rename_session", "finish_session", "switch_model"):
            return True if view is not None else None
        if action == "resend_interrupted":
            return view is not None and bool(view.interrupted_prompt)
        if action == "undo_close":
            return bool(self._recently_closed)
        if action == "send_queued":
            return view is not None and bool(view.queue)
        return True

    # ---- command palette -----------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Every session action, with its key in the help text, then Textual's own."""
        yield SystemCommand(
            "New session", "Start a session: agent, folder, name, worktree (ctrl+n)", self.action_new_session
        )
        yield SystemCommand("Stop session", "Stop the selected session's turn (ctrl+x)", self.action_stop)
        yield SystemCommand(
            "Reconnect session", "Reconnect the selected session's agent (ctrl+r)", self.action_reconnect
        )
        yield SystemCommand("Next session", "Select the next session (ctrl+down)", self.action_next_session)
        yield SystemCommand("Previous session", "Select the previous session (ctrl+up)", self.action_previous_session)
        yield SystemCommand(
            "Jump to attention", "Go to the next session that needs you (ctrl+g)", self.action_attention
        )
        yield SystemCommand(
            "Resend interrupted prompt", "Resend a prompt lost to a restart (ctrl+y)", self.action_resend_interrupted
        )
        yield SystemCommand(
            "Close session",
            "Stop and remove the selected session (asks; undo with ctrl+z for 30 s)",
            self.action_close_session,
        )
        yield SystemCommand("Undo close", "Bring back the session closed last (ctrl+z)", self.action_undo_close)
        yield SystemCommand(
            "Review changes",
            "The selected session's diff against its base; comment and send a review (ctrl+o)",
            self.action_review_changes,
        )
        yield SystemCommand("Rename session", "Give the selected session another name (F4)", self.action_rename_session)
        yield SystemCommand(
            "Finish session…",
            "Commit, merge, push, open a pull request for or discard its worktree (F5)",
            self.action_finish_session,
        )
        yield SystemCommand(
            "Switch model…", "List the selected session's models and switch (F8)", self.action_switch_model
        )
        yield SystemCommand("Session details", "Agent, folder, command, logs and stderr tail (F2)", self.action_details)
        yield SystemCommand(
            "Copy last reply", "Copy the selected session's last reply to the clipboard (F3)", self.action_copy_reply
        )
        yield SystemCommand(
            "Send queued prompts", "Release the held queue: its prompts go out in order", self.action_send_queued
        )
        if self.engine.separate:
            yield SystemCommand(
                "Stop the engine and quit",
                "End every session's agent now (turns in flight are offered for resending next time)",
                self.action_stop_engine,
            )
        yield from super().get_system_commands(screen)
