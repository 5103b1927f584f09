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
    yield SystemCommand("Jump to attention", "Go to the next session that needs you (ctrl+j)", app.action_attention)
    yield SystemCommand("Resend interrupted prompt", "Resend a prompt lost to a restart (ctrl+y)",
                        app.action_resend_interrupted)
    yield SystemCommand("Close session", "Stop and remove the selected session", app.action_close_session)
