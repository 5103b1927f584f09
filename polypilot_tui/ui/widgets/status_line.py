"""The chat pane's status line: what the session does, for how long, and why."""

from __future__ import annotations

from textual.widgets import Static

from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import STATUS_ICONS, chat_status


class StatusLine(Static):
    """E.g. ``▶ Working · 2m 5s · 8 tool calls… (last activity 45s ago)``."""

    DEFAULT_CSS = """
    StatusLine {
        height: 1;
        padding: 0 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    StatusLine.-busy {
        color: $status-busy;
    }
    StatusLine.-needs-user {
        color: $status-attention;
    }
    StatusLine.-awaiting_permission {
        color: $permission-warning;
        text-style: bold;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._status = ""
        self._text = ""

    def show(self, view: SessionView | None, now: float) -> None:
        """Redraw for ``view`` at time ``now`` (no-op when the words are the same)."""
        text = "" if view is None else f"{STATUS_ICONS[view.status]} {chat_status(view, now)}"
        status = "" if view is None else view.status.value
        if status != self._status:
            if self._status:
                self.remove_class(f"-{self._status}")
            if status:
                self.add_class(f"-{status}")
            self._status = status
            self.set_class(view is not None and view.status.busy, "-busy")
            self.set_class(view is not None and view.status.needs_user, "-needs-user")
        if text != self._text:
            self._text = text
            self.update(text)
