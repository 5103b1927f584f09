"""One sidebar row: status icon, name, unread and warning marks, compact status.

A single widget that renders two lines (rather than a tree of Statics): a restore of
hundreds of sessions mounts one widget per session, and styles still come from the theme
through component classes.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import ListItem

from polypilot_tui.core.text import one_line
from polypilot_tui.core.view import SessionView
from polypilot_tui.ui.formatting import STATUS_ICONS, UNREAD_MARK, WARNING_MARK, sidebar_status


class SessionRow(ListItem):
    """A session in the sidebar; it is handed a view and the time, and never fetches."""

    COMPONENT_CLASSES = {"row--icon", "row--name", "row--unread", "row--warning", "row--status"}

    def __init__(self, view: SessionView, now: float, unread: bool) -> None:
        super().__init__(id=f"row-{view.id}", classes="session-row")
        self.session_id = view.id
        self._state: tuple[object, ...] = ()
        self._icon = ""
        self._name = ""
        self._status = ""
        self._unread = False
        self._warning = False
        self.show(view, now, unread)

    @property
    def status_text(self) -> str:
        """The compact status line as shown (e.g. ``2m · 8 tools · 45s ago``)."""
        return self._status

    def show(self, view: SessionView, now: float, unread: bool) -> None:
        """Redraw from a snapshot; does nothing when nothing visible changed."""
        status_text = sidebar_status(view, now)
        state = (view.status, view.name, unread, view.permission_warning, status_text)
        if state == self._state:
            return
        old_status = self._state[0] if self._state else None
        self._state = state
        self._icon = STATUS_ICONS[view.status]
        self._name = one_line(view.name, 60)
        self._status = status_text
        self._unread = unread
        self._warning = view.permission_warning
        if old_status is not None:
            self.remove_class(f"-{old_status}")
        self.add_class(f"-{view.status.value}")
        self.set_class(view.status.busy, "-busy")
        self.set_class(view.status.needs_user, "-needs-user")
        self.set_class(unread, "-unread")
        self.tooltip = f"{view.name} · {view.agent}" + (f" · {view.cwd}" if view.cwd else "")
        self.refresh()

    def render(self) -> Text:
        width = max(4, self.size.width)
        marks = Text()
        if self._unread:
            marks.append(f" {UNREAD_MARK}", self.get_component_rich_style("row--unread"))
        if self._warning:
            marks.append(f" {WARNING_MARK}", self.get_component_rich_style("row--warning"))
        top = Text(no_wrap=True, overflow="ellipsis")
        top.append(f"{self._icon} ", self.get_component_rich_style("row--icon"))
        name_room = max(1, width - 2 - marks.cell_len)
        name = Text(self._name, self.get_component_rich_style("row--name"), no_wrap=True, overflow="ellipsis")
        name.truncate(name_room, overflow="ellipsis", pad=True)
        top.append_text(name)
        top.append_text(marks)
        bottom = Text("  ", no_wrap=True, overflow="ellipsis")
        status = Text(self._status, self.get_component_rich_style("row--status"))
        status.truncate(max(1, width - 2), overflow="ellipsis")
        bottom.append_text(status)
        return Text("\n").join([top, bottom])
