"""The app's session actions as command-palette entries (ctrl+p)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from textual.app import SystemCommand

if TYPE_CHECKING:
    from polypilot_tui.ui.app import PolypilotApp


def session_commands(app: PolypilotApp) -> Iterator[SystemCommand]:
    """One command per session action, with its default key in the help text."""
    yield SystemCommand("New session", "Start a session on an agent (ctrl+n)", app.action_new_session)
    yield SystemCommand("Stop session", "Stop the selected session's turn (ctrl+x)", app.action_stop)
    yield SystemCommand("Reconnect session", "Reconnect the selected session's agent (ctrl+r)", app.action_reconnect)
    yield SystemCommand("Next session", "Select the next session (ctrl+down)", app.action_next_session)
    yield SystemCommand("Previous session", "Select the previous session (ctrl+up)", app.action_previous_session)
    yield SystemCommand("Jump to attention", "Go to the next session that needs you (ctrl+g)", app.action_attention)
    yield SystemCommand("Resend interrupted prompt", "Resend a prompt lost to a restart (ctrl+y)",
                        app.action_resend_interrupted)
    yield SystemCommand("Close session", "Stop and remove the selected session (asks; undo with ctrl+z for 30 s)",
                        app.action_close_session)
    yield SystemCommand("Undo close", "Bring back the session closed last (ctrl+z)", app.action_undo_close)
    yield SystemCommand("Session details", "Agent, folder, command, logs and stderr tail (F2)", app.action_details)
    yield SystemCommand("Copy last reply", "Copy the selected session's last reply to the clipboard (F3)",
                        app.action_copy_reply)
    yield SystemCommand("Send queued prompts", "Send the next held prompt of the selected session",
                        app.action_send_queued)
