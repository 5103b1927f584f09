"""One sidebar row: status icon, name, unread and warning marks, compact status."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ListItem, Static

from polypilot_tui.core.text import one_line
from polypilot_tui.core.view import SessionView
from polypilot_tui.ui.formatting import STATUS_ICONS, UNREAD_MARK, WARNING_MARK, sidebar_status


class SessionRow(ListItem):
    """A session in the sidebar; it is handed a view and the time, and never fetches."""

    def __init__(self, view: SessionView, now: float, unread: bool) -> None:
        super().__init__(id=f"row-{view.id}", classes="session-row")
        self.session_id = view.id
        self._icon = Static("", classes="row-icon", markup=False)
        self._name = Static("", classes="row-name", markup=False)
        self._unread = Static(UNREAD_MARK, classes="row-unread", markup=False)
        self._warning = Static(WARNING_MARK, classes="row-warning", markup=False)
        self._status = Static("", classes="row-status", markup=False)
        self._state: tuple[object, ...] = ()
        self.show(view, now, unread)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="row-top"):
            yield self._icon
            yield self._name
            yield self._unread
            yield self._warning
        yield self._status

    def show(self, view: SessionView, now: float, unread: bool) -> None:
        """Redraw from a snapshot; does nothing when nothing visible changed."""
        status_text = sidebar_status(view, now)
        state = (view.status, view.name, unread, view.permission_warning, status_text)
        if state == self._state:
            return
        old_status = self._state[0] if self._state else None
        self._state = state
        self._icon.update(STATUS_ICONS[view.status])
        self._name.update(one_line(view.name, 60))
        self._status.update(status_text)
        self._unread.display = unread
        self._warning.display = view.permission_warning
        if old_status is not None:
            self.remove_class(f"-{old_status}")
        self.add_class(f"-{view.status.value}")
        self.set_class(view.status.busy, "-busy")
        self.set_class(view.status.needs_user, "-needs-user")
        self.set_class(unread, "-unread")
        self.tooltip = f"{view.name} · {view.agent}" + (f" · {view.cwd}" if view.cwd else "")
